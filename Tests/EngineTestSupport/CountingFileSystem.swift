package import Foundation
package import Prefs
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The system's file system, counting what an engine asks of it: how often it opens (locks or reads) the store file,
/// reads it, writes a file and flushes one to the disk. A test makes commits and compares the counts with what the
/// design says each costs.
package final class CountingFileSystem: PassThroughFileSystem {
    /// What was asked, since the last ``reset()``.
    package struct Counts: Equatable, Sendable, CustomStringConvertible {
        /// Opens of the store file: its lock, a read that takes none.
        package var storeFileOpens = 0
        /// Whole reads of the store file (through a lock or not).
        package var storeFileReads = 0
        /// Files written: temporary files, renamed over the store file.
        package var filesWritten = 0
        /// `fsync`s: of a temporary file written durably, of a folder.
        package var syncs = 0
        /// Renames of a temporary file over the store file.
        package var renames = 0

        package init() {}

        package var description: String {
            "\(storeFileOpens) opens, \(storeFileReads) reads of the store file, \(filesWritten) files written, "
                + "\(syncs) syncs, \(renames) renames"
        }
    }

    package let base = POSIXFileSystem()
    private let counted = Mutex(Counts())
    package let watching: Bool

    /// Made with `watching: false`, the engine hears of no change on its own: the test asks for each look.
    package init(watching: Bool = false) { self.watching = watching }

    package var counts: Counts { counted.withLock { $0 } }

    package func reset() { counted.withLock { $0 = Counts() } }

    private func count(_ change: (inout Counts) -> Void) { counted.withLock { change(&$0) } }

    package func lock(_ path: String, timeout: @autoclosure () -> Duration, clock: EngineClock) throws -> FileLock {
        count { $0.storeFileOpens += 1 }
        return try base.lock(path, timeout: timeout(), clock: clock)
    }

    package func read(_ path: String, through lock: FileLock?) throws(SystemCallError) -> FileContents? {
        count {
            $0.storeFileReads += 1
            if lock == nil { $0.storeFileOpens += 1 }
        }
        return try base.read(path, through: lock)
    }

    package func writeTemporary(beside path: String, bytes: UnsafeRawBufferPointer, mode: mode_t, durable: Bool)
        throws(SystemCallError) -> TemporaryFile
    {
        count {
            $0.filesWritten += 1
            if durable { $0.syncs += 1 }
        }
        return try base.writeTemporary(beside: path, bytes: bytes, mode: mode, durable: durable)
    }

    package func commit(_ temporary: TemporaryFile, to path: String) throws(SystemCallError) {
        count { $0.renames += 1 }
        try base.commit(temporary, to: path)
    }

    package func syncFolder(of path: String) throws(SystemCallError) {
        count { $0.syncs += 1 }
        try base.syncFolder(of: path)
    }
}
