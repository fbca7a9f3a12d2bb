import Foundation

/// The plaintext inside a vault: the store's values as a binary property list (``BinaryPropertyList``), from vault
/// format 3 on. A vault of format 2 holds them in the compact encoding below, which is still read; the next write
/// rewrites such a vault in format 3.
///
/// ```
/// payload    = version u8 (1) | count u32 | entry*          (the top-level dictionary, without a tag)
/// entry      = key string | value
/// string     = length u32 | UTF-8 bytes
/// value      = tag u8 | body
///   0 false, 1 true                   (no body)
///   2 int      Int64 (8)              3 unsignedInt UInt64 (8)
///   4 float    bit pattern u32 (4)    5 double      bit pattern u64 (8)
///   6 date     bit pattern u64 of the seconds since 2001-01-01 (8)
///   7 string   string                 8 data        length u32 | bytes
///   9 array    count u32 | value*     10 dictionary count u32 | entry*
/// ```
///
/// All integers are little-endian. Both readers are strict, and read straight from the plaintext buffer (which is
/// zeroed once it is decoded), so no copy of it is left behind.
enum VaultPayload {
    /// The first byte of a format 2 payload; a binary property list starts with `b`.
    static let legacyVersion: UInt8 = 1

    static func encode(_ values: [String: PrefValue]) throws(PrefsError) -> Data {
        try BinaryPropertyList.encode(values)
    }

    /// Whether `plaintext` is in the encoding of vault format 2.
    static func isLegacy(_ plaintext: UnsafeRawBufferPointer) -> Bool { plaintext.first == legacyVersion }

    /// The values in `plaintext`; anything but a well-formed payload throws `PrefsError.corruptFile` naming `path`.
    static func decode(_ plaintext: UnsafeRawBufferPointer, path: String) throws(PrefsError) -> [String: PrefValue] {
        do throws(BinaryFormatFailure) {
            guard isLegacy(plaintext) else { return try BinaryPropertyList.values(in: plaintext) }
            var reader = LegacyReader(input: LittleEndianReader(plaintext))
            try reader.input.skip(1)
            let values = try reader.dictionaryBody(depth: 1)
            guard reader.input.remaining == 0 else {
                throw BinaryFormatFailure("\(reader.input.remaining) unexpected bytes after the payload")
            }
            return values
        } catch {
            throw .corruptFile(path: path, reason: "malformed vault payload: \(error.description)")
        }
    }

    /// Reads the encoding of vault format 2. Allocations are bounded by the input: a count is checked against the
    /// bytes left before anything is reserved for it.
    private struct LegacyReader {
        var input: LittleEndianReader

        /// A count or length, refused when the rest of the input cannot hold `minimumSize` bytes per item.
        mutating func count(minimumSize: Int) throws(BinaryFormatFailure) -> Int {
            let start = input.position
            let value = Int(try input.integer(UInt32.self))
            let (needed, overflow) = value.multipliedReportingOverflow(by: minimumSize)
            guard !overflow, needed <= input.remaining else {
                throw BinaryFormatFailure("count \(value) at offset \(start) runs past the end")
            }
            return value
        }

        mutating func string() throws(BinaryFormatFailure) -> String {
            let start = input.position
            let raw = try input.slice(try count(minimumSize: 1))
            guard let text = String(validating: raw.assumingMemoryBound(to: UInt8.self), as: UTF8.self) else {
                throw BinaryFormatFailure("invalid UTF-8 in the string at offset \(start)")
            }
            return text
        }

        mutating func dictionaryBody(depth: Int) throws(BinaryFormatFailure) -> [String: PrefValue] {
            guard depth <= BinaryPropertyList.maximumDepth else { throw Self.tooDeep }
            // Each entry takes at least a 4-byte key length and a 1-byte tag.
            let count = try count(minimumSize: 5)
            var members = [String: PrefValue](minimumCapacity: count)
            for _ in 0..<count {
                let start = input.position
                let key = try string()
                guard members.updateValue(try value(depth: depth), forKey: key) == nil else {
                    throw BinaryFormatFailure("repeated key at offset \(start)")
                }
            }
            return members
        }

        mutating func value(depth: Int) throws(BinaryFormatFailure) -> PrefValue {
            let start = input.position
            switch try input.byte() {
            case 0: return .bool(false)
            case 1: return .bool(true)
            case 2: return .int(try input.integer(Int64.self))
            case 3: return .unsignedInt(try input.integer(UInt64.self))
            case 4: return .float(Float(bitPattern: try input.integer(UInt32.self)))
            case 5: return .double(Double(bitPattern: try input.integer(UInt64.self)))
            case 6:
                return .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: try input.integer(UInt64.self))))
            case 7: return .string(try string())
            case 8: return .data(Data(try input.slice(try count(minimumSize: 1))))
            case 9:
                guard depth < BinaryPropertyList.maximumDepth else { throw Self.tooDeep }
                let count = try count(minimumSize: 1)
                var elements: [PrefValue] = []
                elements.reserveCapacity(count)
                for _ in 0..<count { elements.append(try value(depth: depth + 1)) }
                return .array(elements)
            case 10: return .dictionary(try dictionaryBody(depth: depth + 1))
            default: throw BinaryFormatFailure("unknown tag at offset \(start)")
            }
        }

        static let tooDeep = BinaryFormatFailure("nested deeper than \(BinaryPropertyList.maximumDepth) levels")
    }
}
