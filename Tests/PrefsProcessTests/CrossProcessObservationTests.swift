import Foundation
import Observation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

/// A plain (not `@Observable`) class: wrappers still take part in Observation tracking.
final class PlainSettings: Sendable {
    let count: StoredValue<Int>
    init(store: any KeyValueStore) { count = StoredValue(key: "n", default: 0, store: store) }
}

@Suite(.ownThreads)
struct CrossProcessObservationTests {
    @Test(arguments: Backend.persistent)
    func observationTrackingSeesAnotherProcessesWrite(_ backend: Backend) async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let settings = PlainSettings(store: try backend.open(in: directory))
        let (fired, signal) = AsyncStream.makeStream(of: Int.self)
        withObservationTracking {
            _ = settings.count.wrappedValue
        } onChange: {
            signal.yield(1)
        }
        let written = try ChildProcess.run(["set-int", backend.spec(in: directory), "n", "5"])
        #expect(written.lines == ["ok"], "\(written.error)")
        #expect(try await first(1, of: fired) == [1])
        #expect(settings.count.wrappedValue == 5)
    }

    @Test(.timeLimit(.minutes(5))) func aWatchingChildSeesThisProcessesWrites() async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try Backend.file.open(in: directory)
        let child = try ChildProcess.start(["watch", Backend.file.spec(in: directory), "n", "3"])
        var lines = child.lines().makeAsyncIterator()
        #expect(await lines.next() == "ready")
        #expect(await lines.next() == "0")
        try store.set(1, for: PrefKey("n", default: 0))
        #expect(await lines.next() == "1")
        try store.set(2, for: PrefKey("n", default: 0))
        #expect(await lines.next() == "2")
        let ended = child.wait()
        #expect(ended.status == 0, "\(ended)")
    }

    /// TOUR, ObservingChanges: "inotify notices other processes' writes, and only the keys that changed are
    /// announced."
    @Test(arguments: Backend.persistent)
    func anotherProcessesWriteAnnouncesOnlyTheKeysItChanged(_ backend: Backend) async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try backend.open(in: directory)
        try store.replaceAll(["a": .int(1), "b": .int(1), "c": .int(1)])
        let announced = store.changedKeys()
        let spec = backend.spec(in: directory)
        for (key, value) in [("b", "2"), ("a", "1"), ("c", "3")] {  // "a" is rewritten with the value it has
            let written = try ChildProcess.run(["set-int", spec, key, value])
            #expect(written.lines == ["ok"], "\(written.error)")
        }
        #expect(try await first(2, of: announced) == ["b", "c"])
        #expect(try store.value(forKey: "c") == .int(3))
    }
}
