package import Foundation
import Synchronization

/// `let hub = StoreHub()` is Prefs' side of a store: the store holds it, and Prefs keeps there everything it does for
/// the store, so that a store's own code never handles a lock of Prefs or an observer.
///
/// Prefs announces every change made through its API (wrappers, `setValue`, `updateValue`, `batch`, …) to `values`
/// streams, ``KeyValueStore/changedKeys(_:)`` and Observation, in the order the changes were made and after
/// releasing its locks; it keeps the store's registered defaults and layers, and makes its writes one at a time. The
/// one thing only the store can tell is a change made outside Prefs (another process, a server, a file edited by
/// hand): it calls ``keysChanged(_:)`` then.
public final class StoreHub: Sendable {
    /// The announcements of the store's changes and their delivery, the keys' cells, the update lock and what of the
    /// store's failures was reported.
    package let feed: ChangeFeed
    /// The store's layers: registered defaults, and the others it adds.
    let layers: StoreLayers
    /// The store itself when it is one of this package's, which carries out its writes and announces them; nil for
    /// a store of the app's own, which Prefs reads and writes through the store's requirements. Set once, as the
    /// store is made, before it is shared.
    nonisolated(unsafe) package private(set) weak var own: (any OwnImplementation)?
    /// The layer stack of a store of the app's own (the stores of this package keep theirs with their values).
    private let stack: StackHolder?
    /// The writes of the batches running on a store of the app's own, outermost first, each level by key (nil:
    /// removed): what Prefs' reads see until the outermost batch writes them. Changed only holding the update lock.
    private let staged = Mutex<[[String: PrefValue?]]>([])

    /// `let hub = StoreHub()` in a store of your own (see <doc:WritingAStore>).
    public convenience init() { self.init(feed: ChangeFeed()) }

    /// The hub of a store of this package that keeps its layers here, as a store of the app's own does.
    package init(feed: ChangeFeed) {
        self.feed = feed
        layers = StoreLayers(changes: feed)
        let stack = StackHolder()
        self.stack = stack
        layers.attach(stack)
    }

    /// The hub of a store whose engine made its feed and keeps its layers with its values.
    init(feed: ChangeFeed, layers: StoreLayers) {
        self.feed = feed
        self.layers = layers
        stack = nil
    }

    /// Makes `implementation` (the store itself) the one Prefs calls for the store's writes; once, as the store is
    /// made.
    package func bind(_ implementation: some OwnImplementation) { own = implementation }

    /// `hub.keysChanged(["theme"])` tells Prefs that these keys of the store changed outside it (another process, a
    /// server, an edit by hand): every wrapper reads them again, and `values` streams, ``KeyValueStore/changedKeys(_:)``
    /// and Observation hear of them.
    ///
    /// Call it once the change can be read through ``KeyValueStore/read(_:)``, holding none of your locks:
    /// observers run on this thread before it returns (called from the store's ``KeyValueStore/write(_:)``, once
    /// Prefs' write has released its lock). Two quick changes of a key may reach an observer as one, since it reads
    /// the value when it runs.
    public func keysChanged(_ keys: some Sequence<String>) {
        feed.publishOutsideChange(Array(keys))
    }

    // MARK: Reads of a store of the app's own

    /// What `key` reads as through the layers kept here, given the store's own value; `user` itself for a store
    /// that keeps its layers with its values.
    package func resolve(_ key: String, user: PrefValue?) -> PrefValue? {
        guard let stack else { return user }
        return stack.withLayers { stack, _ in stack.value(forKey: key, user: user) }
    }

    /// The layer of the value `key` reads as, given whether the store holds one.
    func origin(of key: String, holdsValue: Bool) -> PreferenceLayer? {
        guard let stack else { return layers.origin(of: key) }
        return stack.withLayers { stack, _ in
            stack.isForced(key) ? .managed : holdsValue ? .user : stack.resolve(key, user: nil)?.layer
        }
    }

