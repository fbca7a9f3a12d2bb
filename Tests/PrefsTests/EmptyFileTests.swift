import EngineTestSupport
import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

/// An empty store file holds no values: `touch s.plist` is not damage, whatever the store's policy, and nothing of
/// it is moved aside. (A suite emptied within the last tick of the clock may be Foundation halfway through its
/// rewrite, and is waited for before it counts as empty.)
@Suite(.ownThreads)
struct EmptyFileTests {
    @Test(arguments: [DamagedFilePolicy.refuse, .keepAside])
    func anEmptySuiteIsNoValues(_ policy: DamagedFilePolicy) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let url = directory.file("s.plist")
        #expect(FileManager.default.createFile(atPath: url.path(percentEncoded: false), contents: Data()))
        let store = try UserDefaultsStore(suiteName: "s", directory: directory.url, onDamage: policy)
        #expect(try store.allValues().isEmpty)
        try store.setValue(.int(1), forKey: "k")
        #expect(try UserDefaultsStore(suiteName: "s", directory: directory.url).value(forKey: "k") == .int(1))
        #expect(try directory.contents().filter { $0.contains(".damaged-") }.isEmpty, "nothing was kept aside")
    }

    @Test(arguments: [DamagedFilePolicy.refuse, .keepAside])
    func anEmptyJSONFileIsNoValues(_ policy: DamagedFilePolicy) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let url = directory.file("settings.json")
        #expect(FileManager.default.createFile(atPath: url.path(percentEncoded: false), contents: Data()))
        let store = try FileStore(url: url, onDamage: policy)
        #expect(try store.allValues().isEmpty)
        try store.setValue(.int(1), forKey: "k")
        #expect(try FileStore(url: url).value(forKey: "k") == .int(1))
        #expect(try directory.contents().filter { $0.contains(".damaged-") }.isEmpty, "nothing was kept aside")
    }

    /// An empty vault no version of which was ever remembered (a writer stopped before its first commit) is no
    /// values; one cut to nothing after it was written is refused (VaultTamperingTests).
    @Test func anEmptyVaultNeverWrittenIsNoValues() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let url = directory.file("secrets.vault")
        #expect(FileManager.default.createFile(atPath: url.path(percentEncoded: false), contents: Data()))
        let store = try EncryptedFileStore(url: url, key: .keyFile(directory.file("secrets.key")))
        #expect(try store.allValues().isEmpty)
        try store.setValue(.string("s"), forKey: "token")
        #expect(try store.value(forKey: "token") == .string("s"))
    }

    /// A watched suite emptied in place (Foundation's truncation, before it writes) keeps its values while that
    /// may be a rewrite in progress, and is no values once it stays empty past the grace. (Emptied within the restore
    /// window of its last commit, it would count as a stale rewrite putting back the keys' absence, and be restored.)
    @Test func aSuiteEmptiedWhileOpenKeepsItsValuesThroughTheGraceThenHasNone() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let clock = ManualClock()
        let store = try UserDefaultsStore(
            suiteName: "s", directory: directory.url, fileSystem: SteppingFileSystem(watching: false),
            clock: clock.engineClock)
        try store.setValue(.int(1), forKey: "k")
        clock.advance(by: CommitRecord.restoreWindow + .seconds(1))
        let handle = try FileHandle(forWritingTo: directory.file("s.plist"))
        try handle.truncate(atOffset: 0)
        try handle.close()
        store.engine.lookAtFile()
        #expect(try store.value(forKey: "k") == .int(1), "kept while it may be a rewrite halfway")
        #expect(store.damage == nil)
        clock.advance(by: UserDefaultsStore.inPlaceRewriteGrace + .milliseconds(20))
        #expect(try store.value(forKey: "k") == nil, "empty past the grace: no values")
        #expect(store.damage == nil, "and no damage")
    }
}
