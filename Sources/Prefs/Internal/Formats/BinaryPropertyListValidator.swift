import Foundation

/// Walks a `bplist00` file's object graph without building it, accepting only what `PrefValue` can hold: booleans,
/// integers of 1 to 16 bytes, 32- and 64-bit reals, dates, data, ASCII and UTF-16 strings, arrays and
/// string-keyed dictionaries. Rejects out-of-range offsets and references, cycles, nesting deeper than 512 levels,
/// and graphs whose shared objects would expand to more values than the file has bytes (see `expandedValueFloor`).
enum BinaryPropertyListValidator {
    static let magic = Array("bplist00".utf8)
    static let maximumDepth = 512
    /// The expanded size every file may reach whatever its own size, in values (a string or data object counts one
    /// more per 16 bytes, so shared large strings are bounded by their expanded bytes too).
    static let expandedValueFloor = 1 << 20

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    static func validate(_ bytes: [UInt8]) throws(Failure) {
        _ = try validatedWalker(bytes)
    }

    /// Validates `bytes` and returns the walker that did, for reading the values it checked.
    static func validatedWalker(_ bytes: [UInt8]) throws(Failure) -> Walker {
        var walker = try Walker(bytes: bytes)
        // A file whose collections are not shared (every file Foundation writes) expands to at most one value per
        // reference it holds, so fewer values than it has bytes. Other writers share collections (plistlib writes
        // one array once, however many keys hold it): allowed while the expanded values stay within that bound (or
        // about a million, whatever the file's size). The reader decodes a shared object once, but whatever walks
        // the values (the writer, JSON, Foundation's objects) meets every copy: beyond the bound, a small file
        // would cost gigabytes there.
        let limit = Swift.max(bytes.count, expandedValueFloor)
        let total = try walker.expandedCount(of: walker.topObject, depth: 1).count
        guard total <= limit else {
            throw Failure("object graph expands to more than \(limit) values, more than the file's size allows")
        }
        return walker
    }

    struct Walker {
        let bytes: [UInt8]
        let offsetSize: Int
        let referenceSize: Int
        let objectCount: Int
        let topObject: Int
        let offsetTableStart: Int
        /// Expanded value counts of the objects already checked, by object index (-1: not yet checked). Arrays
        /// rather than hashed collections: the file holds at most a few objects per byte, and hashing each object
        /// twice cost most of opening a suite.
        /// Saturated at `Int32.max`, far beyond any limit.
        var checkedCounts: [Int32]
        /// The nesting heights of the objects already checked, by object index.
        var checkedHeights: [UInt16]
        /// Objects on the current path, to detect cycles.
        var inProgress: [Bool]
        /// Objects reached more than once, which the reader decodes once and shares.
        var isShared: [Bool]

        init(bytes: [UInt8]) throws(Failure) {
            self.bytes = bytes
            guard bytes.count >= magic.count + 32, bytes.starts(with: magic) else {
                throw Failure("missing bplist00 header or trailer")
            }
            let trailer = bytes.count - 32
            offsetSize = Int(bytes[trailer + 6])
            referenceSize = Int(bytes[trailer + 7])
            guard (1...8).contains(offsetSize), (1...8).contains(referenceSize) else {
                throw Failure("invalid offset or reference size in trailer")
            }
            let objects = Self.readUInt(bytes, at: trailer + 8, size: 8)
            let top = Self.readUInt(bytes, at: trailer + 16, size: 8)
            let table = Self.readUInt(bytes, at: trailer + 24, size: 8)
            guard objects >= 1, top < objects, table >= UInt64(magic.count), table < UInt64(trailer) else {
                throw Failure("invalid object count, top object or offset table position in trailer")
            }
            // objects * offsetSize must fit between the table start and the trailer.
            let (tableBytes, overflow) = objects.multipliedReportingOverflow(by: UInt64(offsetSize))
            guard !overflow, tableBytes <= UInt64(trailer) - table else {
                throw Failure("offset table runs past the trailer")
            }
            objectCount = Int(objects)
            topObject = Int(top)
            checkedCounts = Array(repeating: -1, count: objectCount)
            checkedHeights = Array(repeating: 0, count: objectCount)
            inProgress = Array(repeating: false, count: objectCount)
            isShared = Array(repeating: false, count: objectCount)
            offsetTableStart = Int(table)
        }

        static func readUInt(_ bytes: [UInt8], at start: Int, size: Int) -> UInt64 {
            var value: UInt64 = 0
            for index in start..<start + size { value = value << 8 | UInt64(bytes[index]) }
            return value
        }

        /// The start of object `index`, always inside the object area (after the header, before the table).
        func offset(of index: Int) throws(Failure) -> Int {
            let value = Self.readUInt(bytes, at: offsetTableStart + index * offsetSize, size: offsetSize)
            guard value >= UInt64(magic.count), value < UInt64(offsetTableStart) else {
                throw Failure("object \(index) has offset \(value) outside the object area")
            }
            return Int(value)
        }

        /// Checks that `length` bytes from `start` lie inside the object area.
        func checkRange(_ start: Int, _ length: Int, _ what: String) throws(Failure) {
            guard length >= 0, start <= offsetTableStart, length <= offsetTableStart - start else {
                throw Failure("\(what) at offset \(start) runs past the object area")
            }
        }

