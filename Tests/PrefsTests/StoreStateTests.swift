import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

/// A store's decisions, without files: what `StoreState` returns is what `FileBackedStorage` (and `InMemoryStore`)
/// performs. A file that cannot be decoded, deferred writes, and the write in progress.
@Suite(.ownThreads)
struct StoreStateTests {
    private struct Broken: Error {}

    @Test func aSuiteIsSuspectForItsGracePeriodAndDamagedOnlyAfter() {
        var state = StoreState(values: ["a": .int(1)], grace: .milliseconds(500))
        let start: Duration = .seconds(1_000)
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
        var state = StoreState(values: ["a": .int(1)])
        #expect(state.failedToDecode(Broken(), at: .zero) == .damaged)
        #expect(state.damage != nil)
    }

    @Test func aReloadKeepsADeferredValueWhileTheFileHoldsWhatItReplacedAndTakesTheRest() {
        var state = StoreState(values: ["a": .int(1), "b": .int(1)])
        state.values["a"] = .int(2)
        state.deferred(["a"], before: ["a": .int(1)])
        // Another process wrote `b`: it is taken; the file still holds the `a` this process's change replaced.
        let changed = state.load(["a": .int(1), "b": .int(9)], identity: nil)
        #expect(state.values == ["a": .int(2), "b": .int(9)])
        #expect(changed == ["b"])
        #expect(state.fileValues == ["a": .int(1), "b": .int(9)])
    }

    @Test func aDeferredValueGivesWayToAnotherWritersLaterWriteOfItsKey() {
        var state = StoreState(values: ["a": .int(1)])
        state.values["a"] = .int(2)
        state.deferred(["a"], before: ["a": .int(1)])
        // Another process set `a` after this process deferred its change, and was told it is stored: its value wins.
        #expect(state.load(["a": .int(5)], identity: nil) == ["a"])
        #expect(state.values == ["a": .int(5)])
        #expect(state.pending.isEmpty)
        // The same for a removal, and for a key that was absent when it was deferred.
        state.values["a"] = .int(6)
        state.values["new"] = .int(1)
        state.deferred(["a", "new"], before: ["a": .int(5)])
        #expect(state.load(["new": .int(3)], identity: nil) == ["a", "new"])
        #expect(state.values == ["new": .int(3)])
        #expect(state.pending.isEmpty)
    }

    @Test func aKeyDeferredAgainKeepsItsFirstBaseAndAWriteCommitsEveryKey() {
        var state = StoreState(values: ["a": .int(1)])
        state.values["a"] = .int(2)
        state.deferred(["a"], before: ["a": .int(1)])
        state.values["a"] = .int(3)
        state.deferred(["a"], before: ["a": .int(2)])
        state.values["b"] = .int(1)
        state.deferred(["b"], before: [:])
        #expect(state.fileValues == ["a": .int(1)])
        state.committed()
        #expect(state.pending.isEmpty)
        // Nothing deferred any more: a reload takes the file's values of every key.
        _ = state.load(["b": .int(2)], identity: nil)
        #expect(state.values == ["b": .int(2)])
    }

