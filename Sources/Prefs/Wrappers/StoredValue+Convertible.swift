extension StoredValue {
    /// `@StoredValue(key: "owner") var owner = User(name: "Ada")` stores a ``PrefValueConvertible`` type that need
    /// not be `Codable`, in the form it chooses.
    public init(wrappedValue: Value, key: String, store: (any KeyValueStore)? = nil) where Value: PrefValueConvertible {
        self.init(PrefKey(key, default: wrappedValue), store: store)
    }

    /// `@StoredValue(key: "count") var count = 0` for a type that is both `Codable` and ``PrefValueConvertible``
    /// (every built-in type): its own stored form wins.
    public init(wrappedValue: Value, key: String, store: (any KeyValueStore)? = nil)
    where Value: PrefValueConvertible & Codable {
        self.init(PrefKey(key, default: wrappedValue), store: store)
    }

    /// `@StoredValue(key: "owner") var owner: User?` declares an optional ``PrefValueConvertible`` preference that
    /// reads nil until something is stored.
    public init<Wrapped>(key: String, store: (any KeyValueStore)? = nil)
    where Value == Wrapped?, Wrapped: PrefValueConvertible {
        self.init(PrefKey<Wrapped?>(key), store: store)
    }

    /// `@StoredValue(key: "limit") var limit: Int?` for an optional of a type that is both `Codable` and
    /// ``PrefValueConvertible``: its own stored form wins.
    public init<Wrapped>(key: String, store: (any KeyValueStore)? = nil)
    where Value == Wrapped?, Wrapped: PrefValueConvertible & Codable {
        self.init(PrefKey<Wrapped?>(key), store: store)
    }
}
