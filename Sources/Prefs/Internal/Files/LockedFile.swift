import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Thrown by `LockedFile.writeAtomically` when the lock file was removed or replaced during the write and the data
/// file changed since the caller read it: another process wrote meanwhile. Nothing was written; the caller may read
/// the file again and redo its change. Also thrown when the temporary file was removed before its rename (another
/// writer's sweep, see `commit`): nothing was written either.
struct LockLostError: Error {}

/// How `LockedFile.withLock` locks: many readers, or one writer.
enum LockKind: Sendable {
    /// Other processes may hold `.shared` at the same time; `.exclusive` holders wait.
    case shared
    /// Nobody else, in this process or another, holds the lock.
    case exclusive
}

/// A data file that is replaced atomically and durably, guarded by a separate lock file for cross-process safety.
///
/// - Writes go to a temporary file in the same directory that is synced, renamed over the data file, and the directory
///   synced: readers see either the old or the new bytes, never a mix, and a crash leaves one of the two.
/// - `withLock` serializes callers in this process (a `Mutex`) and across processes (`flock` on the lock file).
///   Callers doing read-modify-write hold `.exclusive` around `read()` … `writeAtomically(_:mode:)`.
/// - Nothing is created on disk until the first lock, write or removal; a shared lock in a folder that does not
///   exist creates nothing (there is nothing to read).
final class LockedFile: Sendable {
    /// The data file.
    let url: URL
    /// The lock file; `<filename>.lock` next to the data file unless given.
    var lockURL: URL { URL(filePath: lockPath, directoryHint: .notDirectory) }
    /// The mode of the folders this object creates: private to the owner.
    static let directoryMode: mode_t = 0o700

    let path: String
    let directoryPath: String
    let lockPath: String

    /// Held for the whole of `withLock`; the value is the lazily opened lock file descriptor (-1 until then).
    private let lockFD = Mutex<Int32>(-1)

    /// - Parameter url: The data file. When it is a symbolic link, its target is the file read and replaced (the
    ///   temporary file, the rename and the lock file are beside the target), so the link stays a link and every
    ///   process, whichever name it opens, shares one lock.
    init(url: URL, lockURL: URL? = nil) {
        self.url = url
        let given = url.fileSystemPath
        self.path = POSIX.resolvingSymbolicLink(given)
        self.directoryPath = POSIX.parentPath(of: path)
        // Built from the path, not as a URL: a store opens several of these, and URL work showed in its cost.
        if let lockURL {
            // A lock file named by the caller goes beside the file really written, under its own name.
            let lock = lockURL.fileSystemPath
            self.lockPath = path == given ? lock : directoryPath + "/" + POSIX.lastComponent(of: lock)
        } else {
            self.lockPath = path + ".lock"
        }
    }

    /// The file actually read and replaced: `url`, or the target of the symbolic link at `url`.
    var resolvedURL: URL { URL(filePath: path, directoryHint: .notDirectory) }

    deinit {
        let fd = lockFD.withLock { $0 }
        if fd >= 0 { close(fd) }
    }

    // MARK: Locking

