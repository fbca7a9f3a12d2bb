// ThreadSanitizer builds lock with Prefs' own annotated Mutex (Platform/TSanMutex.swift), which shadows
// this module's.
import Synchronization

/// The shared state behind a `StoredValue`: its key, codec and store, the decoded value cached against the key's
/// version, and the subscribers of its `values` streams.
final class StoredValueBox<Value: Sendable & Equatable>: Sendable {
    let key: String
    /// The declared default, or the closure that computes it when it is read.
    let defaultSource: DefaultSource<Value>
    let codec: ValueCodec<Value>
    let store: any KeyValueStore
    let migrations: [PrefMigration<Value>]
    /// The key as a published schema describes it, made only when one is published.
    let describe: (@Sendable () -> KeyDescription)?
    /// Whether the value is a secret: a report never shows it, nor where it is.
    let isSecret: Bool
    let cell: KeyCell

    /// A `values` subscriber (yields each new value) or a `changes` subscriber (yields the old and new value).
    ///
    /// A class in an array, not a value in a dictionary: delivery updates `last` in place, and in this generic code
    /// every dictionary lookup and iteration element type was a runtime metadata look-up (a tenth of a delivery).
    final class Subscriber: @unchecked Sendable {
        // @unchecked Sendable: `last` is only read or written while holding the box's `subscribers` lock.
        let token: UInt64
        let yield: @Sendable (_ old: Value, _ new: Value) -> Void
        var last: Value
        /// The key's version when `last` was read: changes announced up to it are already in `last`.
        let since: UInt64

        init(token: UInt64, yield: @escaping @Sendable (Value, Value) -> Void, last: Value, since: UInt64) {
            self.token = token
            self.yield = yield
            self.last = last
            self.since = since
        }
    }

    struct Subscribers {
        var list: [Subscriber] = []
        var nextToken: UInt64 = 0
        var listening = false
    }

    /// The key version the cache is of (0: none yet), under the lock that guards the cache.
    ///
    /// A lock of a concrete type beside plain storage, not a `Mutex` of a (version, value) pair or of an optional:
    /// a read in unspecialized generic code then looks up no metadata of a type built from `Value` (an optional's
    /// cost four times the rest of a cached read: `read_vs_mutex`), and a miss leaves the lock by a typed throw.
    private let cachedVersion = Mutex<UInt64>(0)
    /// The value at that version, once `holdsValue`. Only used while holding `cachedVersion`'s lock.
    private nonisolated(unsafe) let cachedValue = UnsafeMutablePointer<Value>.allocate(capacity: 1)
    /// Whether `cachedValue` is initialized. Only used while holding `cachedVersion`'s lock.
    @exclusivity(unchecked) private nonisolated(unsafe) var holdsValue = false
    /// Whether the key read as its computed default at that version, which each read computes again. Only used
    /// while holding `cachedVersion`'s lock.
    @exclusivity(unchecked) private nonisolated(unsafe) var readsComputedDefault = false
    /// The last read failure reported (its error and source), until the key reads well again.
    private let lastReadFailure = Mutex<String?>(nil)
    let subscribers = Mutex(Subscribers())
    /// Whether the store cannot tell when other code changes its values (a ``UserDefaultsBridgeStore``): each
    /// read first looks, so such a change is seen (and announced) at once.
    let looksBeforeReading: Bool

    init(
        key: String, default defaultSource: DefaultSource<Value>, codec: ValueCodec<Value>, store: any KeyValueStore,
        migrations: [PrefMigration<Value>] = [], describe: (@Sendable () -> KeyDescription)? = nil,
        isSecret: Bool = false
    ) {
        self.key = key
        self.defaultSource = defaultSource
        self.codec = codec
        self.store = store
        self.migrations = migrations
        self.describe = describe
        self.isSecret = isSecret
        self.cell = store.hub.feed.cell(for: key)
        self.looksBeforeReading = store.hub.own?.looksBeforeReading == true
        if let conflict = cell.declare(KeyDeclaration(type: Value.self, default: defaultSource)) {
            ErrorReporter.report(
                PrefsError.conflictingDeclarations(key: key, first: conflict.first, second: conflict.second),
                key: key, operation: .declaration)
        }
        // Before the default is registered, so that only stored values count as present.
        for migration in migrations { migration.run(key: key, codec: codec, in: store) }
        // Layers: a declaration registers its default with its store, for raw reads and other code.
        store.registerDeclared(key, default: defaultSource, codec: codec, describe: describe)
    }

