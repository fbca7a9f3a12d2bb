import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

#if canImport(Glibc)
    import Glibc
#endif

/// The bounds the documents promise when the app sets none, on the engine's clock, which only the test moves: a
/// write gives up on a lock held elsewhere after 5 seconds, a deferring store commits 50 ms after its first change.
@Suite(.ownThreads) struct DefaultBoundTests {
    /// The values of a FileStore's JSON file, read without Prefs.
    private func jsonFile(_ url: URL) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
    }

    @Test func aWriteWaitsFiveSecondsForALockHeldElsewhereUnlessToldOtherwise() throws {
        #expect(PrefsConfig.lockTimeout == .seconds(5))
        let directory = try TempDir()
        defer { directory.cleanup() }
        let url = directory.file("held.json")
        let clock = ManualClock()
        let store = try FileStore(url: url, fileSystem: POSIXFileSystem(), clock: clock.engineClock)
        defer { store.close() }
        try store.setValue(.int(1), forKey: "k")
        // Another holder of the file's lock: an open file description of its own, as another process's is.
        let holder = open(url.path(percentEncoded: false), O_RDONLY | O_CLOEXEC)
        #expect(holder >= 0)
        defer { close(holder) }
        #expect(flock(holder, LOCK_EX) == 0)

        let error = #expect(throws: PrefsError.self) { try store.setValue(.int(2), forKey: "k") }
        guard case .lockTimedOut(_, _, let waited)? = error else {
            Issue.record("not a lock time-out: \(String(describing: error))")
            return
        }
        #expect(waited == .seconds(5))
        #expect(try store.value(forKey: "k") == .int(1))
        flock(holder, LOCK_UN)
        try store.setValue(.int(3), forKey: "k")
        #expect(try jsonFile(url)["k"] as? Int == 3)
    }

    @Test func aDeferringStoreCommitsFiftyMillisecondsAfterItsFirstChangeUnlessToldOtherwise() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let url = directory.file("window.json")
        let clock = ManualClock()
        let store = try FileStore(url: url, fileSystem: POSIXFileSystem(), clock: clock.engineClock)
        defer { store.close() }
        try store.setValue(.int(0), forKey: "volume")
        let quick = store.deferringWrites()
        try quick.setValue(.int(1), forKey: "volume")
        clock.advance(by: .milliseconds(30))
        try quick.setValue(.int(2), forKey: "volume")
        clock.advance(by: .milliseconds(19))
        #expect(try jsonFile(url)["volume"] as? Int == 0, "not in the file 49 ms after the first change")
        clock.advance(by: .milliseconds(1))
        #expect(try jsonFile(url)["volume"] as? Int == 2, "in the file when the window ends")
    }
}
