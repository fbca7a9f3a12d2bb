import CSodium
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The floor for a durable write: the steps any crash-safe replace needs, and nothing else.
/// Write a temporary file, fsync it, rename it over the target, fsync the directory.
struct PlainDurableWriter {
    let path: String
    let directory: String
    private let temporary: String

    init(path: String) {
        self.path = path
        directory = (path as NSString).deletingLastPathComponent
        temporary = path + ".tmp"
    }

    func write(_ bytes: [UInt8]) throws {
        let fd = open(temporary, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw posixFailure("open", temporary) }
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, bytes.count - offset) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else {
                close(fd)
                throw posixFailure("write", temporary)
            }
            offset += written
        }
        guard fsync(fd) == 0 else {
            close(fd)
            throw posixFailure("fsync", temporary)
        }
        close(fd)
        guard rename(temporary, path) == 0 else { throw posixFailure("rename", path) }
        let directoryFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directoryFD >= 0 else { throw posixFailure("open", directory) }
        defer { close(directoryFD) }
        guard fsync(directoryFD) == 0 else { throw posixFailure("fsync", directory) }
    }
}

/// The floor for opening a vault: read the file, then one XChaCha20-Poly1305 decryption of its contents.
struct PlainSealedFile {
    static let nonceCount = Int(crypto_aead_xchacha20poly1305_ietf_npubbytes())
    static let tagCount = Int(crypto_aead_xchacha20poly1305_ietf_abytes())

    let path: String
    let key: [UInt8]

    /// Seals `plaintext` under a random nonce and writes `nonce ‖ ciphertext ‖ tag` to `path`.
    static func create(path: String, plaintext: [UInt8], key: [UInt8]) throws -> PlainSealedFile {
        var nonce = [UInt8](repeating: 0, count: nonceCount)
        randombytes_buf(&nonce, nonce.count)
        var sealed = [UInt8](repeating: 0, count: plaintext.count + tagCount)
        var sealedCount: UInt64 = 0
        let status = crypto_aead_xchacha20poly1305_ietf_encrypt(
            &sealed, &sealedCount, plaintext, UInt64(plaintext.count), nil, 0, nil, nonce, key)
        guard status == 0 else { throw BenchError.failed("sealing the baseline file failed") }
        try Data(nonce + sealed).write(to: URL(filePath: path))
        return PlainSealedFile(path: path, key: key)
    }

    /// Reads and opens the file, returning the plaintext's size.
    func readAndDecrypt() throws -> Int {
        let bytes = try readWholeFile(path)
        guard bytes.count >= Self.nonceCount + Self.tagCount else { throw BenchError.failed("baseline file too short") }
        var plaintext = [UInt8](repeating: 0, count: bytes.count - Self.nonceCount - Self.tagCount)
        var plaintextCount: UInt64 = 0
        let status = bytes.withUnsafeBufferPointer { buffer in
            let base = buffer.baseAddress!
            return crypto_aead_xchacha20poly1305_ietf_decrypt(
                &plaintext, &plaintextCount, nil, base + Self.nonceCount, UInt64(bytes.count - Self.nonceCount),
                nil, 0, base, key)
        }
        guard status == 0 else { throw BenchError.failed("opening the baseline file failed") }
        return Int(plaintextCount)
    }
}

/// Reads a whole file with plain system calls.
func readWholeFile(_ path: String) throws -> [UInt8] {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw posixFailure("open", path) }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0 else { throw posixFailure("stat", path) }
    var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
    var offset = 0
    while offset < bytes.count {
        let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + offset, $0.count - offset) }
        if count < 0 && errno == EINTR { continue }
        guard count > 0 else { throw posixFailure("read", path) }
        offset += count
    }
    return bytes
}

func posixFailure(_ operation: String, _ path: String) -> BenchError {
    .failed("\(operation) \(path): \(String(cString: strerror(errno)))")
}
