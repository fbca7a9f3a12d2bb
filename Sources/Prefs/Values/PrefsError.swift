public import Foundation

/// `catch let error as PrefsError { … }` catches the errors Prefs throws.
///
/// Every case says what went wrong and carries enough context to act on it. Reads through a property wrapper
/// never throw: they fall back to the default and report the error to ``PrefsConfig/errorHandler``.
public enum PrefsError: Error, Sendable, Equatable {
    /// `.invalidSuiteName(_:reason:)`: a suite name that Prefs refuses because Foundation would write outside the
    /// preferences folder: empty, containing `/`, `..` or NUL, or longer than 255 bytes once `.plist` is added.
    case invalidSuiteName(String, reason: String)
    /// `.invalidKey(_:reason:)`: a key that no store can hold: empty or containing NUL.
    case invalidKey(String, reason: String)
    /// `.typeMismatch(key:expected:found:)`: a stored value that does not have the shape the declared type expects.
    /// Nothing was overwritten.
    case typeMismatch(key: String, expected: String, found: String)
    /// `.encodingFailed(key:reason:)`: a value that could not be encoded for storage (for example a `Double.nan`
    /// inside JSON).
    case encodingFailed(key: String, reason: String)
    /// `.decodingFailed(key:reason:)`: a value stored under `key` that could not be decoded as the declared type.
    /// Nothing was overwritten.
    case decodingFailed(key: String, reason: String)
    /// `.corruptFile(path:reason:)`: a store file that is not in the expected format. The file was left untouched.
    case corruptFile(path: String, reason: String)
    /// `.io(path:operation:errno:message:)`: a file-system operation that failed, with the `errno` text: permission
    /// denied, disk full, …
    case io(path: String, operation: String, errno: Int32, message: String)
    /// `.durabilityNotConfirmed(path:operation:errno:message:)`: the change **was made** (the new file is in place
    /// and every reader sees it) but a step after that commit point failed, usually syncing the folder, so it may
    /// not survive a power loss or system crash. Do not undo or retry the change as if it had failed.
    case durabilityNotConfirmed(path: String, operation: String, errno: Int32, message: String)
}

extension PrefsError: LocalizedError, CustomStringConvertible {
    /// `print(error)` prints a one-line message that says what went wrong and where.
    public var description: String {
        switch self {
        case .invalidSuiteName(let name, let reason): "invalid suite name \(String(reflecting: name)): \(reason)"
        case .invalidKey(let key, let reason): "invalid key \(String(reflecting: key)): \(reason)"
        case .typeMismatch(let key, let expected, let found):
            "value for \(String(reflecting: key)) is \(found), expected \(expected); left unchanged"
        case .encodingFailed(let key, let reason): "cannot encode value for \(String(reflecting: key)): \(reason)"
        case .decodingFailed(let key, let reason):
            "cannot decode value for \(String(reflecting: key)): \(reason); left unchanged"
        case .corruptFile(let path, let reason): "\(path) is not a valid preferences file (\(reason)); left untouched"
        case .io(let path, let operation, _, let message): "\(operation) \(path): \(message)"
        case .durabilityNotConfirmed(let path, let operation, _, let message):
            "the change to \(path) was made, but its durability is not confirmed (\(operation): \(message)); "
                + "it is in effect now but might not survive a power loss"
        }
    }

    /// `error.localizedDescription` is the same text as ``description``.
    public var errorDescription: String? { description }
}
