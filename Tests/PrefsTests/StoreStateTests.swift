import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

/// A store's decisions, without files: what `StoreState` and `CommitRecord` return is what `StoreEngine` performs.
/// A file that cannot be decoded, deferred changes and the record that tells them apart from later writes, values a
/// stale rewrite put back, batches and the store's lifetime.
@Suite(.ownThreads)
struct StoreStateTests {
    private struct Broken: Error {}
    private static let hash: @Sendable (String) -> UInt64 = { StableHash.of($0.utf8) }
    private static let now: Duration = .seconds(10_000)

    /// A file state holding `values`, loaded from an intact file with `record`.
    private static func loaded(
        _ values: [String: PrefValue], record: CommitRecord? = nil, restoring: Bool = false
    ) -> StoreState {
        var state = StoreState(file: restoring ? .milliseconds(500) : .zero, restoresStaleRewrites: restoring)
        _ = state.load(values, identity: nil, record: record, intact: record != nil, now: now, keyHash: hash)
        return state
    }

    /// The record of a commit changing `changes` on top of `record`.
    private static func committing(
        _ changes: [String: (old: PrefValue?, new: PrefValue?)], on record: CommitRecord, at time: Duration = now,
        keepsRecent: Bool = true
    ) -> CommitRecord {
        record.next(
            changing: changes.map { (key: hash($0.key), old: $0.value.old.recordHash, new: $0.value.new.recordHash) },
            intact: true, keepsRecent: keepsRecent, now: time)
    }

    // MARK: A file that cannot be decoded

    @Test func aSuiteIsSuspectForItsGracePeriodAndDamagedOnlyAfter() {
        var state = Self.loaded(["a": .int(1)], restoring: true)
        let start: Duration = .seconds(1_000)
        let first = state.failedToDecode(Broken(), at: start)
        #expect(first == .suspect(recheck: .milliseconds(500), scheduleRecheck: true))
        #expect(state.values == ["a": .int(1)] && state.damage == nil && state.isSuspect)
        let second = state.failedToDecode(Broken(), at: start + .milliseconds(200))
        #expect(second == .suspect(recheck: .milliseconds(300), scheduleRecheck: false))
        let third = state.failedToDecode(Broken(), at: start + .milliseconds(500))
        #expect(third == .damaged)
        #expect(state.damage != nil && !state.isSuspect && state.values == ["a": .int(1)])
        #expect(state.refresh(currentIdentity: nil) == .cleared, "a damaged store looks again")
        _ = state.load(["a": .int(2)], identity: nil, record: nil, intact: true, now: Self.now, keyHash: Self.hash)
        #expect(state.damage == nil && !state.isSuspect && state.values == ["a": .int(2)])
    }

    @Test func aFileOnlyPrefsWritesIsDamagedAtOnceAndSoIsAnyFileWithoutGrace() {
        var state = Self.loaded(["a": .int(1)])
        let verdict = state.failedToDecode(Broken(), at: .zero)
        #expect(verdict == .damaged)
        var suite = Self.loaded(["a": .int(1)], restoring: true)
        let atOnce = suite.failedToDecode(Broken(), at: .zero, graceful: false)
        #expect(atOnce == .damaged)
    }

    // MARK: Deferred changes

    @Test func aDeferredValueStaysWhileTheFileHoldsWhatItReplacedAndTheRestIsTaken() {
        var state = Self.loaded(["a": .int(1), "b": .int(1)])
        let changedInMemory = state.setInMemory(.int(2), forKey: "a", reason: .deferred)
        #expect(changedInMemory)
        // Another writer wrote `b` (no record: the values are compared); the file still holds the `a` it replaced.
        let changed = state.load(
            ["a": .int(1), "b": .int(9)], identity: nil, record: nil, intact: false, now: Self.now, keyHash: Self.hash)
        #expect(changed == ["b"])
        #expect(state.values == ["a": .int(2), "b": .int(9)])
        #expect(state.fileValues == ["a": .int(1), "b": .int(9)])
        #expect(state.hasDeferredChanges)
    }

