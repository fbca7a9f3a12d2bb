/// `final class MyStore: KeyValueStore { … }` is a backend that persists preferences.
///
/// Prefs ships ``InMemoryStore``, ``SuiteFileStore``, ``FileStore``, ``EncryptedFileStore`` and
/// ``UserDefaultsBridgeStore``. Any other backend conforms with four members: a ``StoreHub``, a read of one key,
/// a read of every key and a write of several:
///
/// ```swift
/// final class DictionaryStore: KeyValueStore {
///     let hub = StoreHub()
///     private let values = Mutex<[String: PrefValue]>([:])
///
///     func read(_ key: String) throws -> PrefValue? { values.withLock { $0[key] } }
///     func readAll() throws -> [String: PrefValue] { values.withLock { $0 } }
///     func write(_ changes: [String: PrefValue?]) throws {
///         values.withLock { for (key, value) in changes { $0[key] = value } }
///     }
/// }
/// ```
///
/// Everything an app calls comes from Prefs, for every store alike: ``value(forKey:)``, ``setValue(_:forKey:)``,
/// ``updateValue(forKey:_:)``, ``batch(_:)``, typed reads and writes, registered defaults and layers, and the
/// announcements that reach `values` streams, ``changedKeys(_:)`` and Observation, in the order the changes were made
/// and after every lock is released. A store's own code never announces, delivers or locks for Prefs; when something
/// outside Prefs changes its keys (another process, a server, an edit by hand), it calls ``StoreHub/keysChanged(_:)``.
///
/// ```swift
/// let enabled = try store.value(for: .doTheThing)   // the key's default when nothing is stored
/// try store.set(true, for: .doTheThing)
/// try store.removeValue(for: .doTheThing)
/// ```
///
/// `KeyValueStoreConformance`, in the `PrefsTesting` product, checks a store in one line of a test;
/// <doc:WritingAStore> shows a store and that test.
public protocol KeyValueStore: AnyObject, Sendable {
    /// `let hub = StoreHub()`: where Prefs keeps what it does for this store (announcements, registered defaults
    /// and layers, the order of writes); one per store, made with it.
    var hub: StoreHub { get }

    /// `try store.read("theme")` is the value the store holds for the key, or nil: what Prefs' reads start from.
    ///
    /// An app reads with ``value(forKey:)``, which adds what Prefs keeps for the store (registered defaults, layers,
    /// a batch's writes before it ends).
    func read(_ key: String) throws -> PrefValue?

    /// `try store.readAll()` is every key and value the store holds.
    func readAll() throws -> [String: PrefValue]

    /// `try store.write(["theme": .string("dark"), "zoom": nil])` stores each value and removes each key whose
    /// value is nil, all at once if the backend can.
    ///
    /// Prefs calls it for every write made through its API (``setValue(_:forKey:)``, wrappers, a whole
    /// ``batch(_:)`` at its end), one at a time, and announces the change once it returns; an app calls those, not
    /// this. Make the write durable before returning, and throw when it cannot be: Prefs then announces nothing.
    /// Keys are already checked (``validateKey(_:)``).
    func write(_ changes: [String: PrefValue?]) throws
}

extension KeyValueStore {
    /// `try store.value(forKey: "theme")` is the key's value, or nil when no layer holds one.
    ///
    /// The value comes from the strongest layer that holds the key (see <doc:LayeredPreferences>): the store's own,
    /// unless an administrator forced one or an argument gives one, else a registered default. Inside a batch it is
    /// the batch's write.
    public func value(forKey key: String) throws -> PrefValue? {
        guard let own = hub.own else { return hub.resolve(key, user: try hub.stagedValue(forKey: key) ?? read(key)) }
        let value = try own.ownValue(forKey: key)
        return own.resolvesLayers ? value : hub.resolve(key, user: value)
    }

    /// `try store.allValues()` returns every key and value the store holds (registered defaults and other layers
    /// aside; see ``allValues(in:)``).
    public func allValues() throws -> [String: PrefValue] {
        if let own = hub.own { return try own.ownAllValues() }
        var values = try readAll()
        for (key, value) in hub.stagedValues() { values[key] = value }
        return values
    }

    /// `try store.setValue(.bool(true), forKey: "flag")` stores a value; `nil` removes the key.
    ///
    /// When it returns, the change is persisted as durably as the store allows and observers have heard of it.
    public func setValue(_ value: PrefValue?, forKey key: String) throws {
        if let own = hub.own { return try own.ownSet(value, forKey: key) }
        try hub.write(to: self, [key: value])
    }