    /// Runs `body` while holding the lock of `kind`, in this process and across processes.
    ///
    /// In this process every caller is serialized, whatever the kind (a shared `flock` is per open file description,
    /// so readers in one process cannot safely overlap their lock and unlock). Across processes `.shared` holders may
    /// overlap each other. Not re-entrant: calling `withLock` on the same object from inside `body` deadlocks.
    /// Two `LockedFile` objects for the same lock file in one process exclude each other like two processes do.
    ///
    /// A shared lock never creates the lock file (nor its folder): when there is none, nobody is writing, and
    /// `body` runs without it. So a reader, such as a watcher reloading the file, never re-creates a lock file that
    /// someone is deleting along with its folder. `body` runs once: a lock file removed or replaced while `body`
    /// writes is handled at the commit (see `writeAtomically`), never by running `body` again.
    @discardableResult
    func withLock<T>(_ kind: LockKind, _ body: () throws -> T) throws -> T {
        try lockFD.withLock { fd throws -> T in
            let operation = kind == .shared ? LOCK_SH : LOCK_EX
            var attempts = 0
            var opened = false
            while true {
                attempts += 1
                if attempts > 1000 {
                    throw PrefsError.io(
                        path: lockPath, operation: "lock", errno: EAGAIN,
                        message: "the lock file keeps being removed or replaced")
                }
                if fd < 0 {
                    opened = true
                    fd = try prefsIO { () throws(SystemCallError) in try openLockFile(creating: kind == .exclusive) }
                    // No lock file for a reader: nothing to read under it and nobody to exclude.
                    if fd < 0 { return try body() }
                }
                try acquire(fd, operation)
                // The lock file may have been removed or replaced while this descriptor was open (or while it
                // waited): a lock on a file nobody else opens excludes nobody, so start again on the current one,
                // as SQLite's unix VFS does.
                if isCurrentLockFile(fd) {
                    heldLock.store(fd, ordering: .sequentiallyConsistent)
                    heldLockIsNew.store(opened, ordering: .sequentiallyConsistent)
                    defer {
                        heldLock.store(-1, ordering: .sequentiallyConsistent)
                        _ = flock(fd, LOCK_UN)
                    }
                    return try body()
                }
                _ = flock(fd, LOCK_UN)
                close(fd)
                fd = -1
            }
        }
    }

    /// Takes `flock` `operation` on `fd`, waiting at most `LockWait.timeout` for another process to release it:
    /// `flock` itself cannot time out, so a held lock is tried again after pauses growing from 0.1 to 5 ms (as
    /// SQLite's busy handler does). Throws `PrefsError.lockTimedOut` naming the holder, when the system can tell.
    private func acquire(_ fd: Int32, _ operation: Int32, naming lockedPath: String? = nil) throws {
        let lockedPath = lockedPath ?? lockPath
        func attempt() throws -> Bool {
            if POSIX.retrying({ flock(fd, operation | LOCK_NB) }) == 0 { return true }
            guard errno == EWOULDBLOCK else { throw SystemCallError(path: lockedPath, operation: "lock").prefsError }
            return false
        }
        if try attempt() { return }
        let clock = EngineClock.current
        let limit = LockWait.timeout
        let start = clock.now()
        var pause = Duration.microseconds(100)
        while true {
            let waited = clock.now() - start
            guard waited < limit else {
                throw PrefsError.lockTimedOut(path: lockedPath, holder: POSIX.flockHolder(of: fd), waited: waited)
            }
            clock.pause(min(pause, limit - waited))
            if try attempt() { return }
            pause = min(pause * 2, .milliseconds(5))
        }
    }

    /// Closes the lock file's descriptor, if open (a store being closed); a later `withLock` opens it again.
    func closeLock() {
        lockFD.withLock { fd in
            if fd >= 0 { close(fd) }
            fd = -1
        }
    }

    /// The descriptor `withLock` holds while its body runs (-1 outside), for the check before each commit.
    private let heldLock = Atomic<Int32>(-1)
    /// Whether `withLock` opened that descriptor itself this time: the lock file was missing or replaced since this
    /// object last held it, so another process may still be inside its own write under the old one.
    private let heldLockIsNew = Atomic<Bool>(false)

    /// Opens and locks the lock file now at `lockPath`, for a commit whose lock file was removed or replaced while it
    /// wrote (another process may have locked the new one and written). Returns its descriptor, to close after the
    /// rename. Throws `LockLostError` when it cannot, and `PrefsError.lockTimedOut` past the wait limit.
    private func lockCurrentLockFile() throws -> Int32 {
        for _ in 0..<100 {
            let fd: Int32
            do { fd = try openLockFile(creating: true) } catch { throw LockLostError() }
            do { try acquire(fd, LOCK_EX) } catch {
                close(fd)
                if case .lockTimedOut? = error as? PrefsError { throw error }
                throw LockLostError()
            }
            if isCurrentLockFile(fd) { return fd }
            close(fd)
        }
        throw LockLostError()
    }

