package import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The file-system steps a store's engine takes, one method each, so that a test can hand an engine a file system
/// that pauses or fails at a chosen step (as SQLite tests its pager through a test VFS). ``POSIXFileSystem`` is the
/// real one. Paths are the store file's own (a symbolic link already resolved).
package protocol FileSystem: Sendable {
    /// What is at `path` now (`stat`): nil when nothing is.
    func identity(at path: String) throws(SystemCallError) -> FileIdentity?

    /// The exclusive lock of the store file at `path` (`flock` on the file itself), waiting at most `timeout` on
    /// `clock` (asked for only when the lock is held by another). A missing file is created empty and locked, only
    /// if nothing appears at its name meanwhile (``FileLock/createdEmpty``); a missing folder is created (0700).
    ///
    /// - Throws: ``PrefsError/lockTimedOut(path:holder:waited:)`` past the limit, naming the holder.
    func lock(_ path: String, timeout: @autoclosure () -> Duration, clock: EngineClock) throws -> FileLock

    /// The whole file at `path` and the identity of the bytes read; nil when there is none. Through `lock` when
    /// one is held.
    func read(_ path: String, through lock: FileLock?) throws(SystemCallError) -> FileContents?

    /// A new private file beside `path` holding `bytes`, flushed to the disk when `durable`, with its identity.
    func writeTemporary(beside path: String, bytes: UnsafeRawBufferPointer, mode: mode_t, durable: Bool)
        throws(SystemCallError) -> TemporaryFile

    /// Renames `temporary` over `path`: the commit point.
    func commit(_ temporary: TemporaryFile, to path: String) throws(SystemCallError)

    /// Removes a temporary file that is not to be committed.
    func discard(_ temporary: TemporaryFile)

    /// Flushes the folder of `path`, so that a rename or removal in it survives a crash.
    func syncFolder(of path: String) throws(SystemCallError)

    /// Gives the file at `path` the name `destination` if nothing has that name.
    func move(_ path: String, to destination: String) throws(SystemCallError)

    /// Removes the file at `path` (nothing there is fine).
    func remove(_ path: String) throws(SystemCallError)

    /// Removes the temporary files beside `path` that writers killed before their commit left; called holding the
    /// file's lock.
    func removeStaleTemporaries(beside path: String)

    /// Calls `onChange` when the file at `path` may have changed, until the token is cancelled.
    func watch(_ path: String, onChange: @escaping @Sendable () -> Void) -> FileWatchToken
}

/// A file's permission bits, as `open(2)` takes them.
package typealias FileMode = mode_t

extension FileSystem {
    /// ``writeTemporary(beside:bytes:mode:durable:)`` of `data`.
    package func writeTemporary(beside path: String, data: Data, mode: mode_t, durable: Bool)
        throws(SystemCallError) -> TemporaryFile
    {
        let result = data.withUnsafeBytes { bytes in
            Result { () throws(SystemCallError) in
                try writeTemporary(beside: path, bytes: bytes, mode: mode, durable: durable)
            }
        }
        return try result.get()
    }

    /// Writes `data` at `path` by a rename of a temporary file, not synced: for a small file whose loss in a crash
    /// only lags it behind (a vault's rollback record).
    package func replace(_ path: String, with data: Data) throws(SystemCallError) {
        try commit(writeTemporary(beside: path, data: data, mode: 0o600, durable: false), to: path)
    }
}

/// An open store file whose exclusive lock this process holds, and its identity once locked.
package final class FileLock: Sendable {
    package let descriptor: Int32
    package let identity: FileIdentity
    /// Whether the lock created the file, empty, because there was none.
    package let createdEmpty: Bool
    private let released = Atomic<Bool>(false)

    package init(descriptor: Int32, identity: FileIdentity, createdEmpty: Bool = false) {
        self.descriptor = descriptor
        self.identity = identity
        self.createdEmpty = createdEmpty
    }

    /// Lets go of the lock (closing the file); calling it again does nothing.
    package func release() {
        if !released.exchange(true, ordering: .relaxed) { close(descriptor) }
    }

    deinit { release() }
}

/// A written temporary file not yet committed, and the identity it will have at the store's path.
package struct TemporaryFile: Sendable {
    package let path: String
    package let identity: FileIdentity

    package init(path: String, identity: FileIdentity) {
        self.path = path
        self.identity = identity
    }
}

/// A store file as read: its bytes and their identity.
package struct FileContents: Sendable {
    package var data: Data
    package var identity: FileIdentity

    package init(data: Data, identity: FileIdentity) {
        self.data = data
        self.identity = identity
    }
}
