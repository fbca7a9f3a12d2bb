import Foundation
import Synchronization

/// The `FileStore` file format: a pretty-printed JSON object with sorted keys, written and parsed by hand so that
/// every `PrefValue` round-trips exactly and malformed input is always rejected, never guessed at.
///
/// JSON has no float, date or data kinds, so those are written as single-key tagged objects:
/// `{"$float": 0.10000000149011612}`, `{"$date": 123456.789}` (seconds since the reference date) and
/// `{"$data": "yv4="}`. Non-finite numbers are tagged with their name, `{"$double": "inf"}`, `{"$double": "-inf"}`,
/// `{"$double": "nan"}` (and `{"$float": "inf"}` for a `Float`; `{"$date": "nan"}` is read, and written on request). A dictionary value with exactly one key that starts with `$` is wrapped as
/// `{"$dict": {...}}` so that it cannot be mistaken for a tag. The top-level object is never a tag.
enum JSONFormat {
    /// The deepest nesting of arrays and objects the parser accepts.
    static let maximumDepth = 512

    static let floatTag = "$float"
    static let doubleTag = "$double"
    static let dateTag = "$date"
    static let dataTag = "$data"
    static let dictTag = "$dict"

    // MARK: Encoding

    /// The whole store as a UTF-8 JSON document: 2-space indent, sorted keys, trailing newline.
    ///
    /// With `tagsNonFiniteDates`, a date that is not a finite number (which a binary property list can hold) is
    /// written as `{"$date": "nan"}` (or `"inf"`, `"-inf"`) instead of being refused, as `prefs export` needs.
    ///
    /// With `base64`, the base64 text of every `Data` of at least ``Base64Memo/smallest`` bytes is taken from the
    /// memo when it holds that value (from the last encode) and kept in it for the next; the memo then holds only
    /// this document's texts.
    static func encode(
        _ values: [String: PrefValue], tagsNonFiniteDates: Bool = false, base64: Base64Memo? = nil
    ) throws(PrefsError) -> Data {
        var writer = Writer(pretty: true)
        writer.tagsNonFiniteDates = tagsNonFiniteDates
        writer.base64 = base64.map { (previous: $0.take(), kept: [:], room: $0.budget) }
        try writer.writeObject(values, indent: 0, topLevelKey: nil)
        writer.append("\n")
        if let base64, let texts = writer.base64?.kept { base64.keep(texts) }
        return writer.output
    }

    /// The base64 texts of the large `Data` values a store's last write encoded, so the next write copies them
    /// instead of encoding the same bytes again (base64 was 37 % of the CPU time of a `set` in a `FileStore`
    /// holding 100 values of 10 KB). It costs memory while the store is open: about 1.35 bytes per byte of such
    /// values, and at most `budget` bytes of text (the values beyond it are encoded on every write, as without a
    /// memo).
    ///
    /// A text is kept by where its value sits (``Slot``) and used again only while the value there is equal to the
    /// one it was made from: a lookup hashes a key and a number and compares one value, never every byte of every
    /// value (swift-corelibs-foundation's `Data` hashes only its first 80 bytes, so values alike at the start would
    /// all fall under one hash).
    final class Base64Memo: Sendable {
        /// The smallest `Data`, in bytes, whose text is kept: smaller ones encode in about a microsecond.
        static let smallest = 4_096
        /// Where a large value sits: the store key it is under, and how many large values of that key come first.
        struct Slot: Hashable, Sendable {
            let key: String
            let ordinal: Int
        }
        struct Entry: Sendable {
            let bytes: Data
            let text: Data
        }
        /// The most bytes of text kept.
        let budget: Int
        private let texts = Mutex<[Slot: Entry]>([:])

        init(budget: Int = 16 << 20) { self.budget = budget }

        /// The texts kept, emptying the memo (an encode that fails leaves it empty).
        func take() -> [Slot: Entry] {
            texts.withLock { texts in
                defer { texts = [:] }
                return texts
            }
        }

        func keep(_ kept: [Slot: Entry]) { texts.withLock { $0 = kept } }

        /// How many texts are kept, and the hash of each one's slot, for tests.
        var count: Int { texts.withLock { $0.count } }
        var keyHashes: [Int] { texts.withLock { $0.keys.map(\.hashValue) } }
    }

