import Foundation

/// The stored forms other libraries write, read back as the declared type.
///
/// A `Codable` type is read first in Prefs' own form; when that fails, or when the stored text is plainly another
/// library's JSON, these forms are tried:
/// - sindresorhus/Defaults keeps a `Codable` value (a `Codable` enum with a raw value included) as JSON text: the
///   enum `.dark` as the string `"\"dark\""`, a URL as `"\"https:\/\/example.com\""`, a struct as `{"name":…}`;
///   arrays and dictionaries of such values as arrays and dictionaries of JSON texts.
/// - Boutique's `@StoredValue` keeps every value as the JSON-encoded data of `{"value": …}`, nil as
///   `{"value":null}`.
/// - `@AppStorage` users keep `Codable` values as JSON text or JSON data.
enum ForeignForms {
    /// The JSON coders of Prefs' own JSON text: sorted keys, and non-finite numbers named, so they round-trip.
    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(
            positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return encoder
    }()

    static let decoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.nonConformingFloatDecodingStrategy = .convertFromString(
            positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return decoder
    }()

    /// Prefs' JSON text of a value; a set's elements are sorted, so an unchanged set is stored the same way.
    static func jsonText<T: Encodable>(_ value: T) throws -> String {
        if let set = value as? any EncodableSet { return try set.sortedJSONText() }
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    /// Boutique's envelope.
    private struct Envelope<Value: Decodable>: Decodable {
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

    /// Decodes `stored` as `T`: with `primary` (Prefs' own form), then with the other libraries' forms.
    static func decode<T: Decodable>(
        _ stored: PrefValue, as type: T.Type, _ primary: (PrefValue) throws -> Any
    ) throws -> Any {
        switch stored {
        case .string(let text) where T.self != String.self && text.hasPrefix("\""):
            // Defaults' JSON text of a value that encodes as a JSON string: a raw-value enum, a URL, a tag.
            // Read first, so a type whose init(rawValue:) accepts anything does not take the quotes as content.
            if let value = try? decoder.decode(T.self, from: Data(text.utf8)) { return value }
        case .data(let bytes) where T.self == Data.self:
            // Boutique's envelope around Data; plain bytes that are not one stay as they are.
            if let value = envelope(bytes, as: T.self) { return value }
        default:
            break
        }
        let primaryError: any Error
        do { return try primary(stored) } catch { primaryError = error }
        switch stored {
        case .data(let bytes):
            if let value = envelope(bytes, as: T.self) { return value }
        case .string(let text)
        where !(T.self is any PrefValueConvertible.Type) || text.first == "[" || text.first == "{":
            // JSON text of a Codable value (Defaults keeps an `Int` enum as "2"), or of an array or dictionary
            // (AppStorage users). A type with a native form is never kept as bare JSON text ("3" for an `Int`),
            // so such text stays a type mismatch.
            if let value = try? decoder.decode(T.self, from: Data(text.utf8)) { return value }
        case .array, .dictionary:
            // Defaults' collections of Codable values hold each element as JSON text.
            for expanding in [false, true] {
                let tree = jsonObject(stored, expandingJSONText: expanding)
                if let data = try? JSONSerialization.data(withJSONObject: tree, options: [.fragmentsAllowed]),
                    let value = try? decoder.decode(T.self, from: data)
                {
                    return value
                }
            }
        default:
            break
        }
        throw primaryError
    }

    private static func envelope<T: Decodable>(_ bytes: Data, as type: T.Type) -> T? {
        guard bytes.first == UInt8(ascii: "{") else { return nil }
        return try? decoder.decode(Envelope<T>.self, from: bytes).value
    }

    /// A stored value as the Foundation objects `JSONSerialization` writes, in the forms `JSONDecoder` reads by
    /// default: a date as seconds since 2001, data as base64. With `expandingJSONText`, strings that are JSON
    /// texts are replaced by what they encode.
    private static func jsonObject(_ value: PrefValue, expandingJSONText: Bool) -> Any {
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
