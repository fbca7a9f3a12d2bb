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
    /// The engine every file store runs on, here with no file under it: the same updates, batches and
    /// announcements.
    let engine: StoreEngine

    /// `store.changes` is the ``ChangeFeed`` on which this store announces changes.
    public var changes: ChangeFeed { engine.changes }
    /// The layers merged over and under the values held here (registered defaults at least); see `Stores/Layers`.
    var layers: StoreLayers { engine.layers }

    /// `InMemoryStore(["theme": .string("dark")])` creates a store, optionally seeded with values.
    public init(_ values: [String: PrefValue] = [:]) {
        engine = StoreEngine(values: values)
    }

    /// `try store.value(forKey: "theme")` returns the effective value (the one held here, unless a layer such as
    /// a registered default or an argument supplies it), or nil.
    public func value(forKey key: String) throws -> PrefValue? { try engine.value(forKey: key) }

    /// `try store.setValue(.bool(true), forKey: "flag")` stores a value; nil removes it.
    public func setValue(_ value: PrefValue?, forKey key: String) throws {
        try engine.set(value, forKey: key)
    }

    /// `try store.updateValue(forKey: "count") { … }` atomically replaces the value with `transform(current)`.
    ///
    /// Writers wait for each other; the transform may read, or even write, other preferences of this store.
    /// Observers see changes in the order they were applied, after the write returns its locks.
    @discardableResult
    public func updateValue(forKey key: String, _ transform: (PrefValue?) throws -> PrefValue?) throws -> PrefValue? {
        try engine.update(forKey: key, transform)
    }

    /// `try store.allValues()` returns every key and value currently held.
    public func allValues() throws -> [String: PrefValue] { try engine.allValues() }

    /// `try store.replaceAll(values)` makes `values` the whole content at once, announcing the keys that changed.
    public func replaceAll(_ values: [String: PrefValue]) throws {
        for key in values.keys { try validateKey(key) }
        try engine.replaceAll(values)
    }

    /// `try store.removeValues(forKeys: ["a", "b"])` removes several keys at once.
    public func removeValues(forKeys keys: some Sequence<String>) throws { try engine.removeValues(forKeys: keys) }

    /// `try store.batch { … }` applies every write inside `body` at once and announces each changed key once when
    /// `body` returns; if `body` throws, the values go back to what they were before the batch, unannounced. Other
    /// threads' writes wait for the batch to end. See ``KeyValueStore/batch(_:)``.
    public func batch<T>(_ body: () throws -> T) throws -> T { try engine.batch(body) }
}
