import Foundation

/// Reads a UTF-8 XML property list straight into values, in one pass over its bytes: what Foundation's
/// `PropertyListSerialization` followed by `FoundationBridge.value` makes of it, without Foundation's tree
/// and its bridged copy (opening one cost 9 to 10 times its size in memory), and without what Foundation would guess
/// at or change silently, since the next write would make the guess permanent.
///
/// Read as Foundation reads it: an optional byte-order mark, then white space, `<?…?>` instructions, comments and a
/// `<!DOCTYPE …>` without an inline part before one root element (`<plist>` around it or not; anything after it is
/// ignored); elements may carry attributes, and `<dict/>`, `<array/>`, `<string/>`, `<key/>` are empty; text may hold
/// CDATA sections and the references `&lt;` `&gt;` `&amp;` `&apos;` `&quot;` `&#N;` `&#xH;` (a U+FEFF that such a
/// reference puts first in a text is dropped, as Foundation drops it; a U+FEFF written as it is stays); `<integer>`
/// is decimal or `0x` hexadecimal with an optional sign, in the range of `Int64` or `UInt64`; `<real>` is a decimal
/// number or `nan`, `inf`, `infinity` with any case and sign but nan's; nesting stops at 512 levels, as Foundation's.
///
/// A `<date>` is `YYYY-MM-DDTHH:MM:SSZ`, the year with an optional minus sign and 1 to 12 digits, and its time of day
/// counted as Foundation counts it, whatever the two digits of each field: Foundation writes a date far from now with a
/// year its 32-bit field wrapped (`-285196646-06-10T08:00:00Z`, `2147483647-09-07T09:46:32Z`) and some with a time of
/// `24:00`, `:60` or `:64` (and one a moment short of a whole second as `23:59:60`), and reads them all back.
///
/// Refused where Foundation guesses: `<data>` that is not base64 (white space anywhere, `=` padding only at the end,
/// a multiple of four characters), a `<date>` whose day does not exist in its month of the proleptic Gregorian
/// calendar (Foundation's writer never makes one), a `<real>` beyond the range of a double, a dictionary with two keys
/// that are equal as Swift strings, and a `CF$UID` dictionary (a keyed archiver's reference, which is no preference
/// value).
enum XMLPropertyListReader {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The top dictionary of `data`, or nil when `data` is not UTF-8 (a UTF-16 or UTF-32 byte-order mark, a NUL in
    /// its first two bytes, or another `encoding` in its `<?xml …?>` declaration), which is left to Foundation.
    static func values(in data: Data) throws(Failure) -> [String: PrefValue]? {
        let result = data.withUnsafeBytes { raw -> Result<[String: PrefValue]?, Failure> in
            let bytes = raw.bindMemory(to: UInt8.self)
            guard let start = utf8Start(bytes) else { return .success(nil) }
            var reader = Reader(bytes: bytes, index: start)
            return Result { () throws(Failure) in try reader.document() }
        }
        return try result.get()
    }

    /// Where the text starts when `bytes` is UTF-8, as Foundation decides it; nil for any other encoding.
    private static func utf8Start(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        let count = bytes.count
        if count > 4, bytes.starts(with: [0, 0, 0xFE, 0xFF]) || bytes.starts(with: [0xFF, 0xFE, 0, 0]) { return nil }
        if count > 3, bytes.starts(with: [0xEF, 0xBB, 0xBF]) { return 3 }
        if count > 2,
            bytes[0] == 0 || bytes[1] == 0 || bytes.starts(with: [0xFF, 0xFE]) || bytes.starts(with: [0xFE, 0xFF])
        {
            return nil
        }
        guard bytes.starts(with: Array("<?xml".utf8)) else { return 0 }
        // The `encoding` pseudo-attribute of the declaration, if any, before its `?` or `>`.
        var index = 5
        while index < count, bytes[index] != UInt8(ascii: "?"), bytes[index] != UInt8(ascii: ">") {
            index += 1
            guard index + 8 < count else { return nil }
            guard bytes[index - 1] == UInt8(ascii: "e"), bytes[index...].starts(with: Array("ncoding=".utf8)) else {
                continue
            }
            let quote = bytes[index + 8]
            guard quote == UInt8(ascii: "'") || quote == UInt8(ascii: "\"") else { return 0 }
            let name = bytes[(index + 9)...].prefix { $0 != quote }
            guard name.endIndex < count else { return 0 }
            // Letters compared without case, and nothing else: `| 0x20` alone makes a CR of `-` and a 0x18 of `8`.
            let folded = name.map { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) ? $0 | 0x20 : $0 }
            return folded.elementsEqual("utf-8".utf8) ? 0 : nil
        }
        return 0
    }

