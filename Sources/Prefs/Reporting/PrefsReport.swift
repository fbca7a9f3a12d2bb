/// `PrefsConfig.errorHandler = { (report: PrefsReport) in … }` receives one of these for each reported error.
public struct PrefsReport: Sendable, CustomStringConvertible {
    /// `report.operation == .read` tells what was being done when the error happened: `.read` or `.write`.
    public enum Operation: String, Sendable {
        /// `.read`: a read, which returned the default value instead.
        case read
        /// `.write`: a write, which left the stored value as it was.
        case write
    }

    /// `report.key` is the key of the preference involved.
    public let key: String
    /// `report.operation` tells whether a read or a write failed.
    public let operation: Operation
    /// `report.error` is the error, usually a ``PrefsError`` or ``VaultError``.
    public let error: any Error

    /// `"read of \"theme\" failed: …"`.
    public var description: String {
        "\(operation.rawValue) of \(String(reflecting: key)) failed: \(error)"
    }
}
