import Foundation

extension BinaryPropertyListValidator.Walker {
    /// The values of a validated `bplist00` file whose top object is a string-keyed dictionary, built directly from
    /// its bytes: what Foundation's `PropertyListSerialization` followed by `PropertyListFormat.fromFoundation` makes
    /// of it (except that a non-finite 32-bit real stays a `Float`), without Foundation's objects and the dynamic casts that convert them (most of the cost of opening a
    /// suite). Nil for a top object that is not a dictionary, which it leaves to Foundation. A dictionary with a key
    /// twice (or two keys that are equal as Swift strings) is refused, as JSON and XML refuse it.
    ///
    /// Every file both read, they read alike (`FormatTests`); a few damaged files that pass the validator are read
    /// here although Foundation's own binary parser gives up on them.
    ///
    /// Only call on a walker returned by `validatedWalker`: every offset, length and reference was checked.
    func topDictionary() throws(BinaryPropertyListValidator.Failure) -> [String: PrefValue]? {
        guard let offset = try? offset(of: topObject), bytes[offset] & 0xF0 == 0xD0 else { return nil }
        var decoded: [Int: PrefValue] = [:]
        guard case .dictionary(let values)? = try value(of: topObject, sharing: &decoded) else { return nil }
        return values
    }

    /// The value of object `index`; an object the file references more than once is decoded once, kept in
    /// `decoded`, and shared by every reference (copy-on-write), so the values cost what the file holds.
    private func value(
        of index: Int, sharing decoded: inout [Int: PrefValue]
    ) throws(BinaryPropertyListValidator.Failure) -> PrefValue? {
        guard isShared[index] else { return try build(index, sharing: &decoded) }
        if let known = decoded[index] { return known }
        let value = try build(index, sharing: &decoded)
        decoded[index] = value
        return value
    }

    private func build(
        _ index: Int, sharing decoded: inout [Int: PrefValue]
    ) throws(BinaryPropertyListValidator.Failure) -> PrefValue? {
        guard let start = try? offset(of: index) else { return nil }
        let marker = bytes[start]
        switch marker & 0xF0 {
        case 0x00:
            return .bool(marker == 0x09)
        case 0x10:
            let size = 1 << Int(marker & 0x0F)
            switch size {
            case 8: return .int(Int64(bitPattern: Self.readUInt(bytes, at: start + 1, size: 8)))
            // Sixteen bytes hold an unsigned 64-bit value in the low half (the validator checked the high half).
            case 16: return .integer(Self.readUInt(bytes, at: start + 9, size: 8))
            default: return .int(Int64(Self.readUInt(bytes, at: start + 1, size: size)))
            }
        case 0x20:
            // A 32-bit real is a `Float`, bit for bit, also when it is not finite (Foundation turns those into
            // `Double`s); a 64-bit one a `Double`, every NaN the canonical one, as Foundation reads it.
            if marker == 0x22 { return .float(Float(bitPattern: UInt32(Self.readUInt(bytes, at: start + 1, size: 4)))) }
            let number = Double(bitPattern: Self.readUInt(bytes, at: start + 1, size: 8))
            return .double(number.isNaN ? .nan : number)
        case 0x30:
            let seconds = Double(bitPattern: Self.readUInt(bytes, at: start + 1, size: 8))
            return .date(Date(timeIntervalSinceReferenceDate: seconds))
        case 0x40, 0x50, 0x60:
            guard let (length, body) = try? count(marker: marker, at: start) else { return nil }
            switch marker & 0xF0 {
            case 0x40: return .data(Data(bytes[body..<(body + length)]))
            case 0x50: return .string(String(decoding: bytes[body..<(body + length)], as: UTF8.self))
            default:
                let units = (0..<length).map { UInt16(bytes[body + 2 * $0]) << 8 | UInt16(bytes[body + 2 * $0 + 1]) }
                return .string(String(decoding: units, as: UTF16.self))
            }
        case 0xA0:
            guard let (elements, body) = try? count(marker: marker, at: start) else { return nil }
            var result: [PrefValue] = []
            result.reserveCapacity(elements)
            for element in 0..<elements {
                guard let child = try? reference(at: body + element * referenceSize),
                    let value = try value(of: child, sharing: &decoded)
                else { return nil }
                result.append(value)
            }
            return .array(result)
        case 0xD0:
            guard let (pairs, body) = try? count(marker: marker, at: start) else { return nil }
            var result = [String: PrefValue](minimumCapacity: pairs)
            for pair in 0..<pairs {
                guard let keyIndex = try? reference(at: body + pair * referenceSize),
                    case .string(let key)? = try value(of: keyIndex, sharing: &decoded),
                    let valueIndex = try? reference(at: body + (pairs + pair) * referenceSize),
                    let value = try value(of: valueIndex, sharing: &decoded)
                else { return nil }
                guard result.updateValue(value, forKey: key) == nil else {
                    throw BinaryPropertyListValidator.Failure(
                        "dictionary at offset \(start) holds the key \(key.debugDescription) twice")
                }
            }
            return .dictionary(result)
        default:
            return nil
        }
    }
}
