import Foundation

extension BinaryPropertyList {
    /// The file bytes for `values` as a top-level dictionary, which Foundation's `PropertyListSerialization` and
    /// `UserDefaults` read back as the same values:
    ///
    /// - booleans are `0x08`/`0x09`; non-negative integers below 2³² take 1, 2 or 4 big-endian bytes, other `Int64`
    ///   values 8 bytes (two's complement), and `UInt64` values above `Int64.max` a 16-byte integer whose upper 8
    ///   bytes are zero, as Foundation writes them;
    /// - `Float` is a 4-byte real (`0x22`), `Double` an 8-byte real (`0x23`), a `Date` an 8-byte real of seconds since
    ///   2001-01-01 (`0x33`), all big-endian bit patterns so they round-trip exactly;
    /// - strings are ASCII (`0x5n`) when every byte is below 0x80 and UTF-16 big-endian (`0x6n`) otherwise;
    /// - a count of 15 or more is the nibble `0xF` followed by an integer object;
    /// - equal strings (the same code points) are written once and referenced wherever they occur, and so are
    ///   booleans and the integers 0 to 255, so an array of a million zeros costs its references, not a million
    ///   objects (Foundation shares every equal scalar).
    ///
    /// Offsets take the fewest bytes (1, 2, 4 or 8) that hold the offset table's own position, and references the
    /// fewest that hold the object count: Foundation's reader refuses files whose sizes are smaller than that.
    ///
    /// - Throws: `PrefsError.encodingFailed` for a value nested deeper than the reader accepts, so a store never
    ///   writes a file it cannot open.
    static func encode(_ values: [String: PrefValue]) throws(PrefsError) -> Data {
        var graph = ObjectGraph()
        graph.stringIndices.reserveCapacity(values.count)
        let top = try graph.addDictionary(values, depth: 1, key: nil)
        return Data(graph.serialize(top: top))
    }

    /// One object of the file, before it is written. Containers hold the indices of their children.
    private enum Object {
        case value(PrefValue)
        case string(String)
        case array([Int])
        case dictionary(keys: [Int], values: [Int])
    }

    private struct ObjectGraph {
        var objects: [Object] = []
        var stringIndices: [String: Int] = [:]
        /// About how many bytes the file will take, to reserve them at once.
        var size = 64
        /// The objects of `false`, `true` and the integers 0 to 255 once written (-1: not yet), by `smallIndex`.
        var smallIndices = [Int](repeating: -1, count: 258)

        /// Where a boolean or an integer from 0 to 255 is kept in `smallIndices`; nil for any other value.
        static func smallIndex(_ value: PrefValue) -> Int? {
            switch value {
            case .bool(let flag): flag ? 257 : 256
            case .int(let number) where (0...255).contains(number): Int(number)
            default: nil
            }
        }

        /// Adds `value`, nested at `depth`, under the store key `key`.
        mutating func add(_ value: PrefValue, depth: Int, key: String) throws(PrefsError) -> Int {
            guard depth <= maximumDepth else {
                throw .encodingFailed(key: key, reason: "nested deeper than \(maximumDepth) levels")
            }
            switch value {
            case .string(let text):
                return addString(text)
            case .array(let elements):
                let index = reserve()
                var children: [Int] = []
                children.reserveCapacity(elements.count)
                for element in elements { children.append(try add(element, depth: depth + 1, key: key)) }
                objects[index] = .array(children)
                return index
            case .dictionary(let members):
                return try addDictionary(members, depth: depth, key: key)
            default:
                guard let small = Self.smallIndex(value) else {
                    if case .data(let bytes) = value { size += bytes.count }
                    objects.append(.value(value))
                    return objects.count - 1
                }
                if smallIndices[small] < 0 {
                    objects.append(.value(value))
                    smallIndices[small] = objects.count - 1
                }
                return smallIndices[small]
            }
        }

        /// Adds a dictionary at `depth` (its members one deeper); `key` is nil for the top one, whose own keys name
        /// the values in errors.
        mutating func addDictionary(
            _ members: [String: PrefValue], depth: Int, key: String?
        ) throws(PrefsError) -> Int {
            let index = reserve()
            var keys: [Int] = []
            var values: [Int] = []
            keys.reserveCapacity(members.count)
            values.reserveCapacity(members.count)
            for (name, value) in members {
                // The top dictionary's keys are distinct: written without looking for an equal string.
                keys.append(key == nil ? addNewString(name) : addString(name))
                values.append(try add(value, depth: depth + 1, key: key ?? name))
            }
            objects[index] = .dictionary(keys: keys, values: values)
            return index
        }

        /// Equal strings are written once, but only when they have the same code points: Swift's `==` is canonical
        /// equivalence, and `"é"` written as one or as two code points must keep its own spelling.
        mutating func addString(_ text: String) -> Int {
            let next = objects.count
            // One lookup that inserts `next` when the string is new.
            func index(_ slot: inout Int) -> Int { slot }
            let known = index(&stringIndices[text, default: next])
            if known != next, case .string(let stored) = objects[known],
                stored.unicodeScalars.elementsEqual(text.unicodeScalars)
            {
                return known
            }
            return addNewString(text)
        }

        mutating func addNewString(_ text: String) -> Int {
            objects.append(.string(text))
            size += 12 + 2 * text.utf8.count
            return objects.count - 1
        }

