import Foundation
import Observation
import Synchronization

/// `store.changes` announces which keys of a store changed, whoever changed them.
///
/// Every ``KeyValueStore`` owns one feed. Property wrappers, `values` streams and Observation tracking all listen
/// here, so a write through one wrapper, a direct store write and a change made by another process reach every
/// observer alike.
///
/// Watch several keys at once, for example on a settings screen:
///
/// ```swift
/// for await key in store.changes.keys(["theme", "fontSize"]) {
///     print("\(key) changed")
/// }
/// ```
///
/// ### Announcing changes from a store
///
/// A store announces each change in two steps, so that observers see every value that became current, in the
/// order the store applied them, and yet no observer code runs while the store holds a lock:
///
/// 1. While still holding the lock under which it applied a change, the store calls ``announce(_:)`` with the
///    new values of the keys that changed. This fixes the change's place in the order.
/// 2. After releasing every lock of its own, it calls ``deliverAnnouncements()``, which runs observers for every
///    announcement made so far, in announcement order. If another thread is already delivering, that thread
///    delivers this change too, right after the ones before it.
///
/// ``publish(changedKeys:)`` does both at once for a store that cannot tell the new values; its observers then
/// read the value current when they run, so two quick changes may reach them as one.
public final class ChangeFeed: Sendable {
    /// What a listener learns about one key's change: its version and, when the store announced it, the value.
    enum Update: Sendable {
        /// The key's new value (nil: removed), exactly as the store applied it.
        case value(PrefValue?)
        /// The store did not say; read the current value.
        case unknown
    }

    private struct Entry {
        let key: String
        let cell: KeyCell?
        let version: UInt64
        let update: Update
    }

    private struct State {
        var cells: [String: KeyCell] = [:]
        var keySubscribers: [UInt64: KeySubscriber] = [:]
        var nextToken: UInt64 = 0
        /// Announced changes not yet delivered, oldest first; one inner array per announcement.
        var pending: [[Entry]] = []
        /// Whether a thread is running the delivery loop; only one does at a time, which keeps the order.
        var delivering = false
    }

    private struct KeySubscriber {
        let filter: Set<String>?
        let continuation: AsyncStream<String>.Continuation
    }

    private let state = Mutex(State())
    /// Serialises the default read-modify-write of custom stores; see `ChangeFeed+UpdateLock.swift`.
    let updateLock = NSRecursiveLock()

    /// `let changes = ChangeFeed()` creates the feed a custom store exposes as ``KeyValueStore/changes``.
    public init() {}

    deinit {
        // Failures reported about this store are keyed by its feed; a later store must not inherit them.
        ErrorReporter.forgetIncidents(of: self)
    }

    /// `changes.announce(["theme": .string("dark"), "zoom": nil])` records that these keys now hold these values
    /// (nil: removed); call it while holding the lock under which your store applied the change.
    ///
    /// Nothing runs yet: call ``deliverAnnouncements()`` once you have released your locks. The order of
    /// announcements is the order observers see, so announce each change inside the same critical section that
    /// applied it. Announcing takes only the feed's own short lock and never calls back into your store.
    public func announce(_ newValues: [String: PrefValue?]) {
        guard !newValues.isEmpty else { return }
        if newValues.count == 1, let (key, value) = newValues.first {
            enqueue(CollectionOfOne((key, Update.value(value))))  // the common case: no sorting, no lookups
            return
        }
        enqueue(newValues.keys.sorted().map { ($0, Update.value(newValues[$0] ?? nil)) })
    }

    /// `changes.deliverAnnouncements()` runs the observers of every change announced so far, oldest first; call
    /// it after releasing your store's locks, since observers may read or write preferences.
    ///
    /// When another thread is delivering already, this returns at once and that thread delivers the rest, so a
    /// change is delivered exactly once and never ahead of one announced before it.
    public func deliverAnnouncements() {
        let start = state.withLock { state in
            guard !state.delivering, !state.pending.isEmpty else { return false }
            state.delivering = true
            return true
        }
        guard start else { return }
        while true {
            // Copies of the collections (retains, no allocation), used outside the lock.
            let next = state.withLock { state -> ([[Entry]], [UInt64: KeySubscriber])? in
                guard !state.pending.isEmpty else {
                    state.delivering = false
                    return nil
                }
                defer { state.pending = [] }
                return (state.pending, state.keySubscribers)
            }
            guard let (batch, subscribers) = next else { return }
            for entries in batch {
                for entry in entries {
                    entry.cell?.deliver(version: entry.version, entry.update)
                    for subscriber in subscribers.values where subscriber.filter?.contains(entry.key) ?? true {
                        subscriber.continuation.yield(entry.key)
                    }
                }
            }
        }
    }

    /// `changes.publish(changedKeys: ["theme"])` tells every observer that these keys changed, without saying to
    /// what: observers read the current value when they run.
    ///
    /// Call it after the change is visible through ``KeyValueStore/value(forKey:)`` and after releasing your own
    /// locks. Prefer ``announce(_:)`` and ``deliverAnnouncements()``, which guarantee that observers see every
    /// distinct value in order: with this method, two quick changes may reach an observer as one.
    public func publish(changedKeys: some Sequence<String>) {
        let keys = Array(Set(changedKeys)).sorted()
        guard !keys.isEmpty else { return }
        enqueue(keys.map { ($0, Update.unknown) })
        deliverAnnouncements()
    }

    private func enqueue(_ updates: some Collection<(String, Update)>) {
        state.withLock { state in
            let entries = updates.map { key, update in
                let cell = state.cells[key]
                return Entry(key: key, cell: cell, version: cell?.advance() ?? 0, update: update)
            }
            state.pending.append(entries)
        }
    }

    /// Moves these keys to a new version without announcing anything, so cached reads decode them again: for values
    /// a batch applied in memory (announced once, when it commits) or took back (never announced).
    func invalidate(_ keys: Set<String>) {
        guard !keys.isEmpty else { return }
        state.withLock { state in
            for key in keys { _ = state.cells[key]?.advance() }
        }
    }

    /// `for await key in store.changes.keys(["a", "b"])` yields the name of each of these keys as it changes.
    ///
    /// - Parameter keys: The keys to watch; `nil` watches every key of the store.
    /// - Returns: A stream that ends when the task iterating it is cancelled.
    public func keys(_ keys: Set<String>? = nil) -> AsyncStream<String> {
        let (stream, continuation) = AsyncStream.makeStream(of: String.self)
        let token = state.withLock { state in
            state.nextToken += 1
            state.keySubscribers[state.nextToken] = KeySubscriber(filter: keys, continuation: continuation)
            return state.nextToken
        }
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { _ = $0.keySubscribers.removeValue(forKey: token) }
        }
        return stream
    }

    /// The shared per-key state that wrappers of the same key and store use to agree.
    func cell(for key: String) -> KeyCell {
        state.withLock { state in
            if let cell = state.cells[key] { return cell }
            let cell = KeyCell(key: key)
            state.cells[key] = cell
            return cell
        }
    }

    /// The number of live `keys(_:)` subscribers, for leak tests.
    var keySubscriberCount: Int { state.withLock { $0.keySubscribers.count } }
}
