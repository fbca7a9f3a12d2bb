import Foundation

extension ValueCodec where Value: Codable {
    /// This codec, reading a stored JSON object that lacks fields its type gained since it was stored: each missing
    /// field, at any depth, takes its value from `defaultValue`'s encoded form, so a `{"fontSize":20}` stored by
    /// version 1 of a settings struct reads in version 2 with `fontSize` 20 and the new fields' defaults, instead of
    /// the whole value reading as the default.
    ///
    /// Only a value that fails to decode is filled, so values that decode are read exactly as before.
    func fillingMissingFields(from defaultValue: Value) -> ValueCodec {
        let decode = decode
        return ValueCodec(
            encode: encode,
            decode: { stored in
                do {
                    return try decode(stored)
                } catch {
                    guard let filled = MissingFields.decode(stored, as: Value.self, fillingFrom: defaultValue) else {
                        throw error
                    }
                    return filled
                }
            })
    }
}

/// Fills the fields a stored JSON object lacks, one missing field at a time, as `JSONDecoder` names them.
enum MissingFields {
    /// `stored` decoded as `T` with each field `JSONDecoder` finds missing taken from `defaultValue`'s JSON form;
    /// nil when `stored` is not a JSON object or something other than a missing field keeps it from decoding.
    static func decode<T: Codable>(_ stored: PrefValue, as type: T.Type, fillingFrom defaultValue: T) -> T? {
        let text: String
        switch stored {
        case .string(let json) where json.hasPrefix("{"): text = json
        case .data(let bytes) where bytes.first == UInt8(ascii: "{"): text = String(decoding: bytes, as: UTF8.self)
        default: return nil
        }
        guard var tree = try? JSONFormat.decodeValue(text), case .dictionary = tree,
            let defaults = try? JSONFormat.decodeValue(ForeignForms.jsonText(defaultValue))
        else { return nil }
        // Each round fills one field; a type has finitely many, and a field that cannot be filled ends the loop.
        for _ in 0..<1024 {
            guard let json = try? JSONFormat.encodeValue(tree) else { return nil }
            do {
                return try ForeignForms.decoder.decode(T.self, from: Data(json.utf8))
            } catch DecodingError.keyNotFound(let key, let context) {
                let path = context.codingPath + [key]
                guard let value = defaults.member(at: path), tree.setMember(value, at: path) else { return nil }
            } catch {
                return nil
            }
        }
        return nil
    }
}

extension PrefValue {
    /// The value at a `JSONDecoder` coding path: object members by name, array elements by index.
    fileprivate func member(at path: some Collection<any CodingKey>) -> PrefValue? {
        guard let first = path.first else { return self }
        switch self {
        case .dictionary(let members): return members[first.stringValue]?.member(at: path.dropFirst())
        case .array(let elements):
            guard let index = first.intValue, elements.indices.contains(index) else { return nil }
            return elements[index].member(at: path.dropFirst())
        default: return nil
        }
    }

    /// Sets the value at a coding path whose containers all exist; false when one does not.
    fileprivate mutating func setMember(_ value: PrefValue, at path: some Collection<any CodingKey>) -> Bool {
        guard let first = path.first else {
            self = value
            return true
        }
        switch self {
        case .dictionary(var members):
            let rest = path.dropFirst()
            if rest.isEmpty {
                members[first.stringValue] = value
            } else {
                guard var child = members[first.stringValue], child.setMember(value, at: rest) else { return false }
                members[first.stringValue] = child
            }
            self = .dictionary(members)
            return true
        case .array(var elements):
            guard let index = first.intValue, elements.indices.contains(index),
                elements[index].setMember(value, at: path.dropFirst())
            else { return false }
            self = .array(elements)
            return true
        default:
            return false
        }
    }
}