    /// One value as single-line JSON text, as the CLI prints it: `[1, 2]`, `{"$float": 0.5}`, `"dark"`.
    ///
    /// With `plainDecimals`, a number that `description` writes with an exponent is written in full, as PostgreSQL's
    /// `jsonb` prints it back (`1e+16` as `10000000000000000.0`, which it keeps as a non-integer; `1e-05` as
    /// `0.00001`), so the text measured before it is sent is the text every reader measures; and -0.0 is tagged
    /// (`{"$double": "-0"}`), since `jsonb` keeps no sign on zero.
    static func encodeValue(_ value: PrefValue, key: String = "", plainDecimals: Bool = false) throws(PrefsError)
        -> String
    {
        // The commonest values (a flag, a count, a name) need no writer and no buffer: the same text, formed directly.
        switch value {
        case .bool(let flag): return flag ? "true" : "false"
        case .int(let number): return String(number)
        case .string(let text) where !needsEscaping(text): return "\"" + text + "\""
        default: break
        }
        var writer = Writer(pretty: false)
        writer.plainDecimals = plainDecimals
        try writer.write(value, indent: 0, key: key)
        return String(decoding: writer.output, as: UTF8.self)
    }

    // MARK: Decoding

    /// Parses a whole store document; any malformed input throws `PrefsError.corruptFile` naming `path`.
    ///
    /// Parses the bytes in place, and sizes every large array and object before filling it, so the values cost
    /// little more than their final form (see `Parser.containerSizes`).
    static func decode(_ data: Data, path: String) throws(PrefsError) -> [String: PrefValue] {
        let result = data.withUnsafeBytes { raw in
            var parser = Parser(bytes: raw.assumingMemoryBound(to: UInt8.self))
            return Result { () throws(SyntaxError) in try parser.parseDocument() }
        }
        do {
            return try result.get()
        } catch {
            throw .corruptFile(path: path, reason: error.description)
        }
    }

    /// Parses one value as `encodeValue` writes it (any JSON value, tags included).
    /// Malformed text throws `PrefsError.decodingFailed(key:reason:)`.
    static func decodeValue(_ text: String, key: String = "") throws(PrefsError) -> PrefValue {
        var text = text
        let result = text.withUTF8 { bytes in
            var parser = Parser(bytes: bytes)
            return Result { () throws(SyntaxError) in try parser.parseSingleValue() }
        }
        do {
            return try result.get()
        } catch {
            throw .decodingFailed(key: key, reason: "invalid JSON value: " + error.description)
        }
    }
}

extension JSONFormat {
    /// `"inf"`, `"-inf"` or `"nan"`: how a tag names a number JSON cannot hold (and `"-0"`, which `jsonb` cannot).
    static func name(ofNonFinite number: Double) -> String {
        if number.isNaN { return "nan" }
        if number == 0 { return "-0" }
        return number < 0 ? "-inf" : "inf"
    }

    /// The number a tag's name stands for, or nil for any other text.
    static func nonFinite(named name: String) -> Double? {
        switch name {
        case "inf": .infinity
        case "-inf": -.infinity
        case "nan": .nan
        case "-0": -0.0
        default: nil
        }
    }
}

// MARK: - Writer

extension JSONFormat {
    private struct Writer {
        let pretty: Bool
        var plainDecimals = false
        var tagsNonFiniteDates = false
        /// The UTF-8 bytes written so far.
        var output = Data()
        var depth = 0

        init(pretty: Bool) {
            self.pretty = pretty
        }

        mutating func append(_ text: String) { output.append(contentsOf: text.utf8) }

        /// The memo's texts from the last encode, those this one keeps, and the bytes of text it may still keep
        /// (see ``JSONFormat/Base64Memo``).
        var base64:
            (previous: [Base64Memo.Slot: Base64Memo.Entry], kept: [Base64Memo.Slot: Base64Memo.Entry], room: Int)?
        /// How many large `Data` values of the current store key have been written.
        var largeValuesOfKey = 0

        /// Writes `bytes`, a value under the store key `key`, as a quoted base64 string (standard alphabet, padded).
        mutating func appendBase64String(_ bytes: Data, key: String) {
            output.append(0x22)
            if bytes.count >= Base64Memo.smallest, var memo = base64 {
                base64 = nil  // not copied while it changes
                let slot = Base64Memo.Slot(key: key, ordinal: largeValuesOfKey)
                largeValuesOfKey += 1
                let known = memo.previous[slot].flatMap { $0.bytes == bytes ? $0.text : nil }
                let text = known ?? bytes.base64EncodedData()
                if text.count <= memo.room {
                    memo.kept[slot] = Base64Memo.Entry(bytes: bytes, text: text)
                    memo.room -= text.count
                }
                output.append(text)
                base64 = memo
            } else {
                output.append(bytes.base64EncodedData())
            }
            output.append(0x22)
        }