    /// The deepest nesting Foundation reads (the top dictionary is level 1).
    static let maximumDepth = 512

    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        var index: Int
        /// `<plist>` elements open around the current position, which Foundation nests without counting them.
        var plists = 0

        /// An element read by `next`: its value, and whether it is a `<key>` (whose value is its text).
        typealias Item = (value: PrefValue, isKey: Bool)

        func fail(_ reason: String) -> Failure {
            let line = bytes[..<min(index, bytes.count)].count { $0 == 0x0A } + 1
            return Failure(description: "\(reason) (line \(line))")
        }

        func byte(_ offset: Int = 0) -> UInt8 { index + offset < bytes.count ? bytes[index + offset] : 0 }

        func isAt(_ text: String) -> Bool {
            index + text.utf8.count <= bytes.count && bytes[index...].starts(with: text.utf8)
        }

        mutating func skipSpace() {
            while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
        }

        /// Moves past the first `end` that has at least one byte after it, as Foundation looks for it.
        mutating func skip(past end: String, what: String) throws(Failure) {
            while index + end.utf8.count < bytes.count {
                if isAt(end) {
                    index += end.utf8.count
                    return
                }
                index += 1
            }
            throw fail("unterminated \(what)")
        }

        mutating func document() throws(Failure) -> [String: PrefValue] {
            while true {
                skipSpace()
                guard index + 1 < bytes.count else { throw fail("no XML content") }
                guard byte() == UInt8(ascii: "<") else { throw fail("unexpected text before the root element") }
                index += 1
                if isAt("!--") {
                    // Foundation moves one byte further than the comment's opening here before it looks for its end.
                    index += 4
                    try skip(past: "-->", what: "comment")
                } else if byte() == UInt8(ascii: "!") {
                    index += 1
                    guard isAt("DOCTYPE") else { throw fail("malformed DOCTYPE") }
                    while index < bytes.count, byte() != UInt8(ascii: ">") {
                        guard byte() != UInt8(ascii: "[") else { throw fail("a DOCTYPE with an inline part") }
                        index += 1
                    }
                    guard index < bytes.count else { throw fail("unterminated DOCTYPE") }
                    index += 1
                } else if byte() == UInt8(ascii: "?") {
                    index += 1
                    try skip(past: "?>", what: "processing instruction")
                } else {
                    guard case .dictionary(let values) = try element(depth: 0).value else {
                        throw fail("the top level is not a dictionary")
                    }
                    return values
                }
            }
        }

        /// The next element inside a container at `depth`, or nil at its closing tag.
        mutating func next(depth: Int) throws(Failure) -> Item? {
            guard depth <= XMLPropertyListReader.maximumDepth else {
                throw fail("nesting deeper than \(XMLPropertyListReader.maximumDepth) levels")
            }
            while true {
                skipSpace()
                guard byte() == UInt8(ascii: "<") else {
                    throw fail(index < bytes.count ? "unexpected text where an element belongs" : "unexpected end")
                }
                index += 1
                switch byte() {
                case UInt8(ascii: "?"): try skip(past: "?>", what: "processing instruction")
                case UInt8(ascii: "!"):
                    guard isAt("!--") else { throw fail("markup that is not a comment") }
                    index += 3
                    try skip(past: "-->", what: "comment")
                case UInt8(ascii: "/"):
                    index -= 1
                    return nil
                default: return try element(depth: depth)
                }
            }
        }

