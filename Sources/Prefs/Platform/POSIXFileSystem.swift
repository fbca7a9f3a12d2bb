import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The system's file system: the one a store uses unless a test gives it another.
///
/// - A store file is locked by `flock` on the file itself. Files are only ever replaced by renaming a new file over
///   them, so a writer that locked a version since replaced sees that the name holds another file and locks that
///   one. There is no lock file to delete, and no lock shared by two files.
/// - A commit writes a private temporary file beside the store file (mode 0600 whatever the umask), flushes it,
///   renames it over the file and flushes the folder: a crash at any moment leaves the old file or the new one.
/// - Nothing here needs extended attributes or any other optional feature of the file system.
package struct POSIXFileSystem: FileSystem {
    package init() {}

    package func identity(at path: String) throws(SystemCallError) -> FileIdentity? {
        try FileIdentity.of(path: path)
    }

    package func lock(_ path: String, timeout: @autoclosure () -> Duration, clock: EngineClock) throws -> FileLock {
        var waiting: (start: Duration, limit: Duration)?
        var pause = Duration.microseconds(100)
        var held: (fd: Int32, inode: UInt64, device: UInt64)?
        defer { if let held { close(held.fd) } }
        // One loop: open the file (or create it empty), try its lock, wait with growing pauses (0.1 to 5 ms, as
        // SQLite's busy handler does), and start again on the file now at `path` when the one locked was replaced.
        while true {
            if held == nil {
                guard
                    let (fd, info) = try prefsIO({ () throws(SystemCallError) in try POSIX.openRegularFile(atPath: path)
                    })
                else {
                    if let created = try prefsIO({ () throws(SystemCallError) in try Self.createLocked(path) }) {
                        return created
                    }
                    continue  // another writer created it first: lock theirs
                }
                held = (fd, UInt64(truncatingIfNeeded: info.st_ino), UInt64(truncatingIfNeeded: info.st_dev))
            }
            guard let (fd, inode, device) = held else { continue }
            if POSIX.retrying({ flock(fd, LOCK_EX | LOCK_NB) }) == 0 {
                // The identity after the lock, from the name: the same file, unless it was replaced meanwhile.
                if let current = try prefsIO({ () throws(SystemCallError) in try FileIdentity.of(path: path) }),
                    current.inode == inode, current.device == device
                {
                    held = nil
                    return FileLock(descriptor: fd, identity: current)
                }
                close(fd)  // a lock on a file nobody opens any more excludes nobody
                held = nil
                continue
            }
            guard errno == EWOULDBLOCK else { throw SystemCallError(path: path, operation: "lock").prefsError }
            let (start, limit) = waiting ?? (clock.now(), timeout())
            waiting = (start, limit)
            let waited = clock.now() - start
            guard waited < limit else {
                throw PrefsError.lockTimedOut(path: path, holder: POSIX.flockHolder(of: fd), waited: waited)
            }
            clock.pause(min(pause, limit - waited))
            pause = min(pause * 2, .milliseconds(5))
        }
    }

    /// Creates `path` empty and locked: a temporary file, locked before it is linked at `path` (so nobody can lock
    /// it first), linked there only if nothing is. Nil when something is.
    private static func createLocked(_ path: String) throws(SystemCallError) -> FileLock? {
        let (temporary, fd) = try createTemporary(beside: path, mode: 0o600)
        defer { unlink(temporary) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            throw SystemCallError(path: temporary, operation: "lock")
        }
        guard link(temporary, path) == 0 else {
            close(fd)
            // Something is there now; or the temporary file was swept by a writer that created the file first.
            if errno == EEXIST || errno == ENOENT { return nil }
            throw SystemCallError(path: path, operation: "create")
        }
        do throws(SystemCallError) {
            return FileLock(
                descriptor: fd, identity: try FileIdentity.of(fileDescriptor: fd, path: path), createdEmpty: true)
        } catch {
            close(fd)
            throw error
        }
    }

    package func read(_ path: String, through lock: FileLock?) throws(SystemCallError) -> FileContents? {
        let fd: Int32
        var info = stat()
        if let lock {
            fd = lock.descriptor
            guard fstat(fd, &info) == 0 else { throw SystemCallError(path: path, operation: "stat") }
            guard lseek(fd, 0, SEEK_SET) == 0 else { throw SystemCallError(path: path, operation: "read") }
        } else {
            guard let opened = try POSIX.openRegularFile(atPath: path) else { return nil }
            (fd, info) = opened
        }
        defer { if lock == nil { close(fd) } }
        // A writer that takes no lock may rewrite the file in place while it is read: the bytes are then not those
        // of the identity, and do not decode, or decode to what that writer wrote (the store's look reads the file
        // again once it has changed).
        let data = try POSIX.readAll(fd, path: path, expectedSize: Int(info.st_size))
        return FileContents(data: data, identity: FileIdentity(info))
    }

    package func writeTemporary(beside path: String, bytes: UnsafeRawBufferPointer, mode: FileMode, durable: Bool)
        throws(SystemCallError) -> TemporaryFile
    {
        let (temporary, fd) = try Self.createTemporary(beside: path, mode: mode)
        defer { close(fd) }
        do throws(SystemCallError) {
            try POSIX.writeAll(fd, bytes, path: temporary)
            // The umask (or a folder's default ACL) may have taken bits from `mode`.
            if Self.umaskNarrows(mode), fchmod(fd, mode) != 0 {
                throw SystemCallError(path: temporary, operation: "set permissions of")
            }
            if durable { try POSIX.sync(fd, path: temporary) }
            // A rename keeps the inode, size and modification time: the identity the file will have at `path`.
            return TemporaryFile(path: temporary, identity: try FileIdentity.of(fileDescriptor: fd, path: temporary))
        } catch {
            unlink(temporary)
            throw error
        }
    }

    /// Whether this process's umask takes bits from `mode` (read once from the kernel where it says, else assumed).
    private static func umaskNarrows(_ mode: mode_t) -> Bool { mode & processUmask != 0 }

    /// The process's umask, as the kernel reports it (Linux 4.7 and later); the widest when it does not say, so
    /// permissions are always set again then.
    private static let processUmask: mode_t = {
        #if os(Linux)
            if let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
                let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Umask:") }),
                let value = mode_t(line.dropFirst("Umask:".count).trimmingCharacters(in: .whitespaces), radix: 8)
            {
                return value
            }
        #endif
        return 0o777
    }()

    /// Creates `.<name>.tmp-<hex>` beside `path` and opens it, creating the folder (0700) when it is missing. The
    /// hex is this process's id and the time, so no two writers pick one name but by chance, which the exclusive
    /// create catches (and the next name is tried); no system call for randomness.
    private static func createTemporary(beside path: String, mode: mode_t) throws(SystemCallError) -> (String, Int32) {
        let folder = POSIX.parentPath(of: path)
        let flags = O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC | O_NOFOLLOW
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        let stamp =
            (UInt64(UInt32(bitPattern: processID)) << 40)
            ^ (UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec))
        for attempt in UInt64(0)..<8 {
            let candidate = folder + "/" + temporaryPrefix(of: path) + String(stamp &+ attempt, radix: 16)
            var fd = POSIX.retrying { open(candidate, flags, mode) }
            if fd < 0, errno == ENOENT || errno == ENOTDIR {
                try POSIX.createDirectory(atPath: folder, mode: directoryMode)
                fd = POSIX.retrying { open(candidate, flags, mode) }
            }
            if fd >= 0 { return (candidate, fd) }
            guard errno == EEXIST else { throw SystemCallError(path: candidate, operation: "create temporary file") }
        }
        throw SystemCallError(path: path, operation: "create temporary file", errno: EEXIST)
    }

    /// This process's id, asked once.
    private static let processID = getpid()

    package func commit(_ temporary: TemporaryFile, to path: String) throws(SystemCallError) {
        guard rename(temporary.path, path) == 0 else {
            let error = SystemCallError(path: path, operation: "replace")
            unlink(temporary.path)
            throw error
        }
    }

    package func discard(_ temporary: TemporaryFile) {
        unlink(temporary.path)
    }

    package func syncFolder(of path: String) throws(SystemCallError) {
        try POSIX.syncDirectory(atPath: POSIX.parentPath(of: path))
    }

    package func move(_ path: String, to destination: String) throws(SystemCallError) {
        guard link(path, destination) == 0 else {
            throw SystemCallError(path: destination, operation: "move to")
        }
        // Kept private whoever wrote it: a damaged preferences file may hold anything.
        _ = chmod(destination, 0o600)
        guard unlink(path) == 0 else { throw SystemCallError(path: path, operation: "move") }
    }

    package func remove(_ path: String) throws(SystemCallError) {
        guard unlink(path) == 0 || errno == ENOENT else { throw SystemCallError(path: path, operation: "remove") }
    }

    package func removeStaleTemporaries(beside path: String) {
        let prefix = Array(Self.temporaryPrefix(of: path).utf8)
        let folder = POSIX.parentPath(of: path)
        guard let directory = opendir(folder) else { return }
        defer { closedir(directory) }
        while let entry = readdir(directory) {
            let name = Self.entryName(entry)
            guard name.starts(with: prefix) else { continue }
            let suffix = name.dropFirst(prefix.count)
            guard (1...16).contains(suffix.count), suffix.allSatisfy(\.isLowercaseHexDigit) else { continue }
            unlink(folder + "/" + String(decoding: name, as: UTF8.self))
        }
    }

    package func watch(_ path: String, onChange: @escaping @Sendable () -> Void) -> FileWatchToken {
        DirectoryWatcher.shared.watch(fileAt: URL(filePath: path, directoryHint: .notDirectory), onChange: onChange)
    }

    // MARK: Names

    /// The mode of the folders a commit creates: private to the owner.
    static let directoryMode: mode_t = 0o700

    /// `.<name>.tmp-`, the start of every temporary file name beside `path`. A name too long for that to fit in
    /// 255 bytes is cut to 200 bytes followed by `~` and a 64-bit hash of the whole name, so two long names that
    /// share their first 200 bytes still get different prefixes.
    package static func temporaryPrefix(of path: String) -> String {
        let name = POSIX.lastComponent(of: path)
        let limit = 255 - ".".utf8.count - ".tmp-".utf8.count - 16
        guard name.utf8.count > limit else { return "." + name + ".tmp-" }
        let hex = String(StableHash.of(name.utf8), radix: 16)
        let cut = String(decoding: name.utf8.prefix(200), as: UTF8.self)
        return "." + cut + "~" + String(repeating: "0", count: 16 - hex.count) + hex + ".tmp-"
    }

    /// The name of a `readdir` entry, read up to its terminating NUL in place.
    ///
    /// glibc packs entries to their real length, so the 256-byte `d_name` field of the last entry in its buffer may
    /// run past the end of the allocation: only the bytes up to the NUL, which the kernel always writes, are read.
    static func entryName(_ entry: UnsafeMutablePointer<dirent>) -> [UInt8] {
        let offset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
        let start = UnsafeRawPointer(entry).advanced(by: offset).assumingMemoryBound(to: CChar.self)
        return Array(UnsafeRawBufferPointer(start: start, count: strlen(start)))
    }
}

extension UInt8 {
    fileprivate var isLowercaseHexDigit: Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(self)
    }
}

/// A hash that is the same in every process and every run (Swift's `Hasher` is seeded per process): FNV-1a, 64 bits.
/// For names, never for security.
package enum StableHash {
    package static func of(_ bytes: some Sequence<UInt8>) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return hash
    }
}