        /// Whether `number` is written as a tag's name: not finite, or -0.0 in the database form (`jsonb` keeps no
        /// sign on zero).
        func isNamed(_ number: Double) -> Bool {
            !number.isFinite || (plainDecimals && number == 0 && number.sign == .minus)
        }

        /// Counts one more level of `{` or `[`, refusing documents the parser would reject as too deep.
        private mutating func enter(key: String) throws(PrefsError) {
            depth += 1
            guard depth <= JSONFormat.maximumDepth else {
                throw .encodingFailed(key: key, reason: "nested deeper than \(JSONFormat.maximumDepth) levels")
            }
        }

        private mutating func newline(_ indent: Int) {
            guard pretty else { return }
            append("\n")
            append(String(repeating: " ", count: indent * 2))
        }

        /// Writes `values` as an object. `topLevelKey` is nil for the document's top level, where each member's
        /// own key is the store key named in errors.
        mutating func writeObject(_ values: [String: PrefValue], indent: Int, topLevelKey: String?) throws(PrefsError) {
            try enter(key: topLevelKey ?? "")
            defer { depth -= 1 }
            if values.isEmpty {
                append("{}")
                return
            }
            append("{")
            var first = true
            for key in values.keys.sorted() {
                if !first { append(pretty ? "," : ", ") }
                first = false
                if topLevelKey == nil { largeValuesOfKey = 0 }
                newline(indent + 1)
                writeString(key)
                append(": ")
                try write(values[key]!, indent: indent + 1, key: topLevelKey ?? key)
            }
            newline(indent)
            append("}")
        }

        private mutating func writeTagged(
            _ tag: String,
            indent: Int,
            key: String,
            body: (inout Writer) throws(PrefsError) -> Void
        ) throws(PrefsError) {
            try enter(key: key)
            defer { depth -= 1 }
            append("{")
            newline(indent + 1)
            writeString(tag)
            append(": ")
            try body(&self)
            newline(indent)
            append("}")
        }

        mutating func write(_ value: PrefValue, indent: Int, key: String) throws(PrefsError) {
            switch value {
            case .bool(let flag):
                append(flag ? "true" : "false")
            case .int(let number):
                append(String(number))
            case .unsignedInt(let number):
                append(String(number))
            case .double(let number) where isNamed(number):
                try writeTagged(doubleTag, indent: indent, key: key) { (writer: inout Writer) throws(PrefsError) in
                    writer.writeString(JSONFormat.name(ofNonFinite: number))
                }
            case .double(let number):
                try writeDouble(number, kind: "double", key: key)
            case .float(let number):
                try writeTagged(floatTag, indent: indent, key: key) { (writer: inout Writer) throws(PrefsError) in
                    if !writer.isNamed(Double(number)) {
                        try writer.writeDouble(Double(number), kind: "float", key: key)
                    } else {
                        writer.writeString(JSONFormat.name(ofNonFinite: Double(number)))
                    }
                }
            case .date(let date):
                try writeTagged(dateTag, indent: indent, key: key) { (writer: inout Writer) throws(PrefsError) in
                    let seconds = date.timeIntervalSinceReferenceDate
                    if seconds.isFinite || !writer.tagsNonFiniteDates {
                        try writer.writeDouble(seconds, kind: "date", key: key)
                    } else {
                        writer.writeString(JSONFormat.name(ofNonFinite: seconds))  // a binary plist can hold one
                    }
                }
            case .data(let bytes):
                try writeTagged(dataTag, indent: indent, key: key) { (writer: inout Writer) throws(PrefsError) in
                    // Base64 text never needs escaping: appended whole, without scanning it again.
                    writer.appendBase64String(bytes, key: key)
                }
            case .string(let text):
                writeString(text)
            case .array(let elements):
                try enter(key: key)
                defer { depth -= 1 }
                if elements.isEmpty {
                    append("[]")
                    return
                }
                append("[")
                for (index, element) in elements.enumerated() {
                    if index > 0 { append(pretty ? "," : ", ") }
                    newline(indent + 1)
                    try write(element, indent: indent + 1, key: key)
                }
                newline(indent)
                append("]")
            case .dictionary(let members):
                if JSONFormat.needsDictWrapper(members) {
                    try writeTagged(dictTag, indent: indent, key: key) { (writer: inout Writer) throws(PrefsError) in
                        try writer.writeObject(members, indent: indent + 1, topLevelKey: key)
                    }
                } else {
                    try writeObject(members, indent: indent, topLevelKey: key)
                }
            }
        }