    /// Runs `body` holding an exclusive `flock` on the data file's folder: the commit of every writer of a file in
    /// this folder, in any process, is one step from its last check to its rename.
    ///
    /// The lock file alone cannot give that: it can be deleted (by a user, a cleaner) while a writer that has made its
    /// checks is about to rename, and another process then locks a new lock file and reads the file before that
    /// rename lands. The folder cannot be deleted under the file, and is held only for a few system calls. Where
    /// the folder cannot be opened or locked (no read permission, a file system without `flock`), `body` runs
    /// without it, as before.
    private func withFolderLock<T>(_ body: () throws -> T) throws -> T {
        let folder = POSIX.retrying { open(directoryPath, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK) }
        guard folder >= 0 else { return try body() }
        defer { close(folder) }  // closing releases the lock
        do {
            try acquire(folder, LOCK_EX, naming: directoryPath)
        } catch let error as PrefsError {
            if case .lockTimedOut = error { throw error }
            return try body()
        }
        return try body()
    }

    /// Whether `fd` is still the file at `lockPath` (same device and inode, not a symbolic link).
    private func isCurrentLockFile(_ fd: Int32) -> Bool {
        var open = stat()
        var current = stat()
        guard fstat(fd, &open) == 0, lstat(lockPath, &current) == 0 else { return false }
        return open.st_dev == current.st_dev && open.st_ino == current.st_ino
    }

