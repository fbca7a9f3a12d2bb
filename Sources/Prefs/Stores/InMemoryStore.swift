import Synchronization

/// `InMemoryStore()` keeps preferences in memory only: for tests, previews and throwaway state.
///
/// It behaves like every other store (typed access, atomic updates, change announcements) but persists nothing,
/// so each test can start from a fresh, isolated store:
///
/// ```swift
/// let store = InMemoryStore()
/// let model = SettingsModel(store: store)
/// model.$theme.set(.dark)
/// #expect(try store.value(for: .theme) == .dark)
/// ```
public final class InMemoryStore: KeyValueStore {
    /// The values and the batch in progress: the state every store keeps, here with no file under it.
    private let state: Mutex<StoreState>

    /// `store.changes` is the ``ChangeFeed`` on which this store announces changes.
    public let changes: ChangeFeed
    /// The layers merged over and under the values held here (registered defaults at least); see `Stores/Layers`.
    let layers: StoreLayers

    /// `InMemoryStore(["theme": .string("dark")])` creates a store, optionally seeded with values.
    public init(_ values: [String: PrefValue] = [:]) {
        state = Mutex(StoreState(values: values))
        changes = ChangeFeed()
        layers = StoreLayers(changes: changes)
        layers.attach(self)
    }

    /// `try store.value(forKey: "theme")` returns the effective value (the one held here, unless a layer such as
    /// a registered default or an argument supplies it), or nil.
    public func value(forKey key: String) throws -> PrefValue? {
        state.withLock { layers.value(forKey: key, user: $0.values[key]) }
    }

    /// `try store.setValue(.bool(true), forKey: "flag")` stores a value; nil removes it.
    public func setValue(_ value: PrefValue?, forKey key: String) throws {
        try updateValue(forKey: key) { _ in value }
    }

    /// `try store.updateValue(forKey: "count") { … }` atomically replaces the value with `transform(current)`.
    @discardableResult
    public func updateValue(forKey key: String, _ transform: (PrefValue?) throws -> PrefValue?) throws -> PrefValue? {
        try validateKey(key)
        try layers.checkWritable(key)  // Layers hook: a forced key is refused.
        // Writers are serialised by the feed's recursive update lock; the transform runs outside the state lock
        // so it may read (or even write) other preferences of this store. The change is announced in the same
        // critical section that applies it, so observers see changes in the order they were applied, and delivered
        // once the locks are released.
        let updated = try changes.withUpdateLock {
            // Layers hook: without a value of its own, the transform starts from the default below it.
            let new = try transform(state.withLock { $0.values[key] } ?? layers.valueBelowUser(key))
            state.withLock { state in
                let old = state.values[key]
                state.values[key] = new
                if old != new { announce([key], in: state) }
            }
            return new
        }
        changes.deliverAnnouncements()
        return updated
    }

    /// `try store.allValues()` returns every key and value currently held.
    public func allValues() throws -> [String: PrefValue] {
        state.withLock { $0.values }
    }

    /// `try store.replaceAll(values)` makes `values` the whole content at once, announcing the keys that changed.
    public func replaceAll(_ values: [String: PrefValue]) throws {
        for key in values.keys { try validateKey(key) }
        try edit { $0 = values }
    }

    /// `try store.removeValues(forKeys: ["a", "b"])` removes several keys at once.
    public func removeValues(forKeys keys: some Sequence<String>) throws {
        try edit { values in
            for key in keys { values.removeValue(forKey: key) }
        }
    }

    /// `try store.batch { … }` applies every write inside `body` at once and announces each changed key once when
    /// `body` returns; if `body` throws, the values go back to what they were before the batch, unannounced. Other
    /// threads' writes wait for the batch to end. See ``KeyValueStore/batch(_:)``.
    public func batch<T>(_ body: () throws -> T) throws -> T {
        let result = try changes.withUpdateLock { () throws -> T in
            // A nested batch joins the outer one; a throw undoes this batch's own writes only.
            let entry = state.withLock { $0.beginBatch() }
            let result: T
            do { result = try body() } catch {
                state.withLock { changes.invalidate($0.abandonBatch(entry)) }
                throw error
            }
            state.withLock { state in
                guard case .outermost = entry, case .write(let values, let start) = state.endBatch() else { return }
                announce(StoreState.diff(start, values), in: state)
            }
            return result
        }
        changes.deliverAnnouncements()
        return result
    }

    /// Announces the effective values of `keys`, or inside a batch only moves them to a new version (the batch
    /// announces them once, when it ends). Called holding the state lock.
    private func announce(_ keys: Set<String>, in state: StoreState) {
        if state.inBatch {
            changes.invalidate(keys)
        } else if !keys.isEmpty {
            changes.announce(
                Dictionary(uniqueKeysWithValues: keys.map { ($0, layers.value(forKey: $0, user: state.values[$0])) }))
        }
    }

    private func edit(_ change: (inout [String: PrefValue]) throws -> Void) throws {
        try changes.withUpdateLock {
            try state.withLock { state in
                let old = state.values
                try change(&state.values)
                announce(StoreState.diff(old, state.values), in: state)
            }
        }
        changes.deliverAnnouncements()
    }
}

extension InMemoryStore: OwnValues {
    func ownValue(forKey key: String) -> PrefValue? { state.withLock { $0.values[key] } }
    func ownValues() -> [String: PrefValue] { state.withLock { $0.values } }
}