    /// Every value the batches running on the store wrote (nil: removed), the innermost's last.
    func stagedValues() -> [String: PrefValue?] {
        staged.withLock { levels in levels.reduce(into: [:]) { merged, level in merged.merge(level) { _, new in new } }
        }
    }

    /// The value a batch running on the store wrote for `key`, if one did: `.some(nil)` when it removed the key.
    func stagedValue(forKey key: String) -> PrefValue?? {
        staged.withLock { levels in
            for level in levels.reversed() { if let value = level[key] { return value } }
            return nil
        }
    }

    // MARK: Writes to a store of the app's own

    /// Writes `changes` to `store` and announces them: the one path of every write Prefs makes to a store of the
    /// app's own. Inside a batch they are staged for its end instead.
    func write(to store: some KeyValueStore, _ changes: [String: PrefValue?]) throws {
        for key in changes.keys { try validateKey(key) }
        try feed.writing { try apply(changes, to: store) }
    }

    /// `store.updateValue(forKey:_:)` of a store of the app's own: atomic among the writes Prefs makes in this
    /// process, which wait for the update lock.
    func update(
        _ store: some KeyValueStore, _ key: String, _ transform: (PrefValue?) throws -> PrefValue?
    ) throws -> PrefValue? {
        try validateKey(key)
        return try feed.writing {
            let held = try stagedValue(forKey: key) ?? store.read(key)
            let below = held == nil ? stack?.withLayers { stack, _ in stack.valueBelowUser(key) } : nil
            let updated = try transform(held ?? below)
            try apply([key: updated], to: store)
            return updated
        }
    }

    /// `store.replaceAll(_:)` of a store of the app's own: one write of the keys that change.
    func replaceAll(in store: some KeyValueStore, _ values: [String: PrefValue]) throws {
        try feed.writing {
            var current = try store.readAll()
            for (key, value) in stagedValues() { current[key] = value }
            var changes: [String: PrefValue?] = [:]
            for key in current.keys where values[key] == nil { changes[key] = .some(nil) }
            for (key, value) in values where current[key] != value { changes[key] = value }
            try apply(changes, to: store)
        }
    }

    /// `store.batch(_:)` of a store of the app's own: the writes inside `body` are staged (Prefs' reads see them)
    /// and written in one ``KeyValueStore/write(_:)`` when the outermost batch returns, then announced; if `body`
    /// or the write throws, they are dropped and nothing is announced.
    func batch<T>(_ store: some KeyValueStore, _ body: () throws -> T) throws -> T {
        let outcome = feed.writing { () -> Result<T, any Error> in
            staged.withLock { $0.append([:]) }
            let result = Result { try body() }
            let (level, isOutermost) = staged.withLock { ($0[$0.count - 1], $0.count == 1) }
            guard case .success = result else {
                staged.withLock { _ = $0.removeLast() }
                feed.invalidate(Set(level.keys))
                return result
            }
            guard isOutermost else {
                staged.withLock { levels in
                    let inner = levels.removeLast()
                    levels[levels.count - 1].merge(inner) { _, new in new }
                }
                return result
            }
            // The staged values stay visible until the store holds them.
            defer { staged.withLock { _ = $0.removeLast() } }
            guard !level.isEmpty else { return result }
            do {
                try store.write(level)
            } catch {
                feed.invalidate(Set(level.keys))
                return .failure(error)
            }
            announce(level)
            return result
        }
        return try outcome.get()
    }

    /// Writes or stages `changes`, holding the update lock; a forced key is refused first.
    private func apply(_ changes: [String: PrefValue?], to store: some KeyValueStore) throws {
        guard !changes.isEmpty else { return }
        if let forced = stack?.withLayers({ stack, _ in changes.keys.first(where: stack.isForced) }) {
            throw PrefsError.forced(key: forced)
        }
        let batching = staged.withLock { levels in
            guard !levels.isEmpty else { return false }
            levels[levels.count - 1].merge(changes) { _, new in new }
            return true
        }
        if batching {
            feed.invalidate(Set(changes.keys))
            return
        }
        try store.write(changes)
        announce(changes)
    }

