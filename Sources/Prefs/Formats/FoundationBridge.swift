import Foundation

/// The one bridge between `PrefValue` and Foundation: property-list objects both ways, an argument's text as
/// Foundation's argument domain reads it, and how Foundation's typed getters (`integer(forKey:)`, `bool(forKey:)`,
/// `string(forKey:)`, …) read a value of another kind. Used by the suite reader for text in another encoding than
/// UTF-8, the argument and environment layers, ``UserDefaultsBridgeStore``, typed reads in UserDefaults domains
/// and the `prefs` tool.
enum FoundationBridge {
    // MARK: To Foundation

    /// The property-list object for a value: `Bool`, `Int` (the only integer `integer(forKey:)` reads), `UInt64`,
    /// `Float`, `Double`, `String`, `Data`, `Date`, `[Any]` or `[String: Any]`.
    ///
    /// With `fractionalDatesAsText`, as ``UserDefaultsBridgeStore`` stores values, a date with a sub-second part
    /// is ISO 8601 text with every digit of that part (`2001-01-02T10:17:36.789000000004307Z`), which a typed read
    /// turns back into exactly that date: Foundation's suite file keeps whole seconds only.
    static func object(_ value: PrefValue, fractionalDatesAsText: Bool = false) -> Any {
        switch value {
        case .bool(let flag): flag
        case .int(let number): Int(truncatingIfNeeded: number)
        case .unsignedInt(let number): number
        case .float(let number): number
        case .double(let number): number
        case .string(let text): text
        case .data(let bytes): bytes
        case .date(let date): (fractionalDatesAsText ? fractionalDateText(date) : nil) ?? date
        case .array(let elements): elements.map { object($0, fractionalDatesAsText: fractionalDatesAsText) }
        case .dictionary(let members): members.mapValues { object($0, fractionalDatesAsText: fractionalDatesAsText) }
        }
    }

    /// `2001-01-02T10:17:36.789000000004307Z` for a date with a sub-second part; nil for one of whole seconds.
    static func fractionalDateText(_ date: Date) -> String? {
        let seconds = date.timeIntervalSinceReferenceDate
        guard seconds.isFinite else { return nil }
        let whole = seconds.rounded(.down)
        let fraction = seconds - whole  // exact: both are close to `seconds`
        guard fraction > 0 else { return nil }
        // The digits after "0." of the shortest text that reads back as the fraction, written out where Swift
        // would use an exponent (`1.5e-07` is `00000015`).
        let text = fraction.description
        let digits: String
        if text.hasPrefix("0.") {
            digits = String(text.dropFirst(2))
        } else {
            let parts = text.split(separator: "e")
            guard parts.count == 2, let exponent = Int(parts[1]), exponent < 0 else { return nil }
            digits = String(repeating: "0", count: -exponent - 1) + parts[0].filter { $0 != "." }
        }
        let wholeText = Date(timeIntervalSinceReferenceDate: whole).formatted(.iso8601)
        guard wholeText.hasSuffix("Z") else { return nil }
        return wholeText.dropLast() + "." + digits + "Z"
    }

    // MARK: From Foundation

