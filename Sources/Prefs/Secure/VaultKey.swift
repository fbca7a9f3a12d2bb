import CSodium
public import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `.keyFile(url)`, `.passphrase(text)`, `.raw(bytes)` or `.source(keySource)`: where a vault's key comes from.
public enum VaultKey: Sendable {
    /// `.keyFile(url)` reads the 32-byte vault key from the file at `url`.
    ///
    /// When a new vault is created and the file does not exist yet, it is created with 32 random bytes, mode 0600
    /// (and any missing parent folders with mode 0700). Like ssh, a key file that group or others can access in
    /// any way is refused with ``VaultError/insecureKeyFile(path:mode:)``, and one that is not exactly 32 bytes, or
    /// is not a regular file (a FIFO, a device, a symbolic link to a missing file), with
    /// ``VaultError/invalidKey(reason:)``. Losing the file means losing the vault: back it up.
    case keyFile(URL)
    /// `.passphrase(text)` derives the vault key from `text` with Argon2id.
    ///
    /// The salt and cost parameters are stored in the vault header; the key is derived once each time the vault
    /// is opened (with libsodium's interactive cost, 64 MiB of memory). An empty passphrase is refused, and so is a header asking for
    /// a higher cost than this version writes. The store keeps a copy of the passphrase in `sodium_malloc` memory.
    case passphrase(String)
    /// `.raw(bytes)` uses `bytes` as the key: exactly 32 bytes that the app keeps in its own secret manager,
    /// for example 32 bytes from `SecRandomCopyBytes`. A ``VaultKeySource`` (``source(_:)``) keeps the key out of
    /// ordinary memory altogether.
    case raw(Data)
    /// `.source(keySource)` asks a ``VaultKeySource`` for the key: PrefsKeyring's `.keyring()` (the desktop
    /// keyring), ``credential(_:)`` (a systemd service credential), or a source of your own.
    ///
    /// The source is asked when the vault is opened, and to create the key when a new vault is first written.
    /// Errors it throws (a locked keyring, a missing credential) reach the caller unchanged.
    case source(any VaultKeySource)
}

extension VaultKey {
    /// `.credential("vault-key")` reads the vault key from the systemd service credential `vault-key`:
    /// `$CREDENTIALS_DIRECTORY/vault-key`, exactly 32 bytes.
    ///
    /// systemd hands a service its credentials (`LoadCredential=`, `LoadCredentialEncrypted=`,
    /// `SetCredentialEncrypted=`) as read-only files in a private folder it names in `$CREDENTIALS_DIRECTORY`, so the
    /// key is never in the service's home or its backups. The credential is only read: Prefs never creates or
    /// removes it. Without `$CREDENTIALS_DIRECTORY`, without the file, or with a file that is empty or not 32 bytes,
    /// opening or writing the vault throws ``CredentialError``. Make one with
    /// `head -c 32 /dev/urandom | systemd-creds encrypt --name=vault-key - /etc/credstore.encrypted/vault-key`.
    public static func credential(_ name: String) -> VaultKey {
        .source(ServiceCredential(name: name, environment: nil))
    }
}

extension VaultKey {
    /// The length of every vault key.
    static let keyCount = 32

    /// Produces the key for a vault: `header` is the existing vault's header, or nil for a new vault.
    /// See ``VaultKeyMaterial/resolve(for:creating:cost:)``.
    func resolve(
        for header: VaultHeader?, creating: Bool, cost: KDFParameters.Cost = KDFParameters.Cost.interactive,
        vaultPath: String = "/nonexistent/test.vault"
    ) throws -> (key: SecureBytes, kdf: KDFParameters) {
        try VaultKeyMaterial(self, vaultPath: vaultPath).resolve(for: header, creating: creating, cost: cost)
    }

    /// Argon2id13 of a passphrase given as a `String` (tests).
    static func deriveArgon2id(passphrase: String, kdf: KDFParameters) throws(VaultError) -> SecureBytes {
        try VaultKeyMaterial.deriveArgon2id(passphrase: SecureBytes(copying: passphrase), kdf: kdf)
    }
}

