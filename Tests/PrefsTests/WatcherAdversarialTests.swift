import Foundation
import PrefsTestSupport
import Synchronization
import TestThreads
import Testing

@testable import Prefs

/// Another process's change reaches this process's store and its observers, even when it lands while this process
/// is writing another key itself: a watcher event queues a look at the file on the engine's queue, which runs once
/// the write has ended. Real files and real child processes; every wait is a hang guard, never a pause.
@Suite(.ownThreads)
struct WatcherAdversarialTests {
    private static let tags = PrefKey("b", default: [String]())

    /// Writes key `a` of `store` again and again until `child` has ended; returns how it ended.
    private static func writeUntilEnd(of child: ChildProcess, to store: any KeyValueStore) throws -> ChildProcess.Exit {
        var round = 0
        while child.isRunning {
            round += 1
            try store.set(round, for: PrefKey("a", default: 0))
        }
        return child.wait()
    }

    /// The last value of `values` once it equals `expected`, or throws after the hang guard.
    private static func streamReaches<T: Sendable & Equatable>(_ values: AsyncStream<T>, _ expected: T) async throws {
        try await waitUntil(values, within: 120) { $0 == expected }
    }

    @Test func anotherPrefsProcessWritingWhileThisOneWritesEndsAtItsLastValue() async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let path = directory.path("prefs.json")
        let store = try FileStore(url: URL(filePath: path))
        defer { store.close() }
        let tags = StoredValue(key: "b", default: [String](), store: store)
        let stream = tags.values
        let count = 120
        let expected = (0..<count).map { "t-\($0)" }
        async let reached: Void = Self.streamReaches(stream, expected)
        let child = try ChildProcess.start(["append", "json:" + path, "b", String(count), "t"])
        let exit = try Self.writeUntilEnd(of: child, to: store)
        #expect(exit.lines == ["ok"], "\(exit)")
        // No further write of this process: the child's last change must arrive on its own.
        try await reached
        try await eventually("the store to read the child's last value", within: .seconds(120)) {
            try store.value(for: Self.tags) == expected
        }
    }

    /// Foundation rewrites the suite in a tight loop while this process writes another key. Once both are done, the
    /// store and its observers end at what the file holds, with no further write of this process: the last
    /// whole-file write wins, and whichever it was, it is seen. (Which process's last value survived is a figure.)
    @Test func foundationInAnotherProcessWritingWhileThisOneWritesEndsAtWhatTheFileHolds() async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try SuiteFileStore(suiteName: "race", directory: directory.url)
        defer { store.close() }
        let counter = StoredValue(key: "b", default: 0, store: store)
        let stream = counter.values
        let count = 150
        let child = try ChildProcess.start(
            ["foundation-count", "race", "b", String(count)], environment: ["XDG_CONFIG_HOME": directory.path])
        let exit = try Self.writeUntilEnd(of: child, to: store)
        #expect(exit.lines == ["done"], "\(exit)")
        let data = try Data(contentsOf: store.url)
        let values = try PropertyListSerialization.propertyList(from: data, format: nil) as? [String: Any]
        let final = values?["b"] as? Int ?? 0
        print("FIGURE foundation-count: Foundation's last value \(final == count ? "kept" : "written over (\(final))")")
        try await Self.streamReaches(stream, final)
        try await eventually("the store to read what the file holds", within: .seconds(120)) {
            try store.value(for: PrefKey("a", default: 0)) == values?["a"] as? Int ?? 0
        }
    }

    /// Replaces the JSON file at `path` the way a tool that takes no lock does: a new file renamed over it.
    private static func replaceFromOutside(_ path: String, with json: String) throws {
        let temporary = path + ".outside"
        try Data(json.utf8).write(to: URL(filePath: temporary))
        #expect(rename(temporary, path) == 0)
    }

    /// Waits, inside a write, until the watcher has queued a look at the file, which waits for the write to end.
    private static func waitForDeferredEvent(_ store: FileBackedStore) throws {
        try eventually("the watcher to queue a look at the file", within: .seconds(120)) {
            store.engine.guarded.withLock { $0.lookQueued }
        }
    }

    @Test(arguments: [false, true])
    func aChangeThatLandsDuringAWriteIsSeenWithNoLaterWrite(writing: Bool) async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let path = directory.path("prefs.json")
        let store = try FileStore(url: URL(filePath: path))
        defer { store.close() }
        try store.set(1, for: PrefKey("b", default: 0))
        let counter = StoredValue(key: "b", default: 0, store: store)
        let stream = counter.values
        async let reached: Void = Self.streamReaches(stream, 7)
        // The outside change lands after this write's rename (a nested write inside it), while it is under way.
        var deferred = false
        try store.engine.update(forKey: "a") { old in
            if writing { try store.set(5, for: PrefKey("n", default: 0)) }
            try Self.replaceFromOutside(path, with: #"{"a": 2, "b": 7, "n": 5}"#)
            deferred = (try? Self.waitForDeferredEvent(store)) != nil
            return old
        }
        #expect(deferred)
        guard !writing else {
            // The nested write commits after the outside change, which took no lock: the last whole-file write is
            // this process's, and memory is the file.
            let file = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(filePath: path))) as? [String: Int]
            #expect(file == ["b": 1, "n": 5])
            #expect(try store.allValues() == (file ?? [:]).mapValues { .int(Int64($0)) })
            return
        }
        // No further write of this process.
        try await reached
        #expect(try store.value(for: PrefKey("b", default: 0)) == 7)
        #expect(try store.value(for: PrefKey("a", default: 0)) == 2)
    }

    @Test func aFoundationWriteDuringAWriteOfASuiteIsSeenWithNoLaterWrite() async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try SuiteFileStore(suiteName: "during", directory: directory.url)
        defer { store.close() }
        try store.set(1, for: PrefKey("a", default: 0))
        let counter = StoredValue(key: "b", default: 0, store: store)
        let stream = counter.values
        async let reached: Void = Self.streamReaches(stream, 7)
        var written: ChildProcess.Exit?
        var deferred = false
        try store.engine.update(forKey: "a") { old in
            written = try? ChildProcess.run(
                ["foundation-write", "during", "b", "7"], environment: ["XDG_CONFIG_HOME": directory.path])
            deferred = (try? Self.waitForDeferredEvent(store)) != nil
            return old
        }
        #expect(deferred)
        #expect(written?.lines == ["ok"], "\(String(describing: written))")
        try await reached
        #expect(try store.value(for: PrefKey("b", default: 0)) == 7)
        #expect(try store.value(for: PrefKey("a", default: 0)) == 1)
    }

    @Test(arguments: ["077", "022", "0"])
    func filesStay0600AndFoldersAreCreatedWhateverTheUmask(mask: String) throws {
        let directory = try TempDir(create: false)
        defer { directory.cleanup() }
        let path = directory.path("x/y/prefs.json")
        for round in 0..<2 {  // the folder created, then a file replaced in a folder that exists
            let result = try ChildProcess.run(["umask-write", "json:" + path, mask, "k\(round)"])
            #expect(result.lines == ["ok"], "umask \(mask): \(result)")
            let file = try FileManager.default.attributesOfItem(atPath: path)
            let folder = try FileManager.default.attributesOfItem(atPath: directory.path("x/y"))
            #expect((file[.posixPermissions] as? Int) == 0o600, "umask \(mask)")
            #expect((folder[.posixPermissions] as? Int) == 0o700, "umask \(mask)")
        }
        let store = try FileStore(url: URL(filePath: path))
        defer { store.close() }
        #expect(try store.allValues().count == 2)
        #expect(try directory.contents().sorted() == ["x"])
    }

    @Test func aFileInPlaceOfTheFolderIsAClearError() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        try Data("not a folder".utf8).write(to: directory.file("blocked"))
        #expect(throws: PrefsError.self) {
            let store = try FileStore(url: directory.file("blocked/prefs.json"))
            defer { store.close() }
            try store.set(1, for: PrefKey("a", default: 0))
        }
        #expect(try String(contentsOf: directory.file("blocked"), encoding: .utf8) == "not a folder")
    }

    /// A store in a folder that another process creates on its first write, and a store whose own file name looks
    /// like a temporary or lock file name, still see another process's write, and it sees theirs.
    @Test(arguments: ["not/yet/prefs.json", "settings.lock", ".settings.tmp-json", ".lock"])
    func aStoreSeesAnotherProcessWriteItsFile(name: String) async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let path = directory.path(name)
        let store = try FileStore(url: URL(filePath: path))
        defer { store.close() }
        let stream = StoredValue(key: "b", default: 0, store: store).values
        async let reached: Void = Self.streamReaches(stream, 9)
        let result = try ChildProcess.run(["set-int", "json:" + path, "b", "9"])
        #expect(result.lines == ["ok"], "\(result)")
        try await reached
        try store.set(4, for: PrefKey("a", default: 0))
        #expect(try ChildProcess.run(["get-int", "json:" + path, "a"]).lines == ["4"])
    }
}
