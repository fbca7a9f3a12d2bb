import EngineTestSupport
import Foundation
import PrefsTestSupport
import Synchronization
import TestThreads
import Testing

@testable import Prefs

/// Durable: before a write returns, its bytes are flushed to the disk (`fsync`) in a temporary file, the file is
/// renamed over the store's, and the folder is flushed, so that the rename survives a crash of the machine, not only
/// of the process (which `kill -9` tests show). A power loss cannot be played in a test; the steps the engine asks of
/// its file system, in order, can.
@Suite(.ownThreads) struct DurableWriteTests {
    /// The steps of a commit, about the store's own file, as the engine asks them of the file system.
    private final class RecordingFileSystem: PassThroughFileSystem {
        let base = POSIXFileSystem()
        let watching = false
        private let recorded = Mutex<[String]>([])

        /// What was asked about the file at `path` since the last call.
        func takeSteps(of path: String) -> [String] {
            recorded.withLock { steps in
                defer { steps = [] }
                return steps.compactMap { $0.hasSuffix(" " + path) ? String($0.dropLast(path.count + 1)) : nil }
            }
        }

        private func record(_ step: String, _ path: String) { recorded.withLock { $0.append(step + " " + path) } }

        func writeTemporary(beside path: String, bytes: UnsafeRawBufferPointer, mode: mode_t, durable: Bool)
            throws(SystemCallError) -> TemporaryFile
        {
            record(durable ? "flushed temporary" : "unflushed temporary", path)
            return try base.writeTemporary(beside: path, bytes: bytes, mode: mode, durable: durable)
        }

        func commit(_ temporary: TemporaryFile, to path: String) throws(SystemCallError) {
            record("rename", path)
            try base.commit(temporary, to: path)
        }

        func syncFolder(of path: String) throws(SystemCallError) {
            record("folder flushed", path)
            try base.syncFolder(of: path)
        }
    }

    @Test(arguments: Backend.persistent)
    func aWriteIsFlushedBeforeItsRenameAndItsFolderAfterBeforeItReturns(_ backend: Backend) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let fileSystem = RecordingFileSystem()
        let store = try #require(
            try StoreSpec.open(backend.spec(in: directory), fileSystem: fileSystem, clock: .system)
                as? FileBackedStore)
        defer { store.close() }
        let path = store.url.path(percentEncoded: false)
        _ = fileSystem.takeSteps(of: path)
        for value in 1...3 {
            try store.setValue(.int(Int64(value)), forKey: "k")
            #expect(
                fileSystem.takeSteps(of: path) == ["flushed temporary", "rename", "folder flushed"],
                "write \(value)")
        }
        // A batch and a replacement of every value are one such write each.
        try store.batch {
            try store.setValue(.int(4), forKey: "k")
            try store.setValue(.int(5), forKey: "other")
        }
        #expect(fileSystem.takeSteps(of: path) == ["flushed temporary", "rename", "folder flushed"], "the batch")
        try store.replaceAll(["k": .int(6)])
        #expect(fileSystem.takeSteps(of: path) == ["flushed temporary", "rename", "folder flushed"], "replaceAll")
        #expect(try store.value(forKey: "k") == .int(6))
    }
}
