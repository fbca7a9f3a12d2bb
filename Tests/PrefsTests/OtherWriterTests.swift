import Foundation
import PrefsTestSupport
import Synchronization
import Testing

@testable import Prefs

/// Issue 14, point 2: another writer rewriting a suite in place (as Foundation's `synchronize()` does).
@Suite(.serialized)
struct OtherWriterTests {
    /// Collects the reports that name a path inside `directory`.
    private static func reports(in directory: TempDir) -> [PrefsReport] {
        Reports.everything().filter { String(describing: $0.error).contains(directory.url.path) }
    }

    @Test func aSuiteRewrittenInPlaceByAnotherProcessKeepsServingItsValues() async throws {
        Reports.install()
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try UserDefaultsStore(suiteName: "shared", directory: directory.url)
        try store.setValue(.int(0), forKey: "theirs")
        let theirs = StoredValue(key: "theirs", default: -1, store: store)
        let stream = theirs.values
        let rounds = 25
        let child = try ChildProcess.start([
            "rewrite-in-place", directory.file("shared.plist").path, "theirs", String(rounds), "15",
        ])
        // Meanwhile this process writes its own key and reads theirs, many times per rewrite.
        var writeErrors: [String] = []
        var readErrors: [String] = []
        var mine = 0
        while child.isRunning {
            mine += 1
            do { try store.setValue(.int(Int64(mine)), forKey: "mine") } catch { writeErrors.append("\(error)") }
            do {
                if try store.value(forKey: "theirs") == nil { readErrors.append("theirs read as absent") }
            } catch { readErrors.append("\(error)") }
        }
        let ended = child.wait()
        #expect(ended.status == 0, "\(ended)")
        #expect(writeErrors.isEmpty, "\(writeErrors.prefix(3))")
        #expect(readErrors.isEmpty, "\(readErrors.prefix(3))")
        // Their last round is read eventually (their last rewrite may have replaced one of ours, or the reverse,
        // since they take no lock: wait for the file to settle, then for the value the file holds).
        let settled =
            try PropertyListSerialization.propertyList(
                from: Data(contentsOf: directory.file("shared.plist")), format: nil) as? [String: Any]
        let last = settled?["theirs"] as? Int ?? -2
        var seen: [Int] = []
        for await value in stream {
            seen.append(value)
            if value == last { break }
        }
        #expect(!seen.contains(-1), "an observer saw the default, a value that was never stored: \(seen)")
        #expect(seen.allSatisfy { (0...rounds).contains($0) })
        #expect(Self.reports(in: directory).isEmpty, "\(Self.reports(in: directory).prefix(2).map(\.description))")
        #expect(try store.value(forKey: "mine") != nil)
    }

    @Test func foundationSynchronizingTheSameSuiteIsNeverReportedAsDamage() async throws {
        Reports.install()
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try UserDefaultsStore(suiteName: "shared", directory: directory.url)
        try store.setValue(.string("kept"), forKey: "ours")
        let counter = StoredValue(key: "count", default: -1, store: store)
        let stream = counter.values
        let result = try ChildProcess.run(
            ["foundation-count", "shared", "count", "200"], environment: ["XDG_CONFIG_HOME": directory.url.path])
        #expect(result.lines == ["done"], "\(result.error)")
        try await waitUntil(stream) { $0 == 200 }
        #expect(try store.value(forKey: "ours") == .string("kept"))
        #expect(Self.reports(in: directory).isEmpty, "\(Self.reports(in: directory).prefix(2).map(\.description))")
    }

    @Test(arguments: [Backend.file, .userDefaults])
    func aFileDamagedForGoodIsReportedOnceAndNeverOverwritten(_ backend: Backend) async throws {
        Reports.install()
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try backend.open(in: directory)
        let key = uniqueKey("damaged")
        try store.setValue(.int(1), forKey: key)
        let file = backend.dataFile(in: directory)!
        let garbage = Data("garbage".utf8)
        try garbage.write(to: file, options: .atomic)
        // Once the grace period is over, reads throw; until then they keep the last good value.
        let deadline = ContinuousClock.now + .seconds(10)
        while (try? store.value(forKey: key)) == .int(1), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(throws: PrefsError.self) { try store.value(forKey: key) }
        #expect(throws: PrefsError.self) { try store.setValue(.int(2), forKey: key) }
        #expect(Self.reports(in: directory).count == 1)
        #expect(try Data(contentsOf: file) == garbage)
    }
}

/// The engine's pure decision for a file that cannot be decoded, without files.
struct UnreadableFileStateTests {
    private struct Broken: Error {}

    @Test func aSuiteIsSuspectForItsGracePeriodAndDamagedOnlyAfter() {
        var state = SnapshotState(values: ["a": .int(1)], grace: .milliseconds(500))
        let start = ContinuousClock.now
        #expect(
            state.failedToDecode(Broken(), at: start) == .suspect(recheck: .milliseconds(500), scheduleRecheck: true))
        #expect(state.values == ["a": .int(1)] && state.damage == nil && state.isSuspect)
        #expect(
            state.failedToDecode(Broken(), at: start + .milliseconds(200))
                == .suspect(recheck: .milliseconds(300), scheduleRecheck: false))
        #expect(state.failedToDecode(Broken(), at: start + .milliseconds(500)) == .damaged)
        #expect(state.damage != nil && !state.isSuspect && state.values == ["a": .int(1)])
        #expect(state.load(["a": .int(2)], identity: nil) == ["a"])
        #expect(state.damage == nil && !state.isSuspect)
    }

    @Test func aFileOnlyPrefsWritesIsDamagedAtOnce() {
        var state = SnapshotState(values: ["a": .int(1)])
        #expect(state.failedToDecode(Broken(), at: .now) == .damaged)
        #expect(state.damage != nil)
    }
}

/// The rule for mixing Foundation's `UserDefaults` and Prefs on one suite in one process, as the guides state it.
struct FoundationInTheSameProcessTests {
    @Test func eachSeesTheOthersWritesOnlyAfterFoundationsSynchronize() async throws {
        let suite = "prefs-mixing-\(UUID().uuidString.prefix(8))"
        let defaults = try #require(UserDefaults(suiteName: suite))
        let store = try UserDefaultsStore(suiteName: suite)
        defer {
            try? FileManager.default.removeItem(at: store.url)
            try? FileManager.default.removeItem(at: store.url.deletingPathExtension().appendingPathExtension("lock"))
        }
        #expect(defaults.object(forKey: "fromPrefs") == nil)
        try store.setValue(.int(1), forKey: "fromPrefs")
        // Foundation keeps serving its cache until its own synchronize() re-reads the file.
        #expect(defaults.object(forKey: "fromPrefs") == nil)
        defaults.synchronize()
        #expect(defaults.integer(forKey: "fromPrefs") == 1)

        defaults.set(2, forKey: "fromFoundation")
        #expect(try store.value(forKey: "fromFoundation") == nil, "not on disk before synchronize()")
        defaults.synchronize()
        // Foundation's synchronize() rewrote the file; the store's watcher notices and reloads it.
        let deadline = ContinuousClock.now + .seconds(10)
        while try store.value(forKey: "fromFoundation") == nil, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(try store.value(forKey: "fromFoundation") == .int(2))
        #expect(try store.value(forKey: "fromPrefs") == .int(1), "Foundation's rewrite kept Prefs' key")
    }
}
