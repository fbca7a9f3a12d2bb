import Foundation
import PrefsTestSupport
import Synchronization
import TestThreads
import Testing

@testable import Prefs

/// Prefs beside Foundation's `UserDefaults` writing the same suite in another process. Foundation takes no lock and
/// rewrites the file in place, so the last whole-file write wins, as between two Foundation processes: what must
/// hold is that Prefs never tears the file, never reports a rewrite as damage, reads it at its next look, writes its
/// own changes on top of what it reads under its lock, and never writes when it only reads.
@Suite(.serialized, .ownThreads)
struct FoundationWriterTests {
    /// The suite file as Foundation's own property-list reader sees it.
    private static func fileValues(_ url: URL) -> [String: Any] {
        guard let data = try? Data(contentsOf: url),
            let values = try? PropertyListSerialization.propertyList(from: data, format: nil) as? [String: Any]
        else { return [:] }
        return values
    }

    /// A child process running `foundation-loop` on `suite` in `directory` until its standard input closes.
    private struct FoundationChild {
        let child: ChildProcess

        init(suite: String, key: String, pauseMicroseconds: Int, directory: TempDir) throws {
            child = try ChildProcess.start(
                ["foundation-loop", suite, key, String(pauseMicroseconds)],
                environment: ["XDG_CONFIG_HOME": directory.path], input: .pipe)
        }

        /// Waits until the child printed its first line ("started").
        func waitUntilStarted() -> String { child.readLine() ?? "" }

        /// Tells the child to stop and returns the last value it set.
        func stop() -> Int? {
            child.closeInput()
            let rest = child.remainingLines()
            guard child.wait().status == 0, let line = rest.first, line.hasPrefix("last ") else { return nil }
            return Int(line.dropFirst(5).trimmingCharacters(in: .whitespacesAndNewlines))
        }
    }

    /// Prefs updates and a Foundation process writing another key of the suite in a loop: however their writes
    /// interleave, the file always decodes, nothing is reported, and once Foundation has stopped one more Prefs
    /// write keeps Foundation's last value (it reads the file under its lock and writes on top) and memory and the
    /// file agree. How many updates each side lost to the other's whole-file writes is a figure, not a promise.
    @Test(arguments: [false, true])
    func besideAFoundationProcessTheFileDecodesAndTheLastWriteKeepsFoundationsValue(deferring: Bool) async throws {
        Reports.install()
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try SuiteFileStore(suiteName: "stress", directory: directory.url)
        let writes: any KeyValueStore = deferring ? store.deferringWrites(window: .milliseconds(2)) : store
        let counter = StoredValue(key: "pc", default: 0, store: writes)
        let child = try FoundationChild(suite: "stress", key: "fk", pauseMicroseconds: 200, directory: directory)
        #expect(child.waitUntilStarted() == "started")
        for _ in 0..<200 { counter.update { $0 += 1 } }
        let last = try #require(child.stop())
        try await writes.flush()
        try store.setValue(.int(1), forKey: "after")
        let file = Self.fileValues(store.url)
        print("FIGURE beside Foundation (deferring: \(deferring)): pc kept \((file["pc"] as? Int) ?? -1) of 200")
        #expect(file["fk"] as? Int == last, "Foundation's last value, written before this write's lock, was lost")
        #expect(file["after"] as? Int == 1)
        #expect(try store.value(forKey: "fk") == .int(Int64(last)))
        // A `pc` the file lost to Foundation's whole-file writes reads as the counter's declared default, 0.
        #expect(try store.value(forKey: "pc") == .int(Int64((file["pc"] as? Int) ?? 0)), "memory and file differ")
        let reports = Reports.everything().filter { "\($0.error)".contains(directory.path) }
        #expect(reports.isEmpty, "\(reports.prefix(2).map(\.description))")
    }

    /// Opens the suite in `directory` again and again while `isRunning`; returns the failures and the count.
    private static func openRepeatedly(_ directory: TempDir, while isRunning: () -> Bool) -> (
        failures: [String], opens: Int
    ) {
        var failures: [String] = []
        var opens = 0
        repeat {
            opens += 1
            do {
                // A new store each time (the last one is gone), so each open reads the file.
                let store = try SuiteFileStore(suiteName: "busy", directory: directory.url)
                if try store.value(forKey: "key2999") != .string("value 2999") { failures.append("key2999 missing") }
            } catch {
                failures.append("\(error)")
            }
        } while isRunning()
        return (failures, opens)
    }

    /// Fills the suite `busy` with 3 000 keys, so each in-place rewrite takes a while.
    private static func fillBusySuite(in directory: TempDir) throws {
        let store = try SuiteFileStore(suiteName: "busy", directory: directory.url)
        try store.batch {
            for index in 0..<3000 { try store.setValue(.string("value \(index)"), forKey: "key\(index)") }
        }
    }

