import Foundation
import Observation
import Synchronization

/// The announcements of one store's changes and their delivery to the store's observers: wrappers' cells, `values`
/// listeners and `changedKeys` streams. Every store has one, through its ``StoreHub``.
///
/// A change is delivered in two steps:
///
/// 1. While still holding the lock under which it applied a change, the writer calls ``announce(_:)`` with the
///    new values of the keys that changed. This fixes the change's place in the order.
/// 2. After releasing its locks, it calls ``deliverAnnouncements()`` on the same thread, which runs the observers of
///    its announcements there, before it returns, in announcement order: a change of the same key announced earlier
///    by another thread is delivered first (by that thread), so this call may wait for it. Changes of other keys
///    never wait for each other's observers.
///
/// ``publish(changedKeys:)`` does both at once for a change whose new values are not known (one made outside
/// Prefs); its observers read the value current when they run, so two quick changes may reach them as one.
///
/// Observers read the store from their callbacks, on the delivering thread, so nothing delivers while holding a
/// lock of the store. A change made without announcing it (a batch's writes before it commits, or taken back when
/// it throws) goes through ``invalidate(_:)``, so that wrappers do not keep a value they read meanwhile.
package final class ChangeFeed: Sendable {
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

    /// One call of `announce`: its entries and the thread that made it, which delivers it (nil: any thread may).
    private struct Announcement {
        let id: UInt64
        var owner: ThreadID?
        /// The thread running its observers, once one does.
        var deliverer: ThreadID?
        let entries: [Entry]
        /// The keys of `entries` when there are several, so that comparing two large announcements (two imports)
        /// costs the smaller one's length, not the product of both under the feed's lock.
        let keys: Set<String>?

        init(id: UInt64, owner: ThreadID?, entries: [Entry]) {
            self.id = id
            self.owner = owner
            self.entries = entries
            self.keys = entries.count > 1 ? Set(entries.map(\.key)) : nil
        }

        func contains(_ key: String) -> Bool { keys?.contains(key) ?? (entries.first?.key == key) }

        func overlaps(_ other: Announcement) -> Bool {
            let (smaller, larger) = entries.count <= other.entries.count ? (self, other) : (other, self)
            return smaller.entries.contains { larger.contains($0.key) }
        }
    }

    /// The order is kept per key: an announcement waits only for earlier ones that share a key with it, so an
    /// observer of one key never holds up the delivery (and so the write) of another.
    private struct State {
        var cells: [String: KeyCell] = [:]
        /// The `values` listeners of each key, by wrapper state.
        var listeners: [String: [ObjectIdentifier: Listener]] = [:]
        var keySubscribers: [UInt64: KeySubscriber] = [:]
        var nextToken: UInt64 = 0
        var nextAnnouncement: UInt64 = 0
        /// Announced changes not yet delivered, or being delivered, oldest first.
        var pending: [Announcement] = []
        /// How many calls of `writing(_:)` each thread is inside: only the outermost one delivers.
        var applying: [ThreadID: Int] = [:]

        func isDelivering(_ thread: ThreadID) -> Bool { pending.contains { $0.deliverer == thread } }

        func hasAnnouncements(of thread: ThreadID) -> Bool { pending.contains { $0.owner == thread } }

        /// The index of the oldest announcement no one delivers yet, that `thread` may deliver (its own, or one
        /// any thread may), and that no earlier announcement of one of its keys still holds up.
        func nextDeliverable(by thread: ThreadID) -> Int? {
            pending.indices.first { index in
                let candidate = pending[index]
                guard candidate.deliverer == nil, candidate.owner == nil || candidate.owner == thread else {
                    return false
                }
                return !pending[..<index].contains { $0.overlaps(candidate) }
            }
        }

        /// The earlier announcement holding up the oldest one of `thread`.
        func blocker(of thread: ThreadID) -> Announcement? {
            guard let mine = pending.firstIndex(where: { $0.owner == thread }) else { return nil }
            return pending[..<mine].first { $0.overlaps(pending[mine]) }
        }

        /// Lets any thread deliver the announcements of `thread`.
        mutating func release(_ thread: ThreadID?) {
            for index in pending.indices where pending[index].owner == thread { pending[index].owner = nil }
        }
    }

    private struct KeySubscriber {
        let filter: Set<String>?
        let continuation: AsyncStream<String>.Continuation
    }

    private let state = ConditionProtected(State())
    /// How long a thread waits for another one to deliver the announcements ahead of its own before it lets that
    /// thread deliver them too. A safety valve for an observer that blocks (or waits for this very thread), never
    /// reached otherwise: the wait is for observers that are running, or for a thread releasing its store's locks.
    static let handOverAfter: Duration = .seconds(1)
    /// Serialises the default read-modify-write of custom stores; see `ChangeFeed+UpdateLock.swift`.
    let updateLock = NSRecursiveLock()
    /// The defaults registered with a store that keeps none of its own (the default implementation of
    /// ``KeyValueStore/register(defaults:)``), and those its keys' declarations registered: kept here, with the
    /// store, since the feed is the one piece of state every store owns.
    let registeredDefaults = Mutex<[String: PrefValue]>([:])

    /// A feed of its own, for a store's hub.
    package init() { reported = ReportLedger() }

    /// A feed whose store reports none of its failures: one the library opens for a moment and whose failures the
    /// operation that opened it handles itself.
    init(reportingNothing: Void) { reported = ReportLedger(silenced: true) }

    /// The failures of the store already reported, each once until the store recovers; it goes with the store.
    package let reported: ReportLedger

    /// `changes.announce(["theme": .string("dark"), "zoom": nil])` records that these keys now hold these values
    /// (nil: removed); call it while holding the lock under which your store applied the change.
    ///
    /// Nothing runs yet: call ``deliverAnnouncements()`` once you have released your locks. The order of
    /// announcements is the order observers see, so announce each change inside the same critical section that
    /// applied it. Announcing takes only the feed's own short lock and never calls back into your store.
    package func announce(_ newValues: [String: PrefValue?]) {
        guard !newValues.isEmpty else { return }
        if newValues.count == 1, let (key, value) = newValues.first {
            enqueue(CollectionOfOne((key, Update.value(value))))  // the common case: no sorting, no lookups
            return
        }
        enqueue(newValues.keys.sorted().map { ($0, Update.value(newValues[$0] ?? nil)) })
    }

    /// `changes.deliverAnnouncements()` runs the observers of the changes this thread announced, in announcement
    /// order; call it after releasing your store's locks, since observers may read or write preferences.
    ///
    /// Each announcement is delivered exactly once, on the thread that announced it, before this call returns, so
    /// a write's observers have run when the write returns, on the writer's thread. The order is kept per key:
    /// an announcement of another thread that came first and changes one of the same keys is delivered first, by
    /// that thread, and this call waits for it; changes of other keys do not wait. Two exceptions keep it
    /// from ever hanging: called from an observer (a write inside an observer), it returns at once and the
    /// delivery already running delivers the new change right after the current observer returns; and if an
    /// earlier announcement of the same key is not delivered within a second (its observer blocks), this thread's changes are
    /// left to the thread delivering.
    package func deliverAnnouncements() {
        let me = ThreadID.current
        /// The announcement this loop delivered last: taken off the queue in the same critical section that takes the
        /// next one, so a write with one announcement enters the feed's lock twice here.
        var delivered: UInt64?
        while true {
            let next = state.withLock { state, condition -> Delivery? in
                if let id = delivered {
                    state.pending.removeAll { $0.id == id }
                    condition.broadcast()
                }
                // An observer wrote: the delivery running on this thread delivers it once the observer returns.
                if state.isDelivering(me) { return nil }
                var waitedSince: ContinuousClock.Instant?
                while true {
                    if let index = state.nextDeliverable(by: me) {
                        state.pending[index].deliverer = me
                        let announcement = state.pending[index]
                        return Delivery(
                            announcement: announcement, subscribers: state.keySubscribers,
                            listeners: announcement.entries.map { state.listeners[$0.key] ?? [:] })
                    }
                    guard state.hasAnnouncements(of: me), let blocker = state.blocker(of: me) else { return nil }
                    // An earlier change of one of the same keys comes first: wait for it to be delivered.
                    let since = waitedSince ?? .now
                    waitedSince = since
                    if ContinuousClock.now - since >= Self.handOverAfter {
                        // Its observer blocks (perhaps waiting for this very thread): its thread delivers ours
                        // too, after it. Or its thread never came (a custom store that announced without
                        // delivering): deliver it here.
                        state.release(blocker.deliverer != nil ? me : blocker.owner)
                        if blocker.deliverer != nil { return nil }
                        waitedSince = nil
                        continue
                    }
                    condition.wait(for: Self.handOverAfter - (ContinuousClock.now - since))
                }
            }
            guard let next else { return }
            deliver(next)
            delivered = next.announcement.id
        }
    }

    /// An announcement being delivered, with whom it goes to, taken with it.
    private struct Delivery {
        let announcement: Announcement
        let subscribers: [UInt64: KeySubscriber]
        /// The `values` listeners of each entry's key.
        let listeners: [[ObjectIdentifier: Listener]]
    }

    private func deliver(_ delivery: Delivery) {
        for (entry, listeners) in zip(delivery.announcement.entries, delivery.listeners) {
            entry.cell?.deliver()
            for listener in listeners.values { listener(entry.version, entry.update) }
            for subscriber in delivery.subscribers.values where subscriber.filter?.contains(entry.key) ?? true {
                subscriber.continuation.yield(entry.key)
            }
        }
    }

    /// What a `values` stream of a wrapper hears of each change of its key: the key's version and the change.
    typealias Listener = @Sendable (UInt64, Update) -> Void

    /// Adds `owner`'s listener of `key`, replacing its earlier one.
    func addListener(forKey key: String, owner: ObjectIdentifier, _ listener: @escaping Listener) {
        state.withLock { state, _ in state.listeners[key, default: [:]][owner] = listener }
    }

    func removeListener(forKey key: String, owner: ObjectIdentifier) {
        state.withLock { state, _ in
            state.listeners[key]?[owner] = nil
            if state.listeners[key]?.isEmpty == true { state.listeners[key] = nil }
        }
    }

    /// How many `values` listeners `key` has.
    func listenerCount(forKey key: String) -> Int { state.withLock { state, _ in state.listeners[key]?.count ?? 0 } }

    /// `changes.publish(changedKeys: ["theme"])` tells every observer that these keys changed, without saying to
    /// what: observers read the current value when they run.
    ///
    /// Call it after the change is visible through ``KeyValueStore/value(forKey:)`` and after releasing your own
    /// locks. Prefer ``announce(_:)`` and ``deliverAnnouncements()``, which guarantee that observers see every
    /// distinct value in order: with this method, two quick changes may reach an observer as one.
    package func publish(changedKeys: some Sequence<String>) {
        publish(Array(changedKeys))
    }

    /// ``publish(changedKeys:)`` for keys already in an array, which a store in another module of this package calls
    /// without going through the generic sequence (unspecialized there, building a set cost more than the delivery):
    /// a single key, a store's one write, is enqueued as it is.
    package func publish(_ keys: [String]) {
        guard enqueueUnknown(keys) else { return }
        deliverAnnouncements()
    }

    /// Enqueues a change of `keys` whose values observers read when they run; false when there are none.
    @discardableResult
    func enqueueUnknown(_ keys: [String]) -> Bool {
        switch keys.count {
        case 0: return false
        case 1: enqueue(CollectionOfOne((keys[0], Update.unknown)))
        default: enqueue(Set(keys).sorted().map { ($0, Update.unknown) })
        }
        return true
    }

    private func enqueue(_ updates: some Collection<(String, Update)>) {
        state.withLock { state, _ in
            let entries = updates.map { key, update in
                let cell = state.cells[key]
                return Entry(key: key, cell: cell, version: cell?.advance() ?? 0, update: update)
            }
            state.nextAnnouncement += 1
            state.pending.append(Announcement(id: state.nextAnnouncement, owner: .current, entries: entries))
        }
    }

    /// `changes.invalidate(["theme", "zoom"])` makes every wrapper of these keys read them from the store again at
    /// its next read, without telling any observer: for values your store changed without announcing them.
    ///
    /// Wrappers keep the value they decoded until the key's next announcement. A store whose ``KeyValueStore/batch(_:)``
    /// applies its writes at once calls this for the two kinds of change it does not announce:
    ///
    /// - a write inside a batch, applied in memory and announced once, when the outermost batch ends, so that a
    ///   wrapper read inside the batch sees it;
    /// - the writes of a batch whose body threw, when the store puts the old values back: nothing is announced, since
    ///   nothing changed, but a wrapper that read one of them inside the batch must not keep it.
    ///
    /// Call it while holding the lock under which the values changed, as you would ``announce(_:)``. It takes only
    /// the feed's own short lock, runs no observer and never calls back into your store. Keys no wrapper reads cost
    /// nothing.
    package func invalidate(_ keys: Set<String>) {
        guard !keys.isEmpty else { return }
        state.withLock { state, _ in
            for key in keys { _ = state.cells[key]?.advance() }
        }
    }

    /// `for await key in store.changes.keys(["a", "b"])` yields the name of each of these keys as it changes.
    ///
    /// - Parameter keys: The keys to watch; `nil` watches every key of the store.
    /// - Returns: A stream that ends when the task iterating it is cancelled.
    package func keys(_ keys: Set<String>? = nil) -> AsyncStream<String> {
        let (stream, continuation) = AsyncStream.makeStream(of: String.self)
        let token = state.withLock { state, _ in
            state.nextToken += 1
            state.keySubscribers[state.nextToken] = KeySubscriber(filter: keys, continuation: continuation)
            return state.nextToken
        }
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { state, _ in _ = state.keySubscribers.removeValue(forKey: token) }
        }
        return stream
    }

    /// The shared per-key state that wrappers of the same key and store use to agree.
    func cell(for key: String) -> KeyCell {
        state.withLock { state, _ in
            if let cell = state.cells[key] { return cell }
            let cell = KeyCell(key: key)
            state.cells[key] = cell
            return cell
        }
    }

    /// Notes that this thread entered `writing(_:)`; true when it was in none of this feed's.
    func enterApply() -> Bool {
        let me = ThreadID.current
        return state.withLock { state, _ in
            state.applying[me, default: 0] += 1
            return state.applying[me] == 1
        }
    }

    /// Whether `thread` is inside `writing(_:)`.
    func isApplying(on thread: ThreadID) -> Bool { state.withLock { state, _ in state.applying[thread] != nil } }

    /// Notes that this thread left `writing(_:)`.
    func leaveApply() {
        let me = ThreadID.current
        state.withLock { state, _ in
            let depth = (state.applying[me] ?? 1) - 1
            state.applying[me] = depth > 0 ? depth : nil
        }
    }

    /// Whether the calling thread announced changes it has not delivered: a store that calls ``announce(_:)``
    /// without ``deliverAnnouncements()`` leaves them here, and the conformance kit says so.
    package func hasUndeliveredAnnouncements() -> Bool {
        let me = ThreadID.current
        return state.withLock { state, _ in state.pending.contains { $0.owner == me && $0.deliverer == nil } }
    }

    /// The number of live `keys(_:)` subscribers, for leak tests.
    var keySubscriberCount: Int { state.withLock { state, _ in state.keySubscribers.count } }
}
