extension ValueCodec where Value: RawRepresentable, Value.RawValue: PrefValueConvertible & Codable {
    /// A `RawRepresentable` value stored as its raw value (a `String` or an `Int`, as `@AppStorage` stores it), read
    /// back through `init(rawValue:)`; a raw value the type refuses is a type mismatch.
    static var rawValue: ValueCodec {
        let raw = ValueCodec<Value.RawValue>(codable: Value.RawValue.self)
        return ValueCodec(
            encode: { try raw.encode($0.rawValue) },
            decode: { stored in
                let rawValue = try raw.decode(stored)
                guard let value = Value(rawValue: rawValue) else {
                    throw PrefsError.typeMismatch(
                        key: "", expected: "a raw value of \(Value.self)", found: String(describing: rawValue))
                }
                return value
            })
    }

    /// The same for an optional: nil removes the key.
    static var optionalRawValue: ValueCodec<Value?> {
        let codec = rawValue
        return ValueCodec<Value?>(
            encode: { value in try value.flatMap { try codec.encode($0) } }, decode: { try codec.decode($0) })
    }
}

extension PrefKey {
    /// `PrefKey("sort", default: SortOrder.name)` declares a key for a `RawRepresentable` type, such as an enum with
    /// `String` or `Int` raw values, that need not be `Codable`: it is stored as its raw value, as `@AppStorage`
    /// stores it.
    public init(_ name: String, default defaultValue: Value)
    where Value: RawRepresentable, Value.RawValue: PrefValueConvertible & Codable {
        self.init(name: name, defaultValue: defaultValue, codec: .rawValue)
    }

    /// `PrefKey("theme", default: Theme.light)` for a `RawRepresentable` type that is `Codable` too: stored as its
    /// raw value, and the forms other libraries wrote for it read too, as for any `Codable` type.
    public init(_ name: String, default defaultValue: Value)
    where Value: RawRepresentable & Codable, Value.RawValue: PrefValueConvertible & Codable {
        self.init(name: name, defaultValue: defaultValue, codec: ValueCodec(codable: Value.self))
    }

    /// `PrefKey<SortOrder?>("sort")` declares an optional key for a `RawRepresentable` type: nil until something is
    /// stored, and storing nil removes the key.
    public init<Wrapped>(_ name: String, default defaultValue: Value = nil)
    where Value == Wrapped?, Wrapped: RawRepresentable & Sendable, Wrapped.RawValue: PrefValueConvertible & Codable {
        self.init(name: name, defaultValue: defaultValue, codec: ValueCodec<Wrapped>.optionalRawValue)
    }

    /// `PrefKey<Theme?>("theme")` for an optional of a `RawRepresentable` type that is `Codable` too.
    public init<Wrapped>(_ name: String, default defaultValue: Value = nil)
    where
        Value == Wrapped?, Wrapped: RawRepresentable & Codable & Sendable,
        Wrapped.RawValue: PrefValueConvertible & Codable
    {
        self.init(name: name, defaultValue: defaultValue, codec: ValueCodec(codable: Value.self))
    }
}
