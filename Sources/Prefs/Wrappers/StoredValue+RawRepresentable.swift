public import Foundation

// A `RawRepresentable` type (an enum with `String` or `Int` raw values), or an optional of one: stored as its raw
// value, as `@AppStorage` stores it, whichever way the wrapper is declared. A `Codable` one reads the forms other
// libraries wrote for it too.
extension StoredValue where Value: RawRepresentable, Value.RawValue: PrefValueConvertible & Codable {
    /// `@StoredValue(key: "sort") var sort: SortOrder = .name` stores a `RawRepresentable` value, such as an enum with
    /// `String` or `Int` raw values, as its raw value; the type need not be `Codable` (as with `@AppStorage`).
    public init(
        wrappedValue: Value, key: String, schema: PrefKey<Value>.Schema = .init(), store: (any KeyValueStore)? = nil
    ) {
        self.init(PrefKey(name: key, defaultValue: wrappedValue, codec: .rawValue, schema: schema), store: store)
    }

    /// `@StoredValue(key: "sort", storage: defaults) var sort: SortOrder = .name`: the same, in a `UserDefaults`
    /// instance.
    public init(wrappedValue: Value, key: String, schema: PrefKey<Value>.Schema = .init(), storage: UserDefaults) {
        self.init(
            PrefKey(name: key, defaultValue: wrappedValue, codec: .rawValue, schema: schema),
            store: UserDefaultsStore.store(for: storage))
    }
}

extension StoredValue where Value: RawRepresentable & Codable, Value.RawValue: PrefValueConvertible & Codable {
    /// `@StoredValue(key: "theme") var theme: Theme = .light` for a `RawRepresentable` type that is `Codable` too:
    /// stored as its raw value, and the forms other libraries wrote for it read too.
    public init(
        wrappedValue: Value, key: String, schema: PrefKey<Value>.Schema = .init(), store: (any KeyValueStore)? = nil
    ) {
        self.init(PrefKey(key, default: wrappedValue, schema: schema), store: store)
    }

    /// `@StoredValue(key: "theme", storage: defaults) var theme: Theme = .light`: the same, in a `UserDefaults`
    /// instance.
    public init(wrappedValue: Value, key: String, schema: PrefKey<Value>.Schema = .init(), storage: UserDefaults) {
        self.init(PrefKey(key, default: wrappedValue, schema: schema), store: UserDefaultsStore.store(for: storage))
    }

    /// `StoredValue(key: "theme", default: Theme.light)` creates the wrapper without property syntax.
    public init(
        key: String, default defaultValue: Value, schema: PrefKey<Value>.Schema = .init(),
        store: (any KeyValueStore)? = nil
    ) {
        self.init(PrefKey(key, default: defaultValue, schema: schema), store: store)
    }

    /// `StoredValue(key: "theme", default: Theme.light, storage: defaults)`: the same, in a `UserDefaults` instance.
    public init(
        key: String, default defaultValue: Value, schema: PrefKey<Value>.Schema = .init(), storage: UserDefaults
    ) {
        self.init(PrefKey(key, default: defaultValue, schema: schema), store: UserDefaultsStore.store(for: storage))
    }
}

extension StoredValue {
    /// `@StoredValue(key: "sort") var sort: SortOrder?` declares an optional `RawRepresentable` preference, nil until
    /// something is stored.
    public init<Wrapped: RawRepresentable & Sendable>(
        key: String, schema: PrefKey<Value>.Schema = .init(), store: (any KeyValueStore)? = nil
    )
    where Value == Wrapped?, Wrapped.RawValue: PrefValueConvertible & Codable {
        self.init(PrefKey(key, schema: schema), store: store)
    }

    /// `@StoredValue(key: "theme") var theme: Theme?` for an optional `RawRepresentable` type that is `Codable` too.
    public init<Wrapped: RawRepresentable & Codable & Sendable>(
        key: String, schema: PrefKey<Value>.Schema = .init(), store: (any KeyValueStore)? = nil
    )
    where Value == Wrapped?, Wrapped.RawValue: PrefValueConvertible & Codable {
        self.init(PrefKey(key, schema: schema), store: store)
    }

    /// `@StoredValue(key: "theme", storage: defaults) var theme: Theme?`: the same, in a `UserDefaults` instance.
    public init<Wrapped: RawRepresentable & Codable & Sendable>(
        key: String, schema: PrefKey<Value>.Schema = .init(), storage: UserDefaults
    )
    where Value == Wrapped?, Wrapped.RawValue: PrefValueConvertible & Codable {
        self.init(PrefKey(key, schema: schema), store: UserDefaultsStore.store(for: storage))
    }

    /// `@StoredValue(key: "theme") var theme: Theme? = nil`: an optional raw-value type, nil removing the key.
    public init<Wrapped: RawRepresentable & Codable & Sendable>(
        wrappedValue: Value, key: String, schema: PrefKey<Value>.Schema = .init(), store: (any KeyValueStore)? = nil
    )
    where Value == Wrapped?, Wrapped.RawValue: PrefValueConvertible & Codable {
        self.init(PrefKey(key, default: wrappedValue, schema: schema), store: store)
    }

    /// `@StoredValue(key: "theme", storage: defaults) var theme: Theme? = nil`: the same, in a `UserDefaults`
    /// instance.
    public init<Wrapped: RawRepresentable & Codable & Sendable>(
        wrappedValue: Value, key: String, schema: PrefKey<Value>.Schema = .init(), storage: UserDefaults
    )
    where Value == Wrapped?, Wrapped.RawValue: PrefValueConvertible & Codable {
        self.init(PrefKey(key, default: wrappedValue, schema: schema), store: UserDefaultsStore.store(for: storage))
    }

    /// `StoredValue(key: "theme", default: Theme?.none)` creates the wrapper of an optional raw-value type without
    /// property syntax.
    public init<Wrapped: RawRepresentable & Codable & Sendable>(
        key: String, default defaultValue: Value, schema: PrefKey<Value>.Schema = .init(),
        store: (any KeyValueStore)? = nil
    )
    where Value == Wrapped?, Wrapped.RawValue: PrefValueConvertible & Codable {
        self.init(PrefKey(key, default: defaultValue, schema: schema), store: store)
    }

    /// `StoredValue(key: "theme", default: Theme?.none, storage: defaults)`: the same, in a `UserDefaults` instance.
    public init<Wrapped: RawRepresentable & Codable & Sendable>(
        key: String, default defaultValue: Value, schema: PrefKey<Value>.Schema = .init(), storage: UserDefaults
    )
    where Value == Wrapped?, Wrapped.RawValue: PrefValueConvertible & Codable {
        self.init(PrefKey(key, default: defaultValue, schema: schema), store: UserDefaultsStore.store(for: storage))
    }
}