        /// The element whose name starts at `index`, inside a container at `depth`.
        mutating func element(depth: Int) throws(Failure) -> Item {
            let start = index
            var nameEnd: Int?
            while index < bytes.count, bytes[index] != UInt8(ascii: ">") {
                if nameEnd == nil, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { nameEnd = index }
                index += 1
            }
            guard index < bytes.count else { throw fail("unterminated tag") }
            let isEmpty = bytes[index - 1] == UInt8(ascii: "/")
            let name = String(decoding: bytes[start..<(nameEnd ?? (isEmpty ? index - 1 : index))], as: UTF8.self)
            index += 1
            switch (name, isEmpty) {
            case ("plist", false):
                plists += 1
                guard plists <= XMLPropertyListReader.maximumDepth else { throw fail("too many nested <plist>") }
                guard let root = try next(depth: depth) else { throw fail("empty <plist>") }
                guard try next(depth: depth) == nil else { throw fail("more than one element in <plist>") }
                try close(name)
                plists -= 1
                return (root.value, false)
            case ("array", true): return (.array([]), false)
            case ("array", false):
                var elements: [PrefValue] = []
                while let element = try next(depth: depth + 1) { elements.append(element.value) }
                try close(name)
                return (.array(elements), false)
            case ("dict", true): return (.dictionary([:]), false)
            case ("dict", false): return (try dictionary(depth: depth + 1), false)
            case ("key", true), ("string", true): return (.string(""), name == "key")
            case ("key", false), ("string", false):
                let text = try self.text()
                try close(name)
                return (.string(text), name == "key")
            case ("true", _), ("false", _):
                if !isEmpty { try close(name) }
                return (.bool(name == "true"), false)
            case ("data", false): return (try data(), false)
            case ("date", false): return (try date(), false)
            case ("real", false): return (try real(), false)
            case ("integer", false): return (try integer(), false)
            default:
                throw fail(isEmpty && !name.isEmpty ? "empty <\(name)>" : "unknown tag <\(name.prefix(40))>")
            }
        }

        mutating func close(_ name: String) throws(Failure) {
            guard isAt("</" + name) else { throw fail("<\(name)> is not closed where it ends") }
            index += 2 + name.utf8.count
            skipSpace()
            guard byte() == UInt8(ascii: ">") else { throw fail("malformed </\(name)>") }
            index += 1
        }

        mutating func dictionary(depth: Int) throws(Failure) -> PrefValue {
            var members: [String: PrefValue] = [:]
            while let item = try next(depth: depth) {
                guard item.isKey, case .string(let key) = item.value else { throw fail("a value without a <key>") }
                guard let value = try next(depth: depth) else {
                    throw fail("no value for the key \(key.debugDescription)")
                }
                guard members.updateValue(value.value, forKey: key) == nil else {
                    throw fail("dictionary holds the key \(key.debugDescription) twice")
                }
            }
            try close("dict")
            // Foundation makes a keyed archiver's reference of it, which is no preference value.
            switch members.count == 1 ? members["CF$UID"] : nil {
            case .int?, .unsignedInt?, .double?, .float?:
                throw fail("a CF$UID dictionary (a keyed archiver's reference) is not a preference value")
            default: break
            }
            return .dictionary(members)
        }

        /// Text up to the next tag: CDATA sections and references replaced, checked to be UTF-8.
        mutating func text() throws(Failure) -> String {
            var mark = index
            // The text with its CDATA sections and references replaced, once there is one.
            var decoded: [UInt8] = []
            var isDecoded = false
            var droppedMark = false
            while index < bytes.count {
                let current = bytes[index]
                guard current == UInt8(ascii: "<") || current == UInt8(ascii: "&") else {
                    index += 1
                    continue
                }
                guard current == UInt8(ascii: "&") || byte(1) == UInt8(ascii: "!") else { break }
                decoded += bytes[mark..<index]
                isDecoded = true
                if current == UInt8(ascii: "<") {
                    guard isAt("<![CDATA[") else { throw fail("markup other than CDATA inside text") }
                    index += 9
                    let body = index
                    try skip(past: "]]>", what: "CDATA section")
                    decoded += bytes[body..<(index - 3)]
                } else {
                    let scalar = try reference()
                    // Foundation drops a U+FEFF that starts the text it builds (one).
                    if scalar == "\u{FEFF}", decoded.isEmpty, !droppedMark {
                        droppedMark = true
                    } else {
                        decoded += Array(String(scalar).utf8)
                    }
                }
                mark = index
            }
            if isDecoded { decoded += bytes[mark..<index] }
            let text =
                isDecoded
                ? String(validating: decoded, as: UTF8.self)
                : String(validating: UnsafeBufferPointer(rebasing: bytes[mark..<index]), as: UTF8.self)
            guard let text else { throw fail("text that is not UTF-8") }
            return text
        }