        /// A placeholder for a container, so it gets its index before its children.
        mutating func reserve() -> Int {
            objects.append(.array([]))
            return objects.count - 1
        }

        func serialize(top: Int) -> [UInt8] {
            let referenceSize = Output.byteCount(for: UInt64(objects.count))
            var output = Output()
            output.bytes.reserveCapacity(size + objects.count * 16)
            output.bytes.append(contentsOf: magic)
            var offsets: [Int] = []
            offsets.reserveCapacity(objects.count)
            for object in objects {
                offsets.append(output.bytes.count)
                switch object {
                case .value(let value): output.appendScalar(value)
                case .string(let text): output.appendString(text)
                case .array(let children):
                    output.appendMarker(0xA0, count: children.count)
                    for child in children { output.appendBigEndian(UInt64(child), size: referenceSize) }
                case .dictionary(let keys, let values):
                    output.appendMarker(0xD0, count: keys.count)
                    for key in keys { output.appendBigEndian(UInt64(key), size: referenceSize) }
                    for value in values { output.appendBigEndian(UInt64(value), size: referenceSize) }
                }
            }
            let tableStart = output.bytes.count
            // Foundation refuses a file whose offset-table position does not fit in the offset size, even when every
            // offset does; size the offsets for the table position.
            let offsetSize = Output.byteCount(for: UInt64(tableStart))
            for offset in offsets { output.appendBigEndian(UInt64(offset), size: offsetSize) }
            // Trailer: five unused bytes, the sort version, the two sizes, then three 64-bit fields.
            output.bytes.append(contentsOf: [0, 0, 0, 0, 0, 0, UInt8(offsetSize), UInt8(referenceSize)])
            output.appendBigEndian(UInt64(objects.count), size: 8)
            output.appendBigEndian(UInt64(top), size: 8)
            output.appendBigEndian(UInt64(tableStart), size: 8)
            return output.bytes
        }
    }

    private struct Output {
        var bytes: [UInt8] = []

        /// The fewest of 1, 2, 4 or 8 bytes that hold `value`.
        static func byteCount(for value: UInt64) -> Int {
            if value <= 0xFF { return 1 }
            if value <= 0xFFFF { return 2 }
            if value <= 0xFFFF_FFFF { return 4 }
            return 8
        }

        mutating func appendBigEndian(_ value: UInt64, size: Int) {
            switch size {
            case 1: bytes.append(UInt8(truncatingIfNeeded: value))
            case 2:
                Swift.withUnsafeBytes(of: UInt16(truncatingIfNeeded: value).bigEndian) { bytes.append(contentsOf: $0) }
            case 4:
                Swift.withUnsafeBytes(of: UInt32(truncatingIfNeeded: value).bigEndian) { bytes.append(contentsOf: $0) }
            default: Swift.withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
            }
        }

        /// An integer object: 1, 2 or 4 bytes for small non-negative values, 8 bytes otherwise.
        mutating func appendInteger(_ value: Int64) {
            let size = value < 0 ? 8 : Self.byteCount(for: UInt64(value))
            bytes.append(0x10 | UInt8(size.trailingZeroBitCount))
            appendBigEndian(UInt64(bitPattern: value), size: size)
        }

        /// A marker whose low nibble is `count`, or `0xF` followed by an integer object when `count` is 15 or more.
        mutating func appendMarker(_ high: UInt8, count: Int) {
            if count < 15 {
                bytes.append(high | UInt8(count))
            } else {
                bytes.append(high | 0x0F)
                appendInteger(Int64(count))
            }
        }

        mutating func appendScalar(_ value: PrefValue) {
            switch value {
            case .bool(let flag):
                bytes.append(flag ? 0x09 : 0x08)
            case .int(let number):
                appendInteger(number)
            case .unsignedInt(let number) where number <= UInt64(Int64.max):
                appendInteger(Int64(number))
            case .unsignedInt(let number):
                bytes.append(0x14)
                appendBigEndian(0, size: 8)
                appendBigEndian(number, size: 8)
            case .float(let number):
                bytes.append(0x22)
                appendBigEndian(UInt64(number.bitPattern), size: 4)
            case .double(let number):
                bytes.append(0x23)
                appendBigEndian(number.bitPattern, size: 8)
            case .date(let date):
                bytes.append(0x33)
                appendBigEndian(date.timeIntervalSinceReferenceDate.bitPattern, size: 8)
            case .data(let data):
                appendMarker(0x40, count: data.count)
                bytes.append(contentsOf: data)
            case .string(let text):
                appendString(text)
            case .array, .dictionary:
                preconditionFailure("containers are written by the object graph")
            }
        }

        mutating func appendString(_ text: String) {
            var text = text
            let isASCII = text.withUTF8 { utf8 in
                guard BinaryPropertyList.isASCII(UnsafeRawBufferPointer(utf8)) else { return false }
                appendMarker(0x50, count: utf8.count)
                bytes.append(contentsOf: utf8)
                return true
            }
            if !isASCII {
                appendMarker(0x60, count: text.utf16.count)
                for unit in text.utf16 {
                    bytes.append(UInt8(truncatingIfNeeded: unit >> 8))
                    bytes.append(UInt8(truncatingIfNeeded: unit))
                }
            }
        }
    }
}
