import Foundation

// The reader of the `FileStore` format (see `JSONFormat`): a strict parser building each value in its final form.
extension JSONFormat {
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
