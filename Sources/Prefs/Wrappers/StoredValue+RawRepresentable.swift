public import Foundation

extension StoredValue where Value: RawRepresentable, Value.RawValue: PrefValueConvertible & Codable {
    /// `@StoredValue(key: "sort") var sort: SortOrder = .name` stores a `RawRepresentable` value, such as an enum with
    /// `String` or `Int` raw values, as its raw value; the type need not be `Codable` (as with `@AppStorage`).
    public init(wrappedValue: Value, key: String, store: (any KeyValueStore)? = nil) {
        self.init(PrefKey(name: key, defaultValue: wrappedValue, codec: .rawValue), store: store)
    }

    /// `@StoredValue(key: "sort", storage: defaults) var sort: SortOrder = .name`: the same, in a `UserDefaults`
    /// instance.
    public init(wrappedValue: Value, key: String, storage: UserDefaults) {
        self.init(
            PrefKey(name: key, defaultValue: wrappedValue, codec: .rawValue),
            store: UserDefaultsStore.store(for: storage))
    }
}

extension StoredValue where Value: RawRepresentable & Codable, Value.RawValue: PrefValueConvertible & Codable {
    /// `@StoredValue(key: "theme") var theme: Theme = .light` for a `RawRepresentable` type that is `Codable` too:
    /// stored as its raw value, and the forms other libraries wrote for it read too.
    public init(wrappedValue: Value, key: String, store: (any KeyValueStore)? = nil) {
        self.init(PrefKey(key, default: wrappedValue), store: store)
    }

    /// `@StoredValue(key: "theme", storage: defaults) var theme: Theme = .light`: the same, in a `UserDefaults`
    /// instance.
    public init(wrappedValue: Value, key: String, storage: UserDefaults) {
        self.init(PrefKey(key, default: wrappedValue), store: UserDefaultsStore.store(for: storage))
    }
}

extension StoredValue {
    /// `@StoredValue(key: "sort") var sort: SortOrder?` declares an optional `RawRepresentable` preference, nil until
    /// something is stored.
    public init<Wrapped>(key: String, store: (any KeyValueStore)? = nil)
    where Value == Wrapped?, Wrapped: RawRepresentable & Sendable, Wrapped.RawValue: PrefValueConvertible & Codable {
        self.init(PrefKey(name: key, defaultValue: nil, codec: ValueCodec<Wrapped>.optionalRawValue), store: store)
    }

    /// `@StoredValue(key: "theme") var theme: Theme?` for an optional `RawRepresentable` type that is `Codable` too.
    public init<Wrapped>(key: String, store: (any KeyValueStore)? = nil)
    where
        Value == Wrapped?, Wrapped: RawRepresentable & Codable & Sendable,
        Wrapped.RawValue: PrefValueConvertible & Codable
    {
        self.init(PrefKey(key, default: nil), store: store)
    }
}
