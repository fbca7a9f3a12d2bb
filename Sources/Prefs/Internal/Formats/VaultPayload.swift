import Foundation

/// The plaintext inside a vault: a compact binary encoding of a store snapshot.
///
/// The plaintext is never seen outside the encryption, so it is built for exact, fast decoding rather than for people:
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
/// All integers are little-endian. The decoder is strict: an unknown version or tag, a length or count that runs
/// past the end, invalid UTF-8, a repeated key, nesting deeper than ``maximumDepth`` or bytes after the payload all
/// throw `PrefsError.corruptFile`. Allocations are bounded by the input: a count is checked against the bytes left
/// before anything is reserved for it.
enum VaultPayload {
    static let version: UInt8 = 1
    /// The deepest nesting of arrays and dictionaries either side accepts (the top level counts as one).
    static let maximumDepth = 512

    enum Tag: UInt8 {
        case boolFalse = 0
        case boolTrue = 1
        case int = 2
        case unsignedInt = 3
        case float = 4
        case double = 5
        case date = 6
        case string = 7
        case data = 8
        case array = 9
        case dictionary = 10
    }

    // MARK: Encoding

    /// The payload bytes for `values`. Throws `PrefsError.encodingFailed` for a value nested deeper than
    /// ``maximumDepth`` or a string or collection too large for a 32-bit length.
    static func encode(_ values: [String: PrefValue]) throws(PrefsError) -> Data {
        var writer = Writer()
        writer.bytes.reserveCapacity(64 + values.count * 48)
        writer.bytes.append(version)
        try writer.appendCount(values.count, key: "")
        for (key, value) in values {
            try writer.appendString(key, key: key)
            try writer.appendValue(value, key: key, depth: 1)
        }
        return Data(writer.bytes)
    }

    private struct Writer {
        var bytes: [UInt8] = []

        func isValid(length: Int) -> Bool { length <= Int(UInt32.max) }

        mutating func appendLittleEndian<T: FixedWidthInteger>(_ value: T) { bytes.appendLittleEndian(value) }

        mutating func appendCount(_ count: Int, key: String) throws(PrefsError) {
            guard isValid(length: count) else {
                throw .encodingFailed(key: key, reason: "\(count) elements or bytes do not fit in a vault")
            }
            appendLittleEndian(UInt32(count))
        }

        mutating func appendString(_ text: String, key: String) throws(PrefsError) {
            var text = text
            try appendCount(text.utf8.count, key: key)
            text.withUTF8 { bytes.append(contentsOf: $0) }
        }

        mutating func appendValue(_ value: PrefValue, key: String, depth: Int) throws(PrefsError) {
            switch value {
            case .bool(let flag):
                bytes.append(flag ? Tag.boolTrue.rawValue : Tag.boolFalse.rawValue)
            case .int(let number):
                bytes.append(Tag.int.rawValue)
                appendLittleEndian(number)
            case .unsignedInt(let number):
                bytes.append(Tag.unsignedInt.rawValue)
                appendLittleEndian(number)
            case .float(let number):
                bytes.append(Tag.float.rawValue)
                appendLittleEndian(number.bitPattern)
            case .double(let number):
                bytes.append(Tag.double.rawValue)
                appendLittleEndian(number.bitPattern)
            case .date(let date):
                bytes.append(Tag.date.rawValue)
                appendLittleEndian(date.timeIntervalSinceReferenceDate.bitPattern)
            case .string(let text):
                bytes.append(Tag.string.rawValue)
                try appendString(text, key: key)
            case .data(let data):
                bytes.append(Tag.data.rawValue)
                try appendCount(data.count, key: key)
                bytes.append(contentsOf: data)
            case .array(let elements):
                try checkDepth(depth + 1, key: key)
                bytes.append(Tag.array.rawValue)
                try appendCount(elements.count, key: key)
                for element in elements { try appendValue(element, key: key, depth: depth + 1) }
            case .dictionary(let members):
                try checkDepth(depth + 1, key: key)
                bytes.append(Tag.dictionary.rawValue)
                try appendCount(members.count, key: key)
                for (name, member) in members {
                    try appendString(name, key: key)
                    try appendValue(member, key: key, depth: depth + 1)
                }
            }
        }

        func checkDepth(_ depth: Int, key: String) throws(PrefsError) {
            guard depth <= VaultPayload.maximumDepth else {
                throw .encodingFailed(key: key, reason: "nested deeper than \(VaultPayload.maximumDepth) levels")
            }
        }
    }

    // MARK: Decoding

    /// The snapshot in `data`; anything but a well-formed payload throws `PrefsError.corruptFile` naming `path`.
    static func decode(_ data: Data, path: String) throws(PrefsError) -> [String: PrefValue] {
        let result = data.withUnsafeBytes { buffer in
            Result { () throws(PrefsError) in try decode(buffer, path: path) }
        }
        return try result.get()
    }