    /// The state a wrapper declared without `store:` uses now: inside a `withDefaultStore` scope of another store
    /// (a test under `.isolatedPreferences`), this declaration's state on the scope's store, so a global or static
    /// wrapper follows each test; elsewhere this one.
    func inCurrentDefaultScope() -> StoredValueBox { standingIn(for: DefaultStores.scopedDefault) }

    /// The same for a secure wrapper declared without `store:`, in a `withDefaultSecureStore` scope.
    func inCurrentSecureScope() -> StoredValueBox { standingIn(for: DefaultStores.scopedSecure) }

    private func standingIn(for scope: DefaultStores.Scope?) -> StoredValueBox {
        guard let scope, scope.store !== store else { return self }
        return scope.box(standingInFor: self) {
            StoredValueBox(
                key: key, default: defaultSource, codec: codec, store: scope.store, migrations: migrations,
                describe: describe, isSecret: isSecret)
        }
    }

    deinit {
        store.hub.feed.removeListener(forKey: key, owner: ObjectIdentifier(self))
        if holdsValue { cachedValue.deinitialize(count: 1) }
        cachedValue.deallocate()
    }

    /// `$x.defaultValue`: the declared default, or the computed one's answer now.
    var defaultValue: Value { defaultSource.value }

    /// The current value: served from the cache unless the key changed since it was decoded.
    var value: Value {
        if looksBeforeReading { store.hub.own?.noticeChange(forKey: key) }
        cell.trackAccess()
        return currentValue()
    }

    /// The cached value when it belongs to the key's current version, else a fresh one, decoded outside the lock
    /// and cached unless a newer one was cached meanwhile.
    private func currentValue() -> Value {
        let version = cell.version
        do throws(CacheMiss) {
            return try cachedVersion.withLock { cachedVersion throws(CacheMiss) -> Value in
                guard cachedVersion == version else { throw .stale }
                guard !readsComputedDefault else { throw .computedDefault }
                return cachedValue.pointee
            }
        } catch .computedDefault {
            return defaultSource.value
        } catch {
            return refreshed(at: version)
        }
    }

    /// Reads the key afresh and caches what it read at `version`, unless a newer version was cached meanwhile. Apart
    /// from `currentValue`, whose frame would otherwise set up an optional of `Value` on every read.
    @inline(never)
    private func refreshed(at version: UInt64) -> Value {
        let fresh = load()
        cachedVersion.withLock { cachedVersion in
            guard version > cachedVersion else { return }
            cachedVersion = version
            readsComputedDefault = fresh == nil
            guard let fresh else { return }
            if holdsValue { cachedValue.pointee = fresh } else { cachedValue.initialize(to: fresh) }
            holdsValue = true
        }
        return fresh ?? defaultSource.value
    }

    /// Reads and decodes from the store; failures read as the default and are reported, never thrown. A store that
    /// cannot be read at all (a damaged file) is reported once for all its keys; a value that cannot be decoded is
    /// reported once, until the key reads well again. Nil for a computed default, which the caller computes.
    private func load() -> Value? {
        let fallback = defaultSource.fixed
        let stored: PrefValue?
        do {
            stored = try store.value(forKey: key)
        } catch {
            store.hub.feed.reported.reportOnce(error, key: key, operation: .read)
            return fallback
        }
        guard let stored else { return fallback }
        do {
            let value = try store.decodeEffective(stored, key: key, codec: codec) ?? fallback
            lastReadFailure.withLock { $0 = nil }
            return value
        } catch {
            let shownDefault = fallback.flatMap { (try? codec.encode($0)) ?? nil }
            let source = isSecret ? nil : store.source(of: key, stored, default: shownDefault)
            // The same refusal again (a write of the key under a value an argument or another layer keeps) is not
            // news: reported once until the key reads well again.
            let text = "\(error) \(source.map { "\($0)" } ?? "")"
            guard
                lastReadFailure.withLock({ last in
                    defer { last = text }
                    return last != text
                })
            else {
                return fallback
            }
            ErrorReporter.report(error, key: key, operation: .read, source: source)
            return fallback
        }
    }

    /// Runs a write of a wrapper that cannot throw on this state (resolved once, so the write and its report are
    /// about the same store), reporting a failure once per cause (see `ReportLedger.reportingWrite`).
    func reportingWrite(_ body: (StoredValueBox) throws -> Void) {
        store.hub.feed.reported.reportingWrite(key: key) { try body(self) }
    }