        mutating func writeDouble(_ number: Double, kind: String, key: String) throws(PrefsError) {
            guard number.isFinite else {
                let reason = "\(kind) value \(number) is not finite and cannot be stored in JSON"
                throw .encodingFailed(key: key, reason: reason)
            }
            // `description` is the shortest text that parses back to the same bits, and always contains `.` or
            // `e`, so it never reads back as an integer.
            let text = number.description
            if plainDecimals, let exponentAt = text.firstIndex(of: "e") {
                append(JSONFormat.plainDecimal(text, exponentAt: exponentAt))
            } else {
                append(text)
            }
        }

        mutating func writeString(_ text: String) {
            append("\"")
            // Fast path for the common string that needs no escaping: append it whole, not scalar by scalar.
            if !JSONFormat.needsEscaping(text) {
                append(text)
                append("\"")
                return
            }
            for scalar in text.unicodeScalars {
                switch scalar {
                case "\"": append("\\\"")
                case "\\": append("\\\\")
                case "\n": append("\\n")
                case "\r": append("\\r")
                case "\t": append("\\t")
                case "\u{00}"..."\u{1F}":
                    let hex = String(scalar.value, radix: 16, uppercase: true)
                    append("\\u00")
                    if hex.count < 2 { append("0") }
                    append(hex)
                default:
                    append(String(scalar))
                }
            }
            append("\"")
        }
    }

    /// Whether `text` holds a quote, a backslash or a control character, which JSON strings must escape. Scans the
    /// contiguous UTF-8 bytes directly where it can (the closure-based `contains(where:)` on `utf8` cost a tenth of
    /// a large write).
    static func needsEscaping(_ text: String) -> Bool {
        func scan(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
            for byte in bytes where byte == 0x22 || byte == 0x5C || byte < 0x20 { return true }
            return false
        }
        if let found = text.utf8.withContiguousStorageIfAvailable(scan) { return found }
        var copy = text
        copy.makeContiguousUTF8()
        return copy.utf8.withContiguousStorageIfAvailable(scan) ?? true
    }

    /// `-1.25e+3` as `-1250.0`, `1.5e-07` as `0.00000015`: the digits of the mantissa moved by the exponent.
    static func plainDecimal(_ text: String, exponentAt: String.Index) -> String {
        let exponent = Int(text[text.index(after: exponentAt)...])!
        var mantissa = text[..<exponentAt]
        let sign = mantissa.hasPrefix("-") ? "-" : ""
        if !sign.isEmpty { mantissa = mantissa.dropFirst() }
        let parts = mantissa.split(separator: ".", omittingEmptySubsequences: false)
        let digits = parts[0] + (parts.count > 1 ? parts[1] : "")
        let point = parts[0].count + exponent
        if point <= 0 { return sign + "0." + String(repeating: "0", count: -point) + digits }
        if point >= digits.count { return sign + digits + String(repeating: "0", count: point - digits.count) + ".0" }
        return sign + digits.prefix(point) + "." + digits.dropFirst(point)
    }

    /// A dictionary with exactly one `$`-prefixed key would read back as a tag, so it is written inside `$dict`.
    static func needsDictWrapper(_ members: [String: PrefValue]) -> Bool {
        members.count == 1 && members.keys.first!.hasPrefix("$")
    }
}

// MARK: - Parser

extension JSONFormat {
    struct SyntaxError: Error, CustomStringConvertible {
        let message: String
        let offset: Int
        var description: String { "\(message) at byte offset \(offset)" }
    }