/// What a store keeps of its ``VaultKey`` for its whole life: the key file's location, the key source with the
/// vault it asks for, or the passphrase or raw key copied into `sodium_malloc` memory (guarded, excluded from core
/// dumps, wiped on release), so no secret stays in ordinary memory once the `VaultKey` the caller passed is gone.
enum VaultKeyMaterial: Sendable {
    case keyFile(String)
    /// The passphrase's UTF-8 bytes; nil when it is empty (refused when used).
    case passphrase(SecureBytes?)
    /// The raw key, or how many bytes a key of the wrong length had (refused when used).
    case raw(SecureBytes?, count: Int)
    /// A source, and the vault file whose key it is asked for.
    case source(any VaultKeySource, vault: URL)

    /// The material of `key` for the vault at `vaultPath`.
    init(_ key: VaultKey, vaultPath: String) {
        switch key {
        case .keyFile(let url): self = .keyFile(url.path(percentEncoded: false))
        case .passphrase(let text): self = .passphrase(text.isEmpty ? nil : SecureBytes(copying: text))
        case .raw(let data):
            self = .raw(
                data.count == VaultKey.keyCount ? SecureBytes(copying: data as Data) : nil, count: data.count)
        case .source(let source): self = .source(source, vault: URL(filePath: vaultPath).standardizedFileURL)
        }
    }

    /// Produces the key for a vault: `header` is the existing vault's header, or nil for a new vault.
    ///
    /// A passphrase is derived with the header's salt and cost, or for a new vault with a fresh salt and `cost`.
    /// A missing key file, or a key a source does not hold yet, is created only when `creating` is true. The
    /// returned parameters go into the header of the next seal. Throws a ``VaultError``, or what a source threw.
    func resolve(
        for header: VaultHeader?, creating: Bool, cost: KDFParameters.Cost = KDFParameters.Cost.interactive
    ) throws -> (key: SecureBytes, kdf: KDFParameters) {
        switch self {
        case .passphrase(let passphrase):
            guard let passphrase else { throw VaultError.invalidKey(reason: "the passphrase is empty") }
            let kdf: KDFParameters
            if let header {
                guard header.kdf.algorithm == .argon2id13 else {
                    throw VaultError.invalidKey(
                        reason: "this vault is protected by a key file, a key source or a raw key, not a passphrase")
                }
                kdf = header.kdf
            } else {
                kdf = .argon2id(cost: cost)
            }
            return (try Self.deriveArgon2id(passphrase: passphrase, kdf: kdf), kdf)
        case .keyFile(let path):
            try Self.requireNoDerivation(header)
            let recorded = header?.kdf.keyKind ?? .unrecorded
            if !creating, recorded != .keyFile, recorded != .unrecorded, !FileManager.default.fileExists(atPath: path) {
                throw VaultError.invalidKey(reason: "there is no key file \(path): \(Self.keptElsewhere(recorded))")
            }
            return (try KeyFile.load(path: path, creating: creating), .none(kind: .keyFile))
        case .raw(let key, let count):
            try Self.requireNoDerivation(header)
            guard let key else {
                throw VaultError.invalidKey(
                    reason: "a raw key must be exactly \(VaultKey.keyCount) bytes, got \(count)")
            }
            return (key, .none(kind: .raw))
        case .source(let source, let vault):
            try Self.requireNoDerivation(header)
            let kind = Self.kind(of: source)
            guard let key = try Self.key(from: source, forVault: vault, creating: creating) else {
                let recorded = header?.kdf.keyKind ?? .unrecorded
                let elsewhere = [kind, .unrecorded].contains(recorded) ? "" : "; \(Self.keptElsewhere(recorded))"
                throw VaultError.invalidKey(
                    reason: "\(Self.name(of: source)) keeps no key for the vault \(vault.path(percentEncoded: false)); "
                        + "it cannot be opened without that key\(elsewhere)")
            }
            return (key, .none(kind: kind))
        }
    }

    /// The kind of place a source keeps keys in, for the vault's header.
    private static func kind(of source: any VaultKeySource) -> VaultKeyKind {
        if source is ServiceCredential { return .credential }
        return (source as? any VaultKeyKindTelling)?.vaultKeyKind ?? .source
    }

