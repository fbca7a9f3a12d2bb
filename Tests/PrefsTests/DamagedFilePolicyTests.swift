import EngineTestSupport
import Foundation
import PrefsTestSupport
import Synchronization
import TestThreads
import Testing

@testable import Prefs

/// What a file store given `onDamage: .keepAside` does with a file that does not decode, on real files: opening and
/// looking only read it (the store reads no values, `damage` says why, the file is untouched); the first write moves
/// it aside byte for byte
/// (0600), starts afresh and saves, and the app hears of it once, with where the file went. A suite halfway through
/// another writer's rewrite is read again through its grace, not moved.
@Suite(.ownThreads) struct DamagedFilePolicyTests {
    /// The files kept aside for `name` in `directory`.
    private static func keptAside(_ name: String, in directory: TempDir) throws -> [String] {
        try directory.contents().filter { $0.hasPrefix(name + ".damaged-") }
    }

    /// The reports that `path` was kept aside, with where it went.
    private static func keptAsideReports(of path: String) -> [String] {
        Reports.everything().compactMap { report in
            guard case .damagedFileKeptAside(let reported, let kept, _)? = report.error as? PrefsError,
                reported == path
            else { return nil }
            return kept
        }
    }

    @Test func aDamagedFileIsKeptAsideAtTheFirstWriteAndTheStoreSavesAgain() throws {
        Reports.install()
        let directory = try TempDir()
        defer { directory.cleanup() }
        let url = directory.file("prefs.json")
        let damaged = Data(#"{"theme": "dark", "#.utf8)
        try damaged.write(to: url)
        let store = try FileStore(url: url, onDamage: .keepAside)
        defer { store.close() }
        #expect(store.damage != nil, "opening only reads")
        #expect(try store.value(forKey: "theme") == nil, "the store reads afresh")
        #expect(try Self.keptAside("prefs.json", in: directory).isEmpty)
        #expect(try Data(contentsOf: url) == damaged)
        try store.setValue(.string("light"), forKey: "theme")
        #expect(store.damage == nil)
        let aside = try Self.keptAside("prefs.json", in: directory)
        try #require(aside.count == 1, "\(aside)")
        let kept = directory.path(aside[0])
        #expect(FileManager.default.contents(atPath: kept) == damaged, "byte for byte")
        #expect(try FileManager.default.attributesOfItem(atPath: kept)[.posixPermissions] as? Int == 0o600)
        #expect(Self.keptAsideReports(of: url.path(percentEncoded: false)) == [kept], "reported once, with where")
        #expect(Reports.naming(directory).count == 1, "and nothing else: \(Reports.naming(directory))")
        // The one message says what happened; the step it would name is taken already.
        let text = Reports.naming(directory).map { "\($0)" }.joined()
        #expect(text.contains("it was kept as \(kept) and the preferences start afresh"), "\(text)")
        #expect(!text.contains("moveDamagedFileAside") && !text.contains("prefs repair"), "\(text)")
        let saved = try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: String]
        #expect(saved == ["theme": "light"])
    }

    /// Stores of one file in one process share one state, and with it the policy of the first one opened while
    /// it is open: a second store asking for another policy gets the first one's.
    @Test func aSecondStoreOfAnOpenFileTakesThePolicyOfTheFirst() throws {
        Reports.install()
        let directory = try TempDir()
        defer { directory.cleanup() }
        let url = directory.file("prefs.json")
        let refusing = try FileStore(url: url)
        try refusing.setValue(.int(1), forKey: "k")
        let keeping = try FileStore(url: url, onDamage: .keepAside)
        _ = try replaceFile(at: url, with: Data("not json".utf8))
        keeping.engine.lookAtFile()
        #expect(keeping.damage != nil)
        #expect(throws: PrefsError.self) { try keeping.setValue(.int(2), forKey: "k") }
        #expect(try Self.keptAside("prefs.json", in: directory).isEmpty, "refused, as the first store's policy says")
        refusing.close()
        keeping.close()
        // Once every store of the file has closed, the next one opened sets the policy.
        let reopened = try FileStore(url: url, onDamage: .keepAside)
        defer { reopened.close() }
        try reopened.setValue(.int(3), forKey: "k")
        #expect(try Self.keptAside("prefs.json", in: directory).count == 1)
    }

    @Test func aFileDamagedWhileOpenIsKeptAsideAtTheNextWrite() throws {
        Reports.install()
        let directory = try TempDir()
        defer { directory.cleanup() }
        let url = directory.file("prefs.json")
        let store = try FileStore(
            url: url, fileSystem: SteppingFileSystem(watching: false), clock: .system, onDamage: .keepAside)
        try store.setValue(.int(1), forKey: "k")
        _ = try replaceFile(at: url, with: Data("not json".utf8))
        store.engine.lookAtFile()
        #expect(store.damage != nil)
        #expect(try store.value(forKey: "k") == nil, "the store reads afresh")
        #expect(try Self.keptAside("prefs.json", in: directory).isEmpty, "a look only reads")
        try store.setValue(.int(2), forKey: "k")
        let aside = try Self.keptAside("prefs.json", in: directory)
        try #require(aside.count == 1)
        #expect(FileManager.default.contents(atPath: directory.path(aside[0])) == Data("not json".utf8))
        #expect(Self.keptAsideReports(of: url.path(percentEncoded: false)) == [directory.path(aside[0])])
        #expect(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Int] == ["k": 2])
        #expect(try store.allValues() == ["k": .int(2)])
    }

    /// A suite that does not decode may be Foundation's rewrite in place, caught halfway: a write reads it again
    /// through the suite's grace, on the engine's clock, and moves it only once it has stayed so; a rewrite that
    /// finishes meanwhile is written on top of.
    @Test(arguments: [false, true])
    func aSuiteHalfwayThroughARewriteIsMovedOnlyAfterItsGrace(finishing: Bool) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let url = directory.file("suite.plist")
        let full = try PropertyListSerialization.data(
            fromPropertyList: ["k": 1, "theirs": 5], format: .xml, options: 0)
        let half = full.prefix(20)
        let now = Mutex(Duration.zero)
        let clock = EngineClock(
            now: { now.withLock { $0 } },
            pause: { step in
                if finishing { try? full.write(to: url) }
                now.withLock { $0 += step }
            },
            schedule: { _, _, _ in })
        let store = try SuiteFileStore(
            suiteName: "suite", directory: directory.url, fileSystem: SteppingFileSystem(watching: false),
            clock: clock, onDamage: .keepAside)
        try store.setValue(.int(1), forKey: "k")
        let handle = try FileHandle(forWritingTo: url)
        try handle.truncate(atOffset: 0)
        try handle.write(contentsOf: half)
        try handle.close()
        try store.setValue(.int(2), forKey: "k")
        let aside = try Self.keptAside("suite.plist", in: directory)
        if finishing {
            #expect(aside.isEmpty, "a rewrite that finished within the grace was moved")
            #expect(try store.value(forKey: "theirs") == .int(5))
        } else {
            #expect(now.withLock { $0 } >= SuiteFileStore.inPlaceRewriteGrace, "moved within the grace")
            try #require(aside.count == 1)
            #expect(FileManager.default.contents(atPath: directory.path(aside[0])) == half)
            #expect(try store.value(forKey: "theirs") == nil)
        }
        #expect(try store.value(forKey: "k") == .int(2))
        #expect(store.damage == nil)
    }
}