    private enum ASCII {
        static let quote = UInt8(ascii: "\"")
        static let backslash = UInt8(ascii: "\\")
        static let slash = UInt8(ascii: "/")
        static let comma = UInt8(ascii: ",")
        static let colon = UInt8(ascii: ":")
        static let openBrace = UInt8(ascii: "{")
        static let closeBrace = UInt8(ascii: "}")
        static let openBracket = UInt8(ascii: "[")
        static let closeBracket = UInt8(ascii: "]")
        static let minus = UInt8(ascii: "-")
        static let plus = UInt8(ascii: "+")
        static let dot = UInt8(ascii: ".")
        static let zero = UInt8(ascii: "0")
        static let nine = UInt8(ascii: "9")
    }

    /// A parsed JSON value; an object with a single `$`-prefixed key stays unsettled until what holds it is known,
    /// because it is a tag, or the payload of a `$dict` tag, whose meaning depends on its payload's raw form.
    private indirect enum Parsed {
        case value(PrefValue, isScalar: Bool)
        case tagged(String, payload: Parsed, offset: Int)
    }

    /// A strict RFC 8259 recursive-descent parser over UTF-8 bytes, building each value directly in its final form.
    private struct Parser {
        let bytes: UnsafeBufferPointer<UInt8>
        var position = 0
        var depth = 0
        /// The element count of every array and object with many elements, by the offset of its opening bracket.
        let sizes: [Int: Int]

        init(bytes: UnsafeBufferPointer<UInt8>) {
            self.bytes = bytes
            sizes = Self.containerSizes(bytes)
        }

        /// The element counts `sizes` holds, found by one pass over the text that tells strings from structure
        /// and counts commas. Filling an array of known size reserves it once: a growing array would hold up to
        /// twice its elements, and three times while it moves. Malformed text only makes the counts wrong (a
        /// capacity hint), never the values, which the parser checks.
        private static func containerSizes(_ bytes: UnsafeBufferPointer<UInt8>) -> [Int: Int] {
            var sizes: [Int: Int] = [:]
            var open: [(offset: Int, commas: Int, isEmpty: Bool)] = []
            var index = 0
            while index < bytes.count {
                let byte = bytes[index]
                switch byte {
                case 0x20, 0x09, 0x0A, 0x0D:
                    break
                case ASCII.comma:
                    if !open.isEmpty { open[open.count - 1].commas += 1 }
                case ASCII.openBracket, ASCII.openBrace:
                    if !open.isEmpty { open[open.count - 1].isEmpty = false }
                    guard open.count < JSONFormat.maximumDepth else { return sizes }
                    open.append((index, 0, true))
                case ASCII.closeBracket, ASCII.closeBrace:
                    guard let closed = open.popLast() else { return sizes }
                    if closed.commas >= 64 { sizes[closed.offset] = closed.commas + 1 }
                default:
                    if !open.isEmpty { open[open.count - 1].isEmpty = false }
                    if byte == ASCII.quote {
                        index += 1
                        while index < bytes.count, bytes[index] != ASCII.quote {
                            index += bytes[index] == ASCII.backslash ? 2 : 1
                        }
                    }
                }
                index += 1
            }
            return sizes
        }

        private func fail(_ message: String, at offset: Int? = nil) -> SyntaxError {
            SyntaxError(message: message, offset: offset ?? position)
        }

        private func describeCurrent() -> String {
            guard position < bytes.count else { return "unexpected end of input" }
            let byte = bytes[position]
            if byte >= 0x21 && byte < 0x7F {
                return "unexpected character '\(Character(Unicode.Scalar(byte)))'"
            }
            return "unexpected byte 0x" + String(byte, radix: 16, uppercase: true)
        }

        private mutating func skipWhitespace() {
            while position < bytes.count {
                switch bytes[position] {
                case 0x20, 0x09, 0x0A, 0x0D: position += 1
                default: return
                }
            }
        }

        private mutating func expectEnd() throws(SyntaxError) {
            skipWhitespace()
            guard position == bytes.count else { throw fail("trailing content after the JSON value") }
        }

        mutating func parseDocument() throws(SyntaxError) -> [String: PrefValue] {
            skipWhitespace()
            guard position < bytes.count, bytes[position] == ASCII.openBrace else {
                if position == bytes.count { throw fail("empty document, expected a top-level object") }
                throw fail("expected a top-level object, found " + describeCurrent())
            }
            // The top-level object is never a tag.
            let values: [String: PrefValue]
            switch try parseObject() {
            case .value(.dictionary(let members), _): values = members
            case .tagged(let key, let payload, _): values = [key: try settle(payload)]
            default: preconditionFailure("an object parses as a dictionary or a tag")
            }
            try expectEnd()
            return values
        }

