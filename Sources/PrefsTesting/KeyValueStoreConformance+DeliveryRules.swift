import Foundation
import Observation
import Prefs
import Synchronization

// The rules of `KeyValueStoreConformance` about observers: each change delivered once, in order, before the
// write returns, outside the store's locks.
extension KeyValueStoreConformance {
    static func deliveryExactlyOnce(_ context: Context) async throws {
        let store = context.store
        let (key, sentinel) = (context.key("k"), context.key("sentinel"))
        let stream = store.changedKeys([key, sentinel])
        let writes = 20
        try await onThread {
            for value in 1...writes / 2 { try store.setValue(.int(Int64(value)), forKey: key) }
            for _ in 0..<writes / 2 { try store.updateValue(forKey: key, increment) }
            try store.setValue(.int(1), forKey: sentinel)
        }
        guard let keys = try await delivered(stream, before: sentinel, context) else { return }
        context.expect(
            keys.count == writes, "\(writes) changes of a key were delivered \(keys.count) times, expected \(writes)")
    }

    static func deliveryInOrder(_ context: Context) async throws {
        let store = context.store
        let key = context.key("k")
        let wrapper = StoredValue(key: key, default: 0, store: store)
        let stream = wrapper.values
        let total = 60
        try await onThread {
            for value in 1...total / 3 { try store.setValue(.int(Int64(value)), forKey: key) }
            // Two threads updating at once: each value applied is one more than the one before it.
            let done = (0..<2).map { _ in
                spawn { for _ in 0..<total / 3 { _ = try? store.updateValue(forKey: key, increment) } }
            }
            context.expect(done.allSatisfy { $0.wait(hangGuard * 3) }, "concurrent updates did not finish")
        }
        let final = try await onThread { wrapper.wrappedValue }
        guard let seen = try await collect(stream, until: { $0.last == final }) else {
            context.findings.fail("the values stream did not reach the last value written, \(final)")
            return
        }
        context.expect(
            zip(seen, seen.dropFirst()).allSatisfy { $0 < $1 },
            "values applied in increasing order were delivered as \(seen), expected each greater than the one before")
    }

    static func deliveryBeforeReturn(_ context: Context) throws {
        let store = context.store
        let key = context.key("k")
        let wrapper = StoredValue(key: key, default: 0, store: store)
        // First, whether a change reaches an observer at all: the rules that wait for one would otherwise each wait
        // out their hang guards and blame something else.
        let first = ObserverProbe(wrapper)
        try store.setValue(.int(1), forKey: key)
        if first.runs == 0 {
            let reason = "not checked: no change of the store reaches an observer (\(Rule.deliveryBeforeReturn))"
            guard first.ran.wait(deliveryGrace) else {
                context.findings.fail(
                    "no observer ran when setValue returned, nor within \(deliveryGrace) after: the store's writes "
                        + "are not announced (a store of the app's own is announced by Prefs: make its `hub` a "
                        + "StoreHub() of its own, not another store's)")
                context.findings.block(Rule.waitingForDelivery, because: reason)
                return
            }
            context.findings.fail(
                "observers of setValue had not run when it returned; they ran later, on another thread: call "
                    + "hub.keysChanged(_:) on the thread that made the change, before returning")
        }
        let writes: [(String, () throws -> Void)] = [
            ("updateValue", { try store.updateValue(forKey: key, increment) }),
            ("removeValue", { try store.removeValue(forKey: key) }),
            ("setValue after a removal", { try store.setValue(.int(5), forKey: key) }),
            ("removeValues", { try store.removeValues(forKeys: [key]) }),
            ("replaceAll", { try store.replaceAll([key: .int(7)]) }),
        ]
        for (name, write) in writes {
            let probe = ObserverProbe(wrapper)
            try write()
            context.expect(
                probe.runs == 1, "observers had run \(probe.runs) times when \(name) returned, expected once")
        }
    }

    static func deliveryOutsideLocks(_ context: Context) throws {
        let store = context.store
        let (observed, other) = (context.key("observed"), context.key("other"))
        let wrapper = StoredValue(key: observed, default: 0, store: store)
        let writeDone = Signal()
        let observerRan = Signal()
        let completed = Atomic(false)
        withObservationTracking {
            _ = wrapper.wrappedValue
        } onChange: {
            observerRan.raise()
            // Inside the observer: another thread writes another key and reads this one.
            let done = spawn {
                _ = try? store.setValue(.int(1), forKey: other)
                _ = try? store.value(forKey: observed)
                writeDone.raise()
            }
            completed.store(done.wait(hangGuard), ordering: .sequentiallyConsistent)
        }
        try store.setValue(.int(1), forKey: observed)
        guard observerRan.isRaised else {
            context.findings.fail(
                "the observer of a setValue had not run when it returned, so whether it runs under a lock is unknown "
                    + "(see \(Rule.deliveryBeforeReturn))")
            return
        }
        guard completed.load(ordering: .sequentiallyConsistent) else {
            context.findings.fail(
                "inside an observer of one key, a write of another key from another thread did not complete within "
                    + "\(hangGuard): observers run while the store holds a lock that writes need. "
                    + "Observers read the store on the delivering thread, where a non-recursive lock deadlocks, or stops "
                    + "the process (Mutex: \"Recursive call to lock Mutex\")")
            context.findings.block(
                Rule.readingInsideDelivery,
                because: "not checked: observers run under a lock of the store (\(Rule.deliveryOutsideLocks)), where "
                    + "a values stream's read of the store would deadlock or stop the process")
            _ = writeDone.wait(hangGuard)
            return
        }
        _ = writeDone.wait(hangGuard)
    }

    static func valuesStartWithCurrent(_ context: Context) async throws {
        let store = context.store
        let key = context.key("k")
        try await onThread { try store.setValue(.int(5), forKey: key) }
        let wrapper = StoredValue(key: key, default: 0, store: store)
        let stream = wrapper.values
        try await onThread { try store.setValue(.int(6), forKey: key) }
        let seen = try await collect(stream, until: { $0.count == 2 })
        context.expect(
            seen == [5, 6],
            "a values stream made while 5 was stored, then 6 written, yielded \(seen ?? []), expected [5, 6]")
    }
}

/// Counts the runs of an Observation observer of one wrapper, registered when it is made.
final class ObserverProbe: Sendable {
    private let count = Atomic(0)
    /// Raised when the observer runs.
    let ran = KeyValueStoreConformance.Signal()

    init(_ wrapper: StoredValue<Int>) {
        withObservationTracking {
            _ = wrapper.wrappedValue
        } onChange: { [self] in
            count.add(1, ordering: .sequentiallyConsistent)
            ran.raise()
        }
    }

    var runs: Int { count.load(ordering: .sequentiallyConsistent) }
}
