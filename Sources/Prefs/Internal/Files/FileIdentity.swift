import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What a file is right now, from `stat`: which inode on which device, how big, and when its contents and metadata
/// last changed.
///
/// Two equal identities almost certainly mean the file was not replaced or modified in between; an atomic
/// replacement always changes at least the inode.
struct FileIdentity: Equatable, Sendable {
    var device: UInt64
    var inode: UInt64
    var size: Int64
    var modificationSeconds: Int64
    var modificationNanoseconds: Int64
    var changeSeconds: Int64
    var changeNanoseconds: Int64

    init(
        device: UInt64, inode: UInt64, size: Int64, modificationSeconds: Int64, modificationNanoseconds: Int64,
        changeSeconds: Int64, changeNanoseconds: Int64
    ) {
        self.device = device
        self.inode = inode
        self.size = size
        self.modificationSeconds = modificationSeconds
        self.modificationNanoseconds = modificationNanoseconds
        self.changeSeconds = changeSeconds
        self.changeNanoseconds = changeNanoseconds
    }

    init(_ info: stat) {
        #if canImport(Darwin)
            let modification = info.st_mtimespec
            let change = info.st_ctimespec
        #else
            let modification = info.st_mtim
            let change = info.st_ctim
        #endif
        self.init(
            device: UInt64(truncatingIfNeeded: info.st_dev),
            inode: UInt64(truncatingIfNeeded: info.st_ino),
            size: Int64(info.st_size),
            modificationSeconds: Int64(modification.tv_sec),
            modificationNanoseconds: Int64(modification.tv_nsec),
            changeSeconds: Int64(change.tv_sec),
            changeNanoseconds: Int64(change.tv_nsec)
        )
    }

    /// The identity of the file at `path` (following symlinks), or nil when nothing exists there.
    static func of(path: String) throws(SystemCallError) -> FileIdentity? {
        var info = stat()
        if stat(path, &info) != 0 {
            let code = errno
            if code == ENOENT { return nil }
            throw SystemCallError(path: path, operation: "stat", errno: code)
        }
        return FileIdentity(info)
    }

    /// The identity of an open file; `path` is only used in the error.
    static func of(fileDescriptor fd: Int32, path: String) throws(SystemCallError) -> FileIdentity {
        var info = stat()
        if fstat(fd, &info) != 0 { throw SystemCallError(path: path, operation: "stat") }
        return FileIdentity(info)
    }
}
