import EngineTestSupport
import Foundation
import PrefsTestSupport
import Synchronization
import TestThreads
import Testing

@testable import Prefs

#if canImport(Glibc)
    import Glibc
#endif

/// A write or rekey that failed after its commit point (the folder sync) throws `durabilityNotConfirmed`, and the
/// store and the file go on from the new state, as for any write.
@Suite(.ownThreads) struct CommittedWriteTests {
    private static let failedSync = SystemCallError(path: "/", operation: "sync directory", errno: EIO)

    @Test func aRekeyWhoseFolderSyncFailsKeepsTheNewKey() throws {
        let fileSystem = SteppingFileSystem()
        let vault = try Vault(fileSystem: fileSystem)
        defer { vault.directory.cleanup() }
        try vault.store.setValue(.string("secret"), forKey: "k")
        let newKeyFile = vault.directory.file("new.key")
        fileSystem.fail(at: .beforeFolderSync, with: Self.failedSync)
        let error = #expect(throws: PrefsError.self) { try vault.store.rekey(to: .keyFile(newKeyFile)) }
        guard case .durabilityNotConfirmed? = error else {
            Issue.record("expected durabilityNotConfirmed, got \(String(describing: error))")
            return
        }
        #expect(error?.description.contains("was made") == true)
        // The file is under the new key, and so is the store: its next write must not go back to the old key.
        #expect(try vault.reopen(key: .keyFile(newKeyFile)).value(forKey: "k") == .string("secret"))
        #expect(throws: VaultError.authenticationFailed) { try vault.reopen() }
        try vault.store.setValue(.string("after"), forKey: "k")
        #expect(try vault.reopen(key: .keyFile(newKeyFile)).value(forKey: "k") == .string("after"))
    }

    @Test func aWriteWhoseFolderSyncFailsIsReportedAsCommittedAndAnnounced() async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let fileSystem = SteppingFileSystem()
        let store = try FileStore(url: directory.file("store.json"), fileSystem: fileSystem, clock: .system)
        let key = uniqueKey()
        let changes = store.changedKeys([key])
        fileSystem.fail(at: .beforeFolderSync, with: Self.failedSync)
        let error = #expect(throws: PrefsError.self) { try store.setValue(.int(7), forKey: key) }
        guard case .durabilityNotConfirmed? = error else {
            Issue.record("expected durabilityNotConfirmed, got \(String(describing: error))")
            return
        }
        #expect(try store.value(forKey: key) == .int(7))
        let onDisk = try JSONSerialization.jsonObject(with: Data(contentsOf: directory.file("store.json")))
        #expect((onDisk as? [String: Any])?[key] as? Int == 7)
        // Other readers are told, as for any write.
        #expect(try await first(1, of: changes) == [key])
    }

    /// Before the commit point nothing took effect: a batch whose rename fails throws, and the store and the file
    /// hold what they held before the batch, with nothing announced; the next write works.
    @Test func aBatchWhoseRenameFailsLeavesTheStoreAndTheFileAsBeforeIt() async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let (store, url) = try Self.storeWhoseNextRenameFails(in: directory)
        let changes = store.changedKeys(["a", "b"])
        let error = #expect(throws: PrefsError.self) {
            try store.batch {
                try store.setValue(.int(2), forKey: "a")
                try store.setValue(.string("new"), forKey: "b")
            }
        }
        #expect(error?.description.contains("rename") == true, "\(String(describing: error))")
        #expect(try store.value(forKey: "a") == .int(1))
        #expect(try store.value(forKey: "b") == nil)
        #expect(try onDisk(url) == ["a": 1])
        try store.setValue(.int(3), forKey: "a")
        #expect(try onDisk(url) == ["a": 3])
        // The first change announced is the write that took effect.
        #expect(try await first(1, of: changes) == ["a"])
        #expect(try store.value(forKey: "a") == .int(3))
    }

    /// A batch whose rename fails leaves memory as before it and writes nothing, even when a writer that takes no
    /// lock replaced the file meanwhile: the next write reads that file under its lock and writes on top of it.
    @Test func aBatchWhoseRenameFailsWritesNothingAndTheNextWriteReadsTheOtherWritersFile() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let (store, url) = try Self.storeWhoseNextRenameFails(in: directory)
        #expect(throws: PrefsError.self) {
            try store.batch {
                // Another writer, between this batch's read of the file and its commit.
                try replaceFile(at: url, with: Data(#"{"a":1,"c":9}"#.utf8))
                try store.setValue(.int(2), forKey: "a")
            }
        }
        #expect(try onDisk(url) == ["a": 1, "c": 9])
        #expect(try store.value(forKey: "a") == .int(1), "the failed batch's value stayed in memory")
        try store.setValue(.int(3), forKey: "a")
        #expect(try onDisk(url) == ["a": 3, "c": 9])
        #expect(try store.allValues() == ["a": .int(3), "c": .int(9)])
    }

    /// A file store holding `a = 1` in `directory`, whose next commit fails at its rename.
    private static func storeWhoseNextRenameFails(in directory: TempDir) throws -> (FileStore, URL) {
        let fileSystem = SteppingFileSystem()
        let url = directory.file("store.json")
        let store = try FileStore(url: url, fileSystem: fileSystem, clock: .system)
        try store.setValue(.int(1), forKey: "a")
        fileSystem.fail(at: .beforeRename, with: SystemCallError(path: url.path, operation: "rename", errno: EIO))
        return (store, url)
    }

    /// The file's values as Foundation reads them, whatever the store holds in memory.
    private func onDisk(_ url: URL) throws -> [String: Int]? {
        try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Int]
    }
}
