/// How one Swift type maps to and from `PrefValue`, built where a key or wrapper is declared from what its static
/// type is: ``native`` for a ``PrefValueConvertible`` type, ``rawValue`` for a `RawRepresentable` one, ``json`` for
/// any other `Codable` one, ``optional`` around the first two (nil removes the key), and, for a `Decodable` type,
/// ``readingForeignForms(hasNativeForm:)`` on top.
struct ValueCodec<Value: Sendable>: Sendable {
    /// Returns nil when the value is stored by removing the key (an Optional's nil).
    let encode: @Sendable (Value) throws -> PrefValue?
    let decode: @Sendable (PrefValue) throws -> Value

    init(
        encode: @escaping @Sendable (Value) throws -> PrefValue?,
        decode: @escaping @Sendable (PrefValue) throws -> Value
    ) {
        self.encode = encode
        self.decode = decode
    }

    /// Encodes, turning any failure into a `PrefsError` that names the key.
    func encode(_ value: Value, key: String) throws(PrefsError) -> PrefValue? {
        do { return try encode(value) } catch {
            if case .notAllowed(_, let value, let allowed)? = error as? PrefsError {
                throw .notAllowed(key: key, value: value, allowed: allowed)
            }
            throw PrefsError.encodingFailed(key: key, reason: Self.reason(error))
        }
    }

    /// Decodes, turning any failure into a `PrefsError` that names the key.
    func decode(_ stored: PrefValue, key: String) throws(PrefsError) -> Value {
        do { return try decode(stored) } catch let error as PrefsError {
            switch error {
            case .typeMismatch(_, let expected, let found):
                throw .typeMismatch(key: key, expected: expected, found: found)
            case .notAllowed(_, let value, let allowed): throw .notAllowed(key: key, value: value, allowed: allowed)
            default: throw error
            }
        } catch {
            throw .decodingFailed(key: key, reason: Self.reason(error))
        }
    }

    private static func reason(_ error: any Error) -> String {
        if let error = error as? PrefsError { return error.description }
        return String(describing: error)
    }

}

extension ValueCodec where Value: OptionalValue, Value.Wrapped: Sendable {
    /// The codec of an optional made of its wrapped type's: nil removes the key; Boutique's `{"value":null}` reads
    /// as nil.
    init(wrapping wrapped: ValueCodec<Value.Wrapped>) {
        self.init(
            encode: { value in try value.asOptional.flatMap(wrapped.encode) },
            decode: { stored in ForeignForms.isBoutiqueNil(stored) ? nil : Value(asOptional: try wrapped.decode(stored))
            }
        )
    }
}

extension ValueCodec where Value: PrefValueConvertible {
    /// The type's own stored form.
    static var native: ValueCodec { ValueCodec(encode: { try $0.prefValue }, decode: { try Value(prefValue: $0) }) }
}

extension ValueCodec where Value: RawRepresentable, Value.RawValue: PrefValueConvertible {
    /// A `RawRepresentable` value stored as its raw value (a `String` or an `Int`, as `@AppStorage` stores it), read
    /// back through `init(rawValue:)`; a raw value the type refuses is a type mismatch.
    static var rawValue: ValueCodec {
        ValueCodec(
            encode: { try $0.rawValue.prefValue },
            decode: { stored in
                let rawValue = try Value.RawValue(prefValue: stored)
                guard let value = Value(rawValue: rawValue) else {
                    throw PrefsError.typeMismatch(
                        key: "", expected: "a raw value of \(Value.self)", found: String(describing: rawValue))
                }
                return value
            })
    }
}

extension ValueCodec where Value: Codable {
    /// JSON text (JSON data reads too, as `@AppStorage` users store it), reading other libraries' forms too. A value
    /// whose JSON is `null` (an Optional's nil) is stored by removing the key.
    static var json: ValueCodec {
        ValueCodec(
            encode: { value in
                let text = try ForeignForms.jsonText(value)
                return text == "null" ? nil : .string(text)
            },
            decode: { try ForeignForms.decodeJSON($0, as: Value.self) }
        ).readingForeignForms(hasNativeForm: false)
    }
}