    /// Announces what `changes` made each key read as, holding the update lock, so announcements keep the order of
    /// the writes.
    private func announce(_ changes: [String: PrefValue?]) {
        feed.announce(changes.reduce(into: [:]) { $0[$1.key] = .some(resolve($1.key, user: $1.value)) })
    }

    /// The layer stack of a store of the app's own, which keeps its values itself: the stack's changes are compared
    /// as if the store held no value (observers read the value again when they run).
    private final class StackHolder: OwnValues {
        private let stack = Mutex(LayerStack())

        func withLayers<R>(_ body: (inout LayerStack, [String: PrefValue]) -> R) -> R {
            stack.withLock { body(&$0, [:]) }
        }
    }
}

/// The writes a store of this package carries out itself, with its own announcements: its engine's transaction,
/// Foundation's `UserDefaults`, or a PostgreSQL server's. The public API of ``KeyValueStore`` calls these for such a
/// store, and the generic implementation in ``StoreHub`` over the store's requirements for a store of the app's own.
package protocol OwnImplementation: AnyObject, Sendable {
    func ownValue(forKey key: String) throws -> PrefValue?
    func ownAllValues() throws -> [String: PrefValue]
    func ownSet(_ value: PrefValue?, forKey key: String) throws
    func ownUpdate(forKey key: String, _ transform: (PrefValue?) throws -> PrefValue?) throws -> PrefValue?
    func ownReplaceAll(_ values: [String: PrefValue]) throws
    func ownRemoveValues(forKeys keys: [String]) throws
    func ownBatch<T>(_ body: () throws -> T) throws -> T
    func ownFlush() throws
    func ownFlushInBackground() async throws
    func ownDeferringWrites(window: Duration) -> any KeyValueStore
    /// Whether `value(forKey:)` already answers with the effective value, through the layers the store keeps.
    var resolvesLayers: Bool { get }
    /// Whether a value that does not decode as the declared type is converted as Foundation's typed getters
    /// convert it (a UserDefaults domain).
    var convertsLikeFoundation: Bool { get }
    /// The domain of the preferences folder the store is, whose declared keys are published in its schema.
    var schemaDomain: String? { get }
    /// The domain whose user file holds the store's values, which a report names for `prefs reset`.
    var domainName: String? { get }
    /// The file of the store's values, which a report names.
    var fileURL: URL? { get }
    /// Whether the store cannot tell when its values change and looks before each read of a wrapper.
    var looksBeforeReading: Bool { get }
    /// Looks at `key` and announces a change made outside Prefs, before a wrapper reads it.
    func noticeChange(forKey key: String)
}

extension OwnImplementation {
    package func ownFlush() throws {}
    package func ownFlushInBackground() async throws { try ownFlush() }
    package var resolvesLayers: Bool { true }
    package var convertsLikeFoundation: Bool { false }
    package var schemaDomain: String? { nil }
    package var domainName: String? { nil }
    package var fileURL: URL? { nil }
    package var looksBeforeReading: Bool { false }
    package func noticeChange(forKey key: String) {}
}

extension OwnImplementation where Self: KeyValueStore {
    package func ownValue(forKey key: String) throws -> PrefValue? { try read(key) }
    package func ownAllValues() throws -> [String: PrefValue] { try readAll() }
    package func ownDeferringWrites(window: Duration) -> any KeyValueStore { self }

    /// ``KeyValueStore/write(_:)`` of a store of this package: sets and removals in one batch.
    package func ownWrite(_ changes: [String: PrefValue?]) throws {
        for key in changes.keys { try validateKey(key) }
        try ownBatch {
            for (key, value) in changes.sorted(by: { $0.key < $1.key }) { try ownSet(value, forKey: key) }
        }
    }
}