        /// The element count in a marker's low nibble, or in the integer object that follows when it is 0xF.
        /// Returns the count and the offset of the first byte after it.
        func count(marker: UInt8, at start: Int) throws(Failure) -> (Int, Int) {
            let nibble = Int(marker & 0x0F)
            if nibble != 0x0F { return (nibble, start + 1) }
            try checkRange(start + 1, 1, "length")
            let intMarker = bytes[start + 1]
            guard intMarker & 0xF0 == 0x10, intMarker & 0x0F <= 3 else {
                throw Failure("invalid length marker at offset \(start + 1)")
            }
            let size = 1 << Int(intMarker & 0x0F)
            try checkRange(start + 2, size, "length")
            let value = Self.readUInt(bytes, at: start + 2, size: size)
            guard value <= UInt64(offsetTableStart) else {
                throw Failure("length \(value) at offset \(start) too large")
            }
            return (Int(value), start + 2 + size)
        }

        func reference(at position: Int) throws(Failure) -> Int {
            let value = Self.readUInt(bytes, at: position, size: referenceSize)
            guard value < UInt64(objectCount) else {
                throw Failure("reference to object \(value) at offset \(position), only \(objectCount) objects")
            }
            return Int(value)
        }

        func isStringObject(_ index: Int) throws(Failure) -> Bool {
            let marker = bytes[try offset(of: index)]
            return marker & 0xF0 == 0x50 || marker & 0xF0 == 0x60
        }

        /// Validates object `index` and everything it references, returning how many values it expands to.
        /// `height` is the number of nesting levels from the object down to its deepest leaf.
        mutating func expandedCount(of index: Int, depth: Int) throws(Failure) -> (count: Int, height: Int) {
            if checkedCounts[index] >= 0 {
                isShared[index] = true
                let known = (count: Int(checkedCounts[index]), height: Int(checkedHeights[index]))
                guard depth + known.height - 1 <= maximumDepth else { throw tooDeep() }
                return known
            }
            guard depth <= maximumDepth else { throw tooDeep() }
            guard !inProgress[index] else { throw Failure("object \(index) contains itself") }
            inProgress[index] = true
            defer { inProgress[index] = false }

            let start = try offset(of: index)
            let marker = bytes[start]
            var total = 1
            var height = 1
            func add(_ child: (count: Int, height: Int)) {
                total = total.addingSaturating(child.count)
                height = Swift.max(height, child.height + 1)
            }
            switch marker & 0xF0 {
            case 0x00:
                guard marker == 0x08 || marker == 0x09 else { throw unsupported(marker, at: start) }
            case 0x10:
                let size = 1 << Int(marker & 0x0F)
                guard size <= 16 else { throw unsupported(marker, at: start) }
                try checkRange(start + 1, size, "integer")
                if size == 16 {
                    // 128-bit integers are how unsigned 64-bit values are written; the high half must be zero.
                    guard bytes[(start + 1)..<(start + 9)].allSatisfy({ $0 == 0 }) else {
                        throw Failure("integer at offset \(start) does not fit in 64 bits")
                    }
                }
            case 0x20:
                guard marker == 0x22 || marker == 0x23 else { throw unsupported(marker, at: start) }
                try checkRange(start + 1, marker == 0x22 ? 4 : 8, "real")
            case 0x30:
                guard marker == 0x33 else { throw unsupported(marker, at: start) }
                try checkRange(start + 1, 8, "date")
            case 0x40, 0x50:
                let (length, body) = try count(marker: marker, at: start)
                try checkRange(body, length, "data or string")
                total += length / 16
                if marker & 0xF0 == 0x50, bytes[body..<(body + length)].contains(where: { $0 >= 0x80 }) {
                    throw Failure("ASCII string at offset \(start) contains a non-ASCII byte")
                }
            case 0x60:
                let (units, body) = try count(marker: marker, at: start)
                guard units <= offsetTableStart / 2 else { throw Failure("string at offset \(start) too long") }
                try checkRange(body, units * 2, "UTF-16 string")
                total += units / 8
                var codeUnits: [UInt16] = []
                codeUnits.reserveCapacity(units)
                for unit in 0..<units {
                    codeUnits.append(UInt16(bytes[body + 2 * unit]) << 8 | UInt16(bytes[body + 2 * unit + 1]))
                }
                guard String(validating: codeUnits, as: UTF16.self) != nil else {
                    throw Failure("UTF-16 string at offset \(start) has an unpaired surrogate")
                }
            case 0xA0:
                let (elements, body) = try count(marker: marker, at: start)
                guard elements <= offsetTableStart / referenceSize else {
                    throw Failure("array at offset \(start) too long")
                }
                try checkRange(body, elements * referenceSize, "array")
                for element in 0..<elements {
                    let child = try reference(at: body + element * referenceSize)
                    add(try expandedCount(of: child, depth: depth + 1))
                }
            case 0xD0:
                let (pairs, body) = try count(marker: marker, at: start)
                guard pairs <= offsetTableStart / (2 * referenceSize) else {
                    throw Failure("dictionary at offset \(start) too long")
                }
                try checkRange(body, 2 * pairs * referenceSize, "dictionary")
                for pair in 0..<pairs {
                    let key = try reference(at: body + pair * referenceSize)
                    guard try isStringObject(key) else {
                        throw Failure("dictionary at offset \(start) has a key that is not a string")
                    }
                    add(try expandedCount(of: key, depth: depth + 1))
                    let value = try reference(at: body + (pairs + pair) * referenceSize)
                    add(try expandedCount(of: value, depth: depth + 1))
                }
            default:
                throw unsupported(marker, at: start)
            }
            checkedCounts[index] = Int32(clamping: total)
            checkedHeights[index] = UInt16(height)
            return (total, height)
        }

        func tooDeep() -> Failure { Failure("nesting deeper than \(maximumDepth) levels") }

        func unsupported(_ marker: UInt8, at start: Int) -> Failure {
            let code = String(marker, radix: 16, uppercase: true)
            return Failure("unsupported object marker 0x\(code) at offset \(start)")
        }
    }
}

extension Int {
    fileprivate func addingSaturating(_ other: Int) -> Int {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? .max : sum
    }
}