    /// Where the vault says its key was kept, and the key that opens it, as the library's API names it.
    static func keptElsewhere(_ kind: VaultKeyKind) -> String {
        let key =
            switch kind {
            case .keyFile: "VaultKey.keyFile(url)"
            case .keyring: "VaultKey.keyring() (PrefsKeyring)"
            case .credential: "VaultKey.credential(name)"
            case .source: "that VaultKey.source(_:)"
            case .raw: "VaultKey.raw(_:)"
            case .passphrase: "VaultKey.passphrase(_:)"
            case .unrecorded: "the key it was written with"
            }
        return "the vault was written with its key in \(kind.phrase); open it with \(key)"
    }

    /// Asks `source` for a key and checks its length.
    private static func key(
        from source: any VaultKeySource, forVault vault: URL, creating: Bool
    ) throws -> SecureBytes? {
        guard let key = try source.key(forVault: vault, creating: creating) else {
            if creating { throw VaultError.invalidKey(reason: "\(name(of: source)) made no key for a new vault") }
            return nil
        }
        guard key.count == VaultKey.keyCount else {
            throw VaultError.invalidKey(
                reason: "\(name(of: source)) gave a key of \(key.count) bytes, expected \(VaultKey.keyCount)")
        }
        return key
    }

    /// How messages name a source: its description, or its type (never its fields, which may hold secrets).
    private static func name(of source: any VaultKeySource) -> String {
        (source as? any CustomStringConvertible)?.description ?? "the key source \(type(of: source))"
    }

    /// This material when the key is kept apart from the vault (a key file, a source), where a move removes it from;
    /// nil for a passphrase or a raw key, which nothing keeps.
    var keptApart: VaultKeyMaterial? {
        switch self {
        case .keyFile, .source: self
        case .passphrase, .raw: nil
        }
    }

    /// Whether this key opens the vault file `vault` (authenticates it); nil when no key is kept here (a key file
    /// that does not exist, a source that keeps none for the vault). Throws what getting the key threw otherwise.
    func opens(_ vault: Data) throws -> Bool? {
        let header = try VaultFormat.parseHeader(vault)
        let derived = header.kdf.algorithm != .none
        let key: SecureBytes
        switch self {
        case .passphrase:
            guard derived else { return false }
            key = try resolve(for: header, creating: false).key
        case .keyFile(let path):
            guard !derived else { return false }
            // One open: a key file another process removes meanwhile (finishing the same move) keeps no key here.
            do {
                key = try KeyFile.load(path: path, creating: false)
            } catch VaultError.io(_, _, ENOENT, _) {
                return nil
            }
        case .raw:
            guard !derived else { return false }
            key = try resolve(for: header, creating: false).key
        case .source(let source, let url):
            guard !derived else { return false }
            guard let found = try Self.key(from: source, forVault: url, creating: false) else { return nil }
            key = found
        }
        do {
            try VaultFormat.withPlaintext(of: vault, key: key) { _ in }
            return true
        } catch VaultError.authenticationFailed {
            return false
        }
    }

    /// Removes the key kept apart from the vault: the key file (its folder synced, so the removal is durable) or the
    /// source's key. Nothing kept is not an error; a passphrase or raw key has nothing to remove.
    func removeKey() throws {
        switch self {
        case .keyFile(let path): try KeyFile.remove(path: path)
        case .source(let source, let vault): try source.removeKey(forVault: vault)
        case .passphrase, .raw: break
        }
    }

    private static func requireNoDerivation(_ header: VaultHeader?) throws(VaultError) {
        if let header, header.kdf.algorithm != .none {
            throw .invalidKey(reason: "this vault is protected by a passphrase")
        }
    }

    /// Argon2id13 through `crypto_pwhash`, after checking the parameters' bounds (they may come from a file).
    static func deriveArgon2id(passphrase: SecureBytes, kdf: KDFParameters) throws(VaultError) -> SecureBytes {
        precondition(kdf.algorithm == .argon2id13)
        try kdf.validate()
        let key = SecureBytes(count: VaultKey.keyCount)
        let status = key.withUnsafeMutableBytes { output in
            passphrase.withUnsafeBytes { password in
                kdf.salt.withUnsafeBufferPointer { salt in
                    crypto_pwhash(
                        output.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(output.count),
                        password.baseAddress!.assumingMemoryBound(to: CChar.self), UInt64(password.count),
                        salt.baseAddress!, kdf.opsLimit, Int(kdf.memLimit), crypto_pwhash_alg_argon2id13())
                }
            }
        }
        guard status == 0 else {
            throw .io(
                path: "(Argon2id)", operation: "derive key from passphrase", errno: ENOMEM,
                message: "out of memory (needs \(kdf.memLimit >> 20) MiB)")
        }
        return key
    }
}