    @Test func aDeferredValueGivesWayToAnotherWritersLaterValue() {
        var state = Self.loaded(["a": .int(1)])
        _ = state.setInMemory(.int(2), forKey: "a", reason: .deferred)
        _ = state.setInMemory(.int(1), forKey: "new", reason: .deferred)
        let changed = state.load(
            ["a": .int(5), "new": .int(3)], identity: nil, record: nil, intact: false, now: Self.now,
            keyHash: Self.hash)
        #expect(changed == ["a", "new"])
        #expect(state.values == ["a": .int(5), "new": .int(3)])
        #expect(!state.hasDeferredChanges)
    }

    /// The record says whether the key changed since the commit the change was deferred on, even when the file
    /// holds the very value it replaced (ABA), and that a key nobody wrote did not change, whatever else did.
    @Test func theRecordTellsALaterWriteThatPutTheOldValueBackFromNoWriteAtAll() {
        let first = CommitRecord(lineage: 7).next(changing: [], intact: true, keepsRecent: false, now: Self.now)
        var state = Self.loaded(["k": .int(0), "x": .int(0)], record: first)
        _ = state.setInMemory(.int(1), forKey: "k", reason: .deferred)
        _ = state.setInMemory(.int(1), forKey: "x", reason: .deferred)
        // Another process: k = 2, then k = 0 again; y written. x untouched.
        let second = Self.committing(["k": (.int(0), .int(2)), "y": (nil, .int(1))], on: first)
        let third = Self.committing(["k": (.int(2), .int(0))], on: second)
        let changed = state.load(
            ["k": .int(0), "x": .int(0), "y": .int(1)], identity: nil, record: third, intact: true, now: Self.now,
            keyHash: Self.hash)
        #expect(state.values == ["k": .int(0), "x": .int(1), "y": .int(1)], "k gave way, x stands")
        #expect(changed == ["k", "y"])
        #expect(state.unwritten(.deferred) == ["x"])
        // x's change is now based on the third commit: a later record that drops older keys still tells.
        var crowded = third
        for index in 0..<100 {
            crowded = Self.committing(["z\(index)": (nil, .int(1))], on: crowded, keepsRecent: false)
        }
        #expect(crowded.changed(Self.hash("x"), since: third.generation) == false)
        #expect(crowded.changed(Self.hash("k"), since: first.generation) == true)
        for index in 100..<1_000 {
            crowded = Self.committing(["z\(index)": (nil, .int(1))], on: crowded, keepsRecent: false)
        }
        #expect(crowded.changed(Self.hash("x"), since: third.generation) == nil, "evicted history: cannot tell")
    }

    /// Without a record that can tell (none, another lineage, a file rewritten since), values are compared.
    @Test func withoutARecordThatCanTellValuesAreCompared() {
        let first = CommitRecord(lineage: 7).next(changing: [], intact: true, keepsRecent: false, now: Self.now)
        var state = Self.loaded(["k": .int(0)], record: first)
        _ = state.setInMemory(.int(1), forKey: "k", reason: .deferred)
        let other = CommitRecord(lineage: 8).next(
            changing: [(Self.hash("k"), 0, 0)], intact: true, keepsRecent: false, now: Self.now)
        _ = state.load(["k": .int(0)], identity: nil, record: other, intact: true, now: Self.now, keyHash: Self.hash)
        #expect(state.values["k"] == .int(1), "another lineage: the values say unchanged")
    }

