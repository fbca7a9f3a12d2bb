import Foundation

extension VaultPayload {
    /// Where each top-level entry of a payload begins, in key order, so one value can be found and decoded without
    /// decoding the others: how a vault opens at the speed of its decryption.
    ///
    /// An index is built only for a payload it serves exactly as ``VaultPayload/decode(_:path:)-(Data,_)`` would:
    /// - well formed: the scan checks every tag, length, count and depth the decoder checks, so decoding any part of
    ///   it later cannot fail;
    /// - every string (keys and text) ASCII: byte order is then `String` order, the bytes are the decoded text, and
    ///   no UTF-8 needs validating;
    /// - the keys of every dictionary strictly increasing, as ``encode(_:)`` writes them, which also rules out
    ///   repeated keys.
    ///
    /// Any other payload (an older vault written in hash order, non-ASCII names) gets no index and is decoded whole.
    struct Index: Sendable {
        /// The offset of each top-level entry (its key's length), in increasing key order.
        private let entries: [Int]

        /// Scans `bytes`; nil when the payload is not one an index can serve (see above).
        init?(_ bytes: UnsafeRawBufferPointer) {
            var scanner = Scanner(bytes: bytes)
            var entries: [Int] = []
            guard scanner.byte() == version, scanner.dictionaryBody(depth: 1, offsets: &entries),
                scanner.remaining == 0
            else { return nil }
            self.entries = entries
        }

        /// The number of top-level keys.
        var count: Int { entries.count }

        /// The value of `key` in `bytes` (the payload this index was built from), decoded now.
        func value(forKey key: String, in bytes: UnsafeRawBufferPointer) -> PrefValue? {
            var key = key
            let match = key.withUTF8 { utf8 -> Match in
                let wanted = UnsafeRawBufferPointer(utf8)
                guard VaultPayload.isASCII(wanted) else { return .notASCII }
                var low = 0
                var high = entries.count
                while low < high {
                    let middle = (low + high) / 2
                    let order = VaultPayload.compare(Self.key(at: entries[middle], in: bytes), wanted)
                    if order == 0 { return .entry(at: entries[middle]) }
                    if order < 0 { low = middle + 1 } else { high = middle }
                }
                return .absent
            }
            switch match {
            case .absent:
                return nil
            case .entry(let offset):
                return Self.value(at: offset, in: bytes)
            case .notASCII:
                // A key with non-ASCII characters can still equal an ASCII one (U+212A KELVIN SIGN is "K"), as
                // dictionary keys compare: look through every key the slow way, as the dictionary would.
                for offset in entries
                where String(decoding: Self.key(at: offset, in: bytes), as: UTF8.self) == key {
                    return Self.value(at: offset, in: bytes)
                }
                return nil
            }
        }

        private enum Match {
            case entry(at: Int)
            case absent
            case notASCII
        }

        /// Every value in `bytes`, decoded now.
        func allValues(in bytes: UnsafeRawBufferPointer) -> [String: PrefValue] {
            var values = [String: PrefValue](minimumCapacity: entries.count)
            for offset in entries {
                let key = String(decoding: Self.key(at: offset, in: bytes), as: UTF8.self)
                values[key] = Self.value(at: offset, in: bytes)
            }
            return values
        }

        private static func key(at offset: Int, in bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
            let length = Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
            return UnsafeRawBufferPointer(rebasing: bytes[(offset + 4)..<(offset + 4 + length)])
        }

        /// Decodes the value of the entry at `offset`. The scan checked it, so the decoder cannot fail on it; were it
        /// to, the key would read as absent rather than trap.
        private static func value(at offset: Int, in bytes: UnsafeRawBufferPointer) -> PrefValue? {
            let keyLength = key(at: offset, in: bytes).count
            var reader = Reader(bytes: UnsafeRawBufferPointer(rebasing: bytes[(offset + 4 + keyLength)...]))
            return try? reader.value(depth: 1)
        }
    }

