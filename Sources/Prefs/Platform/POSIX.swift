import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Small helpers around raw system calls shared by the file layer and the vault's key files. They throw
/// ``SystemCallError``; callers convert it to their own error type.
enum POSIX {
    /// The largest file a store reads: anything bigger is refused before it is read, so a huge (or sparse) file
    /// cannot exhaust memory.
    static let maximumFileSize = 64 << 20

    /// The current `errno`.
    static var lastError: Int32 { errno }

    /// The `strerror` text for an `errno` value.
    static func message(for code: Int32) -> String {
        guard let text = strerror(code) else { return "error \(code)" }
        return String(cString: text)
    }

    /// `read(2)`, spelled so it does not clash with methods named `read`.
    static func read(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
        #if canImport(Glibc)
            Glibc.read(fd, buffer, count)
        #elseif canImport(Darwin)
            Darwin.read(fd, buffer, count)
        #endif
    }

    /// Runs a system call returning `Int32`, retrying while it fails with `EINTR`.
    static func retrying(_ call: () -> Int32) -> Int32 {
        while true {
            let result = call()
            if result == -1 && errno == EINTR { continue }
            return result
        }
    }

    /// Where a preferences file really is: for a symbolic link (a dotfiles repository, GNU stow, home-manager), the
    /// file it points to, so it is replaced there and the link stays a link; otherwise `path` itself. A dangling
    /// link resolves to where its target would be.
    static func resolvingSymbolicLink(_ path: String) -> String {
        var info = stat()
        var current = path
        for _ in 0..<40 {
            guard lstat(current, &info) == 0, info.st_mode & S_IFMT == S_IFLNK else { return current }
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            let count = readlink(current, &buffer, buffer.count - 1)
            guard count > 0 else { return current }
            let target = String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            current = target.hasPrefix("/") ? target : parentPath(of: current) + "/" + target
        }
        return current
    }

