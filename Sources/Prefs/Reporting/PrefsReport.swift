/// `PrefsConfig.errorHandler = { (report: PrefsReport) in … }` receives one of these for each reported error.
public struct PrefsReport: Sendable, CustomStringConvertible {
    /// `report.operation == .read` tells what was being done when the error happened.
    public enum Operation: String, Sendable {
        /// `.read`: a read, which returned the default value (or the last good one) instead.
        case read
        /// `.write`: a write, which left the stored value as it was.
        case write
        /// `.declaration`: a wrapper declared a key that another wrapper of the same store declared with another
        /// type or default (``PrefsError/conflictingDeclarations(key:first:second:)``); both keep working.
        case declaration
        /// `.migration`: a declared ``PrefMigration`` ran (`error` is then a ``PrefsMigrated`` saying what moved
        /// where) or failed, leaving the older form where it was.
        case migration
    }

    /// `report.key` is the key of the preference involved, or empty for a report about a whole store or file.
    public let key: String
    /// `report.operation` tells whether a read, a write or a declaration failed.
    public let operation: Operation
    /// `report.error` is the error, usually a ``PrefsError`` or ``VaultError``.
    public let error: any Error
    /// `report.file` is the path of the file a report without a key is about (a preferences file or vault that
    /// cannot be read, a layer file), when the error names one.
    public let file: String?

    init(key: String, operation: Operation, error: any Error, file: String? = nil) {
        self.key = key
        self.operation = operation
        self.error = error
        self.file = key.isEmpty ? file ?? Self.fileError(in: error)?.filePath : nil
    }

    /// `"read of \"theme\" failed: …"`, `"read of /home/me/.config/app.plist failed: …"`.
    public var description: String {
        if operation == .declaration { return "declaration of \(String(reflecting: key)): \(error)" }
        if operation == .migration, error is PrefsMigrated {
            return "migration of \(String(reflecting: key)): \(error)"
        }
        let subject = key.isEmpty ? file : String(reflecting: key)
        return "\(operation.rawValue)\(subject.map { " of \($0)" } ?? "") failed: \(error)"
    }
}

/// `report.error is PrefsNotIsolated`: a store that is a real file (``what``, such as `UserDefaultsStore.standard`)
/// was used inside a test under `.isolatedPreferences`, which cannot stand in for it.
///
/// Reported once, at the first such use, so the test does not silently share a file with other runs. Declare the
/// wrapper without `store:` (it then uses the test's store), or give it an ``InMemoryStore``.
public struct PrefsNotIsolated: Error, Sendable, CustomStringConvertible {
    /// `notIsolated.path` is the real file.
    public let path: String
    /// `notIsolated.what` names the store: `"UserDefaultsStore.standard"`.
    public let what: String

    /// `"UserDefaultsStore.standard is the real file …"`.
    public var description: String {
        "\(what) is the real file \(path), used inside a test under .isolatedPreferences, which does not isolate it; "
            + "declare the wrapper without store: to use the test's store"
    }
}
