public import Foundation

/// The errors an encrypted vault throws: `catch let error as VaultError { … }`.
///
/// Opening never modifies the vault file, whatever the error.
public enum VaultError: Error, Sendable, Equatable {
    /// A vault that could not be decrypted: either the key is wrong or the file was modified. The two are
    /// indistinguishable by design.
    case authenticationFailed
    /// A vault written by a newer (or unknown) version of the format.
    case unsupportedFormatVersion(UInt16)
    /// A file that is not a vault at all, or whose header is malformed.
    case notAVault(reason: String)
    /// A vault file shorter than its header says it should be: `expected` bytes, `actual` found.
    case truncated(expected: Int, actual: Int)
    /// A key file that group or others can access in any way; the mode is the file's permission bits.
    case insecureKeyFile(path: String, mode: UInt32)
    /// A key that cannot be used: a key file or raw key that is not 32 bytes, an empty passphrase, or a key of the
    /// wrong kind for the vault.
    case invalidKey(reason: String)
    /// A file-system operation that failed, with the `errno` text: permission denied, disk full, …
    case io(path: String, operation: String, errno: Int32, message: String)
}

extension VaultError: LocalizedError, CustomStringConvertible {
    /// A one-line message that says what went wrong and what to do about it: `print(error)`.
    public var description: String {
        switch self {
        case .authenticationFailed:
            "authentication failed: wrong key or the vault was modified; the file was left untouched"
        case .unsupportedFormatVersion(let version):
            "vault format version \(version) is not supported (this build reads version 1); "
                + "update the app to open it; the file was left untouched"
        case .notAVault(let reason): "not a Prefs vault (\(reason)); the file was left untouched"
        case .truncated(let expected, let actual):
            "vault is truncated: expected \(expected) bytes, found \(actual); restore it from a backup"
        case .insecureKeyFile(let path, let mode):
            "key file \(path) is accessible by group or others (mode \(String(mode & 0o7777, radix: 8))); "
                + "run `chmod 600 \(path)`"
        case .invalidKey(let reason): "invalid vault key: \(reason)"
        case .io(let path, let operation, _, let message): "\(operation) \(path): \(message)"
        }
    }

    /// The same text as ``description``, for `error.localizedDescription`.
    public var errorDescription: String? { description }
}