    func write(_ newValue: Value) throws {
        try store.setValue(try codec.encode(newValue, key: key), forKey: key)
    }

    func remove() throws {
        try store.removeValue(forKey: key)
    }

    /// Atomic read-modify-write through the store. A stored value that cannot be decoded aborts the update, so it
    /// is never overwritten by a transform of the default.
    func modify(_ transform: (inout Value) -> Void) throws {
        // A computed default runs here, before the store takes its lock, never inside the update.
        let fallback = defaultSource.value
        try store.updateValue(forKey: key) { stored in
            var value = try stored.flatMap { try store.decodeEffective($0, key: key, codec: codec) } ?? fallback
            transform(&value)
            return try codec.encode(value, key: key)
        }
    }

    // MARK: Streams

    /// The current value, then each distinct change.
    func stream() -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream.makeStream(of: Value.self)
        let unsubscribe = subscribe(yieldingCurrent: { continuation.yield($0) }, { _, new in continuation.yield(new) })
        continuation.onTermination = { _ in unsubscribe() }
        return stream
    }

    /// Each distinct change as the value before and after it.
    func transitions() -> AsyncStream<(old: Value, new: Value)> {
        let (stream, continuation) = AsyncStream.makeStream(of: (old: Value, new: Value).self)
        let unsubscribe = subscribe(yieldingCurrent: nil, { old, new in continuation.yield((old, new)) })
        continuation.onTermination = { _ in unsubscribe() }
        return stream
    }

    /// Registers a subscriber whose `last` is the current value, optionally yielding it first, under the lock that
    /// orders deliveries, so nothing between the current value and the live changes is lost. Returns what removes
    /// the subscriber.
    private func subscribe(
        yieldingCurrent: ((Value) -> Void)?, _ yield: @escaping @Sendable (Value, Value) -> Void
    ) -> @Sendable () -> Void {
        startListening()
        let token = subscribers.withLock { subscribers in
            let (version, current) = versionedValue()
            subscribers.nextToken += 1
            subscribers.list.append(
                Subscriber(token: subscribers.nextToken, yield: yield, last: current, since: version))
            yieldingCurrent?(current)
            return subscribers.nextToken
        }
        return { self.subscribers.withLock { $0.list.removeAll { $0.token == token } } }
    }

    /// The current value with a version it is at least as new as: stores advance the version right after applying
    /// a value, under their lock, so when the version is the same before and after reading, the value read is
    /// that version's or the next one's, never one announced later still.
    private func versionedValue() -> (UInt64, Value) {
        var attempts = 0
        while true {
            let before = cell.version
            let value = currentValue()
            attempts += 1
            if cell.version == before || attempts == 100 { return (before, value) }
        }
    }

    private func startListening() {
        let start = subscribers.withLock { subscribers in
            defer { subscribers.listening = true }
            return !subscribers.listening
        }
        guard start else { return }
        store.hub.feed.addListener(forKey: key, owner: ObjectIdentifier(self)) { [weak self] version, update in
            self?.deliver(version: version, update)
        }
    }

    /// Sends one announced change to each subscriber that has not seen it yet. The feed delivers one change at a
    /// time, in the order the store applied them, so each subscriber sees every distinct value in that order.
    /// The stored value is decoded before taking the subscribers' lock; yielding never runs subscriber code.
    private func deliver(version: UInt64, _ update: ChangeFeed.Update) {
        guard subscribers.withLock({ !$0.list.isEmpty }) else { return }
        let new: Value
        switch update {
        case .value(let stored): new = decodeQuietly(stored)
        case .unknown: new = currentValue()
        }
        subscribers.withLock { subscribers in
            for subscriber in subscribers.list where version > subscriber.since && subscriber.last != new {
                subscriber.yield(subscriber.last, new)
                subscriber.last = new
            }
        }
    }

    /// A stored value as the declared type; what cannot be decoded reads as the default, as it does through
    /// `value` (which reports the error when the value is read).
    private func decodeQuietly(_ stored: PrefValue?) -> Value {
        guard let stored else { return defaultValue }
        return (try? codec.decode(stored, key: key)) ?? defaultValue
    }
}

/// Why a read cannot be served from a wrapper's cache. Outside the generic class, so that throwing it looks up no
/// metadata.
private enum CacheMiss: Error { case stale, computedDefault }
