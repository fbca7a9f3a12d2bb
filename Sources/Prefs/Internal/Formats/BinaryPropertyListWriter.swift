import Foundation

/// Writes a store snapshot as a binary property list (`bplist00`) without going through Foundation's object graph.
///
/// The output is what Foundation's `PropertyListSerialization` and `UserDefaults` read back as the same values:
///
/// - booleans are `0x08`/`0x09`; non-negative integers below 2³² take 1, 2 or 4 big-endian bytes, other `Int64`
///   values 8 bytes (two's complement), and `UInt64` values above `Int64.max` a 16-byte integer whose upper 8 bytes
///   are zero, as Foundation writes them;
/// - `Float` is a 4-byte real (`0x22`), `Double` an 8-byte real (`0x23`), a `Date` an 8-byte real of seconds since
///   2001-01-01 (`0x33`), all big-endian bit patterns so they round-trip exactly;
/// - strings are ASCII (`0x5n`) when every byte is below 0x80 and UTF-16 big-endian (`0x6n`) otherwise;
/// - a count of 15 or more is written as the nibble `0xF` followed by an integer object;
/// - equal strings (keys and values, the same code points) are written once and referenced wherever they occur, and
///   so are booleans and the integers 0 to 255, so an array of a million zeros costs its references, not a million
///   objects (Foundation shares every equal scalar).
///
/// Offsets use the fewest bytes (1, 2, 4 or 8) that hold the offset table's own position, and object references the
/// fewest that hold the object count: Foundation's reader refuses files whose sizes are smaller than that.
enum BinaryPropertyListWriter {
    /// The file bytes for `values` as a top-level dictionary.
    static func encode(_ values: [String: PrefValue]) -> Data {
        var graph = ObjectGraph()
        let top = graph.addDictionary(values)
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

        mutating func add(_ value: PrefValue) -> Int {
            switch value {
            case .string(let text):
                return addString(text)
            case .array(let elements):
                let index = reserve()
                var children: [Int] = []
                children.reserveCapacity(elements.count)
                for element in elements { children.append(add(element)) }
                objects[index] = .array(children)
                return index
            case .dictionary(let members):
                return addDictionary(members)
            default:
                guard let small = Self.smallIndex(value) else {
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

        mutating func addDictionary(_ members: [String: PrefValue]) -> Int {
            let index = reserve()
            var keys: [Int] = []
            var values: [Int] = []
            keys.reserveCapacity(members.count)
            values.reserveCapacity(members.count)
            for (key, value) in members {
                keys.append(addString(key))
                values.append(add(value))
            }
            objects[index] = .dictionary(keys: keys, values: values)
            return index
        }

        /// Equal strings are written once, but only when they have the same code points: Swift's `==` is canonical
        /// equivalence, and `"é"` written as one or as two code points must keep its own spelling.
        mutating func addString(_ text: String) -> Int {
            if let known = stringIndices[text] {
                if case .string(let stored) = objects[known], stored.unicodeScalars.elementsEqual(text.unicodeScalars) {
                    return known
                }
                objects.append(.string(text))
                return objects.count - 1
            }
            objects.append(.string(text))
            stringIndices[text] = objects.count - 1
            return objects.count - 1
        }

        /// A placeholder for a container, so it gets its index before its children.
        mutating func reserve() -> Int {
            objects.append(.array([]))
            return objects.count - 1
        }

        func serialize(top: Int) -> [UInt8] {
            let referenceSize = BinaryPropertyListWriter.byteCount(for: UInt64(objects.count))
            var output = BinaryPropertyListWriter.Output()
            output.bytes.reserveCapacity(64 + objects.count * 16)
            output.bytes.append(contentsOf: BinaryPropertyListValidator.magic)
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
            let offsetSize = BinaryPropertyListWriter.byteCount(for: UInt64(tableStart))
            for offset in offsets { output.appendBigEndian(UInt64(offset), size: offsetSize) }
            // Trailer: five unused bytes, the sort version, the two sizes, then three 64-bit fields.
            output.bytes.append(contentsOf: [0, 0, 0, 0, 0, 0, UInt8(offsetSize), UInt8(referenceSize)])
            output.appendBigEndian(UInt64(objects.count), size: 8)
            output.appendBigEndian(UInt64(top), size: 8)
            output.appendBigEndian(UInt64(tableStart), size: 8)
            return output.bytes
        }
    }

    /// The fewest of 1, 2, 4 or 8 bytes that hold `value`.
    static func byteCount(for value: UInt64) -> Int {
        if value <= 0xFF { return 1 }
        if value <= 0xFFFF { return 2 }
        if value <= 0xFFFF_FFFF { return 4 }
        return 8
    }

    private struct Output {
        var bytes: [UInt8] = []

        mutating func appendBigEndian(_ value: UInt64, size: Int) {
            var shift = (size - 1) * 8
            while shift >= 0 {
                bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift)))
                shift -= 8
            }
        }

        /// An integer object: 1, 2 or 4 bytes for small non-negative values, 8 bytes otherwise.
        mutating func appendInteger(_ value: Int64) {
            let size = value < 0 ? 8 : BinaryPropertyListWriter.byteCount(for: UInt64(value))
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
            case .unsignedInt(let number):
                if number <= UInt64(Int64.max) {
                    appendInteger(Int64(number))
                } else {
                    bytes.append(0x14)
                    appendBigEndian(0, size: 8)
                    appendBigEndian(number, size: 8)
                }
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
            let isASCII = text.withUTF8 { utf8 in utf8.allSatisfy { $0 < 0x80 } }
            if isASCII {
                text.withUTF8 { utf8 in
                    appendMarker(0x50, count: utf8.count)
                    bytes.append(contentsOf: utf8)
                }
            } else {
                appendMarker(0x60, count: text.utf16.count)
                for unit in text.utf16 {
                    bytes.append(UInt8(truncatingIfNeeded: unit >> 8))
                    bytes.append(UInt8(truncatingIfNeeded: unit))
                }
            }
        }
    }
}
