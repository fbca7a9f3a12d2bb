import EngineTestSupport
import Foundation
import Observation
import PrefsTestSupport
import Synchronization
import TestThreads
import Testing

@testable import Prefs

/// `store.deferringWrites()`: writes that return at once, are seen at once in this process and reach the file
/// within the window, in one write per window; `flush()` and a normal exit make them durable.
@Suite(.ownThreads) struct DeferredWriteTests {
    /// So long that only a flush, an exit or a durable write commits during a test.
    static let hour: Duration = .seconds(3600)

    /// The values of a FileStore's JSON file, read without Prefs.
    private func jsonFile(_ url: URL) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
    }

    @Test(arguments: Backend.persistent)
    func aDeferredSetIsSeenAtOnceInThisProcessAndIsInTheFileAfterFlush(_ backend: Backend) async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let durable = try backend.seededStore(in: directory)
        let url = try #require(backend.dataFile(in: directory))
        let before = try Data(contentsOf: url)
        let quick = durable.deferringWrites(window: Self.hour)
        let viaQuick = StoredValue(key: "volume", default: 0, store: quick)
        let viaDurable = StoredValue(key: "volume", default: 0, store: durable)
        var values = viaDurable.values.makeAsyncIterator()
        #expect(await values.next() == 0)

        viaQuick.set(7)

        // Every reader and observer in this process sees it when `set` returns; the file does not have it yet.
        #expect(viaDurable.wrappedValue == 7)
        #expect(try durable.value(forKey: "volume") == .int(7))
        #expect(await values.next() == 7)
        #expect(try Data(contentsOf: url) == before)
        #expect(try backend.intReadByAnotherProcess("volume", in: directory) == ["0"])

        try await quick.flush()
        #expect(try backend.intReadByAnotherProcess("volume", in: directory) == ["7"])
        #expect(try backend.intReadByAnotherProcess("seed", in: directory) == ["1"], "a commit keeps the other values")
    }

    /// The tour's and the README's example, in a suite of a temporary folder.
    @Test func theFrequentWritesExampleWorksAsWritten() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let settings = try SuiteFileStore(suiteName: "com.example.app", directory: directory.url)
        let quick = settings.deferringWrites()
        let volume = StoredValue(key: "volume", default: 0.5, store: quick)
        let sameKey = StoredValue(key: "volume", default: 0.5, store: settings)
        let tracked = Mutex(false)
        withObservationTracking {
            _ = sameKey.wrappedValue
        } onChange: {
            tracked.withLock { $0 = true }
        }

        volume.set(0.7)

        #expect(sameKey.wrappedValue == 0.7)
        #expect(tracked.withLock { $0 }, "Observation hears of a deferred write")
        try volume.store.flush()
        let plist = try Data(contentsOf: directory.file("com.example.app.plist"))
        let values = try PropertyListSerialization.propertyList(from: plist, format: nil) as? [String: Any]
        #expect(values?["volume"] as? Double == 0.7)
    }

    @Test func anAsyncFlushReturnsOnceTheChangeIsInTheFile() async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let quick = try Backend.userDefaults.seededStore(in: directory).deferringWrites(window: Self.hour)
        try quick.set(42, for: PrefKey("answer", default: 0))
        try await quick.flush()
        #expect(try Backend.userDefaults.intReadByAnotherProcess("answer", in: directory) == ["42"])
    }

    @Test(.timeLimit(.minutes(5)))
    func anotherProcessSeesADeferredChangeOnceItIsCommittedWithoutAFlush() async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let quick = try Backend.file.seededStore(in: directory).deferringWrites()  // the default window
        let watcher = try ChildProcess.start(["watch", Backend.file.spec(in: directory), "level", "2"])
        defer { watcher.kill() }
        var lines = watcher.lines().makeAsyncIterator()
        #expect(await lines.next() == "ready")
        #expect(await lines.next() == "0")

        StoredValue(key: "level", default: 0, store: quick).set(5)

        // Nothing but the background commit writes the file; the other process is told by inotify.
        #expect(await lines.next() == "5")
    }

    @Test func changesWithinOneWindowShareOneFileWrite() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let clock = ManualClock()
        let window: Duration = .milliseconds(100)
        let url = try #require(Backend.file.dataFile(in: directory))
        let durable = try FileStore(url: url, fileSystem: POSIXFileSystem(), clock: clock.engineClock)
        try durable.setValue(.int(1), forKey: "seed")
        let writes = try FileReplacements(of: url)
        let sets = 30
        let quick = durable.deferringWrites(window: window)
        let slider = StoredValue(key: "slider", default: 0.0, store: quick)
        for frame in 1...sets {
            slider.set(Double(frame) / 100)
            clock.advance(by: .microseconds(16_667))  // 60 Hz, the pace of a slider
        }
        // 30 frames are 500 ms: five windows, each ending in one commit of what it gathered.
        #expect(writes.count() == 5)
        #expect(try jsonFile(url)["slider"] as? Double == Double(sets) / 100)
        try quick.flush()
        #expect(writes.count() == 5, "nothing was left for the flush")
        #expect(clock.pendingTimers == 0)
    }

    @Test func aBatchIsOneCommitAndAThrowingBatchIsNone() throws {
        struct Failure: Error {}
        let directory = try TempDir()
        defer { directory.cleanup() }
        let quick = try Backend.file.seededStore(in: directory).deferringWrites(window: Self.hour)
        let url = try #require(Backend.file.dataFile(in: directory))
        let writes = try FileReplacements(of: url)
        let values = (0..<10).map { StoredValue(key: "key-\($0)", default: 0, store: quick) }

        try quick.batch {
            for (index, value) in values.enumerated() { value.set(index + 1) }
            try quick.removeValue(forKey: "seed")
            #expect(values[9].wrappedValue == 10)
        }
        #expect(values.map(\.wrappedValue) == Array(1...10))
        #expect(writes.count() == 0)
        try quick.flush()
        #expect(writes.count() == 1)
        #expect(try Backend.file.intReadByAnotherProcess("key-9", in: directory) == ["10"])
        #expect(try Backend.file.intReadByAnotherProcess("seed", in: directory) == ["0"])

        #expect(throws: Failure.self) {
            try quick.batch {
                values[0].set(100)
                throw Failure()
            }
        }
        #expect(values[0].wrappedValue == 1)
        try quick.flush()
        #expect(writes.count() == 1, "a batch that threw leaves nothing to commit")
    }

    @Test func aReadModifyWriteIsDurableAndTakesDeferredChangesAlong() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let quick = try Backend.file.seededStore(in: directory).deferringWrites(window: Self.hour)
        let url = try #require(Backend.file.dataFile(in: directory))
        StoredValue(key: "volume", default: 0, store: quick).set(3)
        let tags = StoredValue(key: "tags", default: [String](), store: quick)

        tags.append("swift")

        // In the file when `append` returns, with the deferred change made before it.
        let file = try jsonFile(url)
        #expect(file["volume"] as? Int == 3)
        #expect(file["tags"] as? [String] == ["swift"])
        let writes = try FileReplacements(of: url)
        try quick.flush()
        #expect(writes.count() == 0, "nothing was left to commit")
    }

    @Test(arguments: [Backend.file, .userDefaults])
    func readModifyWriteHelpersStayAtomicAcrossProcesses(_ backend: Backend) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let spec = backend.spec(in: directory)
        let count = 60
        let children = try ["a", "b"].map { try ChildProcess.start(["deferred-mix", spec, $0, String(count)]) }
        for child in children {
            let ended = child.wait()
            #expect(ended.status == 0, "\(ended)")
        }
        let store = try backend.open(in: directory)
        let list = try store.value(for: PrefKey("list", default: [String]()))
        #expect(list.count == 2 * count)
        #expect(Set(list).count == 2 * count)
        #expect(try store.value(for: PrefKey("last-a", default: -1)) == count - 1)
        #expect(try store.value(for: PrefKey("last-b", default: -1)) == count - 1)
    }

    @Test(.timeLimit(.minutes(5)))
    func anotherProcessesWriteDoesNotTakeBackAChangeNotYetCommitted() async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let durable = try Backend.file.seededStore(in: directory)
        let quick = durable.deferringWrites(window: Self.hour)
        let mine = StoredValue(key: "mine", default: 0, store: quick)
        let theirs = StoredValue(key: "theirs", default: 0, store: durable)
        let changes = theirs.values
        mine.set(1)

        let other = try ChildProcess.run(["set-int", Backend.file.spec(in: directory), "theirs", "5"])
        #expect(other.status == 0)
        try await waitUntil(changes) { $0 == 5 }

        #expect(mine.wrappedValue == 1)
        try await quick.flush()
        #expect(try Backend.file.intReadByAnotherProcess("mine", in: directory) == ["1"])
        #expect(try Backend.file.intReadByAnotherProcess("theirs", in: directory) == ["5"])
    }

    /// A deferred change is not yet in the file; another process that sets the same key afterwards is told its
    /// write is stored. That later, acknowledged write is what the file keeps and what this process ends on: the
    /// older deferred change gives way instead of overwriting it at the next commit.
    @Test(arguments: Backend.persistent)
    func aDeferredChangeGivesWayToALaterWriteOfItsKeyByAnotherProcess(_ backend: Backend) async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let durable = try backend.seededStore(in: directory)
        let quick = durable.deferringWrites(window: Self.hour)
        let key = StoredValue(key: "k", default: 0, store: quick)
        let seen = key.values
        key.set(1)  // deferred: in memory only

        let other = try ChildProcess.run(["set-int", backend.spec(in: directory), "k", "2"])
        #expect(other.status == 0, "\(other.error)")
        try await quick.flush()  // reads the file first, whether or not the watcher has yet
        #expect(try backend.intReadByAnotherProcess("k", in: directory) == ["2"])
        #expect(key.wrappedValue == 2)
        // Observers heard 1 (this process's change), then 2, and end on 2.
        #expect(try await first(3, of: seen) == [0, 1, 2])
        // Another key deferred beside it is still committed.
        key.set(3)
        try await quick.flush()
        #expect(try backend.intReadByAnotherProcess("k", in: directory) == ["3"])
    }

    /// Closed is closed: a deferred store whose base was closed, or which was closed itself, refuses writes and
    /// flushes with `storeClosed`, and nothing reaches its folder afterwards.
    @Test func aClosedDeferredStoreThrowsAndNeverTouchesItsFolderAgain() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let folder = directory.url.appending(path: "app")
        let durable = try FileStore(url: folder.appending(path: "store.json"))
        try durable.setValue(.int(1), forKey: "seed")
        let quick = durable.deferringWrites(window: .milliseconds(5)) as! FileBackedStore
        quick.close()
        durable.close()
        try FileManager.default.removeItem(at: folder)

        func isClosed(_ error: any Error) -> Bool {
            if case .storeClosed? = error as? PrefsError { return true }
            return false
        }
        #expect(performing: { try quick.setValue(.int(2), forKey: "k") }, throws: isClosed)
        #expect(performing: { try quick.flush() }, throws: isClosed)
        #expect(performing: { try quick.batch { try quick.setValue(.int(3), forKey: "k") } }, throws: isClosed)
        // A deferred view made from a closed store is closed too.
        let late = durable.deferringWrites(window: .milliseconds(5))
        #expect(performing: { try late.setValue(.int(4), forKey: "k") }, throws: isClosed)
        #expect(performing: { try late.flush() }, throws: isClosed)
        // Nothing was accepted, so nothing is left to commit: the folder stays gone. (The exit flush is not called
        // here: it would commit the deferred writes of every other test running in this process.)
        #expect(!FileManager.default.fileExists(atPath: folder.path))
    }

    @Test func aDurableWriteCommitsTheDeferredChangesBeforeIt() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let durable = try Backend.file.seededStore(in: directory)
        let quick = durable.deferringWrites(window: Self.hour)
        try quick.setValue(.int(1), forKey: "first")
        try durable.setValue(.int(2), forKey: "second")
        #expect(try Backend.file.intReadByAnotherProcess("first", in: directory) == ["1"])
        #expect(try Backend.file.intReadByAnotherProcess("second", in: directory) == ["2"])
    }

    @Test(arguments: Backend.persistent)
    func aNormalExitFlushesAndAKillLosesWhatWasNotCommitted(_ backend: Backend) async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let spec = backend.spec(in: directory)
        let exited = try ChildProcess.run(["deferred-set-exit", spec, "n", "11"])
        #expect(exited.status == 0, "\(exited.error)")
        #expect(exited.lines == ["set"])
        #expect(try backend.intReadByAnotherProcess("n", in: directory) == ["11"])

        let killed = try ChildProcess.start(["deferred-set-hang", spec, "n", "12"])
        var lines = killed.lines().makeAsyncIterator()
        #expect(await lines.next() == "set")
        killed.kill()
        #expect(try backend.intReadByAnotherProcess("n", in: directory) == ["11"], "the change was still in the window")
    }

    @Test func releasingTheLastReferenceToTheStoreFlushes() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        do {
            let quick = try FileStore(url: directory.file("prefs.json")).deferringWrites(window: Self.hour)
            StoredValue(key: "n", default: 0, store: quick).set(8)
        }
        #expect(try Backend.file.intReadByAnotherProcess("n", in: directory) == ["8"])
    }

    @Test func aFailedCommitIsReportedOnceKeepsTheValueAndIsTriedAgain() throws {
        Reports.install()
        let directory = try TempDir()
        defer { directory.cleanup() }
        let clock = ManualClock()
        let key = uniqueKey("volume")
        // An engine that hears of no change by itself: only its commits meet the file.
        let url = directory.file("prefs.json")
        let store = try FileStore(url: url, fileSystem: SteppingFileSystem(watching: false), clock: clock.engineClock)
        let quick = store.deferringWrites(window: Self.hour)
        // A folder where the file goes: every commit fails before it writes anything.
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: false)
        let volume = StoredValue(key: key, default: 0, store: quick)

        volume.set(1)
        #expect(throws: PrefsError.self) { try quick.flush() }
        volume.set(2)
        #expect(throws: PrefsError.self) { try quick.flush() }
        #expect(throws: PrefsError.self) { try quick.flush() }

        #expect(Reports.for(key).count == 1)
        #expect(Reports.for(key).first?.operation == .write)
        #expect(volume.wrappedValue == 2)
        #expect(try FileManager.default.contentsOfDirectory(atPath: url.path).isEmpty)

        // Once the obstacle is gone, the retry scheduled after the failure commits without anyone asking.
        try FileManager.default.removeItem(at: url)
        clock.advance(by: StoreEngine.retryDelay)
        #expect(FileManager.default.fileExists(atPath: url.path))
        #expect(try Backend.file.intReadByAnotherProcess(key, in: directory) == ["2"])
        #expect(Reports.for(key).count == 1)
    }

    @Test func aFlushInsideABatchOfTheSameStoreThrowsInsteadOfWaitingForItself() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let quick = try Backend.file.seededStore(in: directory).deferringWrites(window: Self.hour)
        try quick.setValue(.int(1), forKey: "before")
        try quick.batch {
            try quick.setValue(.int(2), forKey: "inside")
            #expect(throws: PrefsError.self) { try quick.flush() }
        }
        try quick.flush()
        #expect(try Backend.file.intReadByAnotherProcess("before", in: directory) == ["1"])
        #expect(try Backend.file.intReadByAnotherProcess("inside", in: directory) == ["2"])
    }

    @Test func aFileThatCannotBeReadRefusesDeferredWritesAndIsLeftUntouched() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let url = directory.file("domain.plist")
        let damaged = Data("not a property list".utf8)
        try damaged.write(to: url)
        let (store, error) = SuiteFileStore.openDomain(url: url)
        #expect(error != nil)
        let quick = store.deferringWrites(window: Self.hour)

        #expect(throws: PrefsError.self) { try quick.setValue(.int(1), forKey: "k") }
        try quick.flush()
        #expect(try Data(contentsOf: url) == damaged)
    }
}
