import Foundation
import Observation
import PrefsTestSupport
import Synchronization
import TestThreads
import Testing

@testable import Prefs

/// What a store of the app's own gets from Prefs, given four members (``MinimalStore``): every write announced after
/// Prefs released its locks and before it returns, a write that throws announcing nothing, batches staged and written
/// once, changes made outside told through `hub.keysChanged`, registered defaults and layers kept with the store.
@Suite(.ownThreads)
struct CustomStoreContractTests {
    /// Raised by an observer, read by the test.
    final class Flag: Sendable {
        private let raised = Atomic(false)
        func raise() { raised.store(true, ordering: .sequentiallyConsistent) }
        var isRaised: Bool { raised.load(ordering: .sequentiallyConsistent) }
    }

    /// Runs `onChange` at the next change of the wrapper's key, on the thread that delivers it.
    static func onNextChange(of wrapper: StoredValue<Int>, _ onChange: @escaping @Sendable () -> Void) {
        withObservationTracking {
            _ = wrapper.wrappedValue
        } onChange: {
            onChange()
        }
    }

    @Test func observersRunBeforeTheWriteReturnsWithPrefsLockReleased() throws {
        let store = MinimalStore()
        let key = uniqueKey("observed")
        let wrapper = StoredValue(key: key, default: 0, store: store)
        let otherWriteCompleted = Flag()
        Self.onNextChange(of: wrapper) {
            // A write from another thread, which needs the lock Prefs holds while it writes, completes now.
            let done = DispatchSemaphore(value: 0)
            Thread {
                try? store.setValue(.int(9), forKey: "other")
                otherWriteCompleted.raise()
                done.signal()
            }.start()
            _ = done.wait(timeout: .now() + 10)
        }
        try store.setValue(.int(1), forKey: key)
        #expect(otherWriteCompleted.isRaised, "the observer ran before setValue returned, no lock of Prefs held")
        #expect(wrapper.wrappedValue == 1)
    }

    @Test func aWriteThatThrowsAnnouncesNothingAndReachesTheCaller() throws {
        let store = MinimalStore()
        let key = uniqueKey("refused")
        let wrapper = StoredValue(key: key, default: 0, store: store)
        wrapper.wrappedValue = 1
        let ran = Flag()
        Self.onNextChange(of: wrapper) { ran.raise() }
        store.failing.withLock { $0 = [key] }
        #expect(throws: MinimalStore.WriteFailed.self) { try store.setValue(.int(2), forKey: key) }
        #expect(!ran.isRaised, "nothing announced")
        #expect(wrapper.wrappedValue == 1)
    }

    @Test func aChangeMadeOutsidePrefsReachesWrappersAndStreamsThroughTheHub() async throws {
        let store = MinimalStore()
        let key = uniqueKey("outside")
        let wrapper = StoredValue(key: key, default: 0, store: store)
        #expect(wrapper.wrappedValue == 0)
        let stream = wrapper.values
        let ran = Flag()
        Self.onNextChange(of: wrapper) { ran.raise() }
        store.values.withLock { $0[key] = .int(5) }  // another process, a server, an edit by hand
        #expect(wrapper.wrappedValue == 0, "a wrapper keeps what it read until the store says")
        store.hub.keysChanged([key])
        #expect(ran.isRaised, "observers ran before keysChanged returned")
        #expect(wrapper.wrappedValue == 5)
        var iterator = stream.makeAsyncIterator()
        #expect(await iterator.next() == 0)
        #expect(await iterator.next() == 5)
    }

    @Test func aBatchThatThrowsWritesNothingAndWrappersReadTheOldValuesAgain() throws {
        let store = MinimalStore()
        let key = uniqueKey("batched")
        let wrapper = StoredValue(key: key, default: 0, store: store)
        wrapper.wrappedValue = 1
        store.writes.withLock { $0 = [] }
        struct Stop: Error {}
        #expect(throws: Stop.self) {
            try store.batch {
                wrapper.wrappedValue = 2
                #expect(wrapper.wrappedValue == 2, "the batch's reads see its write")
                throw Stop()
            }
        }
        #expect(store.writes.withLock { $0.isEmpty })
        #expect(wrapper.wrappedValue == 1)
    }

    @Test func aNestedBatchThatThrowsUndoesOnlyItsOwnWrites() throws {
        let store = MinimalStore()
        struct Stop: Error {}
        try store.batch {
            try store.setValue(.int(1), forKey: "outer")
            _ = try? store.batch {
                try store.setValue(.int(2), forKey: "inner")
                throw Stop()
            }
            try store.updateValue(forKey: "outer") { old in
                #expect(old == .int(1), "an update inside the batch sees its staged value")
                return .int(3)
            }
        }
        #expect(store.writes.withLock { $0 } == [["outer": .int(3)]])
    }

    @Test func aBatchWhoseWriteFailsAnnouncesNothingAndRethrows() throws {
        let store = MinimalStore()
        let key = uniqueKey("failing")
        let wrapper = StoredValue(key: key, default: 0, store: store)
        let ran = Flag()
        Self.onNextChange(of: wrapper) { ran.raise() }
        store.failing.withLock { $0 = [key] }
        #expect(throws: MinimalStore.WriteFailed.self) {
            try store.batch {
                wrapper.wrappedValue = 4
                try store.setValue(.int(1), forKey: "other")
            }
        }
        #expect(!ran.isRaised)
        #expect(wrapper.wrappedValue == 0)
        #expect(try store.value(forKey: "other") == nil, "the batch's other write is not made either")
    }

    @Test func anUpdateStartsFromTheRegisteredDefaultOfAnAbsentKey() throws {
        let store = MinimalStore()
        store.register(defaults: ["count": .int(10)])
        try store.updateValue(forKey: "count") { old in
            guard case .int(let count)? = old else { return old }
            return .int(count + 1)
        }
        #expect(try store.value(forKey: "count") == .int(11))
    }

    @Test func registeredDefaultsLiveWithTheStore() throws {
        let key = uniqueKey("kept")
        var store: MinimalStore? = MinimalStore()
        store?.register(defaults: [key: .int(5)])
        #expect(store?.registeredDefault(forKey: key) == .int(5))
        #expect(try store?.value(for: PrefKey(key, default: 1)) == 5)
        #expect(store?.layer(ofKey: key) == .registered)
        let hubIsAlive = { [weak hub = store?.hub] in hub != nil }
        store = nil
        #expect(!hubIsAlive(), "nothing process-wide keeps the store's hub, or its defaults, alive")
        #expect(MinimalStore().registeredDefault(forKey: key) == nil, "a new store starts with none")
    }

    @Test func aStoreOfTheAppsOwnHasNothingToFlushAndIsItsOwnDeferredView() async throws {
        let store: any KeyValueStore = MinimalStore()
        let flushNow: () throws -> Void = store.flush
        try flushNow()
        try await store.flush()
        #expect(store.deferringWrites() === store)
    }

    @Test func aFileStoreSeenAsAnyStoreDefersThroughTheProtocol() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let file = try FileStore(url: directory.file("s.json"))
        let store: any KeyValueStore = file
        let quick = store.deferringWrites()
        #expect(quick !== store, "a view of its own")
        try quick.setValue(.int(1), forKey: "k")
        try quick.flush()
        #expect(try FileStore(url: directory.file("s.json")).value(forKey: "k") == .int(1))
    }
}
