import CSodium
public import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `.keyFile(url)`, `.passphrase(text)` or `.raw(bytes)`: where a vault's key comes from.
public enum VaultKey: Sendable {
    /// `.keyFile(url)` reads the 32-byte vault key from the file at `url`.
    ///
    /// When a new vault is created and the file does not exist yet, it is created with 32 random bytes, mode 0600
    /// (and any missing parent folders with mode 0700). Like ssh, a key file that group or others can access in
    /// any way is refused with ``VaultError/insecureKeyFile(path:mode:)``, and one that is not exactly 32 bytes
    /// with ``VaultError/invalidKey(reason:)``. Losing the file means losing the vault: back it up.
    case keyFile(URL)
    /// `.passphrase(text)` derives the vault key from `text` with Argon2id.
    ///
    /// The salt and cost parameters are stored in the vault header; the key is derived once each time the vault
    /// is opened (about 55 ms with the default cost). An empty passphrase is refused.
    case passphrase(String)
    /// `.raw(bytes)` uses `bytes` as the key: exactly 32 bytes that the app keeps in its own secret manager
    /// (Keychain, Secret Service, …), for example 32 bytes from `SecRandomCopyBytes`.
    case raw(Data)
}

extension VaultKey {
    /// The length of every vault key.
    static let keyCount = 32

    /// Produces the key for a vault: `header` is the existing vault's header, or nil for a new vault.
    ///
    /// A passphrase is derived with the header's salt and cost, or for a new vault with a fresh salt and `cost`.
    /// A missing key file is created only when `creating` is true. The returned parameters go into the header of
    /// the next seal.
    func resolve(
        for header: VaultHeader?, creating: Bool, cost: KDFParameters.Cost = KDFParameters.Cost.defaultCost
    ) throws(VaultError) -> (key: SecureBytes, kdf: KDFParameters) {
        switch self {
        case .passphrase(let passphrase):
            guard !passphrase.isEmpty else { throw .invalidKey(reason: "the passphrase is empty") }
            let kdf: KDFParameters
            if let header {
                guard header.kdf.algorithm == .argon2id13 else {
                    throw .invalidKey(reason: "this vault is protected by a key file or raw key, not a passphrase")
                }
                kdf = header.kdf
            } else {
                kdf = .argon2id(cost: cost)
            }
            return (try Self.deriveArgon2id(passphrase: passphrase, kdf: kdf), kdf)
        case .keyFile(let url):
            try Self.requireNoDerivation(header)
            return (try KeyFile.load(path: url.path(percentEncoded: false), creating: creating), .none)
        case .raw(let data):
            try Self.requireNoDerivation(header)
            guard data.count == Self.keyCount else {
                throw .invalidKey(reason: "a raw key must be exactly \(Self.keyCount) bytes, got \(data.count)")
            }
            let key = SecureBytes(count: Self.keyCount)
            key.withUnsafeMutableBytes { destination in data.withUnsafeBytes { destination.copyMemory(from: $0) } }
            return (key, .none)
        }
    }

    private static func requireNoDerivation(_ header: VaultHeader?) throws(VaultError) {
        if let header, header.kdf.algorithm != .none {
            throw .invalidKey(reason: "this vault is protected by a passphrase")
        }
    }

