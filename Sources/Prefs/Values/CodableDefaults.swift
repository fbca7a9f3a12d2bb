import Foundation

extension ValueCodec where Value: Codable {
    /// This codec, reading a stored JSON object that lacks fields its type gained since it was stored: each missing
    /// field, at any depth, takes its value from `defaultValue`'s encoded form, so a `{"fontSize":20}` stored by
    /// version 1 of a settings struct reads in version 2 with `fontSize` 20 and the new fields' defaults, instead of
    /// the whole value reading as the default.
    ///
    /// Only a value that fails to decode is filled, so values that decode are read exactly as before.
    func fillingMissingFields(from defaultValue: Value) -> ValueCodec {
        fillingMissingFields(DecodableReader<Value>()) {
            try? ForeignForms.encoder.encode(defaultValue)
        }
    }
}

extension ValueCodec {
    /// This codec, filling the fields a stored JSON object lacks from `defaults()`, the default's JSON form, read
    /// through `reader` (see ``fillingMissingFields(from:)``).
    func fillingMissingFields<R: JSONReading & Sendable>(_ reader: R, defaults: @escaping @Sendable () -> Data?)
        -> ValueCodec
    where R.Value == Value {
        let decode = decode
        return ValueCodec(
            encode: encode,
            decode: { stored in
                do {
                    return try decode(stored)
                } catch {
                    guard let filled = try MissingFields.decode(stored, reader, defaults: defaults) else { throw error }
                    return filled
                }
            }, route: route.fillingMissingFields())
    }
}

/// Fills the fields a stored JSON object lacks, one missing field at a time, as `JSONDecoder` names them.
enum MissingFields {
    /// `stored` decoded as `T` with each field `JSONDecoder` finds missing taken from `defaultValue`'s JSON form;
    /// nil when `stored` is not a JSON object or a missing field cannot be filled. Once a field was filled, what
    /// else keeps the value from decoding is thrown: the cause that remains.
    static func decode<R: JSONReading>(_ stored: PrefValue, _ reader: R, defaults: () -> Data?) throws -> R.Value? {
        let json: Data
        switch stored {
        case .string(let text) where text.hasPrefix("{"): json = Data(text.utf8)
        case .data(let bytes) where bytes.first == UInt8(ascii: "{"): json = bytes
        default: return nil
        }
        guard var tree = try? JSONSerialization.jsonObject(with: json) as? [String: Any],
            let encodedDefault = defaults(),
            let defaults = try? JSONSerialization.jsonObject(with: encodedDefault, options: [.fragmentsAllowed])
        else { return nil }
        // Each round fills one field; a type has finitely many, and a field that cannot be filled ends the loop.
        for round in 0..<1024 {
            do {
                return try reader.read(JSONSerialization.data(withJSONObject: tree))
            } catch DecodingError.keyNotFound(let key, let context) {
                let path = context.codingPath + [key]
                guard let value = member(of: defaults, at: path[...]),
                    let filled = setting(value, at: path[...], in: tree) as? [String: Any]
                else {
                    if round == 0 { return nil }
                    throw DecodingError.keyNotFound(key, context)
                }
                tree = filled
            } catch {
                if round == 0 { return nil }
                throw error
            }
        }
        return nil
    }

    /// The value at a `JSONDecoder` coding path: object members by name, array elements by index.
    private static func member(of tree: Any, at path: ArraySlice<any CodingKey>) -> Any? {
        guard let first = path.first else { return tree }
        if let object = tree as? [String: Any], let child = object[first.stringValue] {
            return member(of: child, at: path.dropFirst())
        }
        if let array = tree as? [Any], let index = first.intValue, array.indices.contains(index) {
            return member(of: array[index], at: path.dropFirst())
        }
        return nil
    }

    /// `tree` with the value at a coding path set, the last member added if missing; nil when a container on the
    /// way does not exist.
    private static func setting(_ value: Any, at path: ArraySlice<any CodingKey>, in tree: Any) -> Any? {
        guard let first = path.first else { return value }
        if var object = tree as? [String: Any] {
            let child = object[first.stringValue] ?? (path.count == 1 ? value : nil)
            guard let child, let updated = setting(value, at: path.dropFirst(), in: child) else { return nil }
            object[first.stringValue] = updated
            return object
        }
        if var array = tree as? [Any], let index = first.intValue, array.indices.contains(index),
            let updated = setting(value, at: path.dropFirst(), in: array[index])
        {
            array[index] = updated
            return array
        }
        return nil
    }
}
