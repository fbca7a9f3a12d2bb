public import Foundation

// A type with its own stored form (``PrefValueConvertible``: every built-in type), or an optional of one: stored in
// that form, whichever way the wrapper is declared. Each overload names the static type, so the codec is chosen here.
extension StoredValue {
    /// `@StoredValue(key: "owner") var owner = User(name: "Ada")` stores a ``PrefValueConvertible`` type that need
    /// not be `Codable`, in the form it chooses.
    public init(
        wrappedValue: Value, key: String, schema: PrefKey<Value>.Schema = .init(), store: (any KeyValueStore)? = nil
    ) where Value: PrefValueConvertible {
        self.init(PrefKey(key, default: wrappedValue, schema: schema), store: store)
    }

    /// `@StoredValue(key: "count") var count = 0` for a type that is both `Codable` and ``PrefValueConvertible``
    /// (every built-in type): its own stored form wins.
    public init(
        wrappedValue: Value, key: String, schema: PrefKey<Value>.Schema = .init(), store: (any KeyValueStore)? = nil
    )
    where Value: PrefValueConvertible & Codable {
        self.init(PrefKey(key, default: wrappedValue, schema: schema), store: store)
    }

    /// `@StoredValue(key: "enabled", storage: defaults) var enabled = false`: the same, in a `UserDefaults` instance.
    public init(wrappedValue: Value, key: String, schema: PrefKey<Value>.Schema = .init(), storage: UserDefaults)
    where Value: PrefValueConvertible & Codable {
        self.init(PrefKey(key, default: wrappedValue, schema: schema), store: UserDefaultsStore.store(for: storage))
    }

    /// `StoredValue(key: "volume", default: 5)` creates the wrapper of a built-in type without property syntax.
    public init(
        key: String, default defaultValue: Value, schema: PrefKey<Value>.Schema = .init(),
        store: (any KeyValueStore)? = nil
    )
    where Value: PrefValueConvertible & Codable {
        self.init(PrefKey(key, default: defaultValue, schema: schema), store: store)
    }

    /// `StoredValue(key: "volume", default: 5, storage: defaults)`: the same, in a `UserDefaults` instance.
    public init(
        key: String, default defaultValue: Value, schema: PrefKey<Value>.Schema = .init(), storage: UserDefaults
    )
    where Value: PrefValueConvertible & Codable {
        self.init(PrefKey(key, default: defaultValue, schema: schema), store: UserDefaultsStore.store(for: storage))
    }

    /// `@StoredValue(key: "owner") var owner: User?` declares an optional ``PrefValueConvertible`` preference that
    /// reads nil until something is stored.
    public init<Wrapped: PrefValueConvertible>(
        key: String, schema: PrefKey<Value>.Schema = .init(), store: (any KeyValueStore)? = nil
    )
    where Value == Wrapped? {
        self.init(PrefKey(key, schema: schema), store: store)
    }

    /// `@StoredValue(key: "limit") var limit: Int?` for an optional of a type that is both `Codable` and
    /// ``PrefValueConvertible``: its own stored form wins.
    public init<Wrapped: PrefValueConvertible & Codable>(
        key: String, schema: PrefKey<Value>.Schema = .init(), store: (any KeyValueStore)? = nil
    )
    where Value == Wrapped? {
        self.init(PrefKey(key, schema: schema), store: store)
    }

    /// `@StoredValue(key: "limit", storage: defaults) var limit: Int?`: the same, in a `UserDefaults` instance.
    public init<Wrapped: PrefValueConvertible & Codable>(
        key: String, schema: PrefKey<Value>.Schema = .init(), storage: UserDefaults
    )
    where Value == Wrapped? {
        self.init(PrefKey(key, schema: schema), store: UserDefaultsStore.store(for: storage))
    }

    /// `@StoredValue(key: "lastOpenedDate") var lastOpenedDate: Date? = nil`: an optional of a built-in type, nil
    /// removing the key.
    public init<Wrapped: PrefValueConvertible & Codable>(
        wrappedValue: Value, key: String, schema: PrefKey<Value>.Schema = .init(), store: (any KeyValueStore)? = nil
    )
    where Value == Wrapped? {
        self.init(PrefKey(key, default: wrappedValue, schema: schema), store: store)
    }

    /// `@StoredValue(key: "lastOpenedDate", storage: defaults) var lastOpenedDate: Date? = nil`: the same, in a
    /// `UserDefaults` instance.
    public init<Wrapped: PrefValueConvertible & Codable>(
        wrappedValue: Value, key: String, schema: PrefKey<Value>.Schema = .init(), storage: UserDefaults
    )
    where Value == Wrapped? {
        self.init(PrefKey(key, default: wrappedValue, schema: schema), store: UserDefaultsStore.store(for: storage))
    }

    /// `StoredValue(key: "limit", default: Int?(5))` creates the wrapper of an optional built-in type without
    /// property syntax.
    public init<Wrapped: PrefValueConvertible & Codable>(
        key: String, default defaultValue: Value, schema: PrefKey<Value>.Schema = .init(),
        store: (any KeyValueStore)? = nil
    )
    where Value == Wrapped? {
        self.init(PrefKey(key, default: defaultValue, schema: schema), store: store)
    }

    /// `StoredValue(key: "limit", default: Int?(5), storage: defaults)`: the same, in a `UserDefaults` instance.
    public init<Wrapped: PrefValueConvertible & Codable>(
        key: String, default defaultValue: Value, schema: PrefKey<Value>.Schema = .init(), storage: UserDefaults
    )
    where Value == Wrapped? {
        self.init(PrefKey(key, default: defaultValue, schema: schema), store: UserDefaultsStore.store(for: storage))
    }
}
