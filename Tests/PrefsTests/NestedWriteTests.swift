import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

/// Writes made through a store from inside its own transform: the write around them decides its commit from the
/// state as they left it, so neither is lost and the transform runs once.
@Suite(.ownThreads) struct NestedWriteTests {
    @Test(arguments: Backend.persistent)
    func aTransformThatWritesThroughItsStoreRunsOnceAndBothWritesReachTheFile(_ backend: Backend) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try backend.seededStore(in: directory)
        var runs = 0

        try store.updateValue(forKey: "outer") { _ in
            runs += 1
            try store.setValue(.int(7), forKey: "inner")
            return .int(3)
        }

        #expect(runs == 1, "the transform ran again: its write's commit was taken for another writer's")
        #expect(try store.value(forKey: "inner") == .int(7))
        #expect(try store.value(forKey: "outer") == .int(3))
        #expect(try backend.intReadByAnotherProcess("inner", in: directory) == ["7"])
        #expect(try backend.intReadByAnotherProcess("outer", in: directory) == ["3"])
        #expect(try backend.intReadByAnotherProcess("seed", in: directory) == ["1"])
    }

    @Test(arguments: Backend.persistent)
    func aDeferredSetInsideATransformOutlivesTheCommitAroundIt(_ backend: Backend) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try backend.seededStore(in: directory)
        let quick = store.deferringWrites(window: .seconds(3600))

        try store.updateValue(forKey: "outer") { _ in
            try quick.setValue(.int(7), forKey: "inner")
            return .int(3)
        }

        #expect(try store.value(forKey: "inner") == .int(7), "the commit of the update undid the deferred set")
        #expect(try backend.intReadByAnotherProcess("outer", in: directory) == ["3"])
        try quick.flush()
        #expect(try backend.intReadByAnotherProcess("inner", in: directory) == ["7"])
    }

    struct Refused: Error {}

    /// A store with no file yet: the update's lock creates an empty one, the transform's `set` commits in its place,
    /// and the update itself then writes nothing (its value is unchanged, or its transform throws). What the `set`
    /// committed stays in the file.
    @Test(arguments: Backend.persistent, [false, true])
    func aSetInsideATransformThatWritesNothingStaysInTheFile(_ backend: Backend, transformThrows: Bool) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try #require(try backend.open(in: directory) as? FileBackedStore)
        let file = try #require(backend.dataFile(in: directory))

        let update = {
            try store.updateValue(forKey: "outer") { old in
                try store.setValue(.int(7), forKey: "inner")
                if transformThrows { throw Refused() }
                return old
            }
        }
        if transformThrows {
            #expect(throws: Refused.self) { try update() }
        } else {
            _ = try update()
        }

        #expect(try store.value(forKey: "inner") == .int(7))
        #expect(FileManager.default.fileExists(atPath: file.path), "the file the set committed was removed")
        #expect(try backend.intReadByAnotherProcess("inner", in: directory) == ["7"])
    }

    /// The last `close()` made inside a transform: the update is refused, and nothing of it reaches the file.
    @Test(arguments: Backend.persistent)
    func aStoreClosedInsideATransformWritesNothingMore(_ backend: Backend) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try backend.seededStore(in: directory)

        #expect(throws: PrefsError.self) {
            _ = try store.updateValue(forKey: "outer") { _ in
                store.close()
                return .int(3)
            }
        }

        #expect(try backend.intReadByAnotherProcess("outer", in: directory) == ["0"])
        #expect(try backend.intReadByAnotherProcess("seed", in: directory) == ["1"])
    }

    @Test func aBatchInsideATransformIsCommittedWithIt() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try Backend.userDefaults.seededStore(in: directory)

        try store.updateValue(forKey: "outer") { _ in
            try store.batch {
                try store.setValue(.int(7), forKey: "a")
                try store.setValue(.int(8), forKey: "b")
            }
            return .int(3)
        }

        #expect(try store.allValues() == ["seed": .int(1), "a": .int(7), "b": .int(8), "outer": .int(3)])
        #expect(try Backend.userDefaults.intReadByAnotherProcess("a", in: directory) == ["7"])
        #expect(try Backend.userDefaults.intReadByAnotherProcess("b", in: directory) == ["8"])
        #expect(try Backend.userDefaults.intReadByAnotherProcess("outer", in: directory) == ["3"])
    }
}