    /// `try store.removeValue(forKey: "theme")` removes a key; removing an absent key does nothing.
    public func removeValue(forKey key: String) throws {
        try setValue(nil, forKey: key)
    }

    /// `try store.updateValue(forKey: "count") { … }` reads, transforms and writes one value atomically.
    ///
    /// The stores Prefs ships that keep a file do it under the file's lock, atomic across processes; the others,
    /// and a store of your own, atomic among the writes of this process.
    ///
    /// - Parameters:
    ///   - key: The key whose value is updated.
    ///   - transform: Receives the current value (nil when absent) and returns the new one (nil removes). If it
    ///     throws, nothing is written and the error is rethrown.
    /// - Returns: The value now stored.
    @discardableResult
    public func updateValue(forKey key: String, _ transform: (PrefValue?) throws -> PrefValue?) throws -> PrefValue? {
        if let own = hub.own { return try own.ownUpdate(forKey: key, transform) }
        return try hub.update(self, key, transform)
    }

    /// `try store.replaceAll(values)` makes `values` the store's whole content: keys not in it are removed, in one
    /// write.
    public func replaceAll(_ values: [String: PrefValue]) throws {
        for key in values.keys { try validateKey(key) }
        if let own = hub.own { return try own.ownReplaceAll(values) }
        try hub.replaceAll(in: self, values)
    }

    /// `try store.removeValues(forKeys: ["theme", "zoom"])` removes several keys in one write, so they read as
    /// their defaults.
    public func removeValues(forKeys keys: some Sequence<String>) throws {
        let keys = Array(keys)
        if let own = hub.own { return try own.ownRemoveValues(forKeys: keys) }
        try hub.write(to: self, Dictionary(keys.map { ($0, nil) }) { first, _ in first })
    }

    /// `try store.removeAll()` removes every key, so every preference of the store reads as its default.
    public func removeAll() throws {
        try removeValues(forKeys: Array(try allValues().keys))
    }

    /// `try store.batch { settings.theme = .dark; settings.fontSize = 14 }` saves many changes as one.
    ///
    /// Every write inside `body`, through property wrappers or the store itself, is applied at once for Prefs'
    /// reads (reads inside `body` see it) and made durable in one write when `body` returns: one atomic write of
    /// the file for the stores Prefs ships that keep one, one ``write(_:)`` for a store of your own. Observers hear
    /// of each changed key once, after that write. If `body` throws, or the write fails, nothing is written, the
    /// values go back to what they were before the batch, and the error is rethrown. A batch inside a batch of the
    /// same store joins it; if the inner one throws, only its own writes are undone.
    ///
    /// While the batch runs it holds the store's write lock: writes from other threads (and, for a file, other
    /// processes) wait until it ends, so keep the body short and never make it wait for another thread that writes
    /// to the same store. Reads from other threads are not blocked and may see the batch's values before it ends.
    /// ``UserDefaultsBridgeStore`` applies each write to its instance as it is made and saves once.
    public func batch<T>(_ body: () throws -> T) throws -> T {
        if let own = hub.own { return try own.ownBatch(body) }
        return try hub.batch(self, body)
    }

    /// `try store.flush()` returns once every write deferred so far (see ``deferringWrites(window:)``) is durably
    /// in the store's file.
    ///
    /// It writes at once, on this thread, instead of waiting for the window; with nothing deferred it returns at
    /// once. Any store of the same file flushes the same changes. A store whose writes are durable when they return
    /// has nothing to flush.
    ///
    /// - Throws: the error of the write when it fails; the values stay in memory and are written by a later commit.
    ///   Inside a batch or an update of the same store, ``PrefsError/io(path:operation:errno:message:)`` with
    ///   `EDEADLK`, since the flush would wait for itself: flush after it. On a closed store,
    ///   ``PrefsError/storeClosed(path:)``.
    public func flush() throws {
        try hub.own?.ownFlush()
    }

    /// `try await store.flush()` returns once every write deferred so far is durably in the file, writing on a
    /// background thread rather than the caller's.
    public func flush() async throws {
        try await hub.own?.ownFlushInBackground()
    }

