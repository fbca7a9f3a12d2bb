import Foundation
import Observation
import PrefsTestSupport
import Synchronization
import TestThreads
import Testing

@testable import Prefs

/// What a custom store gets from the protocol: `changes.apply(locking:)`, which applies a change and announces it in
/// the order the contract needs, and the requirements with default implementations a store may replace
/// (registered defaults, `flush`, `deferringWrites`).
@Suite(.ownThreads)
struct CustomStoreContractTests {
    /// A store whose every write goes through `changes.apply(locking:)`, with a non-recursive lock: an observer run
    /// under that lock would deadlock on its read.
    final class ApplyingStore: KeyValueStore {
        let changes = ChangeFeed()
        let writer = NSLock()
        let values = Mutex<[String: PrefValue]>([:])
        /// Whether the writer lock was free each time an observer ran.
        let lockFreeInObservers = Mutex<[Bool]>([])

        func value(forKey key: String) throws -> PrefValue? { values.withLock { $0[key] } }
        func allValues() throws -> [String: PrefValue] { values.withLock { $0 } }
        func setValue(_ value: PrefValue?, forKey key: String) throws {
            try validateKey(key)
            changes.apply(locking: writer) { changes in
                values.withLock { $0[key] = value }
                changes.announce([key: value])
            }
        }

        /// Writes `value` under `key` and throws `failure` after announcing it.
        func setAndThrow(_ value: PrefValue, forKey key: String, failure: any Error) throws {
            try changes.apply(locking: writer) { changes in
                values.withLock { $0[key] = value }
                changes.announce([key: value])
                throw failure
            }
        }

        /// Two writes, the second inside the first's `apply` (as a batch's body writes), with a recursive lock;
        /// `inside` runs in the outer body after the inner write.
        func nestedWrites(_ key: String, outer: PrefValue, inner: PrefValue, inside: () -> Void) {
            let lock = NSRecursiveLock()
            self.changes.apply(locking: lock) { changes in
                values.withLock { $0[key] = outer }
                changes.announce([key: outer])
                self.changes.apply(locking: lock) { changes in
                    values.withLock { $0[key] = inner }
                    changes.announce([key: inner])
                }
                inside()
            }
        }
    }

    struct Failure: Error {}

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

    @Test func applyRunsObserversAfterReleasingTheLockAndBeforeReturning() throws {
        let store = ApplyingStore()
        let key = uniqueKey("applied")
        let wrapper = StoredValue(key: key, default: 0, store: store)
        Self.onNextChange(of: wrapper) {
            let free = store.writer.try()
            if free { store.writer.unlock() }
            store.lockFreeInObservers.withLock { $0.append(free) }
        }
        try store.setValue(.int(1), forKey: key)
        #expect(store.lockFreeInObservers.withLock { $0 } == [true], "run before setValue returned, lock released")
        #expect(wrapper.wrappedValue == 1)
    }

    @Test func aChangeAnnouncedBeforeTheBodyThrowsIsStillDeliveredAndTheErrorRethrown() throws {
        let store = ApplyingStore()
        let key = uniqueKey("thrown")
        let wrapper = StoredValue(key: key, default: 0, store: store)
        let ran = Flag()
        Self.onNextChange(of: wrapper) { ran.raise() }
        #expect(throws: Failure.self) { try store.setAndThrow(.int(3), forKey: key, failure: Failure()) }
        #expect(ran.isRaised, "delivered before the error reached the caller")
        #expect(!store.changes.hasUndeliveredAnnouncements())
        #expect(wrapper.wrappedValue == 3)
    }

    @Test func aNestedApplyLeavesTheDeliveryToTheOutermost() throws {
        let store = ApplyingStore()
        let key = uniqueKey("nested")
        let wrapper = StoredValue(key: key, default: 0, store: store)
        let ran = Flag()
        Self.onNextChange(of: wrapper) { ran.raise() }
        var ranInside = true
        store.nestedWrites(key, outer: .int(1), inner: .int(2)) { ranInside = ran.isRaised }
        #expect(!ranInside, "nothing delivered while the outer apply held the lock")
        #expect(ran.isRaised, "delivered once the outermost apply ended")
        #expect(wrapper.wrappedValue == 2)
    }

    /// A store keeping registered defaults itself, and flushing a journal of its own.
    final class OwnDefaultsStore: KeyValueStore {
        let changes = ChangeFeed()
        let values = Mutex<[String: PrefValue]>([:])
        let defaults = Mutex<[String: PrefValue]>([:])
        let flushes = Mutex(0)

        func value(forKey key: String) throws -> PrefValue? { values.withLock { $0[key] } }
        func allValues() throws -> [String: PrefValue] { values.withLock { $0 } }
        func setValue(_ value: PrefValue?, forKey key: String) throws {
            values.withLock { $0[key] = value }
            changes.publish(changedKeys: [key])
        }
        func register(defaults new: [String: PrefValue]) { defaults.withLock { $0.merge(new) { $1 } } }
        func registeredDefault(forKey key: String) -> PrefValue? { defaults.withLock { $0[key] } }
        func flush() throws { flushes.withLock { $0 += 1 } }
    }

    @Test func aStoreThatKeepsItsOwnRegisteredDefaultsIsAskedThroughTheProtocol() throws {
        let own = OwnDefaultsStore()
        let store: any KeyValueStore = own
        store.register(defaults: ["volume": .int(5)])
        #expect(own.defaults.withLock { $0 } == ["volume": .int(5)], "kept by the store, not beside it")
        #expect(try store.value(for: PrefKey("volume", default: 1)) == 5)
        #expect(store.layer(ofKey: "volume") == .registered)
        #expect(own.changes.registeredDefaults.withLock { $0.isEmpty })
    }

    @Test func flushReachesTheStoresOwnFlushThroughAnyStoreAndAsync() async throws {
        let own = OwnDefaultsStore()
        let store: any KeyValueStore = own
        let flushNow: () throws -> Void = store.flush
        try flushNow()
        try await store.flush()
        #expect(own.flushes.withLock { $0 } == 2)
        #expect(store.deferringWrites() === store, "a store without deferred writes is its own deferred view")
    }

    @Test func theDefaultRegisteredDefaultsLiveWithTheStore() throws {
        let key = uniqueKey("kept")
        var store: PlainStore? = PlainStore()
        store?.register(defaults: [key: .int(5)])
        #expect(store?.registeredDefault(forKey: key) == .int(5))
        let feedIsAlive = { [weak feed = store?.changes] in feed != nil }
        store = nil
        #expect(!feedIsAlive(), "nothing process-wide keeps the store's feed, or its defaults, alive")
        #expect(PlainStore().registeredDefault(forKey: key) == nil, "a new store starts with none")
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
