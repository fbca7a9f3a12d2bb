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
/// - After a change has been applied, and after releasing your own locks, call
///   `changes.publish(changedKeys:)` with the keys whose values changed, whoever changed them (this process or
///   another one). Wrappers and observers rely on it.
/// - Implement ``updateValue(forKey:_:)`` atomically if your backend can; the default implementation is atomic
///   within the process only.
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

    /// `store.changes` is the feed on which the store announces every change to its values.
    var changes: ChangeFeed { get }
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

    /// `try store.removeValue(forKey: "theme")` removes a key; removing an absent key does nothing.
    public func removeValue(forKey key: String) throws {
        try setValue(nil, forKey: key)
    }

    /// `try store.value(for: .doTheThing)` reads a typed value, or the key's default when nothing is stored.
    ///
    /// - Throws: ``PrefsError/typeMismatch(key:expected:found:)`` or ``PrefsError/decodingFailed(key:reason:)``
    ///   when the stored value does not fit the key's type, and any error of the store.
    public func value<Value>(for key: PrefKey<Value>) throws -> Value {
        guard let stored = try value(forKey: key.name) else { return key.defaultValue }
        return try key.codec.decode(stored, key: key.name)
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

/// Checks a key name before any store sees it.
package func validateKey(_ key: String) throws(PrefsError) {
    if key.isEmpty { throw .invalidKey(key, reason: "a key cannot be empty") }
    if key.utf8.contains(0) { throw .invalidKey(key, reason: "a key cannot contain NUL") }
}