    @Test func openingASuiteWhileAnotherWriterIsHalfwayThroughItsRewriteWaitsForIt() throws {
        Reports.install()
        let directory = try TempDir()
        defer { directory.cleanup() }
        try Self.fillBusySuite(in: directory)
        // Rewrites in place, pausing 10 ms halfway through each write: as Foundation does when descheduled mid-write.
        let child = try ChildProcess.start(["rewrite-in-place", directory.path("busy.plist"), "theirs", "30", "10"])
        let outcome = Self.openRepeatedly(directory) { child.isRunning }
        let ended = child.wait()
        #expect(ended.status == 0, "\(ended)")
        let failed = outcome.failures.count
        #expect(failed == 0, "\(failed) of \(outcome.opens) opens failed: \(outcome.failures.prefix(2))")
    }

    /// Waits until `store` reads `expected` for `key`.
    private static func waitFor(_ expected: PrefValue?, forKey key: String, in store: SuiteFileStore) async throws {
        try await eventually("the store to read \(String(describing: expected)) for \(key)") {
            try store.value(forKey: key) == expected
        }
    }

    /// The suite `shared` in `directory`, where Prefs set `mode` to 1, then 2.
    private static func suiteWithModeSetTwice(in directory: TempDir) throws -> SuiteFileStore {
        let store = try SuiteFileStore(suiteName: "shared", directory: directory.url)
        try store.setValue(.int(1), forKey: "mode")
        try store.setValue(.int(2), forKey: "mode")
        return store
    }

    /// Foundation's `UserDefaults` in a child process sets `mode` of suite `shared` in `directory` to `value`.
    private static func foundationSetsMode(_ value: Int, in directory: TempDir) throws {
        let result = try ChildProcess.run(
            ["foundation-write", "shared", "mode", String(value)], environment: ["XDG_CONFIG_HOME": directory.path])
        #expect(result.lines == ["ok"], "\(result.error)")
    }

    @Test func anotherPrefsProcessSettingAKeyBackIsNotUndone() async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try Self.suiteWithModeSetTwice(in: directory)
        let result = try ChildProcess.run(["set-int", "plist:\(directory.path):shared", "mode", "1"])
        #expect(result.lines == ["ok"], "\(result.error)")
        try await Self.waitFor(.int(1), forKey: "mode", in: store)
        try store.setValue(.int(0), forKey: "other")
        #expect(try store.value(forKey: "mode") == .int(1))
        #expect(Self.fileValues(store.url)["mode"] as? Int == 1)
    }

    @Test func foundationSettingAKeyToANewValueIsKept() async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try Self.suiteWithModeSetTwice(in: directory)
        try Self.foundationSetsMode(7, in: directory)
        try await Self.waitFor(.int(7), forKey: "mode", in: store)
        try store.setValue(.int(0), forKey: "other")
        #expect(try store.value(forKey: "mode") == .int(7))
        #expect(Self.fileValues(store.url)["mode"] as? Int == 7)
    }

    /// Foundation, in another process, deliberately sets a key back to the value it had before Prefs' latest write
    /// of it, while a Prefs process has the suite open: the set-back stands, in the file and in the Prefs process,
    /// and nothing rewrites the file.
    @Test func foundationSettingAKeyBackStandsAndIsRead() async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try Self.suiteWithModeSetTwice(in: directory)
        try Self.foundationSetsMode(1, in: directory)
        let written = try Data(contentsOf: store.url)
        try await Self.waitFor(.int(1), forKey: "mode", in: store)
        #expect(try Data(contentsOf: store.url) == written, "a Prefs process rewrote Foundation's file")
        #expect(Self.fileValues(store.url)["mode"] as? Int == 1)
    }

    /// Reading never writes: after Foundation wrote the suite, opening it, reading every value, a look, and closing
    /// leave the file byte for byte as Foundation wrote it, and create nothing beside it.
    @Test func readingAfterAFoundationWriteLeavesTheFileAsItIs() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        try Self.suiteWithModeSetTwice(in: directory).close()
        try Self.foundationSetsMode(1, in: directory)
        let url = directory.file("shared.plist")
        let written = try Data(contentsOf: url)
        let reader = try SuiteFileStore(suiteName: "shared", directory: directory.url)
        #expect(try reader.value(forKey: "mode") == .int(1))
        _ = try reader.allValues()
        reader.engine.lookAtFile()
        reader.close()
        #expect(try Data(contentsOf: url) == written)
        #expect(try directory.contents() == ["shared.plist"])
    }
}
