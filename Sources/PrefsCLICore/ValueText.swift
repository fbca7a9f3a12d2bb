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
        // The names of `defaults`' type flags (-integer, -boolean) and Swift's Double name the same types.
        if let aliased = ["double": ValueType.float, "integer": .int, "boolean": .bool][text] {
            self = aliased
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
            return UInt64(text).map { .exactInteger($0) }
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

    /// The text of a value on one line, for listings: like ``format(_:)`` with every control character escaped.
    static func formatInline(_ value: PrefValue) -> String {
        visible(format(value))
    }

    /// `text` as a person may safely read it on a terminal: every control character (C0, DEL and C1, which move the
    /// cursor, clear the screen or start a new line) written as an escape, `\n`, `\r`, `\t` or `\u{1B}`, as `ls`
    /// and git quote file names; backslashes doubled, so an escape in the text is told from one written here.
    /// With `keepingLineBreaks`, for messages of several lines, backslashes, line feeds and tabs stay as they are.
    static func visible(_ text: String, keepingLineBreaks: Bool = false) -> String {
        func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
            if keepingLineBreaks {
                return scalar.properties.generalCategory == .control && scalar != "\n" && scalar != "\t"
            }
            return scalar == "\\" || scalar.properties.generalCategory == .control
        }
        guard text.unicodeScalars.contains(where: needsEscape) else { return text }
        var result = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            guard needsEscape(scalar) else {
                result.append(scalar)
                continue
            }
            let escape: String =
                switch scalar {
                case "\\": "\\\\"
                case "\n": "\\n"
                case "\r": "\\r"
                case "\t": "\\t"
                default: "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
                }
            result.append(contentsOf: escape.unicodeScalars)
        }
        return String(result)
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

/// ISO 8601 dates that round-trip a `Date` exactly: proleptic Gregorian in UTC for any year (`-0001-12-31`,
/// `+10000-01-01` in the expanded form), with as many fraction digits as it takes, and no more.
enum ISODate {
    /// `2024-05-01T12:30:00.25Z` (ISO 8601) or `2024-05-01 12:30:00.25 +0000` (how Foundation prints a date).
    enum Style { case iso8601, foundation }

    /// Seconds from 1970-01-01 to 2001-01-01, the reference date.
    private static let referenceOffset: Int64 = 978_307_200

    /// `2024-05-01T12:30:00Z`, `2024-05-01T12:30:00.25Z`: UTC, with the shortest fraction that reads back exactly.
    /// A date that is not a number (or beyond about 292 billion years) prints as `nan`, `inf` or its seconds.
    static func format(_ date: Date, style: Style = .iso8601) -> String {
        let seconds = date.timeIntervalSinceReferenceDate
        // The shortest decimal that reads back as `seconds`, split exactly into whole seconds and fraction digits.
        guard seconds.isFinite, let (whole, fraction) = splitDecimal(seconds.description) else {
            return seconds.description
        }
        let (unix, overflow) = whole.addingReportingOverflow(referenceOffset)
        guard !overflow else { return seconds.description }
        let days = unix.floorDivided(by: 86_400)
        let time = unix - days * 86_400
        let (year, month, day) = civil(fromDays: days)
        let yearText: String
        if (0...9999).contains(year) {
            yearText = pad(year, 4)
        } else {
            yearText = (year < 0 ? "-" : "+") + pad(year.magnitude, 4)
        }
        let clock = pad(time / 3600, 2) + ":" + pad(time / 60 % 60, 2) + ":" + pad(time % 60, 2)
        let fractionText = fraction.isEmpty ? "" : "." + fraction
        switch style {
        case .iso8601: return yearText + "-" + pad(month, 2) + "-" + pad(day, 2) + "T" + clock + fractionText + "Z"
        case .foundation:
            return yearText + "-" + pad(month, 2) + "-" + pad(day, 2) + " " + clock + fractionText + " +0000"
        }
    }

    private static func pad(_ number: some BinaryInteger, _ width: Int) -> String {
        let digits = String(number)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }

    /// `"-1e-07"` as whole seconds rounded down and the decimal digits of what is left: `(-1, "9999999")`.
    /// Nil when the whole part does not fit in 64 bits.
    static func splitDecimal(_ text: String) -> (Int64, String)? {
        var body = Substring(text)
        let negative = body.hasPrefix("-")
        if negative { body = body.dropFirst() }
        var exponent = 0
        if let marker = body.firstIndex(where: { $0 == "e" || $0 == "E" }) {
            guard let value = Int(body[body.index(after: marker)...]) else { return nil }
            exponent = value
            body = body[..<marker]
        }
        let parts = body.split(separator: ".", omittingEmptySubsequences: false)
        let digits = Array(parts[0] + (parts.count > 1 ? parts[1] : ""))
        let point = parts[0].count + exponent  // digits before the decimal point
        var integer = point <= 0 ? "" : String(digits.prefix(point))
        if point > digits.count { integer += String(repeating: "0", count: point - digits.count) }
        var fraction =
            point >= digits.count
            ? "" : String(repeating: "0", count: max(0, -point)) + String(digits.dropFirst(max(0, point)))
        while fraction.hasSuffix("0") { fraction.removeLast() }
        guard var whole = Int64(integer.isEmpty ? "0" : integer) else { return nil }
        guard negative else { return (whole, fraction) }
        whole = -whole
        guard !fraction.isEmpty else { return (whole, "") }
        // -(w + 0.f) = -(w + 1) + (1 - 0.f): the fraction becomes its complement to one.
        return (whole - 1, complement(fraction))
    }

