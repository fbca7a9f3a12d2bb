import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

/// Every persistent store shared with child processes: what they write reads back exactly, their updates are never
/// lost, a set that returned survives `kill -9`, and their writes reach observers here.
@Suite(.ownThreads)
struct StoreProcessTests {
    @Test(arguments: Backend.persistent)
    func valuesWrittenByAnotherProcessReadBackExactly(_ backend: Backend) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let written = try ChildProcess.run(["write-fixtures", backend.spec(in: directory)])
        #expect(written.lines == ["ok"], "\(written.error)")
        let store = try backend.open(in: directory)
        #expect(Fixtures.mismatches(in: store) == [])
    }

    @Test(arguments: Backend.persistent)
    func processesAppendingAtOnceLoseNothing(_ backend: Backend) async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let spec = backend.spec(in: directory)
        let children = try (0..<4).map { index in
            // The long version (4 processes × 250 updates per store, LoadTests) is in the reliability suite.
            try ChildProcess.start(["append", spec, "tags", "25", "p\(index)"])
        }
        for child in children {
            let ended = child.wait()
            #expect(ended.status == 0, "\(ended)")
            #expect(ended.error.isEmpty, "\(ended)")
        }
        let store = try backend.open(in: directory)
        let tags = try store.value(for: PrefKey("tags", default: [String]()))
        #expect(tags.count == 100)
        #expect(Set(tags).count == 100)
    }

    @Test(.timeLimit(.minutes(5)), arguments: Backend.persistent)
    func aSetThatReturnedSurvivesKillDashNine(_ backend: Backend) async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let spec = backend.spec(in: directory)
        let child = try ChildProcess.start(["count-up", spec, "n"])
        var acknowledged = 0
        let target = Int.random(in: 3...40)
        var lines = child.lines().makeAsyncIterator()
        while acknowledged < target, let line = await lines.next() {
            acknowledged = Int(line) ?? acknowledged
        }
        child.kill()
        // Lines still in the pipe are sets that returned before the kill.
        while let line = await lines.next() {
            acknowledged = Int(line) ?? acknowledged
        }
        let after = try ChildProcess.run(["get-int", spec, "n"])
        let stored = Int(after.lines.first ?? "") ?? -1
        #expect(after.status == 0, "the file must still open: \(after.error)")
        #expect(stored >= acknowledged, "acknowledged \(acknowledged) but found \(stored)")
        #expect(stored <= acknowledged + 1)
    }

    @Test(arguments: Backend.persistent)
    func anotherProcessesWriteReachesObservers(_ backend: Backend) async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try backend.open(in: directory)
        let value = StoredValue(key: "n", default: 0, store: store)
        let stream = value.values
        let written = try ChildProcess.run(["set-int", backend.spec(in: directory), "n", "42"])
        #expect(written.lines == ["ok"], "\(written.error)")
        try await waitUntil(stream) { $0 == 42 }
        #expect(value.wrappedValue == 42)
    }
}