    /// The snapshot in `buffer`; anything but a well-formed payload throws `PrefsError.corruptFile` naming `path`.
    static func decode(_ buffer: UnsafeRawBufferPointer, path: String) throws(PrefsError) -> [String: PrefValue] {
        var reader = Reader(bytes: buffer)
        do throws(Failure) {
            guard try reader.byte() == version else { throw Failure("unknown payload version") }
            let values = try reader.dictionaryBody(depth: 1)
            guard reader.position == buffer.count else {
                throw Failure("\(buffer.count - reader.position) unexpected bytes after the payload")
            }
            return values
        } catch {
            throw .corruptFile(path: path, reason: "malformed vault payload: \(error.description)")
        }
    }

    typealias Failure = BinaryFormatFailure

    struct Reader {
        var input: LittleEndianReader

        init(bytes: UnsafeRawBufferPointer) { input = LittleEndianReader(bytes) }

        var bytes: UnsafeRawBufferPointer { input.bytes }
        var position: Int { input.position }
        var remaining: Int { input.remaining }

        mutating func byte() throws(Failure) -> UInt8 { try input.byte() }

        mutating func littleEndian<T: FixedWidthInteger>(_ type: T.Type) throws(Failure) -> T {
            try input.integer(type)
        }

        /// A count or length, refused when the rest of the input cannot hold `minimumSize` bytes per item.
        mutating func count(minimumSize: Int) throws(Failure) -> Int {
            let start = position
            let value = Int(try littleEndian(UInt32.self))
            // As `value <= remaining / minimumSize`, without a division for every string of the payload.
            let (needed, overflow) = value.multipliedReportingOverflow(by: minimumSize)
            guard !overflow, needed <= remaining else {
                throw Failure("count \(value) at offset \(start) runs past the end")
            }
            return value
        }

        mutating func string() throws(Failure) -> String {
            let length = try count(minimumSize: 1)
            let start = position
            let raw = try input.slice(length)
            let utf8 = raw.assumingMemoryBound(to: UInt8.self)
            let text = String(decoding: utf8, as: UTF8.self)
            // Decoding replaces invalid sequences, which changes the bytes: valid UTF-8 is exactly what comes back
            // unchanged. ASCII (the common case) is always valid. This is several times faster than the generic
            // `String(validating:as:)`.
            if !Self.isASCII(raw) {
                guard text.utf8.elementsEqual(utf8) else {
                    throw Failure("invalid UTF-8 in the string at offset \(start)")
                }
            }
            return text
        }

        /// Whether every byte is below 0x80, looked at eight bytes at a time.
        static func isASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
            var high: UInt64 = 0
            var offset = 0
            while offset + 8 <= bytes.count {
                high |= bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
                offset += 8
            }
            while offset < bytes.count {
                high |= UInt64(bytes[offset])
                offset += 1
            }
            return high & 0x8080_8080_8080_8080 == 0
        }

        mutating func dictionaryBody(depth: Int) throws(Failure) -> [String: PrefValue] {
            guard depth <= VaultPayload.maximumDepth else {
                throw Failure("nested deeper than \(VaultPayload.maximumDepth) levels")
            }
            // Each entry takes at least a 4-byte key length and a 1-byte tag.
            let count = try count(minimumSize: 5)
            var members = [String: PrefValue](minimumCapacity: count)
            for _ in 0..<count {
                let start = position
                let key = try string()
                let value = try self.value(depth: depth)
                guard members.updateValue(value, forKey: key) == nil else {
                    throw Failure("repeated key at offset \(start)")
                }
            }
            return members
        }

        mutating func value(depth: Int) throws(Failure) -> PrefValue {
            let start = position
            guard let tag = Tag(rawValue: try byte()) else { throw Failure("unknown tag at offset \(start)") }
            switch tag {
            case .boolFalse: return .bool(false)
            case .boolTrue: return .bool(true)
            case .int: return .int(try littleEndian(Int64.self))
            case .unsignedInt: return .unsignedInt(try littleEndian(UInt64.self))
            case .float: return .float(Float(bitPattern: try littleEndian(UInt32.self)))
            case .double: return .double(Double(bitPattern: try littleEndian(UInt64.self)))
            case .date:
                let seconds = Double(bitPattern: try littleEndian(UInt64.self))
                return .date(Date(timeIntervalSinceReferenceDate: seconds))
            case .string: return .string(try string())
            case .data:
                let length = try count(minimumSize: 1)
                return .data(Data(try input.slice(length)))
            case .array:
                guard depth + 1 <= VaultPayload.maximumDepth else {
                    throw Failure("nested deeper than \(VaultPayload.maximumDepth) levels")
                }
                let count = try count(minimumSize: 1)
                var elements: [PrefValue] = []
                elements.reserveCapacity(count)
                for _ in 0..<count { elements.append(try value(depth: depth + 1)) }
                return .array(elements)
            case .dictionary:
                return .dictionary(try dictionaryBody(depth: depth + 1))
            }
        }
    }
}
