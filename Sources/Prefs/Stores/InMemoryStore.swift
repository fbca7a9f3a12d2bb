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
public final class InMemoryStore: KeyValueStore, OwnImplementation {
    /// The engine every file store runs on, here with no file under it: the same updates, batches and
    /// announcements.
    let engine: StoreEngine
    /// `store.hub` is Prefs' side of the store: its announcements and layers, the engine's.
    public let hub: StoreHub

    /// `InMemoryStore(["theme": .string("dark")])` creates a store, optionally seeded with values.
    public init(_ values: [String: PrefValue] = [:]) {
        engine = StoreEngine(values: values)
        hub = StoreHub(feed: engine.changes, layers: engine.layers)
        hub.bind(self)
    }

    /// `try store.read("theme")` is the value held here, layers aside, or nil.
    public func read(_ key: String) throws -> PrefValue? { try engine.value(forKey: key, throughLayers: false) }

    /// `try store.readAll()` is every key and value held here.
    public func readAll() throws -> [String: PrefValue] { try engine.allValues() }

    package func ownValue(forKey key: String) throws -> PrefValue? { try engine.value(forKey: key) }

    /// `try store.write(["theme": .string("dark"), "zoom": nil])` sets and removes several keys at once.
    public func write(_ changes: [String: PrefValue?]) throws { try ownWrite(changes) }

    package func ownSet(_ value: PrefValue?, forKey key: String) throws { try engine.set(value, forKey: key) }

    package func ownUpdate(forKey key: String, _ transform: (PrefValue?) throws -> PrefValue?) throws -> PrefValue? {
        try engine.update(forKey: key, transform)
    }

    package func ownReplaceAll(_ values: [String: PrefValue]) throws { try engine.replaceAll(values) }

    package func ownRemoveValues(forKeys keys: [String]) throws { try engine.removeValues(forKeys: keys) }

    package func ownBatch<T>(_ body: () throws -> T) throws -> T { try engine.batch(body) }
}
