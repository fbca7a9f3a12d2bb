/// How one Swift type maps to and from `PrefValue`, built where a key or wrapper is declared from what its static
/// type is: ``native`` for a ``PrefValueConvertible`` type, ``rawValue`` for a `RawRepresentable` one, ``json`` for
/// any other `Codable` one, ``optional`` around the first two (nil removes the key), and, for a `Decodable` type,
/// ``readingForeignForms(hasNativeForm:)`` on top.
struct ValueCodec<Value: Sendable>: Sendable {
    /// Returns nil when the value is stored by removing the key (an Optional's nil).
    let encode: @Sendable (Value) throws -> PrefValue?
    let decode: @Sendable (PrefValue) throws -> Value
    /// Which forms `decode` reads, in which order: what a published schema tells `prefs`.
    let route: ReadRoute

    init(
        encode: @escaping @Sendable (Value) throws -> PrefValue?,
        decode: @escaping @Sendable (PrefValue) throws -> Value,
        route: ReadRoute
    ) {
        self.encode = encode
        self.decode = decode
        self.route = route
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
        do { return try decode(stored) } catch { throw Self.prefsError(error, key: key) }
    }

    /// A failure to decode as a `PrefsError` naming the key; a JSON value that does not fit names the place inside it
    /// that fails, as `prefs` does (`windowFrame.width: expected an integer (Int)`).
    static func prefsError(_ error: any Error, key: String) -> PrefsError {
        if let error = error as? PrefsError {
            switch error {
            case .typeMismatch(_, let expected, let found):
                return .typeMismatch(key: key, expected: expected, found: found)
            case .notAllowed(_, let value, let allowed): return .notAllowed(key: key, value: value, allowed: allowed)
            default: return error
            }
        }
        if error is DecodingError {
            let mismatch = ShapeMismatch(error)
            let place = key + mismatch.path
            return .decodingFailed(key: key, reason: place.isEmpty ? mismatch.reason : "\(place): \(mismatch.reason)")
        }
        return .decodingFailed(key: key, reason: reason(error))
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
            },
            route: wrapped.route.optional()
        )
    }
}

extension ValueCodec where Value: PrefValueConvertible {
    /// The type's own stored form.
    static var native: ValueCodec {
        ValueCodec(encode: { try $0.prefValue }, decode: { try Value(prefValue: $0) }, route: ReadRoute(.native))
    }
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
            }, route: ReadRoute(.rawValue))
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
            decode: { try ForeignForms.decodeJSON($0, as: Value.self) }, route: ReadRoute(.json)
        ).readingForeignForms(hasNativeForm: false)
    }
}

extension ValueCodec where Value: Codable {
    /// The codec of a `Codable` type, chosen here once for every declaration (a wrapper, a key, a secret), from the
    /// type the value has at run time, so code generic over `Codable` and code naming the type store the same thing:
    /// a type with a form of its own (``PrefValueConvertible``: every built-in type) in that form, a
    /// `RawRepresentable` one as its raw value, an optional of either as the wrapped type's form (nil removes the
    /// key), any other as JSON text, filling the fields a stored object lacks from `defaultValue` when one is given.
    static func chosen(filling defaultValue: Value? = nil) -> ValueCodec {
        if let native = DynamicNative<Value>.codec { return native.readingForeignForms(hasNativeForm: true) }
        if let raw = DynamicRaw<Value>.codec { return raw.readingForeignForms(hasNativeForm: false) }
        guard let defaultValue else { return json }
        return json.fillingMissingFields(from: defaultValue)
    }
}

/// The native codec of a type that is ``PrefValueConvertible`` (or an optional of one) when code generic over
/// `Codable` cannot name that conformance: found from the type at run time.
enum DynamicNative<Value: Sendable> {
    static var codec: ValueCodec<Value>? {
        if let type = Value.self as? any PrefValueConvertible.Type {
            return ValueCodec(
                encode: { value in try (value as? any PrefValueConvertible)?.prefValue },
                decode: { stored in try cast(try type.init(prefValue: stored)) }, route: ReadRoute(.native))
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
            }, route: ReadRoute(.native).optional())
    }

    private static func cast(_ value: Any) throws -> Value {
        guard let value = value as? Value else {
            throw PrefsError.typeMismatch(key: "", expected: "\(Value.self)", found: "\(type(of: value))")
        }
        return value
    }
}

/// The raw-value codec of a `RawRepresentable` type whose raw value has a form of its own (or of an optional of
/// one), found from the type at run time.
enum DynamicRaw<Value: Sendable> {
    static var codec: ValueCodec<Value>? {
        if let type = Value.self as? any (RawRepresentable & Sendable).Type { return rawCodec(type) }
        guard let optional = Value.self as? any (OptionalValue & Sendable).Type else { return nil }
        return wrappedRawCodec(optional)
    }

