package import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The system's file system: the one a store uses unless a test gives it another.
///
/// - A store file is locked by `flock` on the file itself. Files are only ever replaced by renaming a new file over
///   them, so the lock is on the version that was read; a writer that locked a version since replaced sees that the
///   name holds another file and locks that one. There is no lock file to delete, and no lock shared by two files.
/// - A commit writes a private temporary file beside the store file (mode 0600 whatever the umask), flushes it,
///   renames it over the file and flushes the folder: a crash at any moment leaves the old file or the new one.
/// - A committed file's modification time is set two seconds back (``backdating``), so that a later write in place
///   (Foundation's `synchronize()`) always changes it, whatever the tick of the file system's clock: a file this
///   process committed is known unchanged from a `stat` alone, and only a file another program wrote within the
///   last second (``racyWindow``) needs its bytes compared. (Foundation's `synchronize()` reads the file again
///   whatever its time.) Nothing here needs extended attributes or any other optional feature of the file system.
package struct POSIXFileSystem: FileSystem {
    /// How recent a modification time must be for the file to be "racily clean" (see ``isRacy(_:)``): longer than
    /// the tick of any Linux file system's clock that keeps times finer than a second.
    static let racyWindow: Duration = .seconds(1)
    /// How far back a commit sets its file's modification time: past ``racyWindow``.
    static let backdating: Duration = .seconds(2)

    package init() {}

    package func identity(at path: String) throws(SystemCallError) -> FileIdentity? {
        try FileIdentity.of(path: path)
    }

    package func lock(_ path: String, timeout: Duration, clock: EngineClock) throws -> FileLock {
        let start = clock.now()
        var pause = Duration.microseconds(100)
        var held: (lock: FileLock, info: stat)?
        // One loop: open the file (or create it empty), try its lock, wait with growing pauses (0.1 to 5 ms, as
        // SQLite's busy handler does), and start again on the file now at `path` when the one locked was replaced
        // meanwhile.
        while true {
            if held == nil {
                let fd = POSIX.retrying { open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY) }
                if fd < 0 {
                    guard errno == ENOENT else { throw SystemCallError(path: path, operation: "open").prefsError }
                    if let created = try prefsIO({ () throws(SystemCallError) in
                        try Self.createLocked(path)
                    }) {
                        return created
                    }
                    continue  // another writer created it first: lock theirs
                }
                let lock = FileLock(descriptor: fd)
                var info = stat()
                guard fstat(fd, &info) == 0 else { throw SystemCallError(path: path, operation: "stat").prefsError }
                try prefsIO { () throws(SystemCallError) in
                    try POSIX.requireRegularFile(info, path: path, maximumSize: POSIX.maximumFileSize)
                }
                held = (lock, info)
            }
            guard let (lock, info) = held else { continue }
            if POSIX.retrying({ flock(lock.descriptor, LOCK_EX | LOCK_NB) }) == 0 {
                var current = stat()
                if stat(path, &current) == 0, current.st_dev == info.st_dev, current.st_ino == info.st_ino {
                    return lock
                }
                lock.release()  // a lock on a file nobody opens any more excludes nobody
                held = nil
                continue
            }
            guard errno == EWOULDBLOCK else { throw SystemCallError(path: path, operation: "lock").prefsError }
            let waited = clock.now() - start
            guard waited < timeout else {
                throw PrefsError.lockTimedOut(
                    path: path, holder: POSIX.flockHolder(of: lock.descriptor), waited: waited)
            }
            clock.pause(min(pause, timeout - waited))
            pause = min(pause * 2, .milliseconds(5))
        }
    }

    /// Creates `path` empty and locked: a temporary file, locked before it is linked at `path` (so nobody can lock
    /// it first), linked there only if nothing is. Nil when something is.
    private static func createLocked(_ path: String) throws(SystemCallError) -> FileLock? {
        let temporary = try createTemporary(beside: path, mode: 0o600)
        defer { unlink(temporary.path) }
        let lock = FileLock(descriptor: temporary.descriptor, createdEmpty: true)
        guard flock(lock.descriptor, LOCK_EX | LOCK_NB) == 0 else {
            throw SystemCallError(path: temporary.path, operation: "lock")
        }
        guard link(temporary.path, path) == 0 else {
            // Something is there now; or the temporary file was swept by a writer that created the file first.
            if errno == EEXIST || errno == ENOENT { return nil }
            throw SystemCallError(path: path, operation: "create")
        }
        return lock
    }

    package func lockShared(_ path: String) throws(SystemCallError) -> FileLock? {
        guard let (fd, info) = try POSIX.openRegularFile(atPath: path) else { return nil }
        let lock = FileLock(descriptor: fd)
        guard POSIX.retrying({ flock(fd, LOCK_SH | LOCK_NB) }) == 0 else {
            if errno == EWOULDBLOCK { return nil }
            throw SystemCallError(path: path, operation: "lock")
        }
        // The name may hold a newer file by now; its commit raised an event of its own.
        var current = stat()
        guard stat(path, &current) == 0, current.st_dev == info.st_dev, current.st_ino == info.st_ino else {
            return nil
        }
        return lock
    }

    package func isRacy(_ identity: FileIdentity) -> Bool {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let age =
            Duration.seconds(Int64(now.tv_sec) - identity.modificationSeconds)
            + .nanoseconds(Int64(now.tv_nsec) - identity.modificationNanoseconds)
        return age < Self.racyWindow
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
        // The identity must be that of the bytes read: a writer in place (no lock) may truncate or write the file
        // between the `fstat` and the read, and bytes of its new content under the old file's time would pass for
        // the old content. Read again while the file changes under the read (or the bytes read are not the size
        // the file says it has); if it never settles, the later identity is the one returned: it was modified just
        // now, so it counts as racy and is compared byte for byte before anything relies on it. (Linux updates a
        // truncated file's size before its times, so an empty read can still carry the times of the file before:
        // the engine does not take an empty suite's times for proof that nobody is rewriting it.)
        var attempts = 0
        while true {
            let data = try POSIX.readAll(fd, path: path, expectedSize: Int(info.st_size))
            var after = stat()
            guard fstat(fd, &after) == 0 else { throw SystemCallError(path: path, operation: "stat") }
            attempts += 1
            let settled = FileIdentity(after) == FileIdentity(info) && Int64(data.count) == Int64(after.st_size)
            if settled || attempts == Self.readAttempts {
                return FileContents(data: data, identity: FileIdentity(after))
            }
            info = after
            guard lseek(fd, 0, SEEK_SET) == 0 else { throw SystemCallError(path: path, operation: "read") }
        }
    }

    /// How many times a read starts again when the file changed while it was read.
    static let readAttempts = 3

    package func writeTemporary(beside path: String, data: Data, mode: mode_t, durable: Bool)
        throws(SystemCallError) -> TemporaryFile
    {
        var temporary = try Self.createTemporary(beside: path, mode: mode)
        do throws(SystemCallError) {
            try POSIX.writeAll(temporary.descriptor, data, path: temporary.path)
            // The umask (or a folder's default ACL) may have taken bits from `mode`: set it again only then, since
            // a change of permissions is one more event for every watcher of the folder.
            var created = stat()
            if fstat(temporary.descriptor, &created) != 0 || created.st_mode & 0o7777 != mode,
                fchmod(temporary.descriptor, mode) != 0
            {
                throw SystemCallError(path: temporary.path, operation: "set permissions of")
            }
            Self.backdate(temporary.descriptor)
            if durable { try POSIX.sync(temporary.descriptor, path: temporary.path) }
            // Kept open read-only for the identity after the rename: closing the descriptor written through after
            // the rename would tell every watcher of the folder of one more change.
            let reader = Self.reopenForReading(temporary)
            guard reader >= 0 else { throw SystemCallError(path: temporary.path, operation: "open") }
            let written = temporary.descriptor
            temporary = TemporaryFile(path: temporary.path, descriptor: reader)
            if close(written) != 0 && errno != EINTR {
                throw SystemCallError(path: temporary.path, operation: "close")
            }
        } catch {
            discard(temporary)
            throw error
        }
        return temporary
    }

    /// A read-only descriptor of the file open as `temporary`, opened through `/proc/self/fd` where there is one, so
    /// it works even if a sweep removed the name meanwhile (the commit then finds it gone, as a lost race).
    private static func reopenForReading(_ temporary: TemporaryFile) -> Int32 {
        let flags = O_RDONLY | O_CLOEXEC
        let reader = POSIX.retrying { open("/proc/self/fd/\(temporary.descriptor)", flags) }
        return reader >= 0 ? reader : POSIX.retrying { open(temporary.path, flags | O_NOFOLLOW) }
    }

    /// Sets the modification time of the open file `fd` ``backdating`` back from now (its access time untouched).
    /// Where the file system refuses, the file keeps its time and is merely racy for a second.
    private static func backdate(_ fd: Int32) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        now.tv_sec -= Int(backdating.components.seconds)
        var times = [timespec(tv_sec: 0, tv_nsec: (1 << 30) - 2), now]  // UTIME_OMIT: the access time stays
        _ = futimens(fd, &times)
    }

    /// Creates `.<name>.tmp-<random hex>` beside `path`, creating the folder (0700) when it is missing.
    private static func createTemporary(beside path: String, mode: mode_t) throws(SystemCallError) -> TemporaryFile {
        let folder = POSIX.parentPath(of: path)
        let candidate = folder + "/" + temporaryPrefix(of: path) + String(UInt64.random(in: .min ... .max), radix: 16)
        let flags = O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC | O_NOFOLLOW
        var fd = POSIX.retrying { open(candidate, flags, mode) }
        if fd < 0, errno == ENOENT || errno == ENOTDIR {
            try POSIX.createDirectory(atPath: folder, mode: directoryMode)
            fd = POSIX.retrying { open(candidate, flags, mode) }
        }
        guard fd >= 0 else { throw SystemCallError(path: candidate, operation: "create temporary file") }
        return TemporaryFile(path: candidate, descriptor: fd)
    }

    package func commit(_ temporary: TemporaryFile, to path: String) throws -> FileIdentity {
        var committed = false
        defer { if !committed { discard(temporary) } }
        if rename(temporary.path, path) != 0 {
            // Swept by a writer that created the file first: nothing was written, and the commit is made again.
            if errno == ENOENT, access(temporary.path, F_OK) != 0 { throw CommitRace() }
            throw SystemCallError(path: path, operation: "replace").prefsError
        }
        committed = true
        var info = stat()
        let status = fstat(temporary.descriptor, &info)
        close(temporary.descriptor)
        // Committed all the same; an identity no file has makes the next refresh read the file again.
        guard status == 0 else { return FileIdentity.unknown }
        return FileIdentity(info)
    }

    package func overwrite(_ path: String, with data: Data, mode: mode_t) throws(SystemCallError) {
        let fd = POSIX.retrying { open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, mode) }
        guard fd >= 0 else { throw SystemCallError(path: path, operation: "open") }
        defer { close(fd) }
        try POSIX.writeAll(fd, data, path: path)
        guard ftruncate(fd, off_t(data.count)) == 0 else { throw SystemCallError(path: path, operation: "truncate") }
    }

    package func discard(_ temporary: TemporaryFile) {
        close(temporary.descriptor)
        unlink(temporary.path)
    }

    package func syncFolder(of path: String) throws(SystemCallError) {
        try POSIX.syncDirectory(atPath: POSIX.parentPath(of: path))
    }

    package func move(_ path: String, to destination: String) throws(SystemCallError) {
        guard link(path, destination) == 0 else {
            throw SystemCallError(path: destination, operation: "move aside to")
        }
        // Kept private whoever wrote it: a damaged preferences file may hold anything.
        _ = chmod(destination, 0o600)
        guard unlink(path) == 0 else { throw SystemCallError(path: path, operation: "move aside") }
    }

    package func remove(_ path: String) throws(SystemCallError) {
        guard unlink(path) == 0 || errno == ENOENT else { throw SystemCallError(path: path, operation: "remove") }
        try syncFolder(of: path)
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
/// For names and for telling values apart in a commit record, never for security.
package enum StableHash {
    package static let seed: UInt64 = 0xcbf2_9ce4_8422_2325

    package static func of(_ bytes: some Sequence<UInt8>, seed: UInt64 = StableHash.seed) -> UInt64 {
        var hash = seed
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return hash
    }

    /// The same mix taken eight bytes at a time, for whole files: about eight times faster than byte by byte.
    package static func ofContents(_ data: Data) -> UInt64 {
        data.withUnsafeBytes { bytes in
            var hash = seed ^ UInt64(bytes.count)
            let words = bytes.count / 8
            for index in 0..<words {
                hash = (hash ^ bytes.loadUnaligned(fromByteOffset: index * 8, as: UInt64.self)) &* 0x100_0000_01b3
                hash ^= hash >> 29
            }
            return of(UnsafeRawBufferPointer(rebasing: bytes[(words * 8)...]), seed: hash)
        }
    }
}
