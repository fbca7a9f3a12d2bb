package import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What a file is right now, from `stat`: which inode on which device, how big, and when its contents last changed.
/// An atomic replacement always changes the inode; a rewrite in place changes the size or the modification time,
/// unless it keeps the size within one tick of the file system's clock (docs/ARCHITECTURE.md, "Beside a writer
/// that takes no lock"). The change time is left out: a rename sets it, and a commit knows its file's identity
/// from before its rename.
package struct FileIdentity: Equatable, Sendable {
    package var device: UInt64
    package var inode: UInt64
    package var size: Int64
    package var modificationSeconds: Int64
    package var modificationNanoseconds: Int64

    package init(device: UInt64, inode: UInt64, size: Int64, modificationSeconds: Int64, modificationNanoseconds: Int64)
    {
        self.device = device
        self.inode = inode
        self.size = size
        self.modificationSeconds = modificationSeconds
        self.modificationNanoseconds = modificationNanoseconds
    }

    package init(_ info: stat) {
        #if canImport(Glibc)
            let modification = info.st_mtim
        #elseif canImport(Darwin)
            let modification = info.st_mtimespec
        #endif
        self.init(
            device: UInt64(truncatingIfNeeded: info.st_dev),
            inode: UInt64(truncatingIfNeeded: info.st_ino),
            size: Int64(info.st_size),
            modificationSeconds: Int64(modification.tv_sec),
            modificationNanoseconds: Int64(modification.tv_nsec)
        )
    }

    /// An identity no file has: the next look reads the file again.
    static let unknown = FileIdentity(device: 0, inode: 0, size: -1, modificationSeconds: 0, modificationNanoseconds: 0)

    /// The identity of the file at `path` (following symlinks), or nil when nothing exists there.
    package static func of(path: String) throws(SystemCallError) -> FileIdentity? {
        var info = stat()
        if stat(path, &info) != 0 {
            let code = errno
            if code == ENOENT { return nil }
            throw SystemCallError(path: path, operation: "stat", errno: code)
        }
        return FileIdentity(info)
    }

    /// The identity of an open file; `path` is only used in the error.
    package static func of(fileDescriptor fd: Int32, path: String) throws(SystemCallError) -> FileIdentity {
        var info = stat()
        if fstat(fd, &info) != 0 { throw SystemCallError(path: path, operation: "stat") }
        return FileIdentity(info)
    }
}
