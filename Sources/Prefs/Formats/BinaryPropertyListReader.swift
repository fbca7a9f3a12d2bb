import Foundation

/// Why a binary input could not be read: a one-line description with the offset where it went wrong.
struct BinaryFormatFailure: Error, Sendable {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The binary property-list format (`bplist00`): a UserDefaults suite file, and the payload of a vault. Prefs reads
/// and writes it itself: Foundation on Linux crashes on some malformed files (a set, which it cannot bridge), and its
/// objects and casts were most of the cost of opening a suite.
enum BinaryPropertyList {
    /// The first bytes of every file either side accepts; ``startsWithMagic(_:)`` is the one place they are compared.
    static let magic = Array("bplist00".utf8)
    /// The deepest nesting either side accepts, the top dictionary being the first level.
    static let maximumDepth = 512
    /// The expanded size, in values, every file may reach whatever its own size (a string or data object counts one
    /// more per 16 bytes, so shared large strings are bounded by their expanded bytes too).
    static let expandedValueFloor = 1 << 20

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

    /// Whether `bytes` starts as a binary property list: how a suite file written by Prefs is told from one another
    /// tool rewrote.
    static func startsWithMagic(_ bytes: some Collection<UInt8>) -> Bool { bytes.starts(with: magic) }

    /// The values of a file whose top object is a string-keyed dictionary, read in one pass over its bytes.
    ///
    /// Accepts only what `PrefValue` holds (booleans, integers of 1 to 16 bytes that fit 64 bits, 32- and 64-bit
    /// reals, dates, data, ASCII and UTF-16 strings, arrays, string-keyed dictionaries) and refuses, as it reads:
    /// offsets and references out of range, cycles, nesting deeper than ``maximumDepth``, a dictionary holding a key
    /// twice (or two keys equal as Swift strings), and object graphs whose shared objects expand to more values than
    /// the file has bytes (or ``expandedValueFloor``). An object referenced more than once is decoded once more when
    /// it is met again and then shared by every later reference (copy-on-write), so the values cost what the file
    /// holds; whatever walks them (the writer, JSON, Foundation's objects) meets every copy, hence the bound.
    ///
    /// Every file Foundation also reads, it reads alike (`FormatTests`), except that a non-finite 32-bit real stays a
    /// `Float` (Foundation makes a `Double` of it).
    static func values(in bytes: UnsafeRawBufferPointer) throws(BinaryFormatFailure) -> [String: PrefValue] {
        var reader = try Reader(bytes)
        guard try reader.objectMarker(reader.topObject) & 0xF0 == 0xD0 else {
            throw BinaryFormatFailure("the top object is not a dictionary")
        }
        let (value, expanded, _) = try reader.read(reader.topObject, depth: 1)
        let limit = Swift.max(bytes.count, expandedValueFloor)
        guard expanded <= limit else {
            throw BinaryFormatFailure(
                "object graph expands to more than \(limit) values, more than the file's size allows")
        }
        guard case .dictionary(let values) = value else { preconditionFailure("a dictionary reads as one") }
        return values
    }

    private struct Reader {
        let bytes: UnsafeRawBufferPointer
        let offsetSize: Int
        let referenceSize: Int
        let objectCount: Int
        let topObject: Int
        let offsetTableStart: Int
        /// By object: how many values it expands to once read (saturated at `Int32.max`), -1 before it is met, -2
        /// while it is being read (met again then, it contains itself). Arrays rather than hashed collections: a
        /// file holds at most a few objects per byte, and hashing each object cost most of opening a suite.
        var counts: [Int32]
        /// By object: its nesting height once read, so a later reference is checked against the depth limit.
        var heights: [UInt16]
        /// The containers, strings and data met more than once, as decoded the second time.
        var shared: [Int: PrefValue] = [:]

        init(_ bytes: UnsafeRawBufferPointer) throws(BinaryFormatFailure) {
            self.bytes = bytes
            guard bytes.count >= magic.count + 32, BinaryPropertyList.startsWithMagic(bytes) else {
                throw BinaryFormatFailure("missing bplist00 header or trailer")
            }
            let trailer = bytes.count - 32
            offsetSize = Int(bytes[trailer + 6])
            referenceSize = Int(bytes[trailer + 7])
            guard (1...8).contains(offsetSize), (1...8).contains(referenceSize) else {
                throw BinaryFormatFailure("invalid offset or reference size in trailer")
            }
            let objects = Self.bigEndian(bytes, at: trailer + 8, size: 8)
            let top = Self.bigEndian(bytes, at: trailer + 16, size: 8)
            let table = Self.bigEndian(bytes, at: trailer + 24, size: 8)
            guard objects >= 1, top < objects, table >= UInt64(magic.count), table < UInt64(trailer) else {
                throw BinaryFormatFailure("invalid object count, top object or offset table position in trailer")
            }
            let (tableBytes, overflow) = objects.multipliedReportingOverflow(by: UInt64(offsetSize))
            guard !overflow, tableBytes <= UInt64(trailer) - table else {
                throw BinaryFormatFailure("offset table runs past the trailer")
            }
            objectCount = Int(objects)
            topObject = Int(top)
            offsetTableStart = Int(table)
            counts = Array(repeating: -1, count: objectCount)
            heights = Array(repeating: 0, count: objectCount)
        }

