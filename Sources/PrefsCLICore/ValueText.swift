import Foundation
import Prefs

/// The types `--type` accepts, and the type a stored value keeps when `--type` is left out.
enum ValueType: String, Sendable, CaseIterable {
    case bool, int, float, string, date, data, json
    /// A value stored as a single-precision `Float`: only ever kept from the stored value, never named.
    case singleFloat = "single-precision float"

    /// The names `--type` accepts: the public cases and `double`, an alias of `float`.
    static let names = "bool, int, float, string, date, data, json"

    init(option text: String) throws {
        if text == "double" {
            self = .float
            return
        }
        guard let type = ValueType(rawValue: text), type != .singleFloat else {
            throw Failure.usage("unknown type \(String(reflecting: text)); use one of \(Self.names)")
        }
        self = type
    }

    /// The type of a stored value, kept when `prefs write` gets no `--type`.
    init(of value: PrefValue) {
        switch value {
        case .bool: self = .bool
        case .int, .unsignedInt: self = .int
        case .float: self = .singleFloat
        case .double: self = .float
        case .string: self = .string
        case .date: self = .date
        case .data: self = .data
        case .array, .dictionary: self = .json
        }
    }

    /// The type with its article, for error messages: `an int`, `a date`.
    var phrase: String {
        switch self {
        case .int: "an int"
        case .data: "hex data"
        case .json: "JSON"
        default: "a " + rawValue
        }
    }

    /// What a value of this type looks like, for error messages.
    var expected: String {
        switch self {
        case .bool: "true, false, yes, no, 1 or 0"
        case .int: "a whole number"
        case .float, .singleFloat: "a number such as 0.5"
        case .string: "any text"
        case .date: "an ISO 8601 date such as 2024-05-01T12:30:00Z or 2024-05-01T14:30:00.25+02:00"
        case .data: "hexadecimal bytes such as cafe01"
        case .json: "a JSON value such as [1, 2] or {\"a\": true}"
        }
    }
}

/// Turning command-line text into values and values into the text `prefs read` prints. The two agree: what
/// `prefs read DOMAIN KEY` prints for a value, `prefs write` with the same type reads back as the same value.
enum ValueText {
    /// Parses `text` as a value of `type`, or returns nil when it does not parse.
    static func parse(_ text: String, as type: ValueType) -> PrefValue? {
        switch type {
        case .bool:
            switch text.lowercased() {
            case "true", "yes", "1": return .bool(true)
            case "false", "no", "0": return .bool(false)
            default: return nil
            }
        case .int:
            if let signed = Int64(text) { return .int(signed) }
            return UInt64(text).map { .integer($0) }
        case .float:
            return Double(text).map { .double($0) }
        case .singleFloat:
            return Float(text).map { .float($0) }
        case .string:
            return .string(text)
        case .date:
            return ISODate.parse(text).map { .date($0) }
        case .data:
            return hexBytes(text).map { .data($0) }
        case .json:
            return try? PrefValue(jsonText: text)
        }
    }

    /// The bare text of a value, as `prefs read DOMAIN KEY` prints it: `true`, `42`, `0.5`, a string as is,
    /// a date in ISO 8601, data in hex, arrays and dictionaries as single-line JSON.
    static func format(_ value: PrefValue) -> String {
        switch value {
        case .bool(let flag): String(flag)
        case .int(let number): String(number)
        case .unsignedInt(let number): String(number)
        case .float(let number): number.description
        case .double(let number): number.description
        case .string(let text): text
        case .date(let date): ISODate.format(date)
        case .data(let bytes): bytes.map { String(format: "%02x", $0) }.joined()
        case .array, .dictionary: (try? value.jsonText()) ?? value.description
        }
    }

    /// The text of a value on one line, for listings: like ``format(_:)`` with line breaks and tabs escaped.
    static func formatInline(_ value: PrefValue) -> String {
        format(value).replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\n", with: "\\n")
            .replacingOccurrences(of: "\r", with: "\\r").replacingOccurrences(of: "\t", with: "\\t")
    }