    /// Whether every byte is below 0x80.
    @inline(__always)
    static func isASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var bits: UInt64 = 0
        var index = 0
        while index + 8 <= bytes.count {
            bits |= bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            index += 8
        }
        while index < bytes.count {
            bits |= UInt64(bytes[index])
            index += 1
        }
        return bits & 0x8080_8080_8080_8080 == 0
    }

    /// Byte-wise order of two strings' bytes: negative, zero or positive.
    @inline(__always)
    static func compare(_ first: UnsafeRawBufferPointer, _ second: UnsafeRawBufferPointer) -> Int {
        let common = min(first.count, second.count)
        var index = 0
        // Eight bytes at a time while they are equal; big-endian words compare as their bytes do.
        while index + 8 <= common {
            let left = UInt64(bigEndian: first.loadUnaligned(fromByteOffset: index, as: UInt64.self))
            let right = UInt64(bigEndian: second.loadUnaligned(fromByteOffset: index, as: UInt64.self))
            if left != right { return left < right ? -1 : 1 }
            index += 8
        }
        while index < common {
            let left = first[index]
            let right = second[index]
            if left != right { return left < right ? -1 : 1 }
            index += 1
        }
        return first.count - second.count
    }

    /// Walks a payload checking what the decoder checks, plus the index's own conditions (ASCII, sorted keys),
    /// without building anything. Every method returns false (or nil) as soon as the payload cannot be indexed.
    ///
    /// It runs over every entry of a vault as it opens, so it works on a raw pointer and positions, multiplies
    /// instead of dividing, and creates no buffer slices: it is most of what opening a vault costs beyond
    /// decrypting it.
    private struct Scanner {
        let base: UnsafeRawPointer
        let end: Int
        var position = 0

        init(bytes: UnsafeRawBufferPointer) {
            // An empty buffer may have no address; any address will do for reading nothing.
            base = bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!
            end = bytes.count
        }

        var remaining: Int { end - position }

        @inline(__always)
        mutating func byte() -> UInt8? {
            guard position < end else { return nil }
            defer { position += 1 }
            return base.load(fromByteOffset: position, as: UInt8.self)
        }

        @inline(__always)
        mutating func skip(_ count: Int) -> Bool {
            guard count <= remaining else { return false }
            position += count
            return true
        }

        /// A count or length, refused when the rest of the input cannot hold `minimumSize` bytes per item.
        @inline(__always)
        mutating func count(minimumSize: Int) -> Int? {
            guard remaining >= 4 else { return nil }
            let value = Int(UInt32(littleEndian: base.loadUnaligned(fromByteOffset: position, as: UInt32.self)))
            position += 4
            // At most 2³² - 1 times a small size: no overflow.
            return value * minimumSize <= remaining ? value : nil
        }

        /// The position and length of an ASCII string.
        @inline(__always)
        mutating func string() -> (start: Int, length: Int)? {
            guard let length = count(minimumSize: 1) else { return nil }
            let start = position
            position += length
            return VaultPayload.isASCII(UnsafeRawBufferPointer(start: base + start, count: length))
                ? (start, length) : nil
        }

        /// Checks a dictionary's entries; at the top level (depth 1) records where each begins in `offsets`.
        mutating func dictionaryBody(depth: Int, offsets: inout [Int]) -> Bool {
            guard depth <= VaultPayload.maximumDepth, let count = count(minimumSize: 5) else { return false }
            if depth == 1 { offsets.reserveCapacity(count) }
            var previous: (start: Int, length: Int)?
            for _ in 0..<count {
                let start = position
                guard let key = string() else { return false }
                if let previous {
                    let order = VaultPayload.compare(
                        UnsafeRawBufferPointer(start: base + previous.start, count: previous.length),
                        UnsafeRawBufferPointer(start: base + key.start, count: key.length))
                    if order >= 0 { return false }
                }
                previous = key
                if depth == 1 { offsets.append(start) }
                guard value(depth: depth) else { return false }
            }
            return true
        }

        mutating func value(depth: Int) -> Bool {
            guard let raw = byte(), let tag = Tag(rawValue: raw) else { return false }
            switch tag {
            case .boolFalse, .boolTrue: return true
            case .int, .unsignedInt, .double, .date: return skip(8)
            case .float: return skip(4)
            case .string: return string() != nil
            case .data:
                guard let length = count(minimumSize: 1) else { return false }
                return skip(length)
            case .array:
                guard depth + 1 <= VaultPayload.maximumDepth, let count = count(minimumSize: 1) else { return false }
                for _ in 0..<count where !value(depth: depth + 1) { return false }
                return true
            case .dictionary:
                var unused: [Int] = []
                return dictionaryBody(depth: depth + 1, offsets: &unused)
            }
        }
    }
}