    /// The digits of 1 - 0.`digits`, as many as `digits` has (trailing zeros dropped): `"25"` gives `"75"`.
    private static func complement(_ digits: String) -> String {
        var result: [Character] = []
        var seenNonZero = false
        for character in digits.reversed() {
            let digit = Int(String(character))!
            var value = (seenNonZero ? 9 : 10) - digit
            if value == 10 {
                value = 0
            } else {
                seenNonZero = true
            }
            result.append(Character(String(value)))
        }
        var text = String(result.reversed())
        while text.hasSuffix("0") { text.removeLast() }
        return text
    }

    /// The proleptic Gregorian date of a day counted from 1970-01-01.
    static func civil(fromDays count: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let shifted = count + 719_468  // days from 0000-03-01
        let era = shifted.floorDivided(by: 146_097)
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153  // 0 is March
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// The day, counted from 1970-01-01, of a proleptic Gregorian date; nil when the count overflows.
    static func days(year: Int64, month: Int64, day: Int64) -> Int64? {
        let marchYear = month <= 2 ? year - 1 : year
        let era = marchYear.floorDivided(by: 400)
        let yearOfEra = marchYear - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let (eraDays, overflow) = era.multipliedReportingOverflow(by: 146_097)
        guard !overflow else { return nil }
        let (total, overflow2) = eraDays.addingReportingOverflow(dayOfEra - 719_468)
        return overflow2 ? nil : total
    }

    private static func isLeap(_ year: Int64) -> Bool { year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) }

    private static func daysIn(month: Int64, of year: Int64) -> Int64 {
        switch month {
        case 2: isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM|±HHMM)`; `T` may be a space, a space may come before the
    /// zone (`2024-05-01 12:00:00 +0000`, as Foundation prints dates), and the year may be signed with more digits
    /// (`-0001`, `+10000`); or the seconds ``format(_:style:)`` prints for a date it cannot write so (`1e+300`,
    /// `nan`). Nil for anything else, including impossible dates such as February 30.
    static func parse(_ text: String) -> Date? {
        // What `format` prints for a date that is not a number or lies beyond about 292 billion years: its seconds.
        if let seconds = Double(text), format(Date(timeIntervalSinceReferenceDate: seconds)) == text {
            return Date(timeIntervalSinceReferenceDate: seconds)
        }
        var scanner = Scanner(Array(text.utf8))
        let yearSign = scanner.sign()
        let yearDigits = scanner.digits()
        guard yearDigits.count == 4 || (yearSign != nil && (4...15).contains(yearDigits.count)),
            let yearMagnitude = Int64(yearDigits), scanner.skip("-"), let month = scanner.number(2),
            scanner.skip("-"), let day = scanner.number(2), scanner.skip("T") || scanner.skip("t") || scanner.skip(" "),
            let hour = scanner.number(2), scanner.skip(":"), let minute = scanner.number(2), scanner.skip(":"),
            let second = scanner.number(2)
        else { return nil }
        let year = Int64(yearSign ?? 1) * yearMagnitude
        var fraction = ""
        if scanner.skip(".") {
            fraction = scanner.digits()
            guard !fraction.isEmpty else { return nil }
        }
        _ = scanner.skip(" ")
        var offset: Int64 = 0
        if scanner.skip("Z") || scanner.skip("z") {
        } else if let sign = scanner.sign() {
            guard let hours = scanner.number(2) else { return nil }
            _ = scanner.skip(":")
            guard let minutes = scanner.number(2), hours < 24, minutes < 60 else { return nil }
            offset = Int64(sign * (hours * 3600 + minutes * 60))
        } else {
            return nil
        }
        guard scanner.atEnd, (1...12).contains(month), (1...daysIn(month: Int64(month), of: year)).contains(Int64(day)),
            hour < 24, minute < 60, second < 60,
            let dayCount = days(year: year, month: Int64(month), day: Int64(day))
        else { return nil }
        let (dayStart, overflow) = dayCount.multipliedReportingOverflow(by: 86_400)
        let clock = Int64(hour * 3600 + minute * 60 + second) - offset - referenceOffset
        let (whole, overflow2) = dayStart.addingReportingOverflow(clock)
        guard !overflow, !overflow2 else { return nil }
        // One correctly rounded conversion of the exact decimal whole.fraction, so formatting reads back exactly.
        let decimal: String
        if whole >= 0 || fraction.allSatisfy({ $0 == "0" }) {
            decimal = "\(whole)." + (fraction.isEmpty ? "0" : fraction)
        } else {
            decimal = "-\((whole + 1).magnitude)." + complement(fraction)
        }
        return Double(decimal).map { Date(timeIntervalSinceReferenceDate: $0) }
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

extension Int64 {
    /// Division rounded towards minus infinity: `(-1).floorDivided(by: 86_400)` is -1.
    func floorDivided(by divisor: Int64) -> Int64 {
        let quotient = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }
}
