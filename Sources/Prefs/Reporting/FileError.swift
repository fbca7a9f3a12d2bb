/// An error about a file: a report without a key names the file, and a write that keeps failing with it is
/// reported once per cause.
protocol FileError: Error {
    /// The file the error is about.
    var filePath: String { get }
    /// What makes two failures the same one: a file-system error is the same operation and `errno` in one folder,
    /// since a write's temporary file has a new name every time.
    var repeatCause: String { get }
}

extension FileError {
    /// Most errors are the same failure when their text is the same.
    var repeatCause: String { String(describing: self) }
}

extension PrefsIsolationWarning: FileError {
    var filePath: String { path }
}

/// The one for a PrefsError, or nil when it is not about a file.
extension PrefsError {
    var fileError: (any FileError)? {
        switch self {
        case .corruptFile(let path, _): FileFailure(filePath: path, repeatCause: description)
        case .io(let path, let operation, let errno, _), .durabilityNotConfirmed(let path, let operation, let errno, _):
            FileFailure(filePath: path, repeatCause: FileFailure.systemCallCause(path, operation, errno))
        default: nil
        }
    }
}

/// A file error's path and cause, for error types that are only sometimes about a file.
struct FileFailure: FileError {
    let filePath: String
    let repeatCause: String

    /// A failed system call: its operation and `errno` in the file's folder.
    static func systemCallCause(_ path: String, _ operation: String, _ errno: Int32) -> String {
        let folder = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
        return "\(operation) \(errno) in \(folder)"
    }
}

extension PrefsReport {
    /// The file an error is about, for the errors that carry one.
    static func fileError(in error: any Error) -> (any FileError)? {
        if let error = error as? PrefsError { return error.fileError }
        if let error = error as? any FileErrorConvertible { return error.fileError }
        return error as? any FileError
    }
}

/// An error type defined above this layer (a vault's) that is sometimes about a file.
protocol FileErrorConvertible: Error {
    var fileError: (any FileError)? { get }
}