        mutating func parseSingleValue() throws(SyntaxError) -> PrefValue {
            let parsed = try parseValue()
            try expectEnd()
            return try settle(parsed)
        }

        private mutating func parseValue() throws(SyntaxError) -> Parsed {
            skipWhitespace()
            guard position < bytes.count else { throw fail("unexpected end of input, expected a value") }
            switch bytes[position] {
            case ASCII.openBrace:
                return try parseObject()
            case ASCII.openBracket:
                return .value(.array(try parseArray()), isScalar: false)
            case ASCII.quote:
                return .value(.string(try parseString()), isScalar: true)
            case UInt8(ascii: "t"):
                try expectLiteral("true")
                return .value(.bool(true), isScalar: true)
            case UInt8(ascii: "f"):
                try expectLiteral("false")
                return .value(.bool(false), isScalar: true)
            case UInt8(ascii: "n"):
                throw fail("null is not a storable value")
            case ASCII.minus, ASCII.zero...ASCII.nine:
                return .value(try parseNumber(), isScalar: true)
            default:
                throw fail(describeCurrent() + ", expected a value")
            }
        }

        private mutating func expectLiteral(_ literal: StaticString) throws(SyntaxError) {
            let start = position
            let count = literal.utf8CodeUnitCount
            let matches = literal.withUTF8Buffer { expected in
                position + count <= bytes.count && bytes[position..<position + count].elementsEqual(expected)
            }
            guard matches else { throw fail("invalid literal, expected \(literal)", at: start) }
            position += count
        }

        private mutating func enter() throws(SyntaxError) {
            depth += 1
            guard depth <= JSONFormat.maximumDepth else {
                throw fail("nesting deeper than \(JSONFormat.maximumDepth) levels")
            }
        }

        private mutating func parseArray() throws(SyntaxError) -> [PrefValue] {
            try enter()
            var elements: [PrefValue] = []
            elements.reserveCapacity(sizes[position] ?? 0)
            position += 1  // [
            skipWhitespace()
            if try !closes(with: ASCII.closeBracket) {
                repeat {
                    elements.append(try settle(try parseValue()))
                } while try continues(closingWith: ASCII.closeBracket, in: "array", expected: "']'")
            }
            return elements
        }

        /// Whether the next byte is `close`, which is then consumed and ends the current array or object.
        private mutating func closes(with close: UInt8) throws(SyntaxError) -> Bool {
            guard position < bytes.count, bytes[position] == close else { return false }
            position += 1
            depth -= 1
            return true
        }

        /// After an element or member: true past a comma (another follows), false past `close`; anything else is
        /// an error.
        private mutating func continues(
            closingWith close: UInt8, in context: String, expected: String
        ) throws(SyntaxError) -> Bool {
            skipWhitespace()
            guard position < bytes.count else { throw fail("unterminated \(context)") }
            if bytes[position] == ASCII.comma {
                position += 1
                return true
            }
            if try closes(with: close) { return false }
            throw fail(describeCurrent() + " in \(context), expected ',' or \(expected)")
        }

        /// An object: a dictionary, or `.tagged` for an object whose single key starts with `$`.
        private mutating func parseObject() throws(SyntaxError) -> Parsed {
            try enter()
            let start = position
            var members = [String: PrefValue](minimumCapacity: sizes[position] ?? 0)
            // The first member, settled only once a second one shows the object is not a tag.
            var first: (key: String, value: Parsed)?
            position += 1  // {
            skipWhitespace()
            if try closes(with: ASCII.closeBrace) { return .value(.dictionary(members), isScalar: false) }
            repeat {
                skipWhitespace()
                guard position < bytes.count, bytes[position] == ASCII.quote else {
                    throw fail(describeCurrent() + " in object, expected a string key")
                }
                let keyOffset = position
                let key = try parseString()
                skipWhitespace()
                guard position < bytes.count, bytes[position] == ASCII.colon else {
                    throw fail(describeCurrent() + " after object key, expected ':'")
                }
                position += 1
                let value = try parseValue()
                if members.isEmpty, first == nil {
                    first = (key, value)
                    continue
                }
                if let (firstKey, firstValue) = first {
                    members[firstKey] = try settle(firstValue)
                    first = nil
                }
                guard members.updateValue(try settle(value), forKey: key) == nil else {
                    throw fail("duplicate key \(String(reflecting: key))", at: keyOffset)
                }
            } while try continues(closingWith: ASCII.closeBrace, in: "object", expected: "'}'")
            guard let (key, value) = first else { return .value(.dictionary(members), isScalar: false) }
            if key.hasPrefix("$") { return .tagged(key, payload: value, offset: start) }
            return .value(.dictionary([key: try settle(value)]), isScalar: false)
        }

