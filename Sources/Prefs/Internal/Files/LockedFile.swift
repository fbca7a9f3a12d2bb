import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

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
/// - Nothing is created on disk until the first lock, write or removal.
final class LockedFile: Sendable {
    /// The data file.
    let url: URL
    /// The lock file; `<filename>.lock` next to the data file unless given.
    let lockURL: URL
    /// The mode for directories this object creates.
    let createDirectoryMode: mode_t

    let path: String
    let directoryPath: String
    let lockPath: String

    /// Held for the whole of `withLock`; the value is the lazily opened lock file descriptor (-1 until then).
    private let lockFD = Mutex<Int32>(-1)

    init(url: URL, lockURL: URL? = nil, createDirectoryMode: mode_t = 0o700) {
        self.url = url
        self.lockURL =
            lockURL ?? url.deletingLastPathComponent().appendingPathComponent(url.lastPathComponent + ".lock")
        self.createDirectoryMode = createDirectoryMode
        self.path = url.fileSystemPath
        self.directoryPath = POSIX.parentPath(of: path)
        self.lockPath = self.lockURL.fileSystemPath
    }

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
    @discardableResult
    func withLock<T>(_ kind: LockKind, _ body: () throws -> T) throws -> T {
        try lockFD.withLock { fd throws -> T in
            if fd < 0 { fd = try openLockFile() }
            let operation = kind == .shared ? LOCK_SH : LOCK_EX
            if POSIX.retrying({ flock(fd, operation) }) != 0 {
                throw POSIX.error(path: lockPath, operation: "lock")
            }
            defer { _ = flock(fd, LOCK_UN) }
            return try body()
        }
    }