    /// The value for a Foundation object, or nil for one that is not a property-list value (or holds one, or a
    /// dictionary key that is not a string, or a nil).
    ///
    /// Booleans are told apart from the numbers 0 and 1 by their dynamic type (`Bool` or the boolean `NSNumber`
    /// subclass), because on Linux `NSNumber(value: 1) is Bool` is true. Other numbers (a Swift number bridges to the
    /// `NSNumber` of its own type) map by their stored type: integers to `.int` or `.unsignedInt`, 32-bit reals to
    /// `.float`, 64-bit reals to `.double`. A URL is its full text, or its path for a file URL.
    static func value(_ object: Any) -> PrefValue? {
        // Foundation on Linux hands out the elements of an array as optionals.
        if let optional = object as? any OptionalValue {
            return optional.asOptional.flatMap { value($0 as Any) }
        }
        let dynamicType = ObjectIdentifier(type(of: object))
        if dynamicType == ObjectIdentifier(Bool.self) || dynamicType == booleanNumberType {
            return (object as? Bool).map(PrefValue.bool)
        }
        switch object {
        case let number as NSNumber: return numberValue(number)
        case let text as String: return .string(text)
        case let bytes as Data: return .data(bytes)
        case let date as Date: return .date(date)
        case let url as URL: return .string(url.isFileURL ? url.path(percentEncoded: false) : url.absoluteString)
        case let elements as [Any]:
            var result: [PrefValue] = []
            result.reserveCapacity(elements.count)
            for element in elements {
                guard let converted = value(element) else { return nil }
                result.append(converted)
            }
            return .array(result)
        case let members as [AnyHashable: Any]:
            var result = [String: PrefValue](minimumCapacity: members.count)
            for (key, element) in members {
                guard let key = key.base as? String, let converted = value(element) else { return nil }
                result[key] = converted
            }
            return .dictionary(result)
        default:
            return nil
        }
    }

    /// The dynamic type of `NSNumber(value: true)`, a private `NSNumber` subclass.
    private static let booleanNumberType = ObjectIdentifier(type(of: NSNumber(value: true) as Any))

    private static func numberValue(_ number: NSNumber) -> PrefValue? {
        switch String(cString: number.objCType).first {
        case "c", "s", "i", "l", "q": .int(number.int64Value)
        case "C", "S", "I", "L", "Q": .exactInteger(number.uint64Value)
        case "f": .float(number.floatValue)
        case "d": .double(number.doubleValue)
        default: nil
        }
    }

    /// `value` with each `.double` that was a `Float` before an XML file widened it turned back into a `.float`.
    ///
    /// An XML `<real>` has one width, so a `Float` Foundation writes to a suite file comes back as a `Double` once
    /// Foundation (or the suite reader) reads the file again: `12.34` as `12.340000152587891`. Without this, what a
    /// `String` read or a change check sees would depend on whether Foundation had re-read the file. A double is
    /// taken for a float only when it is exactly one and the float's shortest text is shorter: a double a user typed
    /// is that only when its seventeen digits happen to name a float. The number itself never changes.
    static func restoringFloats(_ value: PrefValue) -> PrefValue {
        switch value {
        case .double(let number):
            let narrow = Float(number)
            guard narrow.isFinite, Double(narrow) == number, narrow.description.count < number.description.count
            else { return value }
            return .float(narrow)
        case .array(let elements): return .array(elements.map(restoringFloats))
        case .dictionary(let members): return .dictionary(members.mapValues(restoringFloats))
        default: return value
        }
    }

    // MARK: Arguments

    /// The text of a `-key value` argument (or an environment variable) as Foundation's argument domain reads it:
    /// trimmed of white space; when it starts with `{`, `[`, `(`, `<` or `"` and parses as a property list (OpenStep
    /// `(a, b)`, `{a = b;}`, or XML), that value; otherwise the text.
    static func argumentValue(_ raw: String) -> PrefValue {
        let text = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        if let first = text.first, "{[(<\"".contains(first),
            let parsed = try? PropertyListSerialization.propertyList(from: Data(text.utf8), format: nil),
            let converted = value(parsed)
        {
            return converted
        }
        return .string(text)
    }

    // MARK: Typed getters

    /// The values `stored` may stand for when a typed read finds another kind, in the order they are tried: what
    /// Foundation's typed getters make of it. A bool or a number reads as a string (`true` is `"1"`, `42` is
    /// `"42"`), as a bool (anything but zero is true) and as the other number types (`12.34` is the integer 12);
    /// text as ``candidates(forText:)`` reads it.
    static func candidates(for stored: PrefValue) -> [PrefValue] {
        switch stored {
        case .bool(let flag): [.int(flag ? 1 : 0), .string(flag ? "1" : "0")]
        case .int(let number):
            [.bool(number != 0), .float(Float(number)), .double(Double(number)), .string(String(number))]
        case .unsignedInt(let number):
            [.bool(number != 0), .float(Float(number)), .double(Double(number)), .string(String(number))]
        case .double(let number):
            [.bool(number != 0), .float(Float(number))] + whole(number) + [.string(number.description)]
        case .float(let number):
            [.bool(number != 0), .double(Double(number))] + whole(Double(number)) + [.string(number.description)]
        case .string(let text): candidates(forText: text)
        case .data, .date, .array, .dictionary: []
        }
    }