    @Test func aKeyDeferredAgainKeepsItsFirstBaseAndACommitWritesEveryKey() {
        var state = Self.loaded(["a": .int(1)])
        _ = state.setInMemory(.int(2), forKey: "a", reason: .deferred)
        _ = state.setInMemory(.int(3), forKey: "a", reason: .deferred)
        _ = state.setInMemory(.int(1), forKey: "b", reason: .deferred)
        #expect(state.fileValues == ["a": .int(1)])
        let unchanged = !state.setInMemory(.int(3), forKey: "a", reason: .deferred)
        #expect(unchanged, "no change")
        _ = state.committed(state.values, identity: nil, record: nil)
        #expect(!state.needsWrite)
        _ = state.load(["b": .int(2)], identity: nil, record: nil, intact: false, now: Self.now, keyHash: Self.hash)
        #expect(state.values == ["b": .int(2)])
    }

    // MARK: Stale rewrites of a suite

    /// A record after `a` was set 1, 2, 3 by Prefs commits.
    private static var threeCommits: CommitRecord {
        var record = CommitRecord(lineage: 3)
        record = committing(["a": (nil, .int(1))], on: record)
        record = committing(["a": (.int(1), .int(2))], on: record)
        return committing(["a": (.int(2), .int(3))], on: record)
    }

    @Test func aValueTheLatestCommitReplacedIsRestoredFromWhatThisProcessKnows() {
        var state = Self.loaded(["a": .int(3)], record: Self.threeCommits, restoring: true)
        _ = state.load(
            ["a": .int(1), "f": .int(9)], identity: nil, record: Self.threeCommits, intact: false, now: Self.now,
            keyHash: Self.hash)
        #expect(state.values == ["a": .int(3), "f": .int(9)])
        #expect(state.hasRestoredValues && state.fileValues["a"] == .int(1))
        // A second stale rewrite before the restoring write: still restored, from the value restored.
        _ = state.load(
            ["a": .int(2)], identity: nil, record: Self.threeCommits, intact: false, now: Self.now, keyHash: Self.hash)
        #expect(state.values == ["a": .int(3)])
    }

    @Test func aProcessThatMissedTheLatestCommitRestoresItFromTheCommittersCopyOrNotAtAll() {
        var record = Self.threeCommits
        record = Self.committing(["a": (.int(3), .int(4))], on: record)  // another process's commit, missed here
        var state = Self.loaded(["a": .int(3)], record: Self.threeCommits, restoring: true)
        _ = state.load(
            ["a": .int(2)], identity: nil, record: record, intact: false, now: Self.now, keyHash: Self.hash,
            lastCommit: ["a": .int(4)])
        #expect(state.values == ["a": .int(4)], "restored to the later commit, not this process's 3")
        var without = Self.loaded(["a": .int(3)], record: Self.threeCommits, restoring: true)
        _ = without.load(
            ["a": .int(2)], identity: nil, record: record, intact: false, now: Self.now, keyHash: Self.hash)
        #expect(without.values == ["a": .int(2)] && !without.hasRestoredValues, "never its own older 3")
    }

    @Test func aNewValueAnOldRecordOrAnIntactFileIsNotAStaleRewrite() {
        var state = Self.loaded(["a": .int(3)], record: Self.threeCommits, restoring: true)
        _ = state.load(
            ["a": .int(7)], identity: nil, record: Self.threeCommits, intact: false, now: Self.now, keyHash: Self.hash)
        #expect(state.values == ["a": .int(7)], "a value it never had")
        var late = Self.loaded(["a": .int(3)], record: Self.threeCommits, restoring: true)
        _ = late.load(
            ["a": .int(1)], identity: nil, record: Self.threeCommits, intact: false,
            now: Self.now + CommitRecord.restoreWindow, keyHash: Self.hash)
        #expect(late.values == ["a": .int(1)], "beyond the window")
        var intact = Self.loaded(["a": .int(3)], record: Self.threeCommits, restoring: true)
        _ = intact.load(
            ["a": .int(1)], identity: nil, record: Self.threeCommits, intact: true, now: Self.now, keyHash: Self.hash)
        #expect(intact.values == ["a": .int(1)], "a Prefs commit set it so")
        var fileStore = Self.loaded(["a": .int(3)], record: Self.threeCommits)
        _ = fileStore.load(
            ["a": .int(1)], identity: nil, record: Self.threeCommits, intact: false, now: Self.now, keyHash: Self.hash)
        #expect(fileStore.values == ["a": .int(1)], "only suites restore")
    }