        static func bigEndian(_ bytes: UnsafeRawBufferPointer, at start: Int, size: Int) -> UInt64 {
            switch size {
            case 1: return UInt64(bytes[start])
            case 2: return UInt64(UInt16(bigEndian: bytes.loadUnaligned(fromByteOffset: start, as: UInt16.self)))
            case 4: return UInt64(UInt32(bigEndian: bytes.loadUnaligned(fromByteOffset: start, as: UInt32.self)))
            case 8: return UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: start, as: UInt64.self))
            default:
                var value: UInt64 = 0
                for index in start..<start + size { value = value << 8 | UInt64(bytes[index]) }
                return value
            }
        }

        /// The start of object `index`, always inside the object area (after the header, before the table).
        func offset(of index: Int) throws(BinaryFormatFailure) -> Int {
            let value = Self.bigEndian(bytes, at: offsetTableStart + index * offsetSize, size: offsetSize)
            guard value >= UInt64(magic.count), value < UInt64(offsetTableStart) else {
                throw BinaryFormatFailure("object \(index) has offset \(value) outside the object area")
            }
            return Int(value)
        }

        func objectMarker(_ index: Int) throws(BinaryFormatFailure) -> UInt8 { bytes[try offset(of: index)] }

        /// Checks that `length` bytes from `start` lie inside the object area.
        func checkRange(_ start: Int, _ length: Int, _ what: String) throws(BinaryFormatFailure) {
            guard length >= 0, start <= offsetTableStart, length <= offsetTableStart - start else {
                throw BinaryFormatFailure("\(what) at offset \(start) runs past the object area")
            }
        }

        /// The count in a marker's low nibble, or in the integer object that follows it when that nibble is 0xF, and
        /// the offset of the first byte after it; at most `perByte` items per byte left in the object area.
        func count(marker: UInt8, at start: Int, bytesPerItem: Int = 1) throws(BinaryFormatFailure) -> (Int, Int) {
            let nibble = Int(marker & 0x0F)
            var (value, body) = (nibble, start + 1)
            if nibble == 0x0F {
                try checkRange(start + 1, 1, "length")
                let intMarker = bytes[start + 1]
                guard intMarker & 0xF0 == 0x10, intMarker & 0x0F <= 3 else {
                    throw BinaryFormatFailure("invalid length marker at offset \(start + 1)")
                }
                let size = 1 << Int(intMarker & 0x0F)
                try checkRange(start + 2, size, "length")
                let wide = Self.bigEndian(bytes, at: start + 2, size: size)
                guard wide <= UInt64(offsetTableStart) else {
                    throw BinaryFormatFailure("length \(wide) at offset \(start) too large")
                }
                (value, body) = (Int(wide), start + 2 + size)
            }
            try checkRange(body, value * bytesPerItem, "object")
            return (value, body)
        }

        func reference(at position: Int) throws(BinaryFormatFailure) -> Int {
            let value = Self.bigEndian(bytes, at: position, size: referenceSize)
            guard value < UInt64(objectCount) else {
                throw BinaryFormatFailure("reference to object \(value) at offset \(position), only \(objectCount)")
            }
            return Int(value)
        }

        /// Object `index` at nesting `depth`: its value, how many values it expands to, and its height.
        mutating func read(_ index: Int, depth: Int) throws(BinaryFormatFailure) -> (PrefValue, Int, Int) {
            let start = try offset(of: index)
            let marker = bytes[start]
            // Scalars, and ASCII strings of up to 14 bytes (which a `String` holds inline, without memory of its
            // own), contain nothing: read each time they are referenced.
            guard marker >= 0x40, marker & 0xF0 != 0x50 || marker == 0x5F else {
                guard depth <= maximumDepth else { throw tooDeep() }
                return (try marker < 0x40 ? scalar(at: start) : object(at: start, depth: depth).0, 1, 1)
            }
            switch counts[index] {
            case -1:
                guard depth <= maximumDepth else { throw tooDeep() }
                counts[index] = -2
                let (value, count, height) = try object(at: start, depth: depth)
                counts[index] = Int32(clamping: count)
                heights[index] = UInt16(height)
                return (value, count, height)
            case -2:
                throw BinaryFormatFailure("object \(index) contains itself")
            case let known:
                // Checked when first met: only the depth it now sits at is new.
                let height = Int(heights[index])
                guard depth + height - 1 <= maximumDepth else { throw tooDeep() }
                if let value = shared[index] { return (value, Int(known), height) }
                let value = try object(at: start, depth: depth).0
                shared[index] = value
                return (value, Int(known), height)
            }
        }