/// Reading and creating key files through the file layer's helpers: opened without blocking (a FIFO cannot hang
/// the open), refused unless a regular file, read and written with `EINTR` retries, created durably.
private enum KeyFile {
    static func load(path: String, creating: Bool) throws(VaultError) -> SecureBytes {
        // A second attempt only happens when another process created the file between our open and our link.
        for _ in 0..<3 {
            let opened: (fd: Int32, info: stat)?
            do {
                opened = try POSIX.openRegularFile(atPath: path, maximumSize: Int.max)
            } catch  where error.errno == EINVAL {
                throw .invalidKey(reason: "key file \(path) \(error.message)")
            } catch {
                throw error.vaultError
            }
            if let (descriptor, info) = opened {
                defer { close(descriptor) }
                return try readKey(descriptor, info: info, path: path)
            }
            var info = stat()
            if lstat(path, &info) == 0 {
                // Something is there but open found nothing: a symbolic link to a missing file. Creating the
                // key through it would write wherever it points, and linking over it is impossible: refuse.
                throw .invalidKey(
                    reason: "key file \(path) is a symbolic link to a missing file; remove it or point it at the key")
            }
            guard creating else {
                throw SystemCallError(path: path, operation: "open key file", errno: ENOENT).vaultError
            }
            if let key = try create(path: path) { return key }
        }
        throw SystemCallError(
            path: path, operation: "open key file", errno: EAGAIN, detail: "it keeps appearing and disappearing"
        ).vaultError
    }

    /// Removes the key file and syncs its folder; a file already gone is not an error.
    static func remove(path: String) throws(VaultError) {
        guard unlink(path) == 0 || errno == ENOENT else {
            throw SystemCallError(path: path, operation: "remove key file").vaultError
        }
        do {
            try POSIX.syncDirectory(atPath: POSIX.parentPath(of: path))
        } catch {
            throw error.vaultError
        }
    }

    /// Checks the open file like ssh does (mode bits, not access(), because root passes every access check).
    private static func readKey(_ descriptor: Int32, info: stat, path: String) throws(VaultError) -> SecureBytes {
        guard info.st_mode & 0o077 == 0 else { throw .insecureKeyFile(path: path, mode: UInt32(info.st_mode & 0o7777)) }
        guard info.st_size == VaultKey.keyCount else {
            throw .invalidKey(reason: "key file \(path) is \(info.st_size) bytes, expected \(VaultKey.keyCount)")
        }
        let key = SecureBytes(count: VaultKey.keyCount)
        let filled: Int
        do {
            filled = try key.withUnsafeMutableBytes { (buffer) throws(SystemCallError) in
                try POSIX.readFully(descriptor, into: buffer, path: path)
            }
        } catch {
            throw error.vaultError
        }
        guard filled == key.count else {
            throw .invalidKey(reason: "key file \(path) is \(filled) bytes, expected \(VaultKey.keyCount)")
        }
        return key
    }

    /// Writes 32 random bytes to a private temporary file, flushed, and gives it the key file's name only if nothing
    /// has it, so the key file appears complete or not at all; through the file-system seam, straight from the key's
    /// locked memory. Returns nil when another process created the file first.
    private static func create(path: String) throws(VaultError) -> SecureBytes? {
        let key = SecureBytes.random(count: VaultKey.keyCount)
        let fileSystem = POSIXFileSystem()
        do throws(SystemCallError) {
            let temporary = try key.withUnsafeBytes { (bytes) throws(SystemCallError) in
                try fileSystem.writeTemporary(beside: path, bytes: bytes, mode: 0o600, durable: true)
            }
            do throws(SystemCallError) {
                try fileSystem.move(temporary.path, to: path)
            } catch {
                fileSystem.discard(temporary)
                if error.errno == EEXIST { return nil }
                throw error
            }
            try fileSystem.syncFolder(of: path)
        } catch {
            throw error.vaultError
        }
        return key
    }
}