    /// What kind of file a `stat` mode is, for messages: "a FIFO", "a directory", ….
    static func kindName(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFREG: "a regular file"
        case S_IFDIR: "a directory"
        case S_IFIFO: "a FIFO"
        case S_IFCHR: "a character device"
        case S_IFBLK: "a block device"
        case S_IFSOCK: "a socket"
        case S_IFLNK: "a symbolic link"
        default: "a special file"
        }
    }

    /// Opens an existing regular file for reading (or with `access`, for example `O_RDWR | O_APPEND`), without
    /// blocking (a FIFO would otherwise wait for a writer) and optionally without following a final symbolic link.
    /// Returns nil when nothing exists at `path` (a dangling symbolic link counts as nothing when links are followed).
    /// Anything but a regular file, or a regular file larger than `maximumSize`, is closed again and refused.
    static func openRegularFile(
        atPath path: String, access: Int32 = O_RDONLY, followingSymlinks: Bool = true,
        maximumSize: Int = maximumFileSize
    ) throws(SystemCallError) -> (fd: Int32, info: stat)? {
        var flags = access | O_CLOEXEC | O_NONBLOCK | O_NOCTTY
        if !followingSymlinks { flags |= O_NOFOLLOW }
        let fd = retrying { open(path, flags) }
        if fd < 0 {
            let code = errno
            if code == ENOENT { return nil }
            if code == ELOOP, !followingSymlinks {
                throw SystemCallError(
                    path: path, operation: "open", errno: code, detail: "is a symbolic link, which is not accepted here"
                )
            }
            throw SystemCallError(path: path, operation: "open", errno: code)
        }
        var info = stat()
        do throws(SystemCallError) {
            if fstat(fd, &info) != 0 { throw SystemCallError(path: path, operation: "stat") }
            // O_NONBLOCK stays set: it changes nothing for a regular file.
            try requireRegularFile(info, path: path, maximumSize: maximumSize)
        } catch {
            close(fd)
            throw error
        }
        return (fd, info)
    }

    /// Throws unless `info` describes a regular file of at most `maximumSize` bytes.
    static func requireRegularFile(_ info: stat, path: String, maximumSize: Int) throws(SystemCallError) {
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw SystemCallError(
                path: path, operation: "open", errno: EINVAL,
                detail: "is \(kindName(info.st_mode)), not a regular file; replace it with a regular file")
        }
        guard info.st_size <= maximumSize else {
            throw SystemCallError(
                path: path, operation: "open", errno: EFBIG,
                detail: "is \(info.st_size) bytes, more than the \(maximumSize >> 20) MiB a store file may have")
        }
    }

    /// Reads `fd` to its end, refusing more than `maximumSize` bytes (the file may grow while it is read).
    static func readAll(_ fd: Int32, path: String, expectedSize: Int, maximumSize: Int = maximumFileSize)
        throws(SystemCallError) -> Data
    {
        // Straight into a buffer of the size the file had when opened: no intermediate copy. A file that shrank
        // since ends early; one that grew is read on below.
        let expected = max(0, min(expectedSize, maximumSize))
        var data = Data(count: expected)
        if expected > 0 {
            let result = data.withUnsafeMutableBytes { bytes in
                Result { () throws(SystemCallError) in try readFully(fd, into: bytes, path: path) }
            }
            let filled = try result.get()
            if filled < expected {
                data.count = filled
                return data
            }
        }
        // Until the end of the file: usually one read that returns nothing, into scratch space on the stack (a
        // zeroed heap buffer here was a noticeable part of opening a small file).
        return try withUnsafeTemporaryAllocation(byteCount: 16 * 1024, alignment: 1) {
            (buffer: UnsafeMutableRawBufferPointer) throws(SystemCallError) -> Data in
            while true {
                var count: Int
                repeat { count = read(fd, buffer.baseAddress, buffer.count) } while count < 0 && errno == EINTR
                if count < 0 { throw SystemCallError(path: path, operation: "read") }
                if count == 0 { return data }
                guard data.count + count <= maximumSize else {
                    throw SystemCallError(
                        path: path, operation: "read", errno: EFBIG,
                        detail: "grew past the \(maximumSize >> 20) MiB a store file may have while it was read")
                }
                data.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            }
        }
    }

    /// Fills `buffer` from `fd`, retrying on `EINTR`; returns how many bytes were read before the end of the file.
    static func readFully(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, path: String)
        throws(SystemCallError) -> Int
    {
        try transferAll(buffer.count, path: path, operation: "read") { read(fd, buffer.baseAddress! + $0, $1) }
    }

    /// Writes all of `bytes` to `fd`, retrying on `EINTR` and after short writes.
    ///
    /// A write past the process's file size limit (`RLIMIT_FSIZE`) raises `SIGXFSZ`, whose default action ends the
    /// process. Where a limit is set, the signal is held back on this thread for the write, which then fails with
    /// `EFBIG` as on a full disk, and the signal that write raised is taken off again (one pending before is left as
    /// it was). Without a limit (read once: the usual case) the signal cannot be raised, and nothing is done.
    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, path: String) throws(SystemCallError) {
        guard fileSizeIsLimited else { return try writeFully(fd, bytes, path: path) }
        var held = sigset_t()
        sigemptyset(&held)
        sigaddset(&held, SIGXFSZ)
        var previous = sigset_t()
        pthread_sigmask(SIG_BLOCK, &held, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        var pending = sigset_t()
        let pendingBefore = sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ) == 1
        do throws(SystemCallError) {
            try writeFully(fd, bytes, path: path)
        } catch {
            if error.errno == EFBIG, !pendingBefore, sigpending(&pending) == 0, sigismember(&pending, SIGXFSZ) == 1 {
                takePending(&held)
            }
            throw error
        }
    }

    /// Whether this process has a file size limit, so a write can raise `SIGXFSZ`; read once.
    static let fileSizeIsLimited: Bool = {
        var limit = rlimit()
        #if canImport(Glibc)
            let resource = __rlimit_resource_t(RLIMIT_FSIZE.rawValue)
        #else
            let resource = RLIMIT_FSIZE
        #endif
        // RLIM_INFINITY is all bits set on every platform (it does not import into Swift on Linux).
        return getrlimit(resource, &limit) != 0 || limit.rlim_cur != rlim_t.max
    }()

    /// Takes a pending signal of `set` off this thread (it is pending, so neither call waits).
    private static func takePending(_ set: inout sigset_t) {
        #if canImport(Glibc)
            var noWait = timespec()
            _ = sigtimedwait(&set, nil, &noWait)
        #else
            var taken: Int32 = 0
            _ = sigwait(&set, &taken)
        #endif
    }

    private static func writeFully(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, path: String) throws(SystemCallError) {
        let written = try transferAll(bytes.count, path: path, operation: "write") {
            write(fd, bytes.baseAddress! + $0, $1)
        }
        if written < bytes.count { throw SystemCallError(path: path, operation: "write", errno: ENOSPC) }
    }

    /// Writes all of `data` to `fd`, as ``writeAll(_:_:path:)`` does.
    static func writeAll(_ fd: Int32, _ data: Data, path: String) throws(SystemCallError) {
        let failure = data.withUnsafeBytes { bytes -> SystemCallError? in
            do throws(SystemCallError) {
                try writeAll(fd, bytes, path: path)
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw failure }
    }

    /// Calls `transfer(offset, remaining)` (a `read` or `write`) until `count` bytes have moved or it moves none,
    /// retrying on `EINTR`; returns how many moved.
    private static func transferAll(
        _ count: Int, path: String, operation: String, _ transfer: (Int, Int) -> Int
    ) throws(SystemCallError) -> Int {
        var done = 0
        while done < count {
            let result = transfer(done, count - done)
            if result < 0 {
                if errno == EINTR { continue }
                throw SystemCallError(path: path, operation: operation)
            }
            if result == 0 { break }
            done += result
        }
        return done
    }

    /// `fsync`, retrying on `EINTR`. On Apple platforms `fsync` leaves the data in the drive's cache, so it is
    /// `fcntl(F_FULLFSYNC)` there, with `fsync` only where the file system does not support it.
    static func sync(_ fd: Int32, path: String) throws(SystemCallError) {
        if retrying({ fullSync(fd) }) != 0 { throw SystemCallError(path: path, operation: "sync") }
    }

    /// The strongest flush the platform offers for one descriptor.
    private static func fullSync(_ fd: Int32) -> Int32 {
        #if canImport(Darwin)
            if fcntl(fd, F_FULLFSYNC) == 0 { return 0 }
            if errno == EINTR { return -1 }
            return fsync(fd)  // file systems without F_FULLFSYNC (some network and FAT volumes)
        #else
            return fsync(fd)
        #endif
    }

    /// Creates `path` and any missing ancestors with `mode`, leaving existing directories alone.
    ///
    /// Each directory that is created is `chmod`ed to `mode` afterwards so the process umask cannot widen or narrow
    /// it, and its parent is `fsync`ed so the new entry survives a crash.
    static func createDirectory(atPath path: String, mode: mode_t) throws(SystemCallError) {
        var info = stat()
        if stat(path, &info) == 0 {
            if info.st_mode & S_IFMT == S_IFDIR { return }
            throw SystemCallError(path: path, operation: "create directory", errno: ENOTDIR)
        }
        let missingCode = errno
        guard missingCode == ENOENT else {
            throw SystemCallError(path: path, operation: "create directory", errno: missingCode)
        }
        let parent = parentPath(of: path)
        if parent != path { try createDirectory(atPath: parent, mode: mode) }
        if mkdir(path, mode) != 0 {
            let code = errno
            if code == EEXIST, stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR { return }
            throw SystemCallError(path: path, operation: "create directory", errno: code)
        }
        if chmod(path, mode) != 0 { throw SystemCallError(path: path, operation: "set permissions of") }
        try? syncDirectory(atPath: parent)
    }

    /// `fsync`s a directory so renames, creations and removals inside it are durable.
    ///
    /// File systems that cannot sync directories (`EINVAL`, `ENOTSUP`) are treated as success.
    static func syncDirectory(atPath path: String) throws(SystemCallError) {
        let fd = retrying { open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard fd >= 0 else { throw SystemCallError(path: path, operation: "open directory") }
        defer { close(fd) }
        if retrying({ fullSync(fd) }) != 0 {
            let code = errno
            if code == EINVAL || code == ENOTSUP || code == EOPNOTSUPP { return }
            throw SystemCallError(path: path, operation: "sync directory", errno: code)
        }
    }

    /// The directory part of a path: `"/a/b/c"` → `"/a/b"`, `"/a"` → `"/"`, `"c"` → `"."`.
    static func parentPath(of path: String) -> String {
        let trimmed = withoutTrailingSlashes(path)
        guard let slash = trimmed.utf8.lastIndex(of: UInt8(ascii: "/")) else { return "." }
        if slash == trimmed.startIndex { return "/" }
        return String(trimmed[..<slash])
    }

    /// The last component of a path.
    static func lastComponent(of path: String) -> String {
        let trimmed = withoutTrailingSlashes(path)
        guard let slash = trimmed.utf8.lastIndex(of: UInt8(ascii: "/")) else { return String(trimmed) }
        return String(trimmed[trimmed.utf8.index(after: slash)...])
    }

    /// `path` without its trailing slashes, keeping its first character ("/" stays "/"). Works on the UTF-8 bytes:
    /// a "/" byte is always a whole character, and counting characters made every store open pay for it.
    private static func withoutTrailingSlashes(_ path: String) -> Substring {
        let utf8 = path.utf8
        var end = utf8.endIndex
        while end != utf8.startIndex {
            let last = utf8.index(before: end)
            guard last != utf8.startIndex, utf8[last] == UInt8(ascii: "/") else { break }
            end = last
        }
        return path[..<end]
    }

    /// The process holding a `flock` on the file open at `fd`, read from `/proc/locks` (Linux); nil where the
    /// system does not tell, or when nobody holds one any more.
    static func flockHolder(of fd: Int32) -> Int32? {
        var info = stat()
        guard fstat(fd, &info) == 0,
            let table = try? String(contentsOfFile: "/proc/locks", encoding: .utf8)
        else { return nil }
        let device = UInt64(info.st_dev)
        let major = ((device >> 8) & 0xfff) | ((device >> 32) & ~0xfff)
        let minor = (device & 0xff) | ((device >> 12) & ~0xff)
        // "1: FLOCK  ADVISORY  WRITE 8386 fe:00:16224565 0 EOF": the holder's pid, then major:minor:inode in
        // hexadecimal, hexadecimal and decimal. A waiter's line has "->" after the number.
        for line in table.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count >= 6, fields[1] == "FLOCK", let pid = Int32(fields[4]) else { continue }
            let file = fields[5].split(separator: ":")
            if file.count == 3, UInt64(file[0], radix: 16) == major, UInt64(file[1], radix: 16) == minor,
                UInt64(file[2]) == UInt64(info.st_ino)
            {
                return pid
            }
        }
        return nil
    }
}

extension URL {
    /// The file-system path of a file URL, without percent encoding.
    var fileSystemPath: String { path(percentEncoded: false) }

}