    /// Opens the lock file without following a symbolic link at its name, so a planted link cannot make this
    /// process create or lock a file elsewhere; anything but a regular file is refused. With `creating`, the file
    /// (and its folder) is created if missing; without, a missing file gives -1.
    private func openLockFile(creating: Bool) throws(SystemCallError) -> Int32 {
        if creating { try POSIX.createDirectory(atPath: POSIX.parentPath(of: lockPath), mode: Self.directoryMode) }
        let flags = O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | (creating ? O_CREAT : 0)
        let fd = POSIX.retrying { open(lockPath, flags, 0o600) }
        guard fd >= 0 else {
            let code = errno
            if !creating, code == ENOENT || code == ENOTDIR { return -1 }
            if code == ELOOP {
                throw SystemCallError(
                    path: lockPath, operation: "open lock file", errno: code,
                    detail: "is a symbolic link; remove it (lock files are never links)")
            }
            throw SystemCallError(path: lockPath, operation: "open lock file", errno: code)
        }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            close(fd)
            throw SystemCallError(
                path: lockPath, operation: "open lock file", errno: EINVAL,
                detail: "is \(POSIX.kindName(info.st_mode)), not a regular file")
        }
        return fd
    }

    // MARK: Reading

    /// The whole contents and the identity of the file they came from, or nil when the file does not exist.
    ///
    /// The identity comes from `fstat` of the descriptor that was read, so it describes exactly these bytes.
    func read() throws(PrefsError) -> (data: Data, identity: FileIdentity)? {
        try prefsIO { () throws(SystemCallError) -> (data: Data, identity: FileIdentity)? in
            guard let (fd, info) = try POSIX.openRegularFile(atPath: path) else { return nil }
            defer { close(fd) }
            let data = try POSIX.readAll(fd, path: path, expectedSize: Int(info.st_size))
            return (data, FileIdentity(info))
        }
    }

    /// The identity of the data file, or nil when it does not exist.
    func identity() throws(PrefsError) -> FileIdentity? {
        try prefsIO { () throws(SystemCallError) in try FileIdentity.of(path: path) }
    }

    // MARK: Writing

    /// Replaces the file with `data`, atomically and durably, and returns the new file's identity.
    ///
    /// Creates the directory (`directoryMode`) if missing, writes a temporary `.<name>.tmp-<hex>` file in the
    /// same directory with `mode` (set again with `fchmod` where the umask took bits), syncs it, renames it over the
    /// file and syncs the directory. On failure before the rename the temporary file is removed and the old file is
    /// untouched. The rename is the commit point: a failure after it (syncing the directory) throws
    /// `PrefsError.durabilityNotConfirmed`, because the new contents are in place and must not be treated as lost.
    /// Callers hold `withLock(.exclusive)` around read-modify-write; the rename itself is made under a short lock of
    /// the folder (see `commit`). With `durable` false nothing is synced (still atomic for readers, but a crash may
    /// lose the write), for files that may safely lag behind.
    ///
    /// `expected` is the identity of the file as the caller last read it under the lock (nil: absent). When the lock
    /// file was removed or replaced during the write, the commit goes ahead only if the file is still that one, and
    /// throws `LockLostError` otherwise, with nothing written; callers that do not say (`.none`) commit regardless.
    /// `beforeCommit`, when given, runs just before the rename, under the folder lock (so it must not write a file of
    /// this folder); what it throws cancels the write like a failure. `landed`, when given, is told the new file's
    /// identity as soon as it is in place, before the folder is synced.
    @discardableResult
    func writeAtomically(
        _ data: Data, mode: mode_t = 0o600, durable: Bool = true, expecting expected: FileIdentity?? = .none,
        beforeCommit: (() throws -> Void)? = nil, landed: ((FileIdentity) -> Void)? = nil
    ) throws -> FileIdentity {
        Self.ignoreFileSizeSignal()
        let identity = try replace(
            with: data, mode: mode, durable: durable, expecting: expected, beforeCommit: beforeCommit)
        landed?(identity)
        do {
            if durable { try syncDirectoryAfterCommit() }
        } catch {
            throw PrefsError.durabilityNotConfirmed(
                path: path, operation: error.operation + " " + error.path, errno: error.errno, message: error.message)
        }
        return identity
    }

    /// Writes a synced temporary file and renames it over the file: everything up to the commit point. Returns the
    /// identity of the file it put in place, taken from its own descriptor after the rename: the name may already
    /// be another process's newer file (its lock file deleted meanwhile), whose identity must not be mistaken for
    /// this write's, or the values written would pass for that file's and its changes would be lost.
    private func replace(
        with data: Data, mode: mode_t, durable: Bool, expecting expected: FileIdentity??,
        beforeCommit: (() throws -> Void)?
    ) throws -> FileIdentity {
        let (fd, temporaryPath) = try prefsIO { () throws(SystemCallError) in try createTemporaryFile(mode: mode) }
        // Locked until it is renamed into place (or removed), so the sweep can tell it from a killed writer's file
        // (whose lock the kernel released) even if the lock file was deleted and two writers are in at once. The
        // lock is on a second, read-only descriptor kept until after the rename: closing the one written to would
        // release it, and a sweep in another process then removed the file before the rename ("No such file or
        // directory"); closing the read-only one after the rename tells no watcher of a change.
        let locked = POSIX.retrying { open(temporaryPath, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK) }
        if locked >= 0 { _ = flock(locked, LOCK_EX | LOCK_NB) }
        var succeeded = false
        var isOpen = true
        defer {
            if isOpen { close(fd) }
            if !succeeded { unlink(temporaryPath) }
            if locked >= 0 { close(locked) }
        }
        let failure: SystemCallError? = data.withUnsafeBytes { bytes in
            do throws(SystemCallError) {
                try POSIX.writeAll(fd, bytes, path: temporaryPath)
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw failure.prefsError }
        // The umask (or a folder's default ACL) may have taken bits from `mode`. Set only then: a change of
        // permissions is one more event for every watcher of the folder and one more inode update on every write.
        var created = stat()
        if fstat(fd, &created) != 0 || created.st_mode & 0o7777 != mode, fchmod(fd, mode) != 0 {
            throw SystemCallError(path: temporaryPath, operation: "set permissions of").prefsError
        }
        if durable { try prefsIO { () throws(SystemCallError) in try POSIX.sync(fd, path: temporaryPath) } }
        isOpen = false
        if close(fd) != 0 && errno != EINTR {
            throw SystemCallError(path: temporaryPath, operation: "close").prefsError
        }
        try commit(temporaryPath, expecting: expected, beforeCommit: beforeCommit)
        succeeded = true
        var info = stat()
        guard locked >= 0, fstat(locked, &info) == 0 else {
            // Committed all the same; an identity no file has makes the next read load the file again.
            return FileIdentity(
                device: 0, inode: 0, size: -1, modificationSeconds: 0, modificationNanoseconds: 0, changeSeconds: 0,
                changeNanoseconds: 0)
        }
        return FileIdentity(info)
    }

    /// Renames the written temporary file over the data file, the commit point, under the folder lock.
    ///
    /// When the caller said what it read (`expected`), the lock it holds must still be the current lock file, and
    /// where that lock file is not the one it read under (opened afresh, or locked again because the one it held was
    /// removed), the data file must still be the one it read; otherwise `LockLostError`, with nothing written. Those
    /// checks, `beforeCommit` and the rename run as one step for every writer of the folder. Together they mean a
    /// commit always holds the current lock file, and a writer that held it since its read saw every other commit.
    private func commit(
        _ temporaryPath: String, expecting expected: FileIdentity??, beforeCommit: (() throws -> Void)?
    ) throws {
        let held = heldLock.load(ordering: .sequentiallyConsistent)
        let heldIsNew = heldLockIsNew.load(ordering: .sequentiallyConsistent)
        var relock: Int32 = -1
        defer { if relock >= 0 { close(relock) } }
        for _ in 0..<100 {
            let holding = relock >= 0 ? relock : held
            let committed = try withFolderLock { () throws -> Bool in
                if case .some(let expected) = expected, holding >= 0 {
                    // Removed or replaced since it was locked: lock the new one first (not under the folder lock).
                    guard isCurrentLockFile(holding) else { return false }
                    if relock >= 0 || heldIsNew, (try? FileIdentity.of(path: path)) != expected {
                        throw LockLostError()
                    }
                }
                try beforeCommit?()
                if rename(temporaryPath, path) != 0 {
                    let code = errno
                    // Removed by the sweep of another writer that got in beside this one (the lock file deleted)
                    // before this one could lock it: nothing was written, and the change is redone.
                    if code == ENOENT, access(temporaryPath, F_OK) != 0, access(directoryPath, F_OK) == 0 {
                        throw LockLostError()
                    }
                    throw SystemCallError(path: path, operation: "replace", errno: code).prefsError
                }
                return true
            }
            if committed { return }
            if relock >= 0 { close(relock) }
            relock = -1
            relock = try lockCurrentLockFile()
        }
        throw LockLostError()
    }

    /// Test hook: when set, returns the error that syncing the directory after a commit fails with (nil: sync as
    /// usual). No real file system here can be made to fail that step on demand.
    let directorySyncFault = Mutex<(@Sendable (String) -> SystemCallError?)?>(nil)

    /// Syncs the directory after a rename or removal, or fails as the test hook says.
    private func syncDirectoryAfterCommit() throws(SystemCallError) {
        if let fault = directorySyncFault.withLock({ $0 }), let error = fault(directoryPath) { throw error }
        try POSIX.syncDirectory(atPath: directoryPath)
    }

    /// Removes the temporary files that writers killed between creating and renaming them left behind
    /// (`.<name>.tmp-<hex>` beside the file), and returns how many it removed. Best effort: errors are ignored.
    ///
    /// Call only while holding `withLock(.exclusive)`: then no writer of this file, in any process, can be
    /// between creating and renaming its temporary file, so every match is stale. A writer also keeps its temporary
    /// file locked until the rename, and a locked one is never removed. The whole name must match (the
    /// file's full name, or for a long name its cut-down form with a hash of the full name), so the sweep never
    /// touches the temporary file of another file in the same folder.
    @discardableResult
    func removeStaleTemporaryFiles() -> Int {
        let prefix = Array(temporaryPrefix.utf8)
        let hexDigits = Set("0123456789abcdef".utf8)
        guard let directory = opendir(directoryPath) else { return 0 }
        defer { closedir(directory) }
        var stale: [String] = []
        while let entry = readdir(directory) {
            let name = Self.entryName(entry)
            guard name.starts(with: prefix) else { continue }
            let suffix = name.dropFirst(prefix.count)
            guard (1...16).contains(suffix.count), suffix.allSatisfy(hexDigits.contains) else { continue }
            stale.append(String(decoding: name, as: UTF8.self))
        }
        return stale.filter { name in
            let path = directoryPath + "/" + name
            let fd = POSIX.retrying { open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK) }
            guard fd >= 0 else { return false }
            defer { close(fd) }
            // A live writer holds its temporary file locked: only unlocked ones are stale.
            guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { return false }
            return unlink(path) == 0
        }.count
    }

    /// The name of a `readdir` entry, read up to its terminating NUL in place.
    ///
    /// glibc packs entries to their real length, so the 256-byte `d_name` field of the last entry in its buffer may
    /// run past the end of the allocation: copying the field (as `withUnsafeBytes(of: entry.pointee.d_name)` does)
    /// reads memory that is not there. Only the bytes up to the NUL, which the kernel always writes, are read.
    static func entryName(_ entry: UnsafeMutablePointer<dirent>) -> [UInt8] {
        let offset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
        let start = UnsafeRawPointer(entry).advanced(by: offset).assumingMemoryBound(to: CChar.self)
        return Array(UnsafeRawBufferPointer(start: start, count: strlen(start)))
    }

    /// Removes the file; a missing file is fine. The directory is synced so the removal is durable.
    func remove() throws(PrefsError) {
        if unlink(path) != 0 {
            let code = errno
            if code == ENOENT { return }
            throw SystemCallError(path: path, operation: "remove", errno: code).prefsError
        }
        do {
            try syncDirectoryAfterCommit()
        } catch {
            throw .durabilityNotConfirmed(
                path: path, operation: error.operation + " " + error.path, errno: error.errno, message: error.message)
        }
    }

    /// `.<name>.tmp-`, the start of every temporary file name. A name too long for that to fit in 255 bytes is cut
    /// to 200 bytes followed by `~` and a 64-bit hash of the whole name, so two long names that share their first
    /// 200 bytes still get different prefixes.
    var temporaryPrefix: String {
        let name = POSIX.lastComponent(of: path)
        let limit = 255 - ".".utf8.count - ".tmp-".utf8.count - 16
        guard name.utf8.count > limit else { return "." + name + ".tmp-" }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a
        for byte in name.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        let hex = String(hash, radix: 16)
        let cut = String(decoding: name.utf8.prefix(200), as: UTF8.self)
        return "." + cut + "~" + String(repeating: "0", count: 16 - hex.count) + hex + ".tmp-"
    }

    private func createTemporaryFile(mode: mode_t) throws(SystemCallError) -> (fd: Int32, path: String) {
        let prefix = temporaryPrefix
        var attempts = 0
        while true {
            let suffix = String(UInt64.random(in: .min ... .max), radix: 16)
            let candidate = directoryPath + "/" + prefix + suffix
            let fd = POSIX.retrying {
                open(candidate, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, mode)
            }
            if fd >= 0 { return (fd, candidate) }
            let code = errno
            attempts += 1
            if code == ENOENT || code == ENOTDIR, attempts == 1 {
                // The folder is missing (or something else is on its way): create it, or say why it cannot be.
                try POSIX.createDirectory(atPath: directoryPath, mode: Self.directoryMode)
                continue
            }
            if code != EEXIST || attempts >= 16 {
                throw SystemCallError(path: candidate, operation: "create temporary file", errno: code)
            }
        }
    }

    // MARK: Signals

    private static let fileSizeSignalIgnored: Bool = {
        signal(SIGXFSZ, SIG_IGN)
        return true
    }()

    /// Sets `SIGXFSZ` to be ignored, once per process, so a write beyond `RLIMIT_FSIZE` fails with `EFBIG` instead of
    /// killing the process. Called before the first write.
    static func ignoreFileSizeSignal() {
        _ = fileSizeSignalIgnored
    }
}
