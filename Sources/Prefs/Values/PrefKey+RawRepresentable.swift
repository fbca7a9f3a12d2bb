extension PrefKey {
    /// `PrefKey("sort", default: SortOrder.name)` declares a key for a `RawRepresentable` type, such as an enum with
    /// `String` or `Int` raw values, that need not be `Codable`: it is stored as its raw value, as `@AppStorage`
    /// stores it.
    public init(_ name: String, default defaultValue: Value, schema: Schema = .init())
    where Value: RawRepresentable, Value.RawValue: PrefValueConvertible & Codable {
        self.init(name: name, defaultValue: defaultValue, codec: .rawValue, schema: schema)
    }

    /// `PrefKey("theme", default: Theme.light)` for a `RawRepresentable` type that is `Codable` too: stored as its
    /// raw value, and the forms other libraries wrote for it read too, as for any `Codable` type.
    public init(_ name: String, default defaultValue: Value, schema: Schema = .init())
    where Value: RawRepresentable & Codable, Value.RawValue: PrefValueConvertible & Codable {
        self.init(
            name: name, defaultValue: defaultValue,
            codec: ValueCodec.rawValue.readingForeignForms(hasNativeForm: false), schema: schema)
    }

    /// `PrefKey<SortOrder?>("sort")` declares an optional key for a `RawRepresentable` type: nil until something is
    /// stored, and storing nil removes the key.
    public init<Wrapped: RawRepresentable & Sendable>(
        _ name: String, default defaultValue: Value = nil, schema: Schema = .init()
    )
    where Value == Wrapped?, Wrapped.RawValue: PrefValueConvertible & Codable {
        self.init(name: name, defaultValue: defaultValue, codec: ValueCodec(wrapping: .rawValue), schema: schema)
    }

    /// `PrefKey<Theme?>("theme")` for an optional of a `RawRepresentable` type that is `Codable` too.
    public init<Wrapped: RawRepresentable & Codable & Sendable>(
        _ name: String, default defaultValue: Value = nil, schema: Schema = .init()
    )
    where Value == Wrapped?, Wrapped.RawValue: PrefValueConvertible & Codable {
        let wrapped = ValueCodec<Wrapped>.rawValue.readingForeignForms(hasNativeForm: false)
        self.init(name: name, defaultValue: defaultValue, codec: ValueCodec(wrapping: wrapped), schema: schema)
    }
}
