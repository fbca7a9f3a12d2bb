import Synchronization

/// The shared state behind a `StoredValue`: its key, codec and store, the decoded value cached against the key's
/// version, and the subscribers of its `values` streams.
final class StoredValueBox<Value: Sendable & Equatable>: Sendable {
    let key: String
    let defaultValue: Value
    let codec: ValueCodec<Value>
    let store: any KeyValueStore
    let cell: KeyCell

    private struct Subscriber {
        let continuation: AsyncStream<Value>.Continuation
        var last: Value
    }

    private struct Subscribers {
        var byToken: [UInt64: Subscriber] = [:]
        var nextToken: UInt64 = 0
        var listening = false
    }

    /// The key version `cachedValue` was decoded at (0: never), and the lock that guards `cachedValue`.
    ///
    /// The lock holds a plain `UInt64` rather than a generic struct on purpose: this code is not specialized for
    /// `Value`, and every generic type built from `Value` (a `Cache<Value>`, an `Optional<Value>`, a tuple) costs a
    /// runtime metadata lookup on each read, which made a cached read 7 times as slow as a bare `Mutex<Int>`.
    private let cachedVersion = Mutex<UInt64>(0)
    /// Only read or written while holding `cachedVersion`.
    nonisolated(unsafe) private var cachedValue: Value
    private let subscribers = Mutex(Subscribers())

    init(key: String, defaultValue: Value, codec: ValueCodec<Value>, store: any KeyValueStore) {
        self.key = key
        self.defaultValue = defaultValue
        self.codec = codec
        self.store = store
        self.cell = store.changes.cell(for: key)
        self.cachedValue = defaultValue
    }

    deinit {
        cell.removeListener(ObjectIdentifier(self))
    }

    /// The current value: served from the cache unless the key changed since it was decoded.
    var value: Value {
        cell.trackAccess()
        return currentValue()
    }

    private func currentValue() -> Value {
        let version = cell.version
        var isCurrent = false
        let cached = cachedVersion.withLock { cachedVersion -> Value in
            isCurrent = cachedVersion == version
            return cachedValue
        }
        if isCurrent { return cached }
        let fresh = load()
        cachedVersion.withLock { cachedVersion in
            if version > cachedVersion {
                cachedVersion = version
                cachedValue = fresh
            }
        }
        return fresh
    }

    /// Reads and decodes from the store; failures read as the default and are reported, never thrown.
    private func load() -> Value {
        do {
            guard let stored = try store.value(forKey: key) else { return defaultValue }
            return try codec.decode(stored, key: key)
        } catch {
            PrefsConfig.report(error, key: key, operation: .read)
            return defaultValue
        }
    }

    func set(_ newValue: Value) {
        do { try write(newValue) } catch { PrefsConfig.report(error, key: key, operation: .write) }
    }

    func write(_ newValue: Value) throws {
        try store.setValue(try codec.encode(newValue, key: key), forKey: key)
    }

    func remove() throws {
        try store.removeValue(forKey: key)
    }

    /// Atomic read-modify-write through the store, reporting instead of throwing.
    func update(_ transform: (inout Value) -> Void) {
        do { try modify(transform) } catch { PrefsConfig.report(error, key: key, operation: .write) }
    }

    /// Atomic read-modify-write through the store. A stored value that cannot be decoded aborts the update, so it
    /// is never overwritten by a transform of the default.
    func modify(_ transform: (inout Value) -> Void) throws {
        try store.updateValue(forKey: key) { stored in
            var value = try stored.map { try codec.decode($0, key: key) } ?? defaultValue
            transform(&value)
            return try codec.encode(value, key: key)
        }
    }

    // MARK: Streams

    func stream() -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream.makeStream(of: Value.self)
        startListening()
        let token = subscribers.withLock { subscribers in
            let current = currentValue()
            subscribers.nextToken += 1
            subscribers.byToken[subscribers.nextToken] = Subscriber(continuation: continuation, last: current)
            continuation.yield(current)
            return subscribers.nextToken
        }
        continuation.onTermination = { _ in
            self.subscribers.withLock { _ = $0.byToken.removeValue(forKey: token) }
        }
        return stream
    }

    private func startListening() {
        let start = subscribers.withLock { subscribers in
            defer { subscribers.listening = true }
            return !subscribers.listening
        }
        guard start else { return }
        cell.addListener(ObjectIdentifier(self)) { [weak self] in self?.deliver() }
    }

    /// Sends the current value to each subscriber that has not seen it yet. Runs under the subscribers' lock so
    /// concurrent deliveries cannot reorder values; yielding never runs subscriber code, so this cannot deadlock.
    private func deliver() {
        subscribers.withLock { subscribers in
            guard !subscribers.byToken.isEmpty else { return }
            let current = currentValue()
            for (token, subscriber) in subscribers.byToken where subscriber.last != current {
                subscriber.continuation.yield(current)
                subscribers.byToken[token]?.last = current
            }
        }
    }

    var subscriberCount: Int { subscribers.withLock { $0.byToken.count } }
}
