import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

/// A store's decisions, without files: what `StoreState` returns is what `StoreEngine` performs. Deferred changes
/// and another writer's later change of their key, a file that does not read, a commit, and the store's lifetime.
@Suite(.ownThreads)
struct StoreStateTests {
    private struct Broken: Error {}

    private static func identity(_ inode: UInt64) -> FileIdentity {
        FileIdentity(device: 1, inode: inode, size: 10, modificationSeconds: 0, modificationNanoseconds: 0)
    }

    private static func loaded(_ values: [String: PrefValue], inode: UInt64 = 1) -> StoreState {
        var state = StoreState()
        _ = state.load(values, identity: identity(inode))
        return state
    }

    @Test func aFileIsReadOnlyWhenItIsAnotherOrDidNotRead() {
        var state = Self.loaded(["a": .int(1)])
        #expect(!state.mustRead(Self.identity(1)))
        #expect(state.mustRead(Self.identity(2)))
        #expect(state.mustRead(nil))
        _ = state.failedToRead(Broken(), identity: Self.identity(1))
        #expect(state.mustRead(Self.identity(1)), "a damaged file is read again, so a repaired one is seen")
        #expect(state.values == ["a": .int(1)] && state.damage != nil, "the last values stay; writes are refused")
        let changed = state.load(["a": .int(2)], identity: Self.identity(3))
        #expect(changed == ["a"] && state.damage == nil)
    }

    @Test func aDeferredValueStaysWhileTheFileHoldsWhatItReplacedAndTheRestIsTaken() {
        var state = Self.loaded(["a": .int(1), "b": .int(1)])
        let made = state.change("a", to: .int(5), deferred: true)
        #expect(made)
        let changed = state.load(["a": .int(1), "b": .int(2), "c": .int(3)], identity: Self.identity(2))
        #expect(state.values == ["a": .int(5), "b": .int(2), "c": .int(3)])
        #expect(changed == ["b", "c"])
        #expect(state.hasDeferredChanges)
    }

    /// The file's value of the key is compared with the one the change replaced: another writer's different value
    /// wins (it was acknowledged to its writer; this one was not written yet).
    @Test func aDeferredValueGivesWayToAnotherWritersDifferentValue() {
        var state = Self.loaded(["a": .int(1)])
        _ = state.change("a", to: .int(5), deferred: true)
        let changed = state.load(["a": .int(9)], identity: Self.identity(2))
        #expect(state.values == ["a": .int(9)] && changed == ["a"])
        #expect(!state.hasDeferredChanges)
        var removed = Self.loaded(["a": .int(1)])
        _ = removed.change("a", to: .int(5), deferred: true)
        _ = removed.load([:], identity: nil)
        #expect(removed.values.isEmpty, "another writer's removal wins too")
    }

    @Test func aKeyDeferredAgainKeepsItsFirstBaseAndACommitTakesEveryChange() {
        var state = Self.loaded(["a": .int(1)])
        _ = state.change("a", to: .int(2), deferred: true)
        _ = state.change("a", to: .int(3), deferred: true)
        #expect(state.unwritten["a"] == .some(.int(1)))
        let unchanged = state.change("a", to: .int(3), deferred: true)
        #expect(!unchanged, "an unchanged value is no change")
        state.committed(state.values, identity: Self.identity(2))
        #expect(!state.hasDeferredChanges && state.identity == Self.identity(2) && !state.sweepDue)
        #expect(state.values == ["a": .int(3)])
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
