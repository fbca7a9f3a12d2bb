import Foundation
import PrefsTestSupport
import Synchronization
import TestThreads
import Testing

@testable import Prefs

/// `try store.batch { … }`: many writes, one durable write of the file, one announcement per changed key.
@Suite(.ownThreads)
struct BatchTests {
    struct Failure: Error {}

    /// The file's inode and bytes: a different inode means the file was replaced (every write renames a new file).
    private func fileState(_ url: URL) throws -> (inode: UInt64, bytes: Data) {
        let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
        let inode = (attributes[.systemFileNumber] as? NSNumber)?.uint64Value ?? 0
        return (inode, try Data(contentsOf: url))
    }

    @Test(arguments: Backend.persistent)
    func aBatchWritesTheFileOnceWhenItEnds(_ backend: Backend) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try backend.open(in: directory)
        try store.setValue(.int(0), forKey: "seed")
        let url = try #require(backend.dataFile(in: directory))
        let before = try fileState(url)
        let a = StoredValue(key: "a", default: 0, store: store)

        try store.batch {
            for index in 1...10 { try store.setValue(.int(Int64(index)), forKey: "key-\(index)") }
            a.wrappedValue = 7
            // Reads inside see every write at once; the file is still the one from before the batch.
            #expect(a.wrappedValue == 7)
            #expect(try store.value(forKey: "key-10") == .int(10))
            let during = try fileState(url)
            #expect(during.inode == before.inode)
            #expect(during.bytes == before.bytes)
        }

        #expect(try fileState(url).inode != before.inode)
        // A fresh process reads every value of the batch from the file.
        for (key, value) in [("key-1", "1"), ("key-10", "10"), ("a", "7")] {
            let read = try ChildProcess.run(["get-int", backend.spec(in: directory), key])
            #expect(read.lines == [value])
        }
    }

    @Test(arguments: Backend.persistent)
    func aThrowingBatchLeavesFileAndMemoryUntouched(_ backend: Backend) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try backend.open(in: directory)
        try store.setValue(.int(1), forKey: "a")
        let url = try #require(backend.dataFile(in: directory))
        let before = try fileState(url)
        let a = StoredValue(key: "a", default: 0, store: store)
        let b = StoredValue(key: "b", default: 0, store: store)
        #expect(a.wrappedValue == 1)

        #expect(throws: Failure.self) {
            try store.batch {
                a.wrappedValue = 2
                b.wrappedValue = 3
                try store.setValue(.string("x"), forKey: "c")
                #expect(a.wrappedValue == 2)
                throw Failure()
            }
        }

        let after = try fileState(url)
        #expect(after.inode == before.inode)
        #expect(after.bytes == before.bytes)
        #expect(a.wrappedValue == 1)
        #expect(b.wrappedValue == 0)
        #expect(try store.value(forKey: "c") == nil)
        #expect(try store.allValues() == ["a": .int(1)])
    }

    @Test func aNestedBatchJoinsTheOuterOneAndUndoesOnlyItsOwnWritesWhenItThrows() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let url = directory.file("prefs.json")
        let store = try FileStore(url: url)
        try store.setValue(.int(0), forKey: "seed")
        let before = try fileState(url)

        try store.batch {
            try store.setValue(.int(1), forKey: "outer")
            try store.batch { try store.setValue(.int(2), forKey: "inner") }
            #expect(try fileState(url).bytes == before.bytes)
            #expect(throws: Failure.self) {
                try store.batch {
                    try store.setValue(.int(3), forKey: "undone")
                    try store.setValue(.int(4), forKey: "outer")
                    throw Failure()
                }
            }
            #expect(try store.value(forKey: "outer") == .int(1))
            #expect(try store.value(forKey: "undone") == nil)
        }

        let written = try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any]
        #expect(written?["outer"] as? Int == 1)
        #expect(written?["inner"] as? Int == 2)
        #expect(written?["undone"] == nil)
        #expect(try fileState(url).inode != before.inode)
    }

    @Test func wrapperHelpersInsideABatchAreWrittenTogether() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let url = directory.file("prefs.json")
        let store = try FileStore(url: url)
        let theme = StoredValue(key: "theme", default: Theme.light, store: store)
        let counter = StoredValue(key: "counter", default: 0, store: store)
        let tags = StoredValue(key: "tags", default: [String](), store: store)

        try store.batch {
            theme.wrappedValue = .dark
            counter.update { $0 += 2 }
            counter.update { $0 += 3 }
            tags.set(["a", "b"])
            #expect(counter.wrappedValue == 5)
            // The batch holds the file's lock (on a new file, created empty): nothing is in it yet.
            #expect((try? Data(contentsOf: url))?.isEmpty == true)
        }

        let reopened = try ChildProcess.run(["get-int", "json:" + url.path, "counter"])
        #expect(reopened.lines == ["5"])
        #expect(theme.wrappedValue == .dark)
        #expect(counter.wrappedValue == 5)
        #expect(tags.wrappedValue == ["a", "b"])
    }

    /// A batch holds the store's locks until it commits: a thread of this process waits for it, and another process
    /// finds the file locked by this one (given no time to wait, it gives up naming us and writes nothing). Both
    /// writes made after the batch are the ones that stay.
    @Test func writesFromOtherThreadsAndProcessesWaitForTheBatch() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let url = directory.file("prefs.json")
        let store = try FileStore(url: url)
        try store.setValue(.int(0), forKey: "thread")
        let threadDone = Atomic<Bool>(false)

        try store.batch {
            try store.setValue(.int(1), forKey: "thread")
            try store.setValue(.int(1), forKey: "process")
            Thread.detachNewThread {
                try? store.setValue(.int(2), forKey: "thread")
                threadDone.store(true, ordering: .sequentiallyConsistent)
            }
            let refused = try ChildProcess.run(
                ["set-int", "json:" + url.path, "process", "2"], environment: ["PREFS_TEST_LOCK_TIMEOUT_MS": "0"])
            #expect(refused.status != 0)
            #expect(refused.error.contains("held by process \(getpid())"), "\(refused)")
            // The thread cannot have written: the batch holds the store until it returns.
            let written = threadDone.load(ordering: .sequentiallyConsistent)
            #expect(!written)
        }

        let ended = try ChildProcess.run(["set-int", "json:" + url.path, "process", "2"])
        #expect(ended.status == 0, "\(ended)")
        try eventually("the thread's write to return") { threadDone.load(ordering: .sequentiallyConsistent) }
        // Both wrote after the batch's commit, so their values are the ones that stay.
        try eventually("the process's write to be seen") { (try? store.value(forKey: "process")) == .int(2) }
        #expect(try store.value(forKey: "thread") == .int(2))
    }

    @Test func aStoreOfTheAppsOwnGetsABatchAsOneWrite() throws {
        let store = MinimalStore()
        let a = PrefKey("a", default: 0)
        let result = try store.batch {
            try store.set(1, for: a)
            try store.setValue(.int(2), forKey: "b")
            #expect(try store.value(for: a) == 1, "Prefs' reads inside the batch see its writes")
            #expect(store.writes.withLock { $0.isEmpty }, "nothing written before the body returns")
            return 42
        }
        #expect(result == 42)
        #expect(store.writes.withLock { $0 } == [["a": .int(1), "b": .int(2)]])
    }
}
