package import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The file-system operations a store's engine performs: one method for each step of a read or a commit, so that
/// a test can hand an engine a file system that pauses or fails at a chosen step (as SQLite tests its pager through
/// a test VFS), and the engine itself stays free of test hooks. ``POSIXFileSystem`` is the real one.
///
/// Paths are the store file's own path (a symbolic link already resolved). Every method is called by the engine's
/// one transaction function or its read of the file, never concurrently for one store.
package protocol FileSystem: Sendable {
    /// What is at `path` now (`stat`): nil when nothing is.
    func identity(at path: String) throws(SystemCallError) -> FileIdentity?

    /// Takes the exclusive lock of the store file at `path`, the file itself (`flock`), waiting at most `timeout`
    /// on `clock` for another process to release it. When there is no file, an empty one is created and locked, if
    /// nothing appears at its name meanwhile (``FileLock/createdEmpty``): a file that does not exist has nothing to
    /// lock. The folder is created (mode 0700) if it is missing. The lock lasts until ``FileLock/release()``.
    ///
    /// - Throws: ``PrefsError/lockTimedOut(path:holder:waited:)`` past the limit, naming the holder.
    func lock(_ path: String, timeout: Duration, clock: EngineClock) throws -> FileLock

    /// Takes a shared lock of the store file at `path` without waiting: nil when there is no file, or when a writer
    /// holds its exclusive lock (it is in the middle of a commit, whose rename will be seen). A look reads under it,
    /// so that the file, its commit file and what it decides from them belong to one commit.
    func lockShared(_ path: String) throws(SystemCallError) -> FileLock?

    /// Whether a file with `identity` may still change without its identity showing it: its modification time is
    /// within one tick of the file system's clock of now (git's "racily clean"). Only then are its bytes compared.
    func isRacy(_ identity: FileIdentity) -> Bool

    /// The whole file at `path` and the identity of the bytes read; nil when there is no file. Read through `lock`
    /// when one is held, so the bytes are those of the locked file.
    func read(_ path: String, through lock: FileLock?) throws(SystemCallError) -> FileContents?

    /// A new private file beside `path` holding `data`, flushed to the disk when `durable`, its modification time
    /// set back past the file system's clock tick, so that any later write in place changes its identity (see
    /// ``isRacy(_:)``). The folder is created (mode 0700) if it is missing.
    func writeTemporary(beside path: String, data: Data, mode: mode_t, durable: Bool)
        throws(SystemCallError) -> TemporaryFile

    /// Renames `temporary` over the file at `path`: the commit point. Returns the identity of the file it put there,
    /// from its own descriptor, since the name may already hold a newer file by then. Throws ``CommitRace`` when
    /// the temporary file is gone (swept by another writer: nothing was written), and a `PrefsError` when the rename
    /// fails otherwise.
    func commit(_ temporary: TemporaryFile, to path: String) throws -> FileIdentity

    /// Removes a temporary file that is not to be committed.
    func discard(_ temporary: TemporaryFile)

    /// Writes `data` over the file at `path` in place (created `mode` if missing, cut to its length), not synced and
    /// not atomic: for a copy whose readers check what they read.
    func overwrite(_ path: String, with data: Data, mode: mode_t) throws(SystemCallError)

    /// Flushes the folder of `path`, so that a rename or removal in it survives a crash.
    func syncFolder(of path: String) throws(SystemCallError)

    /// Gives the file at `path` the name `destination` if nothing has that name.
    func move(_ path: String, to destination: String) throws(SystemCallError)

    /// Removes the file at `path` (nothing there is fine) and flushes its folder.
    func remove(_ path: String) throws(SystemCallError)

    /// Removes the temporary files beside `path` that writers killed before their commit left behind. Called
    /// holding the file's lock, when no live writer of it can have one.
    func removeStaleTemporaries(beside path: String)

    /// Calls `onChange` when the file at `path` may have changed, until the token is cancelled.
    func watch(_ path: String, onChange: @escaping @Sendable () -> Void) -> FileWatchToken
}

/// An open store file whose exclusive lock this process holds.
package final class FileLock: Sendable {
    package let descriptor: Int32
    /// Whether the lock created the file, empty, because there was none.
    package let createdEmpty: Bool
    private let released = Atomic<Bool>(false)

    package init(descriptor: Int32, createdEmpty: Bool = false) {
        self.descriptor = descriptor
        self.createdEmpty = createdEmpty
    }

    /// Lets go of the lock (closing the file); calling it again does nothing.
    package func release() {
        if !released.exchange(true, ordering: .relaxed) { close(descriptor) }
    }

    deinit { release() }
}

/// A written temporary file not yet committed.
package struct TemporaryFile: Sendable {
    package let path: String
    package let descriptor: Int32

    package init(path: String, descriptor: Int32) {
        self.path = path
        self.descriptor = descriptor
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

/// A commit whose temporary file was swept by another writer before its rename: nothing was written, and the
/// transaction makes its commit again.
package struct CommitRace: Error, Sendable {
    package init() {}
}