    private func openLockFile() throws(PrefsError) -> Int32 {
        try POSIX.createDirectory(atPath: POSIX.parentPath(of: lockPath), mode: createDirectoryMode)
        let fd = POSIX.retrying { open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600) }
        guard fd >= 0 else { throw POSIX.error(path: lockPath, operation: "open lock file") }
        return fd
    }

    // MARK: Reading

    /// The whole contents and the identity of the file they came from, or nil when the file does not exist.
    ///
    /// The identity comes from `fstat` of the descriptor that was read, so it describes exactly these bytes.
    func read() throws(PrefsError) -> (data: Data, identity: FileIdentity)? {
        let fd = POSIX.retrying { open(path, O_RDONLY | O_CLOEXEC) }
        if fd < 0 {
            let code = errno
            if code == ENOENT { return nil }
            throw POSIX.error(path: path, operation: "open", errno: code)
        }
        defer { close(fd) }
        let identity = try FileIdentity.of(fileDescriptor: fd, path: path)
        var data = Data()
        data.reserveCapacity(Int(max(0, identity.size)))
        let chunkSize = 64 * 1024
        var buffer = [UInt8](repeating: 0, count: chunkSize)
        while true {
            let count = buffer.withUnsafeMutableBytes { bytes in
                var result: Int
                repeat { result = POSIX.read(fd, bytes.baseAddress, chunkSize) } while result < 0 && errno == EINTR
                return result
            }
            if count < 0 { throw POSIX.error(path: path, operation: "read") }
            if count == 0 { break }
            data.append(contentsOf: buffer[..<count])
        }
        return (data, identity)
    }

    /// The identity of the data file, or nil when it does not exist.
    func identity() throws(PrefsError) -> FileIdentity? {
        try FileIdentity.of(path: path)
    }

    // MARK: Writing

    /// Replaces the file with `data`, atomically and durably, and returns the new file's identity.
    ///
    /// Creates the directory (`createDirectoryMode`) if missing, writes a temporary `.<name>.tmp-<hex>` file in the
    /// same directory with `mode` (set with `fchmod`, so the umask does not matter), syncs it, renames it over the
    /// file and syncs the directory. On failure the temporary file is removed and the old file is untouched.
    /// Does not lock: callers hold `withLock(.exclusive)` around read-modify-write.
    @discardableResult
    func writeAtomically(_ data: Data, mode: mode_t = 0o600) throws(PrefsError) -> FileIdentity {
        Self.ignoreFileSizeSignal()
        try POSIX.createDirectory(atPath: directoryPath, mode: createDirectoryMode)

        let (fd, temporaryPath) = try createTemporaryFile(mode: mode)
        var succeeded = false
        var isOpen = true
        defer {
            if isOpen { close(fd) }
            if !succeeded { unlink(temporaryPath) }
        }

        try writeAll(data, to: fd, path: temporaryPath)
        if fchmod(fd, mode) != 0 { throw POSIX.error(path: temporaryPath, operation: "set permissions of") }
        if POSIX.retrying({ fsync(fd) }) != 0 { throw POSIX.error(path: temporaryPath, operation: "sync") }
        isOpen = false
        if close(fd) != 0 && errno != EINTR { throw POSIX.error(path: temporaryPath, operation: "close") }
        if rename(temporaryPath, path) != 0 { throw POSIX.error(path: path, operation: "replace") }
        succeeded = true

        try POSIX.syncDirectory(atPath: directoryPath)
        guard let identity = try FileIdentity.of(path: path) else {
            throw POSIX.error(path: path, operation: "stat", errno: ENOENT)
        }
        return identity
    }

    /// Removes the temporary files that writers killed between creating and renaming them left behind
    /// (`.<name>.tmp-<hex>` beside the file), and returns how many it removed. Best effort: errors are ignored.
    ///
    /// Call only while holding `withLock(.exclusive)`: then no writer of this file, in any process, can be
    /// between creating and renaming its temporary file, so every match is stale.
    @discardableResult
    func removeStaleTemporaryFiles() -> Int {
        let prefix = Array(temporaryPrefix.utf8)
        let hexDigits = Set("0123456789abcdef".utf8)
        guard let directory = opendir(directoryPath) else { return 0 }
        defer { closedir(directory) }
        var stale: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix { $0 != 0 }) }
            guard name.starts(with: prefix) else { continue }
            let suffix = name.dropFirst(prefix.count)
            guard (1...16).contains(suffix.count), suffix.allSatisfy(hexDigits.contains) else { continue }
            stale.append(String(decoding: name, as: UTF8.self))
        }
        return stale.filter { unlink(directoryPath + "/" + $0) == 0 }.count
    }

    /// Removes the file; a missing file is fine. The directory is synced so the removal is durable.
    func remove() throws(PrefsError) {
        if unlink(path) != 0 {
            let code = errno
            if code == ENOENT { return }
            throw POSIX.error(path: path, operation: "remove", errno: code)
        }
        try POSIX.syncDirectory(atPath: directoryPath)
    }

    /// `.<name>.tmp-`, the start of every temporary file name; the name is cut to 200 bytes so the whole stays
    /// within the 255-byte limit even when the target's own name is near it.
    private var temporaryPrefix: String {
        "." + String(decoding: POSIX.lastComponent(of: path).utf8.prefix(200), as: UTF8.self) + ".tmp-"
    }

    private func createTemporaryFile(mode: mode_t) throws(PrefsError) -> (fd: Int32, path: String) {
        let prefix = temporaryPrefix
        var attempts = 0
        while true {
            let suffix = String(UInt64.random(in: .min ... .max), radix: 16)
            let candidate = directoryPath + "/" + prefix + suffix
            let fd = POSIX.retrying { open(candidate, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, mode) }
            if fd >= 0 { return (fd, candidate) }
            let code = errno
            attempts += 1
            if code != EEXIST || attempts >= 16 {
                throw POSIX.error(path: candidate, operation: "create temporary file", errno: code)
            }
        }
    }

    private func writeAll(_ data: Data, to fd: Int32, path: String) throws(PrefsError) {
        let failure: Int32? = data.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                if written == 0 { return ENOSPC }
                offset += written
            }
            return nil
        }
        if let failure { throw POSIX.error(path: path, operation: "write", errno: failure) }
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