    /// `cafe01` (any case, an optional `0x`) as bytes; nil for an odd number of digits or a non-hex character.
    static func hexBytes(_ text: String) -> Data? {
        var digits = Substring(text)
        if digits.hasPrefix("0x") || digits.hasPrefix("0X") { digits = digits.dropFirst(2) }
        guard digits.count.isMultiple(of: 2) else { return nil }
        var bytes = Data(capacity: digits.count / 2)
        var index = digits.startIndex
        while index < digits.endIndex {
            let next = digits.index(index, offsetBy: 2)
            guard let byte = UInt8(digits[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        return bytes
    }
}

/// ISO 8601 dates that round-trip a `Date` exactly: as many fraction digits as it takes, and no more.
enum ISODate {
    private static let calendar: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(secondsFromGMT: 0)!
        return calendar
    }()

    /// `2024-05-01T12:30:00Z`, `2024-05-01T12:30:00.25Z`: UTC, with the shortest fraction that reads back exactly.
    static func format(_ date: Date) -> String {
        let seconds = date.timeIntervalSinceReferenceDate
        guard seconds.isFinite else { return String(seconds) }
        let whole = seconds.rounded(.down)
        let fraction = seconds - whole  // exact: both are doubles of the same binade or smaller
        let parts = calendar.dateComponents(
            [.year, .month, .day, .hour, .minute, .second], from: Date(timeIntervalSinceReferenceDate: whole))
        let base = String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d", parts.year!, parts.month!, parts.day!, parts.hour!,
            parts.minute!, parts.second!)
        guard fraction > 0 else { return base + "Z" }
        for digits in 1...40 {
            let decimal = String(format: "%.\(digits)f", fraction)
            guard decimal.hasPrefix("0.") else { continue }  // rounded up to 1.0
            var trimmed = Substring(decimal.dropFirst(1))
            while trimmed.hasSuffix("0") { trimmed = trimmed.dropLast() }
            let text = base + trimmed + "Z"
            if parse(text) == date { return text }
        }
        return base + String(format: "%.40f", fraction).dropFirst(1) + "Z"
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM|±HHMM)`; `T` may be a space. Nil for anything else,
    /// including impossible dates such as February 30.
    static func parse(_ text: String) -> Date? {
        var scanner = Scanner(Array(text.utf8))
        guard let year = scanner.number(4), scanner.skip("-"), let month = scanner.number(2), scanner.skip("-"),
            let day = scanner.number(2), scanner.skip("T") || scanner.skip("t") || scanner.skip(" "),
            let hour = scanner.number(2), scanner.skip(":"), let minute = scanner.number(2), scanner.skip(":"),
            let second = scanner.number(2)
        else { return nil }
        var fraction = 0.0
        if scanner.skip(".") {
            let digits = scanner.digits()
            guard !digits.isEmpty, let value = Double("0." + digits) else { return nil }
            fraction = value
        }
        var offset = 0
        if scanner.skip("Z") || scanner.skip("z") {
        } else if let sign = scanner.sign() {
            guard let hours = scanner.number(2) else { return nil }
            _ = scanner.skip(":")
            guard let minutes = scanner.number(2), hours < 24, minutes < 60 else { return nil }
            offset = sign * (hours * 3600 + minutes * 60)
        } else {
            return nil
        }
        guard scanner.atEnd else { return nil }
        let components = DateComponents(
            year: year, month: month, day: day, hour: hour, minute: minute, second: second)
        guard let whole = calendar.date(from: components) else { return nil }
        let check = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: whole)
        guard check.year == year, check.month == month, check.day == day, check.hour == hour,
            check.minute == minute, check.second == second
        else { return nil }
        let seconds = whole.timeIntervalSinceReferenceDate - Double(offset)
        return Date(timeIntervalSinceReferenceDate: seconds + fraction)
    }

    private struct Scanner {
        let bytes: [UInt8]
        var position = 0
        init(_ bytes: [UInt8]) { self.bytes = bytes }

        var atEnd: Bool { position == bytes.count }

        mutating func skip(_ character: Unicode.Scalar) -> Bool {
            guard position < bytes.count, bytes[position] == UInt8(ascii: character) else { return false }
            position += 1
            return true
        }

        mutating func digits() -> String {
            let start = position
            while position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) {
                position += 1
            }
            return String(decoding: bytes[start..<position], as: UTF8.self)
        }

        mutating func number(_ count: Int) -> Int? {
            guard position + count <= bytes.count else { return nil }
            let slice = bytes[position..<position + count]
            guard slice.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else { return nil }
            position += count
            return Int(String(decoding: slice, as: UTF8.self))
        }

        mutating func sign() -> Int? {
            if skip("+") { return 1 }
            if skip("-") { return -1 }
            return nil
        }
    }
}
