package import Foundation
package import Prefs

#if canImport(Glibc)
    import Glibc
#endif

/// A test's `FileSystem` that hands every step to the system's (`base`) unless it declares that step itself: the
/// counting and the stepping file systems each write only the steps they watch.
package protocol PassThroughFileSystem: FileSystem {
    var base: POSIXFileSystem { get }
    /// Whether the engine hears of changes from the system's watcher (else the test asks for each look).
    var watching: Bool { get }
}

extension PassThroughFileSystem {
    package func identity(at path: String) throws(SystemCallError) -> FileIdentity? { try base.identity(at: path) }

    package func lock(_ path: String, timeout: @autoclosure () -> Duration, clock: EngineClock) throws -> FileLock {
        try base.lock(path, timeout: timeout(), clock: clock)
    }

    package func read(_ path: String, through lock: FileLock?) throws(SystemCallError) -> FileContents? {
        try base.read(path, through: lock)
    }

    package func writeTemporary(beside path: String, bytes: UnsafeRawBufferPointer, mode: mode_t, durable: Bool)
        throws(SystemCallError) -> TemporaryFile
    {
        try base.writeTemporary(beside: path, bytes: bytes, mode: mode, durable: durable)
    }

    package func commit(_ temporary: TemporaryFile, to path: String) throws(SystemCallError) {
        try base.commit(temporary, to: path)
    }

    package func discard(_ temporary: TemporaryFile) { base.discard(temporary) }

    package func syncFolder(of path: String) throws(SystemCallError) { try base.syncFolder(of: path) }

    package func move(_ path: String, to destination: String) throws(SystemCallError) {
        try base.move(path, to: destination)
    }

    package func remove(_ path: String) throws(SystemCallError) { try base.remove(path) }

    package func removeStaleTemporaries(beside path: String) { base.removeStaleTemporaries(beside: path) }

    package func watch(_ path: String, onChange: @escaping @Sendable () -> Void) -> FileWatchToken {
        watching ? base.watch(path, onChange: onChange) : FileWatchToken {}
    }
}