        /// The character a reference at `index` (its `&`) stands for; moves past it.
        mutating func reference() throws(Failure) -> Unicode.Scalar {
            index += 1
            for (name, character) in [("lt;", "<"), ("gt;", ">"), ("amp;", "&"), ("apos;", "'"), ("quot;", "\"")]
            where isAt(name) {
                index += name.utf8.count
                return Unicode.Scalar(character)!
            }
            guard byte() == UInt8(ascii: "#") else { throw fail("unknown entity reference") }
            index += 1
            let isHex = byte() == UInt8(ascii: "x")
            if isHex { index += 1 }
            // Up to eight digits (none is zero), as Foundation reads them.
            var code: UInt32 = 0
            for _ in 0...8 {
                let digit = byte()
                index += 1
                if digit == UInt8(ascii: ";") {
                    guard let scalar = Unicode.Scalar(code) else { throw fail("a character reference to no character") }
                    return scalar
                }
                guard let value = digit.asciiHexDigit, isHex || value < 10 else { break }
                code = code &* (isHex ? 16 : 10) &+ UInt32(value)
            }
            throw fail("malformed character reference")
        }

        mutating func data() throws(Failure) -> PrefValue {
            var decoded: [UInt8] = []
            var accumulator: UInt32 = 0
            var characters = 0
            var padding = 0
            while index < bytes.count, byte() != UInt8(ascii: "<") {
                let character = byte()
                index += 1
                if [0x20, 0x09, 0x0A, 0x0D].contains(character) { continue }
                characters += 1
                if character == UInt8(ascii: "=") {
                    padding += 1
                    continue
                }
                guard padding == 0, let value = Self.base64Value(character) else {
                    throw fail("<data> element is not valid base64")
                }
                accumulator = accumulator << 6 | UInt32(value)
                if characters % 4 == 0 {
                    decoded += [
                        UInt8(truncatingIfNeeded: accumulator >> 16), UInt8(truncatingIfNeeded: accumulator >> 8),
                        UInt8(truncatingIfNeeded: accumulator),
                    ]
                }
            }
            guard padding <= 2, characters % 4 == 0 else { throw fail("<data> element is not valid base64") }
            // The last group, shortened by its padding.
            if padding > 0 {
                accumulator <<= 6 * UInt32(padding)
                decoded += [UInt8(truncatingIfNeeded: accumulator >> 16), UInt8(truncatingIfNeeded: accumulator >> 8)]
                    .prefix(3 - padding)
            }
            try close("data")
            return .data(Data(decoded))
        }

