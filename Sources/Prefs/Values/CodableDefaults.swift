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
        let json: Data
        switch stored {
        case .string(let text) where text.hasPrefix("{"): json = Data(text.utf8)
        case .data(let bytes) where bytes.first == UInt8(ascii: "{"): json = bytes
        default: return nil
        }
        let decoder = ForeignForms.decoder
        guard var tree = try? decoder.decode(JSONTree.self, from: json), case .object = tree,
            let defaults = try? decoder.decode(JSONTree.self, from: ForeignForms.encoder.encode(defaultValue))
        else { return nil }
        // Each round fills one field; a type has finitely many, and a field that cannot be filled ends the loop.
        for _ in 0..<1024 {
            do {
                return try decoder.decode(T.self, from: ForeignForms.encoder.encode(tree))
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

/// A JSON document as `JSONDecoder` reads it, numbers kept exactly (integers as integers), for filling in fields.
enum JSONTree: Codable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case unsignedInt(UInt64)
    case double(Double)
    case string(String)
    case array([JSONTree])
    case object([String: JSONTree])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let flag = try? container.decode(Bool.self) {
            self = .bool(flag)
        } else if let number = try? container.decode(Int64.self) {
            self = .int(number)
        } else if let number = try? container.decode(UInt64.self) {
            self = .unsignedInt(number)
        } else if let number = try? container.decode(Double.self) {
            self = .double(number)
        } else if let text = try? container.decode(String.self) {
            self = .string(text)
        } else if let elements = try? container.decode([JSONTree].self) {
            self = .array(elements)
        } else {
            self = .object(try container.decode([String: JSONTree].self))
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let flag): try container.encode(flag)
        case .int(let number): try container.encode(number)
        case .unsignedInt(let number): try container.encode(number)
        case .double(let number): try container.encode(number)
        case .string(let text): try container.encode(text)
        case .array(let elements): try container.encode(elements)
        case .object(let members): try container.encode(members)
        }
    }

    /// The value at a `JSONDecoder` coding path: object members by name, array elements by index.
    func member(at path: some Collection<any CodingKey>) -> JSONTree? {
        guard let first = path.first else { return self }
        switch self {
        case .object(let members): return members[first.stringValue]?.member(at: path.dropFirst())
        case .array(let elements):
            guard let index = first.intValue, elements.indices.contains(index) else { return nil }
            return elements[index].member(at: path.dropFirst())
        default: return nil
        }
    }

    /// Sets the value at a coding path whose containers all exist; false when one does not.
    mutating func setMember(_ value: JSONTree, at path: some Collection<any CodingKey>) -> Bool {
        guard let first = path.first else {
            self = value
            return true
        }
        switch self {
        case .object(var members):
            let rest = path.dropFirst()
            if rest.isEmpty {
                members[first.stringValue] = value
            } else {
                guard var child = members[first.stringValue], child.setMember(value, at: rest) else { return false }
                members[first.stringValue] = child
            }
            self = .object(members)
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
