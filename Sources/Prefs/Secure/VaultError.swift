public import Foundation

/// `catch let error as VaultError { … }` catches the errors an encrypted vault throws.
///
/// Opening never modifies the vault file, whatever the error.
public enum VaultError: Error, Sendable, Equatable {
    /// `.authenticationFailed`: the vault could not be decrypted, because either the key is wrong or the file was
    /// modified. The two are indistinguishable by design.
    case authenticationFailed
    /// `.unsupportedFormatVersion(4)`: a vault written by a newer (or unknown) version of the format.
    case unsupportedFormatVersion(UInt16)
    /// `.notAVault(reason:)`: a file that is not a vault at all, or whose header is malformed.
    case notAVault(reason: String)
    /// `.truncated(expected:actual:)`: a vault file shorter than its header says it should be.
    case truncated(expected: Int, actual: Int)
    /// `.insecureKeyFile(path:mode:)`: a key file that group or others can access in any way; `mode` is the file's
    /// permission bits.
    case insecureKeyFile(path: String, mode: UInt32)
    /// `.invalidKey(reason:)`: a key that cannot be used: a key file or raw key that is not 32 bytes, an empty
    /// passphrase, or a key of the wrong kind for the vault.
    case invalidKey(reason: String)
    /// `.rollbackDetected(reason:)`: a vault that authenticates but is older than a version of the same vault
    /// already seen (a restored or replayed copy), or is another vault than the one seen at this path (for example
    /// another app's vault under the same key). `reason` says which, and where the last seen version is remembered.
    case rollbackDetected(reason: String)
    /// `.io(path:operation:errno:message:)`: a file-system operation that failed, with the `errno` text: permission
    /// denied, disk full, …
    case io(path: String, operation: String, errno: Int32, message: String)
    /// `.rollbackRecordUnavailable(path:reason:)`: the record at `path` that lets a vault notice an older copy of
    /// itself cannot be read or written (a read-only, full or missing state folder, a record that does not parse,
    /// a folder in its place). The vault still opens, but an older copy put in its place would not be noticed.
    /// Reported once per store, when it opens, to ``PrefsConfig/errorHandler`` and given by
    /// ``EncryptedFileStore/rollbackRecordProblem``; never thrown by the library.
    case rollbackRecordUnavailable(path: String, reason: String)
}

extension VaultError: LocalizedError, CustomStringConvertible {
    /// `print(error)` prints a one-line message that says what went wrong and what to do about it.
    public var description: String {
        switch self {
        case .authenticationFailed:
            "authentication failed: wrong key or the vault was modified; the file was left untouched"
        case .unsupportedFormatVersion(let version) where version < 2:
            "vault format version \(version) is not supported (this build reads versions 2 and 3): it was only "
                + "written by development builds before the first release; the file was left untouched"
        case .unsupportedFormatVersion(let version):
            "vault format version \(version) is not supported (this build reads versions 2 and 3); "
                + "update the app to open it; the file was left untouched"
        case .notAVault(let reason): "not a Prefs vault (\(reason)); the file was left untouched"
        case .truncated(let expected, let actual):
            "vault is truncated: expected \(expected) bytes, found \(actual); restore it from a backup"
        case .insecureKeyFile(let path, let mode):
            "key file \(path) is accessible by group or others (mode \(String(mode & 0o7777, radix: 8))); "
                + "run `chmod 600 \(path)`"
        case .invalidKey(let reason): "invalid vault key: \(reason)"
        case .rollbackDetected(let reason): "vault refused: \(reason); the file was left untouched"
        case .io(let path, let operation, _, let message): "\(operation) \(path): \(message)"
        case .rollbackRecordUnavailable(let path, let reason):
            "rollback protection is off: the vault's record \(path) \(reason); an older copy of the vault would "
                + "open unnoticed (make $XDG_STATE_HOME writable, or, where no "
                + "state can be kept, pass over this report in PrefsConfig.errorHandler)"
        }
    }

    /// `error.localizedDescription` is the same text as ``description``.
    public var errorDescription: String? { description }
}

extension SystemCallError {
    /// The same failure as a `VaultError.io`, for vault key files.
    var vaultError: VaultError { .io(path: path, operation: operation, errno: errno, message: message) }
}

extension VaultError: FileErrorConvertible {
    /// A vault's file-system failure, for reports.
    var fileError: (any FileError)? {
        switch self {
        case .io(let path, let operation, let errno, _):
            FileFailure(filePath: path, repeatCause: FileFailure.systemCallCause(path, operation, errno))
        case .insecureKeyFile(let path, _): FileFailure(filePath: path, repeatCause: description)
        default: nil
        }
    }
}