    /// What text may stand for, as Foundation's getters scan it after white space: the number it starts with (`3abc`
    /// is 3, `12.9` is 12 as an integer, `1e3` is 1000), true when it starts with `Y`, `T` (any case) or a sign and
    /// zeros then another digit (`yellow`, `00001`), false when it starts with `N`, `F` or another number (`0.5`).
    ///
    /// Unlike Foundation's getters, which give 0 or false, text that starts with no number (`abc`, `inf`) has no
    /// number, and text that is neither (`maybe`) no bool: a read then gives the declared default and reports the
    /// value. Foundation's integer scan stops at a `.` or an exponent (`1e3` is 1 there) and clamps beyond `Int`'s
    /// range; here an integer is the whole part of the number written, and none beyond the range. Beyond Foundation:
    /// a JSON array or object (`["a", "b"]`, which an environment variable cannot write otherwise) and an ISO 8601
    /// date.
    static func candidates(forText raw: String) -> [PrefValue] {
        let text = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        let number = leadingNumber(text)
        var candidates: [PrefValue] = []
        switch text.unicodeScalars.first {
        case "Y", "y", "T", "t": candidates.append(.bool(true))
        case "N", "n", "F", "f": candidates.append(.bool(false))
        default:
            guard number != nil else { break }
            // True for a sign, zeros, then a digit from 1 to 9.
            let unsigned = text.first == "+" || text.first == "-" ? text.dropFirst() : Substring(text)
            candidates.append(.bool(unsigned.drop { $0 == "0" }.first.map { ("1"..."9").contains($0) } ?? false))
        }
        // Exactly, where a double would round (beyond 2⁵³).
        if let exact = Int64(text) {
            candidates.append(.int(exact))
        } else if let exact = UInt64(text) {
            candidates.append(.unsignedInt(exact))
        }
        if let number { candidates += [.double(number), .float(Float(number))] + whole(number) }
        if text.first == "[" || text.first == "{", let value = try? PrefValue(jsonText: text) {
            candidates.append(value)
        }
        if let date = try? Date(text, strategy: .iso8601) { candidates.append(.date(date)) }
        return candidates
    }

    /// The number `text` starts with, as Foundation's scanner reads it: a sign, digits with a fraction (`1.`, `.5`)
    /// and an exponent; nil when it starts with none. Hexadecimal and names (`inf`) are not numbers there.
    private static func leadingNumber(_ text: String) -> Double? {
        let bytes = Array(text.utf8)
        var end = 0
        func digits() -> Int {
            let start = end
            while end < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[end]) { end += 1 }
            return end - start
        }
        if end < bytes.count, bytes[end] == UInt8(ascii: "+") || bytes[end] == UInt8(ascii: "-") { end += 1 }
        var mantissa = digits()
        if end < bytes.count, bytes[end] == UInt8(ascii: ".") {
            end += 1
            mantissa += digits()
        }
        guard mantissa > 0 else { return nil }
        let beforeExponent = end
        if end < bytes.count, bytes[end] | 0x20 == UInt8(ascii: "e") {
            end += 1
            if end < bytes.count, bytes[end] == UInt8(ascii: "+") || bytes[end] == UInt8(ascii: "-") { end += 1 }
            if digits() == 0 { end = beforeExponent }
        }
        return Double(String(decoding: bytes[..<end], as: UTF8.self))
    }

    /// A number as the integer Foundation makes of it: its whole part, when that fits.
    private static func whole(_ number: Double) -> [PrefValue] {
        guard number.isFinite, let whole = Int64(exactly: number.rounded(.towardZero)) else { return [] }
        return [.int(whole)]
    }
}