    /// A deferred change is no write of a stale copy: it stands over a key a rewrite put back.
    @Test func aDeferredChangeStandsOverAStaleRewriteOfItsKey() {
        var state = Self.loaded(["a": .int(3)], record: Self.threeCommits, restoring: true)
        _ = state.setInMemory(.int(10), forKey: "a", reason: .deferred)
        _ = state.load(
            ["a": .int(1)], identity: nil, record: Self.threeCommits, intact: false, now: Self.now, keyHash: Self.hash)
        #expect(state.values == ["a": .int(10)] && state.hasDeferredChanges)
    }

    // MARK: The commit record

    @Test func aRecordReadsBackAndRefusesAnythingElse() throws {
        var record = Self.threeCommits
        record.contentSize = 12
        record.contentHash = StableHash.ofContents(Data("hello, world".utf8))
        #expect(CommitRecord(record.encoded()) == record)
        #expect(record.describes(Data("hello, world".utf8)) && !record.describes(Data("hello, World".utf8)))
        #expect(CommitRecord(Data()) == nil)
        #expect(CommitRecord(Data("PRC1".utf8)) == nil)
        #expect(CommitRecord(record.encoded() + Data([0])) == nil)
        #expect(CommitRecord(Data(record.encoded().dropLast())) == nil)
    }

    @Test func aRecordStaysSmallDroppingTheLeastRecentFirst() {
        var record = CommitRecord(lineage: 1)
        for index in 0..<2_000 {
            record = Self.committing(
                ["k\(index)": (nil, .int(Int64(index))), "hot": (.int(Int64(index)), .int(Int64(index + 1)))],
                on: record, at: Self.now + .milliseconds(index))
        }
        #expect(record.encoded().count <= CommitRecord.sizeLimit)
        #expect(record.changed(Self.hash("hot"), since: record.generation - 1) == true)
        #expect(record.changed(Self.hash("k1999"), since: record.generation - 2) == true)
        #expect(record.changed(Self.hash("k0"), since: 0) == nil, "dropped: the floor says it cannot tell")
        #expect(record.recent[Self.hash("hot")]?.earlier.count == CommitRecord.earlierLimit)
    }

    // MARK: Batches and lifetime

    @Test func aNestedBatchThatThrowsUndoesOnlyItsOwnWrites() {
        var state = Self.loaded(["a": .int(1)])
        var write = WriteInProgress()
        let outermostWrite = write.beginWrite()
        #expect(outermostWrite)
        let outer = write.beginBatch(at: state.batchPoint)
        #expect(outer.outermost)
        _ = state.setInMemory(.int(2), forKey: "a", reason: .batch)
        let inner = write.beginBatch(at: state.batchPoint)
        #expect(!inner.outermost)
        _ = state.setInMemory(.int(3), forKey: "b", reason: .batch)
        let undone = state.rollBack(to: inner.restore)
        #expect(undone == ["b"])
        #expect(state.values == ["a": .int(2)] && write.inBatch)
        let start = write.endBatch()
        #expect(start == ["a": .int(1)])
        #expect(!write.inBatch)
        write.endWrite()
        #expect(write.depth == 0)
    }

    @Test func theLastHandleShutsTheStateForGood() {
        var state = Self.loaded([:])
        let handles = [state.retain(), state.retain()]
        #expect(handles == [true, true])
        let releases = [state.release(), state.release()]
        #expect(releases == [false, true] && state.isShut)
        let afterShut = [state.retain(), state.release()]
        #expect(afterShut == [false, false], "a shut state takes no new handle")
    }
}
