import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A file only its owner can read or write, whatever the umask: how `prefs export` writes, as private as the domain
/// files it copies.
enum PrivateFile {
    /// Replaces the file at `path` with `data` at once: written to a new file beside it, created with mode 0600 and
    /// set to it (a umask can only have taken bits away), then renamed over it.
    static func replace(atPath path: String, with data: Data) throws {
        let url = URL(filePath: path)
        let temporary = url.deletingLastPathComponent()
            .appending(path: ".\(url.lastPathComponent).tmp-\(UUID().uuidString.prefix(8))").path(percentEncoded: false)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        var renamed = false
        defer {
            close(fd)
            if !renamed { unlink(temporary) }
        }
        var written = 0
        let failure: Int32? = data.withUnsafeBytes { bytes in
            guard fchmod(fd, 0o600) == 0 else { return errno }
            while written < bytes.count {
                let count = write(fd, bytes.baseAddress! + written, bytes.count - written)
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { return errno }
                written += count
            }
            return rename(temporary, path) == 0 ? nil : errno
        }
        if let failure { throw POSIXError(POSIXErrorCode(rawValue: failure) ?? .EIO) }
        renamed = true
    }
}