extension ValueCodec where Value: Codable {
    /// The codec of a key declared knowing only that its type is `Codable` (generic code such as
    /// `final class Model<Value: Codable>`): chosen from the type the value has at run time, so a `String`, `Int`,
    /// `Date`, `[String]` or an optional of one is stored in its own form, exactly as a declaration naming the type
    /// stores it. Other types are JSON text, as ``json``.
    static var codable: ValueCodec {
        if let native = DynamicNative<Value>.codec { return native.readingForeignForms(hasNativeForm: true) }
        return json
    }
}

/// The native codec of a type that is ``PrefValueConvertible`` (or an optional of one) when code generic over
/// `Codable` cannot name that conformance: found from the type at run time.
private enum DynamicNative<Value: Sendable> {
    static var codec: ValueCodec<Value>? {
        if let type = Value.self as? any PrefValueConvertible.Type {
            return ValueCodec(
                encode: { value in try (value as? any PrefValueConvertible)?.prefValue },
                decode: { stored in try cast(try type.init(prefValue: stored)) })
        }
        guard let optional = Value.self as? any _DynamicOptional.Type, let wrapped = optional.wrappedNativeType else {
            return nil
        }
        let absent = try? cast(optional.nilValue)
        return ValueCodec(
            encode: { value in
                try ((value as? any _DynamicOptional)?.wrappedValue as? any PrefValueConvertible)?.prefValue
            },
            decode: { stored in
                if ForeignForms.isBoutiqueNil(stored), let absent { return absent }
                return try cast(try wrapped.init(prefValue: stored))
            })
    }

    private static func cast(_ value: Any) throws -> Value {
        guard let value = value as? Value else {
            throw PrefsError.typeMismatch(key: "", expected: "\(Value.self)", found: "\(type(of: value))")
        }
        return value
    }
}

/// `Optional`, seen by ``DynamicNative`` without knowing its wrapped type.
private protocol _DynamicOptional {
    static var wrappedNativeType: (any PrefValueConvertible.Type)? { get }
    static var nilValue: Self { get }
    var wrappedValue: Any? { get }
}

extension Optional: _DynamicOptional {
    static var wrappedNativeType: (any PrefValueConvertible.Type)? { Wrapped.self as? any PrefValueConvertible.Type }
    static var nilValue: Self { nil }
    var wrappedValue: Any? { self.map { $0 } }
}

extension ValueCodec where Value: Decodable {
    /// This codec, also reading the forms other libraries wrote for the type (see ``ForeignForms``): first when the
    /// stored value is plainly one of them, else only when this codec's own decode fails.
    ///
    /// - Parameter hasNativeForm: Whether the type has a form of its own (``PrefValueConvertible``): such a type is
    ///   never kept as bare JSON text, and its own form is read before Defaults' quoted text.
    func readingForeignForms(hasNativeForm: Bool) -> ValueCodec {
        let decode = decode
        return ValueCodec(
            encode: encode,
            decode: { stored in
                if let value = ForeignForms.plainlyForeign(stored, as: Value.self, hasNativeForm: hasNativeForm) {
                    return value
                }
                do { return try decode(stored) } catch {
                    guard let value = ForeignForms.decode(stored, as: Value.self, hasNativeForm: hasNativeForm) else {
                        throw error
                    }
                    return value
                }
            })
    }
}

/// `Optional` as a constraint, for the code that handles an optional of any type (a codec, a value of unknown type
/// from Foundation): only `Optional` conforms. Public declarations spell an optional `Value == Wrapped?` instead.
protocol OptionalValue: ExpressibleByNilLiteral {
    associatedtype Wrapped
    /// `value.asOptional` is the optional itself.
    var asOptional: Wrapped? { get }
    /// `Value(asOptional: x)` is `x`.
    init(asOptional: Wrapped?)
}

extension Optional: OptionalValue {
    /// `value.asOptional` is the optional itself.
    var asOptional: Wrapped? { self }
    /// `Optional(asOptional: x)` is `x`.
    init(asOptional optional: Wrapped?) { self = optional }
}