    /// Foundation rewrites a suite in place but never removes it: a suite file that is gone was removed on purpose,
    /// so the guard against stale rewrites restores nothing (it used to write the recent values back, re-creating
    /// the folder someone had just deleted).
    @Test func aRemovedSuiteIsNotTakenForAStaleRewrite() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let guardian = ForeignRewriteGuard(path: directory.path("suite.plist"))
        guardian.recordCommit(from: ["k": .int(1)], to: ["k": .int(2)], changing: "k")
        #expect(guardian.restorations(in: [:], identity: nil).isEmpty)
        // Forgotten for good: the same stale value in a file Foundation wrote later is not restored either.
        try Data("<plist/>".utf8).write(to: URL(filePath: directory.path("suite.plist")))
        let identity = try #require(try LockedFile(url: URL(filePath: directory.path("suite.plist"))).identity())
        #expect(guardian.restorations(in: ["k": .int(1)], identity: identity).isEmpty)
        // While it is remembered, a stale value in a foreign file is restored, except for a key with a deferred change.
        guardian.recordCommit(from: ["k": .int(1)], to: ["k": .int(2)], changing: "k")
        #expect(guardian.restorations(in: ["k": .int(1)], identity: identity) == ["k": .int(2)])
        #expect(guardian.restorations(in: ["k": .int(1)], identity: identity, deferred: ["k"]).isEmpty)
        #expect(guardian.replaced(.int(1), forKey: "k") && !guardian.replaced(.int(3), forKey: "k"))
    }

    /// The watcher's event for this process's own rename is no news (it used to wait for the write's lock to learn
    /// that, and the next write then waited for it); any other file is, and so is one once memory has moved on.
    @Test func theFileThisProcessJustRenamedIsNoNewsToTheWatcher() {
        func identity(_ inode: UInt64) -> FileIdentity {
            FileIdentity(
                device: 1, inode: inode, size: 10, modificationSeconds: 0, modificationNanoseconds: 0,
                changeSeconds: 0, changeNanoseconds: 0)
        }
        var state = StoreState(values: ["k": .int(1)], identity: identity(1))
        #expect(!state.isNews(currentIdentity: identity(1)))
        #expect(state.isNews(currentIdentity: identity(2)))
        state.landing = identity(2)
        #expect(!state.isNews(currentIdentity: identity(2)))
        #expect(state.isNews(currentIdentity: identity(3)))
        #expect(state.isNews(currentIdentity: nil))
        state.take(["k": .int(2)], identity: identity(2))
        #expect(state.landing == nil)
        #expect(!state.isNews(currentIdentity: identity(2)))
        #expect(state.isNews(currentIdentity: identity(3)))
    }

    /// A suite's commits are remembered for the guard's window on the engine's clock, then forgotten: a stale value
    /// a foreign rewrite brings back after that is taken as Foundation's, not restored.
    @Test func aCommitIsRememberedForTheWindowOnTheEnginesClock() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        try Data("<plist/>".utf8).write(to: URL(filePath: directory.path("suite.plist")))
        let identity = try #require(try LockedFile(url: URL(filePath: directory.path("suite.plist"))).identity())
        let clock = ManualClock()
        let guardian = ForeignRewriteGuard(path: directory.path("suite.plist"))
        EngineClock.withClock(clock.engineClock) {
            guardian.recordCommit(from: ["k": .int(1)], to: ["k": .int(2)], changing: "k")
            clock.advance(by: ForeignRewriteGuard.window - .milliseconds(1))
            #expect(guardian.restorations(in: ["k": .int(1)], identity: identity) == ["k": .int(2)])
            clock.advance(by: .milliseconds(1))
            #expect(guardian.restorations(in: ["k": .int(1)], identity: identity).isEmpty)
            #expect(guardian.isIdle)
        }
    }

    @Test func onlyTheFirstWriteSweepsTemporaryFiles() {
        var state = StoreState()
        let first = state.takeSweep()
        let second = state.takeSweep()
        #expect(first && !second)
    }

    @Test func onlyTheOutermostWriteTakesTheFilesLock() {
        var state = StoreState()
        #expect(state.beginWrite() == .outermost)
        #expect(state.beginWrite() == .nested)
        let nestedEnd = state.endWrite()
        let outermostEnd = state.endWrite()
        #expect(!nestedEnd && !outermostEnd, "no event came")
        #expect(state.writerDepth == 0)
        #expect(state.beginWrite() == .outermost)
    }

    /// A watcher event during a write of this process is left to the write, which looks at the file again once,
    /// when its outermost level ends; with no write under way the watcher reloads as before.
    @Test func anEventDuringAWriteIsLookedAtAgainWhenTheWriteEnds() {
        var state = StoreState()
        let outside = state.deferEventToWrite()
        _ = state.beginWrite()
        _ = state.beginWrite()
        let during = [state.deferEventToWrite(), state.deferEventToWrite()]
        let ends = [state.endWrite(), state.endWrite()]
        _ = state.beginWrite()
        let next = state.endWrite()
        #expect(!outside, "no write under way: the watcher reloads itself")
        #expect(during == [true, true])
        #expect(ends == [false, true], "a nested write leaves it to the outermost")
        #expect(!next, "looked at once")
    }

    @Test func aBatchWritesWhatChangedAndNothingWhenNothingDid() {
        var state = StoreState(values: ["a": .int(1)])
        #expect(state.beginBatch() == .outermost(start: ["a": .int(1)]))
        #expect(state.inBatch)
        state.values["a"] = .int(1)
        #expect(state.endBatch() == .unchanged)
        #expect(!state.inBatch)

        _ = state.beginBatch()
        state.values["b"] = .int(2)
        #expect(state.endBatch() == .write(values: ["a": .int(1), "b": .int(2)], start: ["a": .int(1)]))
        #expect(!state.inBatch)
    }

    @Test func aNestedBatchThatThrowsUndoesOnlyItsOwnWrites() {
        var state = StoreState(values: ["a": .int(1)])
        let outer = state.beginBatch()
        state.values["a"] = .int(2)
        let inner = state.beginBatch()
        #expect(inner == .nested(start: ["a": .int(2)]))
        state.values["b"] = .int(3)
        #expect(state.abandonBatch(inner) == ["b"])
        #expect(state.values == ["a": .int(2)] && state.inBatch)
        // The outer batch throwing too ends the batch with the values it began with.
        #expect(state.abandonBatch(outer) == ["a"])
        #expect(state.values == ["a": .int(1)] && !state.inBatch)
    }

    @Test func aBatchWhoseWriteFailedRollsBackToItsStart() {
        var state = StoreState(values: ["a": .int(1)])
        _ = state.beginBatch()
        state.values["a"] = .int(2)
        guard case .write(_, let start) = state.endBatch() else {
            Issue.record("the batch changed a value")
            return
        }
        #expect(state.rollBack(to: start) == ["a"])
        #expect(state.values == ["a": .int(1)] && !state.inBatch)
    }
}
