import EngineTestSupport
import Foundation
import PrefsTestSupport
import Synchronization
import TestThreads
import Testing

@testable import Prefs

/// An empty store file holds no values: `touch s.plist` is not damage, whatever the store's policy, and nothing of
/// it is moved aside. (An empty suite may be Foundation halfway through its rewrite, and is read again through the
/// grace before it counts as empty.)
@Suite(.ownThreads)
struct EmptyFileTests {
    @Test(arguments: [DamagedFilePolicy.refuse, .keepAside])
    func anEmptySuiteIsNoValues(_ policy: DamagedFilePolicy) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let url = directory.file("s.plist")
        #expect(FileManager.default.createFile(atPath: url.path(percentEncoded: false), contents: Data()))
        let store = try SuiteFileStore(suiteName: "s", directory: directory.url, onDamage: policy)
        #expect(try store.allValues().isEmpty)
        try store.setValue(.int(1), forKey: "k")
        #expect(try SuiteFileStore(suiteName: "s", directory: directory.url).value(forKey: "k") == .int(1))
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
    /// may be a rewrite in progress, read again on the engine's clock, and is no values once it stays empty past the
    /// grace: never damage.
    @Test func aSuiteEmptiedWhileOpenKeepsItsValuesThroughTheGraceThenHasNone() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let now = Mutex(Duration.zero)
        let store = Mutex<SuiteFileStore?>(nil)
        let seenDuringTheGrace = Mutex<[PrefValue?]>([])
        let clock = EngineClock(
            now: { now.withLock { $0 } },
            pause: { step in
                // A read while the look waits serves the last good values.
                let seen = try? store.withLock { $0 }?.value(forKey: "k")
                seenDuringTheGrace.withLock { $0.append(seen) }
                now.withLock { $0 += step }
            },
            schedule: { _, _, _ in })
        let opened = try SuiteFileStore(
            suiteName: "s", directory: directory.url, fileSystem: SteppingFileSystem(watching: false), clock: clock)
        try opened.setValue(.int(1), forKey: "k")
        store.withLock { $0 = opened }
        let handle = try FileHandle(forWritingTo: directory.file("s.plist"))
        try handle.truncate(atOffset: 0)
        try handle.close()
        opened.engine.lookAtFile()
        #expect(now.withLock { $0 } >= SuiteFileStore.inPlaceRewriteGrace, "read again through the grace")
        let seen = seenDuringTheGrace.withLock { $0 }
        #expect(!seen.isEmpty && seen.allSatisfy { $0 == .int(1) }, "\(seen)")
        #expect(try opened.value(forKey: "k") == nil, "empty past the grace: no values")
        #expect(opened.damage == nil, "and no damage")
    }

    /// Linux sets a truncated file's size before its times, so for a moment an in-place rewrite's empty file still
    /// carries the times of the file before it. A suite Prefs last wrote with values, found empty with old times, is
    /// waited for all the same: here the rewriter finishes during the first pause of the open, which then reads
    /// its values. (Taken for an old empty file, it was loaded as no values at once.)
    @Test func anEmptySuitePrefsWroteWithValuesIsWaitedForEvenWithOldTimes() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let url = directory.file("s.plist")
        try SuiteFileStore(suiteName: "s", directory: directory.url).setValue(.int(1), forKey: "k")
        let full = try Data(contentsOf: url)
        let handle = try FileHandle(forWritingTo: url)
        try handle.truncate(atOffset: 0)
        try handle.close()
        try FileManager.default.setAttributes(
            [.modificationDate: Date(timeIntervalSinceNow: -60)], ofItemAtPath: url.path(percentEncoded: false))
        let pauses = Atomic(0)
        let now = Mutex(Duration.zero)
        let clock = EngineClock(
            now: { now.withLock { $0 } },
            pause: { step in
                // The rewriter writes the rest of the file (in place, as Foundation does) during the first pause.
                if pauses.add(1, ordering: .relaxed).newValue == 1 { try? full.write(to: url) }
                now.withLock { $0 += step }
            },
            schedule: { _, _, _ in })
        let store = try SuiteFileStore(
            suiteName: "s", directory: directory.url, fileSystem: SteppingFileSystem(watching: false), clock: clock)
        #expect(try store.value(forKey: "k") == .int(1))
        #expect(pauses.load(ordering: .relaxed) >= 1, "the open waited")
    }
}
