import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Small helpers around raw system calls shared by the file layer.
enum POSIX {
    /// The `strerror` text for an `errno` value.
    static func message(for code: Int32) -> String {
        guard let text = strerror(code) else { return "error \(code)" }
        return String(cString: text)
    }

    /// A `PrefsError.io` for the current (or given) `errno`.
    static func error(path: String, operation: String, errno code: Int32 = errno) -> PrefsError {
        .io(path: path, operation: operation, errno: code, message: message(for: code))
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

    /// Creates `path` and any missing ancestors with `mode`, leaving existing directories alone.
    ///
    /// Each directory that is created is `chmod`ed to `mode` afterwards so the process umask cannot widen or narrow
    /// it, and its parent is `fsync`ed so the new entry survives a crash.
    static func createDirectory(atPath path: String, mode: mode_t) throws(PrefsError) {
        var info = stat()
        if stat(path, &info) == 0 {
            if info.st_mode & S_IFMT == S_IFDIR { return }
            throw error(path: path, operation: "create directory", errno: ENOTDIR)
        }
        let missingCode = errno
        guard missingCode == ENOENT else { throw error(path: path, operation: "create directory", errno: missingCode) }
        let parent = parentPath(of: path)
        if parent != path { try createDirectory(atPath: parent, mode: mode) }
        if mkdir(path, mode) != 0 {
            let code = errno
            if code == EEXIST, stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR { return }
            throw error(path: path, operation: "create directory", errno: code)
        }
        if chmod(path, mode) != 0 { throw error(path: path, operation: "set permissions of") }
        try? syncDirectory(atPath: parent)
    }

    /// `fsync`s a directory so renames, creations and removals inside it are durable.
    ///
    /// File systems that cannot sync directories (`EINVAL`, `ENOTSUP`) are treated as success.
    static func syncDirectory(atPath path: String) throws(PrefsError) {
        let fd = retrying { open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard fd >= 0 else { throw error(path: path, operation: "open directory") }
        defer { close(fd) }
        if retrying({ fsync(fd) }) != 0 {
            let code = errno
            if code == EINVAL || code == ENOTSUP || code == EOPNOTSUPP { return }
            throw error(path: path, operation: "sync directory", errno: code)
        }
    }

    /// The directory part of a path: `"/a/b/c"` → `"/a/b"`, `"/a"` → `"/"`, `"c"` → `"."`.
    static func parentPath(of path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return "." }
        if slash == trimmed.startIndex { return "/" }
        return String(trimmed[..<slash])
    }

    /// The last component of a path.
    static func lastComponent(of path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return String(trimmed) }
        return String(trimmed[trimmed.index(after: slash)...])
    }
}

extension URL {
    /// The file-system path of a file URL, without percent encoding.
    var fileSystemPath: String { path(percentEncoded: false) }
}
