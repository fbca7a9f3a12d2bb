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
        var state = StoreState(values: ["a": .int(1)])
        #expect(state.failedToDecode(Broken(), at: .now) == .damaged)
        #expect(state.damage != nil)
    }

    @Test func aReloadKeepsTheValuesOfDeferredKeysAndTakesTheRest() {
        var state = StoreState(values: ["a": .int(1), "b": .int(1)])
        state.values["a"] = .int(2)
        state.deferred(["a"])
        // Another process wrote both keys: its `b` is taken, this process's uncommitted `a` stays.
        let changed = state.load(["a": .int(9), "b": .int(9)], identity: nil)
        #expect(state.values == ["a": .int(2), "b": .int(9)])
        #expect(changed == ["b"])
        // Removed by the other process: a deferred key still keeps its value.
        _ = state.load([:], identity: nil)
        #expect(state.values == ["a": .int(2)])
    }

    @Test func aCommitForgetsOnlyTheChangesItTookAndADurableWriteForgetsAll() {
        var state = StoreState()
        state.deferred(["a"])
        let taken = state.sequence
        state.deferred(["b"])  // after the commit took its values
        state.committed(through: taken)
        #expect(Set(state.pending.keys) == ["b"])
        state.deferred(["a"])
        state.committed(through: nil)
        #expect(state.pending.isEmpty)
        // Nothing deferred any more: a reload takes the file's values of every key.
        state.values = ["b": .int(1)]
        _ = state.load(["b": .int(2)], identity: nil)
        #expect(state.values == ["b": .int(2)])
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
        state.endWrite()
        state.endWrite()
        #expect(state.writerDepth == 0)
        #expect(state.beginWrite() == .outermost)
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
