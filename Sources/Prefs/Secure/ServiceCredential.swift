public import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `catch let error as CredentialError { … }` catches why a vault key given as ``VaultKey/credential(_:)`` could not
/// be read.
public enum CredentialError: Error, Sendable, Equatable {
    /// `.directoryNotSet(name:)`: `$CREDENTIALS_DIRECTORY` is not set, so this process was not given any
    /// credential: it was not started by systemd with `LoadCredential=` (or a sibling) for credential `name`.
    case directoryNotSet(name: String)
    /// `.invalidName(name)`: a credential name that is not one file name (empty, `.`, `..`, or containing `/` or a
    /// NUL byte).
    case invalidName(String)
    /// `.missing(path:)`: the credentials folder has no file of that name: the unit does not pass that credential.
    case missing(path: String)
    /// `.empty(path:)`: the credential file is empty.
    case empty(path: String)
    /// `.wrongSize(path:size:)`: the credential file is `size` bytes, not the 32 of a vault key.
    case wrongSize(path: String, size: Int)
    /// `.unreadable(path:reason:)`: the credential cannot be read: not a regular file, permission denied, ….
    case unreadable(path: String, reason: String)
    /// `.notRemovable(name:)`: a vault's key moved away from credential `name`, which Prefs cannot remove: systemd
    /// passes it read-only.
    case notRemovable(name: String)
}

extension CredentialError: LocalizedError, CustomStringConvertible {
    /// `print(error)` prints a one-line message that says what went wrong and what to do about it.
    public var description: String {
        switch self {
        case .directoryNotSet(let name):
            "no service credentials: $CREDENTIALS_DIRECTORY is not set; run the program as a systemd service with "
                + "LoadCredential=\(name):… (or LoadCredentialEncrypted=) to pass its vault key"
        case .invalidName(let name):
            "credential name \(String(reflecting: name)) is not a file name; use a name such as vault-key"
        case .missing(let path):
            "credential \(path) does not exist; add LoadCredential= (or LoadCredentialEncrypted=) for it to the unit"
        case .empty(let path): "credential \(path) is empty; it must hold the 32-byte vault key"
        case .wrongSize(let path, let size):
            "credential \(path) is \(size) bytes, expected the 32-byte vault key (head -c 32 /dev/urandom makes one)"
        case .unreadable(let path, let reason): "credential \(path) cannot be read: \(reason)"
        case .notRemovable(let name):
            "the vault no longer uses credential \(name), which systemd passes read-only; remove it from the unit and "
                + "from the credential store yourself"
        }
    }

    /// `error.localizedDescription` is the same text as ``description``.
    public var errorDescription: String? { description }
}

/// A vault key passed by systemd as a service credential: `$CREDENTIALS_DIRECTORY/<name>`, exactly 32 bytes, read
/// into `sodium_malloc` memory and never created or written.
struct ServiceCredential: VaultKeySource, CustomStringConvertible {
    let name: String
    /// The environment to find `CREDENTIALS_DIRECTORY` in; nil for this process's, read when the key is asked for.
    let environment: [String: String]?

    var description: String { "service credential \(name)" }

    func key(forVault vault: URL, creating: Bool) throws -> SecureBytes? {
        let path = try path()
        let opened: (fd: Int32, info: stat)?
        do {
            // Read-only and owned by the service, so no mode check: systemd decides who reads it.
            opened = try POSIX.openRegularFile(atPath: path, maximumSize: Int.max)
        } catch {
            throw CredentialError.unreadable(path: path, reason: error.message)
        }
        guard let (descriptor, info) = opened else { throw CredentialError.missing(path: path) }
        defer { close(descriptor) }
        guard info.st_size != 0 else { throw CredentialError.empty(path: path) }
        guard info.st_size == VaultKey.keyCount else {
            throw CredentialError.wrongSize(path: path, size: Int(info.st_size))
        }
        let key = SecureBytes(count: VaultKey.keyCount)
        let filled: Int
        do {
            filled = try key.withUnsafeMutableBytes { (buffer) throws(SystemCallError) in
                try POSIX.readFully(descriptor, into: buffer, path: path)
            }
        } catch {
            throw CredentialError.unreadable(path: path, reason: error.message)
        }
        guard filled == key.count else { throw CredentialError.wrongSize(path: path, size: filled) }
        return key
    }

    func removeKey(forVault vault: URL) throws {
        throw CredentialError.notRemovable(name: name)
    }

    /// `$CREDENTIALS_DIRECTORY/<name>`, once the name is known to stay inside the folder.
    private func path() throws(CredentialError) -> String {
        guard !name.isEmpty, name != ".", name != "..", !name.contains("/"), !name.contains("\0") else {
            throw .invalidName(name)
        }
        let variables = environment ?? ProcessInfo.processInfo.environment
        guard let directory = variables["CREDENTIALS_DIRECTORY"], !directory.isEmpty else {
            throw .directoryNotSet(name: name)
        }
        return directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }
}