    /// `let quick = store.deferringWrites()` is the same store, whose writes return at once and reach the file
    /// within `window`, for a store that keeps a file; any other store returns itself, since its writes wait for no
    /// file.
    ///
    /// ```swift
    /// let settings = try SuiteFileStore(suiteName: "com.example.app")
    /// let quick = settings.deferringWrites()                         // 50 ms
    /// @StoredValue(key: "volume", store: quick) var volume = 0.5
    /// volume = 0.7          // in memory now: every reader and observer in the process sees 0.7
    /// try quick.flush()     // on disk now (or wait: it is there within 50 ms)
    /// ```
    ///
    /// Both stores read and write the same values: a write through either is seen at once through the other, by
    /// every wrapper of the key and by every observer in this process. Writes through the returned store
    /// (`set`, `reset`, `setValue(_:forKey:)`, `removeValues(forKeys:)`, `replaceAll(_:)`, `batch(_:)`) change
    /// memory and return; a background commit then writes every change made within the window in one durable,
    /// atomic write of the file, in the order they were made, on top of the file's latest values under its
    /// cross-process lock. Other processes see a change once it is committed. A commit is a write like a durable
    /// one, with the same checks (see ``FileBackedStore``).
    ///
    /// - A change not committed yet gives way to a later write of the same key by another process: that write,
    ///   which its writer was told is stored, is what the file keeps and what this process's readers and observers
    ///   end on. The commit compares the file's value of the key with the value the change replaced; another write
    ///   that left that same value there (set and set back) is not told apart, and the change is written.
    /// - A batch is one commit: its changes reach the file together, or, if its body throws, not at all.
    /// - Read-modify-write helpers (`update`, `toggle`, `append`, `set(_:to:)`, `updateValue(forKey:_:)`) stay
    ///   durable and atomic across processes: they run under the file's lock and write before they return, taking
    ///   every deferred change along in the same write.
    /// - `flush()` returns once every change deferred so far is in the file; a normal exit
    ///   (`exit`, or returning from `main`) and releasing the last reference to the store flush too. A crash or
    ///   `kill -9` loses the changes not committed yet: at most those of the last window and of a commit in
    ///   progress.
    /// - A commit that fails (a full disk, a folder that cannot be written) keeps the values in memory, is
    ///   reported to ``PrefsConfig/errorHandler`` once while it keeps failing, and is tried again a second later,
    ///   at the next change and at a flush; `flush()` throws its error.
    /// - A file that cannot be read is never overwritten: writes throw its error, as durable ones do.
    /// - Once the store, or the store it was made from, is closed, writes and `flush()` throw
    ///   ``PrefsError/storeClosed(path:)``, and nothing of it touches the file or its folder again.
    ///
    /// - Parameter window: How long a change may wait in memory; changes within one window share one write. Zero
    ///   commits as soon as the background thread gets to it.
    public func deferringWrites(window: Duration = .milliseconds(50)) -> any KeyValueStore {
        hub.own?.ownDeferringWrites(window: window) ?? self
    }

    /// `store.register(defaults: ["volume": .int(5)])` registers defaults for this process, as
    /// `UserDefaults.register(defaults:)` does: an unset key reads as its registered default, through typed reads and
    /// wrappers, until a value is stored. Nothing is written; a later registration of a key replaces an earlier one.
    public func register(defaults: [String: PrefValue]) {
        hub.layers.register(defaults)
    }

    /// `store.registeredDefault(forKey: "volume")` is the default registered for the key in this process, or nil.
    public func registeredDefault(forKey key: String) -> PrefValue? {
        hub.layers.values(of: .registered)[key]
    }

    /// `for await key in store.changedKeys(["theme", "fontSize"])` yields the name of each of these keys as it
    /// changes, whoever changed it: a wrapper, a write of the store, another process.
    ///
    /// - Parameter keys: The keys to watch; `nil` watches every key of the store.
    /// - Returns: A stream that ends when the task iterating it is cancelled.
    public func changedKeys(_ keys: Set<String>? = nil) -> AsyncStream<String> {
        hub.feed.keys(keys)
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
            let cell = hub.feed.cell(for: key.name)
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

    /// `try store.value(for: .doTheThing)` reads a typed value, or the key's default when no layer holds one.
    ///
    /// The value comes from the strongest layer that holds the key (see <doc:LayeredPreferences>); text from the
    /// command line or the environment is converted to the key's type.
    ///
    /// - Throws: ``PrefsError/typeMismatch(key:expected:found:)`` or ``PrefsError/decodingFailed(key:reason:)``
    ///   when the stored value does not fit the key's type, and any error of the store.
    public func value<Value>(for key: PrefKey<Value>) throws -> Value {
        guard let stored = try value(forKey: key.name) else { return key.defaultValue }
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

    /// `try validateKey(key)` refuses a key name no store may hold: an empty one, or one containing NUL.
    ///
    /// Prefs checks every key before it calls ``write(_:)``.
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
