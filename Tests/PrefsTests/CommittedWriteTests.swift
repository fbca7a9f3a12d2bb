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
        let changes = store.changes.keys([key])
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
}
