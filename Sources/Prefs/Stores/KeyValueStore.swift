import Synchronization

/// `final class MyStore: KeyValueStore { … }` is a backend that persists preferences.
///
/// Prefs ships ``InMemoryStore``, ``UserDefaultsStore``, ``FileStore`` and ``EncryptedFileStore``. Any other
/// backend conforms with five members: three raw operations on ``PrefValue``s, an atomic read-modify-write and a
/// ``ChangeFeed`` on which it announces changes. Every operation can throw, so a store never has to hide a failure.
///
/// Typed access comes for free:
///
/// ```swift
/// let enabled = try store.value(for: .doTheThing)   // the key's default when nothing is stored
/// try store.set(true, for: .doTheThing)
/// try store.removeValue(for: .doTheThing)
/// ```
///
/// ### Writing a store
/// - Serve reads from memory where you can: property wrappers cache decoded values, but a miss calls
///   ``value(forKey:)``.
/// - Announce every change, whoever made it (this process or another one), in two steps: while still holding the
///   lock under which you applied it, call `changes.announce(_:)` with the new values of the keys that changed;
///   after releasing your locks, call `changes.deliverAnnouncements()`. Observers then see every value that became
///   current, in the order you applied them, and none of their code runs under your lock. (A store that cannot
///   tell the new values calls `changes.publish(changedKeys:)` after releasing its locks instead; its observers
///   read the current value, so quick successive changes may reach them as one.)
/// - Implement ``updateValue(forKey:_:)`` atomically if your backend can; the default implementation is atomic
///   within the process only.
/// - Refuse bad keys with ``validateKey(_:)`` in every write.
///
/// `KeyValueStoreConformance`, in the `PrefsTesting` product, checks a store against all of this in one line of a
/// test; <doc:WritingAStore> shows a store and that test.
public protocol KeyValueStore: AnyObject, Sendable {
    /// `try store.value(forKey: "theme")` returns the stored value, or nil when the key is absent.
    func value(forKey key: String) throws -> PrefValue?

    /// `try store.setValue(.bool(true), forKey: "flag")` stores a value; `nil` removes the key.
    ///
    /// When it returns, the change is persisted as durably as the backend allows and has been announced on
    /// ``changes``.
    func setValue(_ value: PrefValue?, forKey key: String) throws

    /// `try store.updateValue(forKey: "count") { … }` reads, transforms and writes one value atomically.
    ///
    /// - Parameters:
    ///   - key: The key whose value is updated.
    ///   - transform: Receives the current value (nil when absent) and returns the new one (nil removes). If it
    ///     throws, nothing is written and the error is rethrown.
    /// - Returns: The value now stored.
    @discardableResult
    func updateValue(forKey key: String, _ transform: (PrefValue?) throws -> PrefValue?) throws -> PrefValue?

    /// `try store.allValues()` returns every key and value in the store.
    func allValues() throws -> [String: PrefValue]

    /// `try store.replaceAll(values)` makes `values` the store's whole content: keys not in it are removed.
    ///
    /// The stores Prefs ships do it in one atomic write. The default implementation, for a custom store, removes
    /// and sets key by key while holding the update lock of ``changes``: atomic among callers in this process only.
    func replaceAll(_ values: [String: PrefValue]) throws

    /// `try store.removeValues(forKeys: ["theme", "zoom"])` removes several keys, so they read as their defaults.
    ///
    /// The stores Prefs ships do it in one atomic write; the default implementation removes key by key.
    func removeValues(forKeys keys: some Sequence<String>) throws

    /// `store.changes` is the feed on which the store announces every change to its values.
    var changes: ChangeFeed { get }

    /// `try store.batch { settings.theme = .dark; settings.fontSize = 14 }` saves many changes as one.
    ///
    /// Every write inside `body`, through property wrappers or the store itself, is applied in memory at once
    /// (reads inside `body` see it) and, in the stores Prefs ships that keep a file (``FileStore``,
    /// ``UserDefaultsStore``, ``EncryptedFileStore``), made durable in one atomic write of the file when `body`
    /// returns. Observers hear of each changed key once, after that write. If `body` throws, or the write fails,
    /// nothing is written, the store's values go back to what they were before the batch, and the error is
    /// rethrown. A batch inside a batch of the same store joins it; if the inner one throws, only its own writes
    /// are undone.
    ///
    /// While the batch runs it holds the store's write lock: writes from other threads and processes to the same
    /// file wait until it ends, so keep the body short and never make it wait for another thread that writes to
    /// the same store. Reads from other threads are not blocked and may see the batch's values before it commits.
    ///
    /// ``InMemoryStore`` batches the same way, without the file. The default implementation, for a custom store
    /// without native batching, runs `body` holding the store's update lock: each write inside takes effect and
    /// is announced as it is made, and nothing is undone if `body` throws.
    func batch<T>(_ body: () throws -> T) throws -> T