    private static func rawCodec<R: RawRepresentable & Sendable>(_: R.Type) -> ValueCodec<Value>? {
        guard let rawType = R.RawValue.self as? any PrefValueConvertible.Type else { return nil }
        return ValueCodec(
            encode: { value in try ((value as? R)?.rawValue as? any PrefValueConvertible)?.prefValue },
            decode: { stored in
                let raw = try rawType.init(prefValue: stored)
                guard let rawValue = raw as? R.RawValue, let value = R(rawValue: rawValue) as? Value else {
                    throw PrefsError.typeMismatch(
                        key: "", expected: "a raw value of \(Value.self)", found: String(describing: raw))
                }
                return value
            }, route: ReadRoute(.rawValue))
    }

    private static func wrappedRawCodec<O: OptionalValue & Sendable>(_: O.Type) -> ValueCodec<Value>? {
        guard let raw = O.Wrapped.self as? any (RawRepresentable & Sendable).Type else { return nil }
        return optionalOf(raw, O.self)
    }

    private static func optionalOf<R: RawRepresentable & Sendable, O: OptionalValue & Sendable>(_: R.Type, _: O.Type)
        -> ValueCodec<Value>?
    {
        guard let inner = DynamicRaw<R>.codec else { return nil }
        return ValueCodec(
            encode: { value in try ((value as? O)?.asOptional as? R).flatMap { try inner.encode($0) } },
            decode: { stored in
                let wrapped = ForeignForms.isBoutiqueNil(stored) ? nil : try inner.decode(stored) as? O.Wrapped
                guard let value = O(asOptional: wrapped) as? Value else {
                    throw PrefsError.typeMismatch(key: "", expected: "\(Value.self)", found: stored.typeName)
                }
                return value
            }, route: ReadRoute(.rawValue).optional())
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
        readingForeignForms(DecodableReader<Value>(), hasNativeForm: hasNativeForm)
    }
}

extension ValueCodec {
    /// The same, reading JSON through `reader`.
    func readingForeignForms<R: JSONReading & Sendable>(_ reader: R, hasNativeForm: Bool) -> ValueCodec
    where R.Value == Value {
        let decode = decode
        return ValueCodec(
            encode: encode,
            decode: { stored in
                if let value = ForeignForms.plainlyForeign(stored, reader, hasNativeForm: hasNativeForm) {
                    return value
                }
                do { return try decode(stored) } catch {
                    guard let value = ForeignForms.decode(stored, reader, hasNativeForm: hasNativeForm) else {
                        throw error
                    }
                    return value
                }
            }, route: route.readingForeignForms())
    }
}

/// Which stored forms a key's codec reads, in which order, as its constructors composed it: its own form (the
/// type's native form, its raw value, or JSON text), then optionally the forms other libraries wrote
/// (``ForeignForms``), the fields a JSON object lacks filled from the default (``MissingFields``), and for an optional
/// nothing stored as nil. Published with the key's ``ValueShape``, so `prefs` reads a stored value through the same
/// forms as the app.
package struct ReadRoute: Sendable, Equatable {
    package enum Form: String, Sendable {
        /// ``PrefValueConvertible``: a `Bool` as a bool, an array as an array.
        case native
        /// `RawRepresentable`: the raw value in its native form.
        case rawValue = "raw"
        /// Any other `Codable` type: JSON text (or JSON data).
        case json
    }

    package var form: Form
    package var readsForeignForms = false
    package var fillsMissingFields = false
    package var isOptional = false

    package init(
        _ form: Form, readsForeignForms: Bool = false, fillsMissingFields: Bool = false, isOptional: Bool = false
    ) {
        self.form = form
        self.readsForeignForms = readsForeignForms
        self.fillsMissingFields = fillsMissingFields
        self.isOptional = isOptional
    }

    /// `{"form": "json", "foreignForms": true, …}`, in a schema file: only the flags that are set.
    var stored: PrefValue {
        var members: [String: PrefValue] = ["form": .string(form.rawValue)]
        if readsForeignForms { members["foreignForms"] = .bool(true) }
        if fillsMissingFields { members["missingFields"] = .bool(true) }
        if isOptional { members["optional"] = .bool(true) }
        return .dictionary(members)
    }

    /// A route read back from a schema file; nil when its form is one this Prefs does not know.
    init?(stored: PrefValue) {
        guard case .dictionary(let members) = stored, case .string(let name)? = members["form"],
            let form = Form(rawValue: name)
        else { return nil }
        self.init(
            form, readsForeignForms: members["foreignForms"] == .bool(true),
            fillsMissingFields: members["missingFields"] == .bool(true), isOptional: members["optional"] == .bool(true))
    }

    func optional() -> ReadRoute { with(\.isOptional) }
    func readingForeignForms() -> ReadRoute { with(\.readsForeignForms) }
    func fillingMissingFields() -> ReadRoute { with(\.fillsMissingFields) }

    private func with(_ flag: WritableKeyPath<ReadRoute, Bool>) -> ReadRoute {
        var route = self
        route[keyPath: flag] = true
        return route
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
