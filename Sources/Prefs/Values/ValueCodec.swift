import Foundation

/// How one Swift type maps to and from `PrefValue`, chosen once when a key or wrapper is declared.
///
/// Order of preference: `Optional` (nil removes the key) around the wrapped type's codec, a type's own
/// `PrefValueConvertible` form, the raw value of a `RawRepresentable` type, and JSON text for any other `Codable`.
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

    init(codable type: Value.Type) where Value: Codable {
        let erased = AnyCodec.make(for: type) ?? AnyCodec.json(type)
        self.encode = { try erased.encode($0) }
        self.decode = { try erased.decode($0) as! Value }
    }

    /// Encodes, turning any failure into a `PrefsError` that names the key.
    func encode(_ value: Value, key: String) throws(PrefsError) -> PrefValue? {
        do { return try encode(value) } catch { throw PrefsError.encodingFailed(key: key, reason: Self.reason(error)) }
    }

    /// Decodes, turning any failure into a `PrefsError` that names the key.
    func decode(_ stored: PrefValue, key: String) throws(PrefsError) -> Value {
        do { return try decode(stored) } catch let error as PrefsError {
            if case .typeMismatch(_, let expected, let found) = error {
                throw .typeMismatch(key: key, expected: expected, found: found)
            }
            throw error
        } catch {
            throw .decodingFailed(key: key, reason: Self.reason(error))
        }
    }

    private static func reason(_ error: any Error) -> String {
        if let error = error as? PrefsError { return error.description }
        return String(describing: error)
    }
}

/// A type-erased codec, built by inspecting a metatype at run time so nested Optionals, arrays of raw values and
/// Codable fallbacks all compose.
struct AnyCodec: Sendable {
    let encode: @Sendable (Any) throws -> PrefValue?
    let decode: @Sendable (PrefValue) throws -> Any

    static func make(for type: Any.Type) -> AnyCodec? {
        if let common = common(type) { return common }
        if let optional = type as? any (OptionalCodable & Sendable).Type { return optionalCodec(optional) }
        let primary: AnyCodec?
        if let convertible = type as? any PrefValueConvertible.Type {
            primary = native(convertible)
        } else if let raw = type as? any (RawRepresentable & Sendable).Type, let codec = rawCodec(raw) {
            primary = codec
        } else if let codable = type as? any (Codable & Sendable).Type {
            primary = json(codable)
        } else {
            primary = nil
        }
        guard let primary else { return nil }
        // A Codable type also reads the forms other libraries wrote for it (see ForeignForms).
        if let codable = type as? any (Decodable & Sendable).Type { return readingForeignForms(primary, codable) }
        return primary
    }

    /// The codec of a standard type, found by comparing metatypes: exactly what the casts below choose for it (its
    /// own form, reading foreign forms too), without them. The first cast of a type to a protocol searches every
    /// conformance record of every loaded library, about a millisecond of an app's launch for the few a declaration
    /// needs.
    private static func common(_ type: Any.Type) -> AnyCodec? {
        func standard<T: PrefValueConvertible & Decodable & Sendable>(_ type: T.Type) -> AnyCodec {
            readingForeignForms(native(type), type)
        }
        switch ObjectIdentifier(type) {
        case ObjectIdentifier(Int.self): return standard(Int.self)
        case ObjectIdentifier(Bool.self): return standard(Bool.self)
        case ObjectIdentifier(Double.self): return standard(Double.self)
        case ObjectIdentifier(String.self): return standard(String.self)
        case ObjectIdentifier(Date.self): return standard(Date.self)
        case ObjectIdentifier(Data.self): return standard(Data.self)
        case ObjectIdentifier(Float.self): return standard(Float.self)
        case ObjectIdentifier(Int64.self): return standard(Int64.self)
        case ObjectIdentifier(URL.self): return standard(URL.self)
        default: return nil
        }
    }

    private static func readingForeignForms<T: Decodable & Sendable>(_ primary: AnyCodec, _ type: T.Type) -> AnyCodec {
        AnyCodec(
            encode: primary.encode, decode: { stored in try ForeignForms.decode(stored, as: T.self, primary.decode) })
    }

    private static func optionalCodec<O: OptionalCodable & Sendable>(_ type: O.Type) -> AnyCodec? {
        guard let wrapped = make(for: O.wrappedType) else { return nil }
        return AnyCodec(
            encode: { value in
                guard let some = (value as! O).wrappedAny else { return nil }
                return try wrapped.encode(some)
            },
            decode: { stored in
                // Boutique stores an optional's nil as `{"value":null}`.
                if ForeignForms.isBoutiqueNil(stored) { return O.nothing }
                return O(wrappedAny: try wrapped.decode(stored))
            }
        )
    }

    private static func native<T: PrefValueConvertible>(_ type: T.Type) -> AnyCodec {
        AnyCodec(encode: { try ($0 as! T).prefValue }, decode: { try T(prefValue: $0) })
    }

    private static func rawCodec<T: RawRepresentable & Sendable>(_ type: T.Type) -> AnyCodec? {
        guard let raw = make(for: T.RawValue.self) else { return nil }
        return AnyCodec(
            encode: { try raw.encode(($0 as! T).rawValue) },
            decode: { stored in
                let rawValue = try raw.decode(stored) as! T.RawValue
                guard let value = T(rawValue: rawValue) else {
                    throw PrefsError.typeMismatch(
                        key: "", expected: "a raw value of \(T.self)", found: "\(String(describing: rawValue))")
                }
                return value
            }
        )
    }

    static func json<T: Codable & Sendable>(_ type: T.Type) -> AnyCodec {
        AnyCodec(
            encode: { value in .string(try ForeignForms.jsonText(value as! T)) },
            decode: { stored in
                let data: Data
                switch stored {
                case .string(let text): data = Data(text.utf8)
                case .data(let bytes): data = bytes  // AppStorage users store JSON as Data.
                default: throw mismatch("JSON text for \(T.self)", stored)
                }
                return try ForeignForms.decoder.decode(T.self, from: data)
            }
        )
    }
}

/// Lets the codec see through `Optional` at run time.
protocol OptionalCodable {
    static var wrappedType: Any.Type { get }
    static var nothing: Self { get }
    var wrappedAny: Any? { get }
    init(wrappedAny: Any)
}

extension Optional: OptionalCodable {
    static var wrappedType: Any.Type { Wrapped.self }
    static var nothing: Self { nil }
    var wrappedAny: Any? { self.map { $0 as Any } }
    init(wrappedAny: Any) { self = .some(wrappedAny as! Wrapped) }
}