        /// The value a parsed value stands for: an object with exactly one `$`-prefixed key is a tag (`$float`,
        /// `$date`, `$data`, `$dict`); any other object is a plain dictionary.
        private func settle(_ parsed: Parsed) throws(SyntaxError) -> PrefValue {
            switch parsed {
            case .value(let value, _): value
            case .tagged(let tag, let payload, let offset): try convertTag(tag, payload, at: offset)
            }
        }

        private func convertTag(_ tag: String, _ node: Parsed, at offset: Int) throws(SyntaxError) -> PrefValue {
            if tag == JSONFormat.dictTag {
                guard case .tagged(let innerKey, let innerValue, _) = node else {
                    throw fail("$dict tag needs an object with exactly one key starting with '$'", at: offset)
                }
                return .dictionary([innerKey: try settle(innerValue)])
            }
            guard case .value(let payload, isScalar: true) = node else {
                throw fail("\(tag) tag has an array or object payload", at: offset)
            }
            switch tag {
            case JSONFormat.floatTag:
                if case .string(let name) = payload, let special = JSONFormat.nonFinite(named: name) {
                    return .float(Float(special))
                }
                guard case .double(let wide) = payload else {
                    throw fail("$float tag needs a floating-point number", at: offset)
                }
                let narrow = Float(wide)
                guard Double(narrow) == wide else {
                    throw fail("$float value \(wide) is not exactly a single-precision float", at: offset)
                }
                return .float(narrow)
            case JSONFormat.doubleTag:
                guard case .string(let name) = payload, let special = JSONFormat.nonFinite(named: name) else {
                    throw fail("$double tag needs \"inf\", \"-inf\" or \"nan\"", at: offset)
                }
                return .double(special)
            case JSONFormat.dateTag:
                switch payload {
                case .double(let seconds): return .date(Date(timeIntervalSinceReferenceDate: seconds))
                case .int(let seconds): return .date(Date(timeIntervalSinceReferenceDate: Double(seconds)))
                case .string(let name) where JSONFormat.nonFinite(named: name) != nil:
                    return .date(Date(timeIntervalSinceReferenceDate: JSONFormat.nonFinite(named: name)!))
                default: throw fail("$date tag needs a number of seconds", at: offset)
                }
            case JSONFormat.dataTag:
                guard case .string(let text) = payload, let bytes = Data(base64Encoded: text) else {
                    throw fail("$data tag needs a base64 string", at: offset)
                }
                return .data(bytes)
            default:
                throw fail("unknown tag \(String(reflecting: tag))", at: offset)
            }
        }

        private mutating func parseNumber() throws(SyntaxError) -> PrefValue {
            let start = position
            var isInteger = true
            if bytes[position] == ASCII.minus { position += 1 }
            guard position < bytes.count, (ASCII.zero...ASCII.nine).contains(bytes[position]) else {
                throw fail("invalid number, expected a digit")
            }
            if bytes[position] == ASCII.zero {
                position += 1
                if position < bytes.count, (ASCII.zero...ASCII.nine).contains(bytes[position]) {
                    throw fail("invalid number, leading zeros are not allowed", at: start)
                }
            } else {
                skipDigits()
            }
            if position < bytes.count, bytes[position] == ASCII.dot {
                isInteger = false
                position += 1
                guard skipDigits() else { throw fail("invalid number, expected a digit after '.'") }
            }
            if position < bytes.count, bytes[position] | 0x20 == UInt8(ascii: "e") {
                isInteger = false
                position += 1
                if position < bytes.count, bytes[position] == ASCII.plus || bytes[position] == ASCII.minus {
                    position += 1
                }
                guard skipDigits() else { throw fail("invalid number, expected a digit in the exponent") }
            }
            let text = String(decoding: bytes[start..<position], as: UTF8.self)
            if isInteger {
                if let signed = Int64(text) { return .int(signed) }
                if let unsigned = UInt64(text) { return .unsignedInt(unsigned) }
                // A double would silently keep only its first 17 digits.
                throw fail("integer \(text.prefix(40)) does not fit in 64 bits", at: start)
            }
            guard let number = Double(text), number.isFinite else {
                throw fail("number \(text.prefix(40)) is out of range", at: start)
            }
            return .double(number)
        }

