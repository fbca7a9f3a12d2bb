public import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `let writes = try FileReplacements(of: url)` counts, through inotify, how many times a file is replaced by a
/// rename into its folder (every write of a Prefs file store is one), independently of the library.
///
/// Events queue in the kernel from `init` on; ``count()`` reads those that arrived so far.
public final class FileReplacements {
    private let fd: Int32
    private let name: String
    private var total = 0

    /// `try FileReplacements(of: url)` starts counting replacements of the file at `url`; its folder must exist.
    public init(of url: URL) throws {
        name = url.lastPathComponent
        fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        let folder = url.deletingLastPathComponent().path(percentEncoded: false)
        // Moves from the temporary names too: the kernel merges an event identical to the last one unread, so
        // renames onto the file would count as one unless another event comes between them.
        guard inotify_add_watch(fd, folder, UInt32(IN_MOVED_TO | IN_MOVED_FROM)) >= 0 else {
            close(fd)
            throw POSIXError(.init(rawValue: errno) ?? .EIO)
        }
    }

    deinit { close(fd) }

    /// `writes.count()` is the number of replacements of the file since counting began.
    public func count() -> Int {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let read = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            guard read > 0 else { return total }
            var offset = 0
            let header = MemoryLayout<inotify_event>.size
            while offset + header <= read {
                let length = buffer.withUnsafeBytes { bytes in
                    Int(bytes.loadUnaligned(fromByteOffset: offset, as: inotify_event.self).len)
                }
                let nameBytes = buffer[(offset + header)..<(offset + header + length)].prefix { $0 != 0 }
                let mask = buffer.withUnsafeBytes { bytes in
                    bytes.loadUnaligned(fromByteOffset: offset, as: inotify_event.self).mask
                }
                if mask & UInt32(IN_MOVED_TO) != 0, String(decoding: nameBytes, as: UTF8.self) == name { total += 1 }
                offset += header + length
            }
        }
    }
}