    /// `store.register(defaults: ["volume": .int(5)])` registers defaults for this process, as
    /// `UserDefaults.register(defaults:)` does: an unset key reads as its registered default, through typed reads and
    /// wrappers, until a value is stored. Nothing is written; a later registration of a key replaces an earlier one.
    ///
    /// The stores Prefs ships keep them in their registered-defaults layer, which ``value(forKey:)`` reads too. The
    /// default implementation, for a custom store, keeps them beside the store's ``changes`` and announces the keys
    /// whose default changed; a store that keeps them itself implements this and ``registeredDefault(forKey:)``.
    func register(defaults: [String: PrefValue])

    /// `store.registeredDefault(forKey: "volume")` is the default registered for the key in this process, or nil.
    func registeredDefault(forKey key: String) -> PrefValue?

    /// `try store.flush()` returns once every write deferred so far (see ``FileBackedStore/deferringWrites(window:)``)
    /// is durably in the store's file.
    ///
    /// It writes at once, on this thread, instead of waiting for the window; with nothing deferred it returns at
    /// once. Any store handle of the same file flushes the same changes. The default implementation, for a store
    /// whose writes are durable when they return, has nothing to flush.
    ///
    /// - Throws: the error of the write when it fails; the values stay in memory and are written by a later commit.
    ///   Inside a batch or an update of the same store, ``PrefsError/io(path:operation:errno:message:)`` with
    ///   `EDEADLK`, since the flush would wait for itself: flush after it. On a closed store,
    ///   ``PrefsError/storeClosed(path:)``.
    func flush() throws

    /// `try await store.flush()` returns once every write deferred so far is durably in the file, writing on a
    /// background thread rather than the caller's. The default implementation calls the synchronous `flush()`.
    func flush() async throws

    /// `let quick = store.deferringWrites(window: .milliseconds(20))` is the store's view whose plain writes are
    /// deferred, when it defers writes (a file store: see ``FileBackedStore/deferringWrites(window:)``), or else the
    /// store itself, whose writes do not wait for a file: the default implementation.
    func deferringWrites(window: Duration) -> any KeyValueStore
}

extension KeyValueStore {
    /// `try store.updateValue(forKey: "count") { … }`, by default: a read-modify-write that is atomic among callers
    /// in this process, not across processes.
    @discardableResult
    public func updateValue(forKey key: String, _ transform: (PrefValue?) throws -> PrefValue?) throws -> PrefValue? {
        try changes.withUpdateLock {
            let updated = try transform(try value(forKey: key))
            try setValue(updated, forKey: key)
            return updated
        }
    }

    /// `try store.batch { … }`, by default: runs `body` holding the update lock of ``changes``; its writes take
    /// effect one by one, as they are made.
    public func batch<T>(_ body: () throws -> T) throws -> T {
        try changes.withUpdateLock(body)
    }

    /// `store.register(defaults: defaults)`, by default: keeps them beside the store's ``changes``, replacing earlier
    /// registrations of the same keys, and announces the keys whose default changed.
    public func register(defaults: [String: PrefValue]) {
        let changed = changes.registeredDefaults.withLock { registered in
            var changed: [String] = []
            for (key, value) in defaults where registered[key] != value {
                registered[key] = value
                changed.append(key)
            }
            return changed
        }
        changes.publish(changedKeys: changed)
    }

    /// `store.registeredDefault(forKey: "volume")`, by default: what ``register(defaults:)`` or a declaration of the
    /// key registered beside the store's ``changes``.
    public func registeredDefault(forKey key: String) -> PrefValue? {
        changes.registeredDefaults.withLock { $0[key] }
    }

    /// `try store.flush()`, by default: nothing to flush, since the store's writes are durable when they return.
    public func flush() throws {}

    /// `try await store.flush()`, by default: the store's synchronous `flush()`.
    public func flush() async throws {
        let flushNow: () throws -> Void = flush
        try flushNow()
    }

    /// `store.deferringWrites(window: window)`, by default: the store itself, whose writes do not wait for a file.
    public func deferringWrites(window: Duration) -> any KeyValueStore { self }

    /// `let quick = PrefsConfig.defaultStore.deferringWrites()` is the store's view whose plain writes are deferred
    /// for up to 50 ms (see ``deferringWrites(window:)``).
    public func deferringWrites() -> any KeyValueStore { deferringWrites(window: .milliseconds(50)) }