        /// Skips a run of digits; returns false when there was none.
        @discardableResult
        private mutating func skipDigits() -> Bool {
            let start = position
            while position < bytes.count, (ASCII.zero...ASCII.nine).contains(bytes[position]) { position += 1 }
            return position > start
        }

        private mutating func parseString() throws(SyntaxError) -> String {
            let start = position
            position += 1  // "
            // Fast path for the common string without escapes: validate the bytes in place, no per-byte appends.
            var end = position
            while end < bytes.count, bytes[end] != ASCII.quote, bytes[end] != ASCII.backslash, bytes[end] >= 0x20 {
                end += 1
            }
            if end < bytes.count, bytes[end] == ASCII.quote {
                guard let text = String(validating: bytes[position..<end], as: UTF8.self) else {
                    throw fail("string is not valid UTF-8", at: start)
                }
                position = end + 1
                return text
            }
            var buffer = Array(bytes[position..<end])
            position = end
            while true {
                guard position < bytes.count else { throw fail("unterminated string", at: start) }
                let byte = bytes[position]
                switch byte {
                case ASCII.quote:
                    position += 1
                    guard let text = String(validating: buffer, as: UTF8.self) else {
                        throw fail("string is not valid UTF-8", at: start)
                    }
                    return text
                case ASCII.backslash:
                    try parseEscape(into: &buffer)
                case 0x00..<0x20:
                    let code = String(byte, radix: 16, uppercase: true)
                    throw fail("unescaped control character 0x\(code) in string")
                default:
                    buffer.append(byte)
                    position += 1
                }
            }
        }

        private mutating func parseEscape(into buffer: inout [UInt8]) throws(SyntaxError) {
            let start = position
            position += 1  // backslash
            guard position < bytes.count else { throw fail("unterminated escape", at: start) }
            let letter = bytes[position]
            position += 1
            switch letter {
            case ASCII.quote, ASCII.backslash, ASCII.slash: buffer.append(letter)
            case UInt8(ascii: "b"): buffer.append(0x08)
            case UInt8(ascii: "f"): buffer.append(0x0C)
            case UInt8(ascii: "n"): buffer.append(0x0A)
            case UInt8(ascii: "r"): buffer.append(0x0D)
            case UInt8(ascii: "t"): buffer.append(0x09)
            case UInt8(ascii: "u"):
                let first = try parseHex4(escapeStart: start)
                var value = UInt32(first)
                switch first {
                case 0xD800...0xDBFF:
                    let lowStart = position
                    guard position + 1 < bytes.count, bytes[position] == ASCII.backslash,
                        bytes[position + 1] == UInt8(ascii: "u")
                    else { throw fail("high surrogate \\u\(hex(first)) not followed by a low surrogate", at: start) }
                    position += 2
                    let second = try parseHex4(escapeStart: lowStart)
                    guard (0xDC00...0xDFFF).contains(second) else {
                        throw fail("high surrogate \\u\(hex(first)) not followed by a low surrogate", at: start)
                    }
                    value = 0x10000 + ((UInt32(first) - 0xD800) << 10) + (UInt32(second) - 0xDC00)
                case 0xDC00...0xDFFF:
                    throw fail("lone low surrogate \\u\(hex(first))", at: start)
                default:
                    break
                }
                // Surrogates were handled above, so the scalar always exists.
                buffer.append(contentsOf: Array(String(Unicode.Scalar(value)!).utf8))
            default:
                throw fail("invalid escape sequence", at: start)
            }
        }

        private func hex(_ value: UInt16) -> String {
            let digits = String(value, radix: 16, uppercase: true)
            return String(repeating: "0", count: 4 - digits.count) + digits
        }

        private mutating func parseHex4(escapeStart: Int) throws(SyntaxError) -> UInt16 {
            guard position + 4 <= bytes.count else { throw fail("truncated \\u escape", at: escapeStart) }
            var value: UInt16 = 0
            for offset in 0..<4 {
                guard let digit = bytes[position + offset].asciiHexDigit else {
                    throw fail("invalid hex digit in \\u escape", at: escapeStart)
                }
                value = value << 4 | UInt16(digit)
            }
            position += 4
            return value
        }
    }
}