    /// Argon2id13 through `crypto_pwhash`, after checking the parameters' bounds (they may come from a file).
    static func deriveArgon2id(passphrase: String, kdf: KDFParameters) throws(VaultError) -> SecureBytes {
        precondition(kdf.algorithm == .argon2id13)
        try kdf.validate()
        let key = SecureBytes(count: keyCount)
        var text = passphrase  // shares storage; withUTF8 only copies a non-contiguous (bridged) string
        let status = text.withUTF8 { utf8 in
            key.withUnsafeMutableBytes { output in
                kdf.salt.withUnsafeBufferPointer { salt in
                    utf8.withMemoryRebound(to: CChar.self) { password in
                        crypto_pwhash(
                            output.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(output.count),
                            password.baseAddress!, UInt64(password.count), salt.baseAddress!,
                            kdf.opsLimit, Int(kdf.memLimit), crypto_pwhash_alg_argon2id13())
                    }
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

/// Reading and creating key files with POSIX calls, so that permissions are checked on the open descriptor.
private enum KeyFile {
    static func load(path: String, creating: Bool) throws(VaultError) -> SecureBytes {
        while true {
            let descriptor = open(path, O_RDONLY | O_CLOEXEC)
            if descriptor >= 0 {
                defer { close(descriptor) }
                return try readKey(descriptor, path: path)
            }
            let code = errno
            guard code == ENOENT, creating else { throw ioError(path, "open key file", code) }
            if let key = try create(path: path) { return key }
            // Another process created it between our open and link: read theirs.
        }
    }

    /// Checks the open file like ssh does (mode bits, not access(), because root passes every access check).
    private static func readKey(_ descriptor: Int32, path: String) throws(VaultError) -> SecureBytes {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw ioError(path, "stat key file", errno) }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw .invalidKey(reason: "key file \(path) is not a regular file")
        }
        guard info.st_mode & 0o077 == 0 else { throw .insecureKeyFile(path: path, mode: UInt32(info.st_mode & 0o7777)) }
        guard info.st_size == VaultKey.keyCount else {
            throw .invalidKey(reason: "key file \(path) is \(info.st_size) bytes, expected \(VaultKey.keyCount)")
        }
        let key = SecureBytes(count: VaultKey.keyCount)
        var filled = 0
        while filled < key.count {
            let result = key.withUnsafeMutableBytes { buffer in
                read(descriptor, buffer.baseAddress! + filled, buffer.count - filled)
            }
            if result < 0 {
                if errno == EINTR { continue }
                throw ioError(path, "read key file", errno)
            }
            if result == 0 {
                throw .invalidKey(reason: "key file \(path) is \(filled) bytes, expected \(VaultKey.keyCount)")
            }
            filled += result
        }
        return key
    }

    /// Writes 32 random bytes to a private temporary file, fsyncs it and links it into place, so the key file
    /// appears complete or not at all. Returns nil when another process created the file first.
    private static func create(path: String) throws(VaultError) -> SecureBytes? {
        let directory = (path as NSString).deletingLastPathComponent
        try makeDirectories(directory.isEmpty ? "." : directory)
        let suffix = randomBytes(count: 8).map { String($0, radix: 16) }.joined()
        let temporary = "\(path).tmp-\(suffix)"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else { throw ioError(temporary, "create key file", errno) }
        defer { unlink(temporary) }
        let key = SecureBytes.random(count: VaultKey.keyCount)
        do {
            defer { close(descriptor) }
            guard fchmod(descriptor, 0o600) == 0 else { throw ioError(temporary, "chmod key file", errno) }
            var written = 0
            while written < key.count {
                let result = key.withUnsafeBytes { buffer in
                    write(descriptor, buffer.baseAddress! + written, buffer.count - written)
                }
                if result < 0 {
                    if errno == EINTR { continue }
                    throw ioError(temporary, "write key file", errno)
                }
                written += result
            }
            guard fsync(descriptor) == 0 else { throw ioError(temporary, "fsync key file", errno) }
        }
        guard link(temporary, path) == 0 else {
            let code = errno
            if code == EEXIST { return nil }
            throw ioError(path, "create key file", code)
        }
        syncDirectory(directory.isEmpty ? "." : directory)
        return key
    }

    /// `mkdir -p` with mode 0700 for every folder it creates; existing folders are left as they are.
    private static func makeDirectories(_ path: String) throws(VaultError) {
        if mkdir(path, 0o700) == 0 {
            chmod(path, 0o700)  // in case the umask removed owner bits
            return
        }
        switch errno {
        case EEXIST: return
        case ENOENT:
            let parent = (path as NSString).deletingLastPathComponent
            guard !parent.isEmpty, parent != path else { throw ioError(path, "create folder", ENOENT) }
            try makeDirectories(parent)
            guard mkdir(path, 0o700) == 0 || errno == EEXIST else { throw ioError(path, "create folder", errno) }
            chmod(path, 0o700)
        case let code: throw ioError(path, "create folder", code)
        }
    }

    /// Best effort: makes the new directory entry durable.
    private static func syncDirectory(_ path: String) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        fsync(descriptor)
        close(descriptor)
    }

    private static func ioError(_ path: String, _ operation: String, _ code: Int32) -> VaultError {
        .io(path: path, operation: operation, errno: code, message: String(cString: strerror(code)))
    }
}
