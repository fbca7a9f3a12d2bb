import Foundation

/// The stored forms other libraries write, read back as the declared type by
/// `ValueCodec.readingForeignForms(hasNativeForm:)`, apart from the type's own form:
/// - sindresorhus/Defaults keeps a `Codable` value (a `Codable` enum with a raw value included) as JSON text: the
///   enum `.dark` as the string `"\"dark\""`, a URL as `"\"https:\/\/example.com\""`, a struct as `{"name":…}`;
///   arrays and dictionaries of such values as arrays and dictionaries of JSON texts.
/// - Boutique's `@StoredValue` keeps every value as the JSON-encoded data of `{"value": …}`, nil as
///   `{"value":null}`.
/// - `@AppStorage` users keep `Codable` values as JSON text or JSON data.
///
/// A type read as JSON also reads Prefs' native forms of its values this way (an `.int` as a JSON number).
enum ForeignForms {
    /// The JSON coders of Prefs' own JSON text: sorted keys, and non-finite numbers named, so they round-trip.
    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(
            positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return encoder
    }()

    static let decoder = makeDecoder()

    /// A decoder configured as ``decoder``, for a caller that sets its own `userInfo` (the check of a published shape).
    static func makeDecoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.nonConformingFloatDecodingStrategy = .convertFromString(
            positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return decoder
    }

    /// Prefs' JSON text of a value; a set's elements are sorted, so an unchanged set is stored the same way.
    static func jsonText<T: Encodable>(_ value: T) throws -> String {
        if let set = value as? any EncodableSet { return try set.sortedJSONText() }
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    /// Prefs' own JSON form: JSON text, or JSON data as `@AppStorage` users store it.
    static func decodeJSON<T: Decodable>(_ stored: PrefValue, as type: T.Type) throws -> T {
        try decodeJSON(stored, DecodableReader<T>())
    }

    static func decodeJSON<R: JSONReading>(_ stored: PrefValue, _ reader: R) throws -> R.Value {
        switch stored {
        case .string(let text): try reader.read(Data(text.utf8))
        case .data(let bytes): try reader.read(bytes)
        default: throw mismatch("JSON text for \(reader.typeName)", stored)
        }
    }

    /// Boutique's envelope.
    struct Envelope<Value: Decodable>: Decodable {
        let value: Value
    }

    /// Whether `stored` is Boutique's form of nil.
    static func isBoutiqueNil(_ stored: PrefValue) -> Bool {
        guard case .data(let bytes) = stored,
            let object = try? JSONSerialization.jsonObject(with: bytes) as? [String: Any],
            object.count == 1, object["value"] is NSNull
        else { return false }
        return true
    }

    /// `stored` as `T` when it is plainly another library's form, tried before the type's own: Boutique's envelope,
    /// and for a type without a form of its own Defaults' JSON text of a string (so a type whose `init(rawValue:)`
    /// accepts anything does not take the quotes as content).
    static func plainlyForeign<T: Decodable>(_ stored: PrefValue, as type: T.Type, hasNativeForm: Bool) -> T? {
        plainlyForeign(stored, DecodableReader<T>(), hasNativeForm: hasNativeForm)
    }

    static func plainlyForeign<R: JSONReading>(_ stored: PrefValue, _ reader: R, hasNativeForm: Bool) -> R.Value? {
        switch stored {
        case .data(let bytes) where bytes.first == UInt8(ascii: "{"): try? reader.readEnvelope(bytes)
        case .string(let text) where !hasNativeForm && text.hasPrefix("\""): try? reader.read(Data(text.utf8))
        default: nil
        }
    }

    /// `stored` as `T` in another library's form, tried once the type's own form failed; nil when none fits.
    static func decode<T: Decodable>(_ stored: PrefValue, as type: T.Type, hasNativeForm: Bool) -> T? {
        decode(stored, DecodableReader<T>(), hasNativeForm: hasNativeForm)
    }

    static func decode<R: JSONReading>(_ stored: PrefValue, _ reader: R, hasNativeForm: Bool) -> R.Value? {
        switch stored {
        case .string(let text):
            // JSON text of a Codable value (Defaults keeps an `Int` enum as "2", a URL as quoted text), or of an array
            // or dictionary (AppStorage users). A type with a native form is never kept as bare JSON text ("3" for
            // an `Int`), so such text stays a type mismatch.
            guard !hasNativeForm || ["[", "{", "\""].contains(text.first) else { return nil }
            if let value = try? reader.read(Data(text.utf8)) { return value }
            if hasNativeForm { return nil }
        case .array, .dictionary: break
        default: if hasNativeForm { return nil }
        }
        // Defaults' collections of Codable values hold each element as JSON text; a JSON-read type's native values.
        for expanding in [false, true] {
            let tree = jsonObject(stored, expandingJSONText: expanding)
            if let data = try? JSONSerialization.data(withJSONObject: tree, options: [.fragmentsAllowed]),
                let value = try? reader.read(data)
            {
                return value
            }
        }
        return nil
    }

    /// A stored value as the Foundation objects `JSONSerialization` writes, in the forms `JSONDecoder` reads by
    /// default: a date as seconds since 2001, data as base64. With `expandingJSONText`, strings that are JSON
    /// texts are replaced by what they encode.
    static func jsonObject(_ value: PrefValue, expandingJSONText: Bool) -> Any {
        switch value {
        case .bool(let flag): return flag
        case .int(let number): return number
        case .unsignedInt(let number): return number
        case .float(let number): return Double(number)
        case .double(let number): return number
        case .string(let text):
            if expandingJSONText, let first = text.utf8.first,
                [UInt8(ascii: "{"), UInt8(ascii: "["), UInt8(ascii: "\"")].contains(first)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) || first == UInt8(ascii: "-"),
                let parsed = try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
            {
                return parsed
            }
            return text
        case .data(let bytes): return bytes.base64EncodedString()
        case .date(let date): return date.timeIntervalSinceReferenceDate
        case .array(let elements): return elements.map { jsonObject($0, expandingJSONText: expandingJSONText) }
        case .dictionary(let members):
            return members.mapValues { jsonObject($0, expandingJSONText: expandingJSONText) }
        }
    }
}

extension PrefValue {
    /// The value as the Foundation objects `JSONSerialization` writes, in the forms `JSONDecoder` reads by default.
    package var jsonObject: Any { ForeignForms.jsonObject(self, expandingJSONText: false) }
}

/// How JSON is decoded as a declared type: `JSONDecoder` and the type itself in the app (``DecodableReader``); in
/// `prefs`, which has no such type, the type's published shape (``ValueShape``). Every route through stored forms
/// (``ForeignForms``, ``MissingFields``) takes one, so the app and the tool go through the same forms in the same order.
protocol JSONReading {
    associatedtype Value
    /// The type as messages name it.
    var typeName: String { get }
    /// A JSON document as the type.
    func read(_ data: Data) throws -> Value
    /// Boutique's envelope of the type, `{"value": …}`.
    func readEnvelope(_ data: Data) throws -> Value
}

/// `JSONDecoder` with Prefs' settings, and the type's own `init(from:)`.
struct DecodableReader<Value: Decodable>: JSONReading, Sendable {
    var typeName: String { "\(Value.self)" }
    func read(_ data: Data) throws -> Value { try ForeignForms.decoder.decode(Value.self, from: data) }
    func readEnvelope(_ data: Data) throws -> Value {
        try ForeignForms.decoder.decode(ForeignForms.Envelope<Value>.self, from: data).value
    }
}