        func scalar(at start: Int) throws(BinaryFormatFailure) -> PrefValue {
            let marker = bytes[start]
            switch marker {
            case 0x08, 0x09:
                return .bool(marker == 0x09)
            case 0x10...0x14:
                let size = 1 << Int(marker & 0x0F)
                try checkRange(start + 1, size, "integer")
                switch size {
                case 8: return .int(Int64(bitPattern: Self.bigEndian(bytes, at: start + 1, size: 8)))
                case 16:
                    // How an unsigned 64-bit value is written: the high half must be zero.
                    guard Self.bigEndian(bytes, at: start + 1, size: 8) == 0 else {
                        throw BinaryFormatFailure("integer at offset \(start) does not fit in 64 bits")
                    }
                    return .exactInteger(Self.bigEndian(bytes, at: start + 9, size: 8))
                default: return .int(Int64(Self.bigEndian(bytes, at: start + 1, size: size)))
                }
            case 0x22:
                // A 32-bit real is a `Float`, bit for bit, also when it is not finite.
                try checkRange(start + 1, 4, "real")
                return .float(Float(bitPattern: UInt32(Self.bigEndian(bytes, at: start + 1, size: 4))))
            case 0x23:
                // Every NaN the canonical one, as Foundation reads it.
                try checkRange(start + 1, 8, "real")
                let number = Double(bitPattern: Self.bigEndian(bytes, at: start + 1, size: 8))
                return .double(number.isNaN ? .nan : number)
            case 0x33:
                try checkRange(start + 1, 8, "date")
                let seconds = Double(bitPattern: Self.bigEndian(bytes, at: start + 1, size: 8))
                return .date(Date(timeIntervalSinceReferenceDate: seconds))
            default:
                throw unsupported(marker, at: start)
            }
        }

        /// A string, data, array or dictionary starting at `start`, with its expanded count and height.
        mutating func object(at start: Int, depth: Int) throws(BinaryFormatFailure) -> (PrefValue, Int, Int) {
            let marker = bytes[start]
            switch marker & 0xF0 {
            case 0x40:
                let (length, body) = try count(marker: marker, at: start)
                return (
                    .data(Data(UnsafeRawBufferPointer(rebasing: bytes[body..<(body + length)]))), 1 + length / 16, 1
                )
            case 0x50:
                let (length, body) = try count(marker: marker, at: start)
                let text = UnsafeRawBufferPointer(rebasing: bytes[body..<(body + length)])
                guard BinaryPropertyList.isASCII(text) else {
                    throw BinaryFormatFailure("ASCII string at offset \(start) contains a non-ASCII byte")
                }
                return (
                    .string(String(decoding: text.assumingMemoryBound(to: UInt8.self), as: UTF8.self)), 1 + length / 16,
                    1
                )
            case 0x60:
                let (units, body) = try count(marker: marker, at: start, bytesPerItem: 2)
                let codeUnits = (0..<units).map { UInt16(bytes[body + 2 * $0]) << 8 | UInt16(bytes[body + 2 * $0 + 1]) }
                guard let text = String(validating: codeUnits, as: UTF16.self) else {
                    throw BinaryFormatFailure("UTF-16 string at offset \(start) has an unpaired surrogate")
                }
                return (.string(text), 1 + units / 8, 1)
            case 0xA0:
                let (elements, body) = try count(marker: marker, at: start, bytesPerItem: referenceSize)
                var (values, total, height) = ([PrefValue](), 1, 1)
                values.reserveCapacity(elements)
                for element in 0..<elements {
                    let (value, count, childHeight) = try read(
                        reference(at: body + element * referenceSize), depth: depth + 1)
                    values.append(value)
                    total = total.addingSaturating(count)
                    height = Swift.max(height, childHeight + 1)
                }
                return (.array(values), total, height)
            case 0xD0:
                let (pairs, body) = try count(marker: marker, at: start, bytesPerItem: 2 * referenceSize)
                var (members, total, height) = ([String: PrefValue](minimumCapacity: pairs), 1, 1)
                for pair in 0..<pairs {
                    let (key, keyCount, _) = try read(reference(at: body + pair * referenceSize), depth: depth + 1)
                    guard case .string(let name) = key else {
                        throw BinaryFormatFailure("dictionary at offset \(start) has a key that is not a string")
                    }
                    let (value, count, childHeight) = try read(
                        reference(at: body + (pairs + pair) * referenceSize), depth: depth + 1)
                    guard members.updateValue(value, forKey: name) == nil else {
                        throw BinaryFormatFailure(
                            "dictionary at offset \(start) holds the key \(name.debugDescription) twice")
                    }
                    total = total.addingSaturating(keyCount).addingSaturating(count)
                    height = Swift.max(height, childHeight + 1)
                }
                return (.dictionary(members), total, height)
            default:
                throw unsupported(marker, at: start)
            }
        }

        func tooDeep() -> BinaryFormatFailure { BinaryFormatFailure("nesting deeper than \(maximumDepth) levels") }

        func unsupported(_ marker: UInt8, at start: Int) -> BinaryFormatFailure {
            BinaryFormatFailure(
                "unsupported object marker 0x\(String(marker, radix: 16, uppercase: true)) at offset \(start)")
        }
    }
}

extension Int {
    fileprivate func addingSaturating(_ other: Int) -> Int {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? .max : sum
    }
}