    /// `try store.replaceAll(values)`, by default: removes the keys `values` lacks and sets the others, one key at a
    /// time, while holding the update lock of ``changes``.
    public func replaceAll(_ values: [String: PrefValue]) throws {
        for key in values.keys { try validateKey(key) }
        try changes.withUpdateLock {
            let current = try allValues()
            for key in current.keys where values[key] == nil { try setValue(nil, forKey: key) }
            for (key, value) in values where current[key] != value { try setValue(value, forKey: key) }
        }
    }

    /// `try store.removeValues(forKeys: keys)`, by default: removes one key at a time.
    public func removeValues(forKeys keys: some Sequence<String>) throws {
        for key in keys { try setValue(nil, forKey: key) }
    }

    /// `try store.removeAll()` removes every key, so every preference of the store reads as its default.
    public func removeAll() throws {
        try removeValues(forKeys: Array(try allValues().keys))
    }

    /// `try store.reset(.theme, .fontSize)` removes the values of several typed keys, so they read as their defaults.
    public func reset<each Value>(_ keys: repeat PrefKey<each Value>) throws {
        var names: [String] = []
        for key in repeat each keys { names.append(key.name) }
        try removeValues(forKeys: names)
    }

    /// `store[.theme]` reads a typed value and `store[.theme] = .dark` writes one, without `try`: errors are
    /// reported to ``PrefsConfig/errorHandler`` as a property wrapper reports them, and a read that fails returns
    /// the key's default.
    ///
    /// For code that is not a property, the way `Defaults[.key]` is used. A failing read of the same stored value is
    /// reported once; use ``value(for:)`` and ``set(_:for:)`` to handle errors yourself.
    public subscript<Value>(key: PrefKey<Value>) -> Value {
        get {
            let cell = changes.cell(for: key.name)
            let version = cell.version
            do {
                return try value(for: key)
            } catch {
                if cell.shouldReportFailure(at: version) {
                    ErrorReporter.report(error, key: key.name, operation: .read)
                }
                return key.defaultValue
            }
        }
        set {
            ErrorReporter.reporting(key: key.name, operation: .write) { try set(newValue, for: key) }
        }
    }

    /// `try store.removeValue(forKey: "theme")` removes a key; removing an absent key does nothing.
    public func removeValue(forKey key: String) throws {
        try setValue(nil, forKey: key)
    }

    /// `try store.value(for: .doTheThing)` reads a typed value, or the key's default when no layer holds one.
    ///
    /// The value comes from the strongest layer that holds the key (see <doc:LayeredPreferences>); text from the
    /// command line or the environment is converted to the key's type.
    ///
    /// - Throws: ``PrefsError/typeMismatch(key:expected:found:)`` or ``PrefsError/decodingFailed(key:reason:)``
    ///   when the stored value does not fit the key's type, and any error of the store.
    public func value<Value>(for key: PrefKey<Value>) throws -> Value {
        // Layers: the effective value (a custom store's registered default too), text converted to the key's type.
        guard let stored = try effectiveValue(forKey: key.name) else { return key.defaultValue }
        return try decodeEffective(stored, key: key.name, codec: key.codec) ?? key.defaultValue
    }

    /// `try store.set(true, for: .doTheThing)` writes a typed value; an Optional's nil removes the key.
    public func set<Value>(_ value: Value, for key: PrefKey<Value>) throws {
        try setValue(try key.codec.encode(value, key: key.name), forKey: key.name)
    }

    /// `try store.removeValue(for: .doTheThing)` removes the value so the key reads as its default again.
    public func removeValue<Value>(for key: PrefKey<Value>) throws {
        try setValue(nil, forKey: key.name)
    }
}

extension KeyValueStore {
    /// `try validateKey(key)`, in your store's writes, refuses a key name no store may hold: an empty one, or one
    /// containing NUL.
    ///
    /// Every store Prefs ships makes this check first in each operation that writes a key. Make it in your own
    /// store's writes too, so that a bad key gets the same ``PrefsError/invalidKey(_:reason:)`` everywhere (the
    /// `key-validation` rule of `KeyValueStoreConformance` checks it).
    ///
    /// - Throws: ``PrefsError/invalidKey(_:reason:)`` naming the key and what is wrong with it.
    public func validateKey(_ key: String) throws(PrefsError) {
        try Prefs.validateKey(key)
    }
}

/// Refuses a key name no store may hold: the check behind ``KeyValueStore/validateKey(_:)``, for the code of this
/// package that is not a store (inside a store, the member shadows it and does the same).
package func validateKey(_ key: String) throws(PrefsError) {
    if key.isEmpty { throw .invalidKey(key, reason: "a key cannot be empty") }
    if key.utf8.contains(0) { throw .invalidKey(key, reason: "a key cannot contain NUL") }
}