        /// The value of a base64 character, or nil.
        static func base64Value(_ character: UInt8) -> UInt8? {
            switch character {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): character - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): character - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0") + 52
            case UInt8(ascii: "+"): 62
            case UInt8(ascii: "/"): 63
            default: nil
            }
        }

        /// White space as Foundation skips it around an `<integer>`'s sign: any byte below `!` or from DEL to 0xA0,
        /// and the first byte of some encoded Unicode spaces (the bytes after it are then such bytes themselves).
        func isIntegerSpace() -> Bool {
            let first = byte()
            if first < 0x21 || (first > 0x7E && first < 0xA1) { return index < bytes.count }
            guard first == 0xE2 || first == 0xE3, index + 3 <= bytes.count else { return false }
            switch (first, byte(1), byte(2)) {
            // Foundation compares the third byte with decimal 80 there, not 0x80.
            case (0xE2, 0x80, let third): return (80...0x8B).contains(third) || third == 0xAF
            case (0xE2, 0x81, let third): return third == 0x9F
            case (0xE3, 0x80, let third): return third == 0x80
            default: return false
            }
        }

        mutating func integer() throws(Failure) -> PrefValue {
            func malformed(_ reason: String = "is malformed") -> Failure { fail("<integer> element \(reason)") }
            while isIntegerSpace() { index += 1 }
            guard index < bytes.count, byte() != UInt8(ascii: "<") else { throw malformed("is empty") }
            let isNegative = byte() == UInt8(ascii: "-")
            if isNegative || byte() == UInt8(ascii: "+") {
                index += 1
                while isIntegerSpace() { index += 1 }
            }
            var isHex = false
            var hadZero = false
            if byte() == UInt8(ascii: "0") {
                if byte(1) | 0x20 == UInt8(ascii: "x") {
                    isHex = true
                    index += 1
                } else {
                    hadZero = true
                }
                index += 1
            }
            while byte() == UInt8(ascii: "0") {
                hadZero = true
                index += 1
            }
            guard index < bytes.count else { throw malformed() }
            var magnitude: UInt64 = 0
            while index < bytes.count, byte() != UInt8(ascii: "<") {
                guard let digit = byte().asciiHexDigit, isHex || digit < 10 else { throw malformed() }
                let (shifted, overflow) = magnitude.multipliedReportingOverflow(by: isHex ? 16 : 10)
                let (sum, carry) = shifted.addingReportingOverflow(UInt64(digit))
                guard !overflow, !carry, !isNegative || sum <= 1 << 63 else {
                    throw malformed("is beyond the range of a 64-bit integer")
                }
                magnitude = sum
                index += 1
                hadZero = true
            }
            guard hadZero else { throw malformed() }
            try close("integer")
            return isNegative ? .int(Int64(bitPattern: 0 &- magnitude)) : .exactInteger(magnitude)
        }

        mutating func real() throws(Failure) -> PrefValue {
            let text = try self.text()
            try close("real")
            switch text.lowercased() {
            case "nan": return .double(.nan)
            case "inf", "+inf", "infinity", "+infinity": return .double(.infinity)
            case "-inf", "-infinity": return .double(-.infinity)
            default: break
            }
            // [sign] (digits [. digits] | . digits) [e [sign] digits] after what Foundation takes for space (controls,
            // DEL to U+00A0, U+2000 to U+200B, U+3000); Swift reads that form as Foundation does, and refuses others.
            let number = String(
                text.unicodeScalars.drop {
                    $0.value < 0x21 || (0x7F...0xA0).contains($0.value) || (0x2000...0x200B).contains($0.value)
                        || $0.value == 0x3000
                })
            let trimmed = number.utf8.reversed().drop { [0x20, 0x09, 0x0A, 0x0D].contains($0) }.reversed()
            guard trimmed.allSatisfy({ "+-.0123456789eE".utf8.contains($0) }),
                let value = Double(String(decoding: trimmed, as: UTF8.self))
            else { throw fail("<real> element is not a number: \(text.prefix(40))") }
            guard value.isFinite else {
                throw fail("<real> element is beyond the range of a double: \(text.prefix(40))")
            }
            guard trimmed.count == number.utf8.count else { throw fail("<real> element ends in space") }
            return FoundationBridge.restoringFloats(.double(value))
        }

        mutating func date() throws(Failure) -> PrefValue {
            var problem: Failure { fail("<date> element is not a date that exists") }
            let isNegative = byte() == UInt8(ascii: "-")
            if isNegative { index += 1 }
            // The year as written, and as Foundation's 32-bit field wraps it.
            var year: Int64 = 0
            var wrapped: Int32 = 0
            var yearDigits = 0
            while let digit = byte().asciiHexDigit, digit < 10 {
                yearDigits += 1
                guard yearDigits <= 12 else { throw problem }
                year = year * 10 + Int64(digit)
                wrapped = wrapped &* 10 &+ Int32(digit)
                index += 1
            }
            var fields: [Int] = []
            for expected in "-00-00T00:00:00Z".utf8 {
                let character = byte()
                index += 1
                if expected != UInt8(ascii: "0") {
                    guard character == expected else { throw problem }
                } else if let digit = character.asciiHexDigit, digit < 10 {
                    fields.append(Int(digit))
                } else {
                    throw problem
                }
            }
            let (month, day, hour, minute, second) = (
                fields[0] * 10 + fields[1], fields[2] * 10 + fields[3], fields[4] * 10 + fields[5],
                fields[6] * 10 + fields[7], fields[8] * 10 + fields[9]
            )
            if isNegative { year = -year }
            let isLeap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
            let monthDays = [31, isLeap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
            guard yearDigits > 0, (1...12).contains(month), (1...monthDays[month - 1]).contains(day) else {
                throw problem
            }
            try close("date")
            // As Foundation computes it: the wrapped year, days since 2001-01-01, then seconds.
            let civilYear = Int64((isNegative ? 0 &- wrapped : wrapped) &- 2001) + 2001
            let days = Self.daysSince1970(year: civilYear, month: month) - 11_323 + Int64(day - 1)
            let seconds = 86_400.0 * Double(days) + Double(hour * 3_600 + minute * 60 + second)
            return .date(Date(timeIntervalSinceReferenceDate: seconds))
        }

        /// Days from 1970-01-01 to the first day of `month` in `year` (proleptic Gregorian, year 0 exists).
        static func daysSince1970(year: Int64, month: Int) -> Int64 {
            let shifted = month <= 2 ? year - 1 : year
            let era = (shifted >= 0 ? shifted : shifted - 399) / 400
            let yearOfEra = shifted - era * 400
            let dayOfYear = Int64((153 * (month > 2 ? month - 3 : month + 9) + 2) / 5)
            return era * 146_097 + yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear - 719_468
        }
    }
}
