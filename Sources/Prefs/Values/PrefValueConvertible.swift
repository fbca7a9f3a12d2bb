public import Foundation

/// `extension Money: PrefValueConvertible { … }` gives a type its own stored representation.
///
/// Prefs already stores `Bool`, every integer width, `Float`, `Double`, `String`, `Data`, `Date`, `URL`, and
/// arrays and string-keyed dictionaries of them natively. `RawRepresentable` types store their raw value and any
/// other `Codable` type is stored as JSON text. Conform to this protocol to choose a different form, for example
/// a compact string for a value that would otherwise be a JSON object:
///
/// ```swift
/// extension Version: PrefValueConvertible {
///     init(prefValue: PrefValue) throws {
///         guard case .string(let text) = prefValue, let version = Version(text) else {
///             throw PrefsError.typeMismatch(key: "", expected: "version string", found: prefValue.typeName)
///         }
///         self = version
///     }
///     var prefValue: PrefValue { .string(description) }
/// }
/// ```
///
/// The conversion must round-trip: `try T(prefValue: value.prefValue) == value`.
public protocol PrefValueConvertible: Sendable {
    /// `try Version(prefValue: stored)` creates the value from its stored form, throwing when it does not fit.
    init(prefValue: PrefValue) throws
    /// `try version.prefValue` is the stored form of the value.
    var prefValue: PrefValue { get throws }
}

extension PrefValueConvertible where Self: RawRepresentable, RawValue: PrefValueConvertible {
    /// `extension SortOrder: PrefValueConvertible {}` stores an enum with raw values (that need not be `Codable`) as
    /// its raw value, as `@AppStorage` stores it; a raw value the type refuses is a type mismatch.
    public init(prefValue: PrefValue) throws {
        let rawValue = try RawValue(prefValue: prefValue)
        guard let value = Self(rawValue: rawValue) else {
            throw PrefsError.typeMismatch(
                key: "", expected: "a raw value of \(Self.self)", found: String(describing: rawValue))
        }
        self = value
    }

    /// The raw value's stored form.
    public var prefValue: PrefValue { get throws { try rawValue.prefValue } }
}

func mismatch(_ expected: String, _ found: PrefValue) -> PrefsError {
    .typeMismatch(key: "", expected: expected, found: found.typeName)
}

extension Bool: PrefValueConvertible {
    /// `try Bool(prefValue: .bool(true))` reads a stored bool (or the integers 0 and 1, which other tools write).
    public init(prefValue: PrefValue) throws {
        switch prefValue {
        case .bool(let value): self = value
        case .int(0): self = false
        case .int(1): self = true
        default: throw mismatch("bool", prefValue)
        }
    }
    /// `.bool(self)`.
    public var prefValue: PrefValue { .bool(self) }
}

extension PrefValueConvertible where Self: FixedWidthInteger {
    /// `try Int(prefValue: .int(42))` reads a stored integer that fits this type exactly; anything else is a type
    /// mismatch.
    public init(prefValue: PrefValue) throws {
        let converted: Self? =
            switch prefValue {
            case .int(let value): Self(exactly: value)
            case .unsignedInt(let value): Self(exactly: value)
            case .double(let value): Self(exactly: value)
            default: nil
            }
        guard let converted else { throw mismatch(String(describing: Self.self), prefValue) }
        self = converted
    }
    /// `.int(…)`, or `.unsignedInt(…)` above `Int64.max`.
    public var prefValue: PrefValue { .exactInteger(self) }
}

extension Int: PrefValueConvertible {}
extension Int8: PrefValueConvertible {}
extension Int16: PrefValueConvertible {}
extension Int32: PrefValueConvertible {}
extension Int64: PrefValueConvertible {}
extension UInt: PrefValueConvertible {}
extension UInt8: PrefValueConvertible {}
extension UInt16: PrefValueConvertible {}
extension UInt32: PrefValueConvertible {}
extension UInt64: PrefValueConvertible {}

extension Double: PrefValueConvertible {
    /// `try Double(prefValue: .double(0.5))` reads a stored double, float or exactly representable integer.
    public init(prefValue: PrefValue) throws {
        switch prefValue {
        case .double(let value): self = value
        case .float(let value): self = Double(value)
        case .int(let value):
            guard let exact = Double(exactly: value) else { throw mismatch("Double", prefValue) }
            self = exact
        default: throw mismatch("Double", prefValue)
        }
    }
    /// `.double(self)`.
    public var prefValue: PrefValue { .double(self) }
}

extension Float: PrefValueConvertible {
    /// `try Float(prefValue: .float(0.1))` reads a stored float, or a double that is exactly a float (as a property
    /// list returns it after a reload).
    public init(prefValue: PrefValue) throws {
        switch prefValue {
        case .float(let value): self = value
        case .double(let value) where value.isNaN: self = .nan
        case .double(let value):
            let narrowed = Float(value)
            guard Double(narrowed) == value else { throw mismatch("Float", prefValue) }
            self = narrowed
        case .int(let value):
            guard let exact = Float(exactly: value) else { throw mismatch("Float", prefValue) }
            self = exact
        default: throw mismatch("Float", prefValue)
        }
    }
    /// `.float(self)`.
    public var prefValue: PrefValue { .float(self) }
}

extension String: PrefValueConvertible {
    /// `try String(prefValue: .string("dark"))` reads a stored string.
    public init(prefValue: PrefValue) throws {
        guard case .string(let value) = prefValue else { throw mismatch("String", prefValue) }
        self = value
    }
    /// `.string(self)`.
    public var prefValue: PrefValue { .string(self) }
}

extension Data: PrefValueConvertible {
    /// `try Data(prefValue: .data(bytes))` reads stored bytes.
    public init(prefValue: PrefValue) throws {
        guard case .data(let value) = prefValue else { throw mismatch("Data", prefValue) }
        self = value
    }
    /// `.data(self)`.
    public var prefValue: PrefValue { .data(self) }
}

extension Date: PrefValueConvertible {
    /// `try Date(prefValue: .date(date))` reads a stored date, or ISO 8601 text in UTC with any number of
    /// fractional digits (`2001-01-02T10:17:36.789Z`), the form a date with a sub-second part takes in a
    /// ``UserDefaultsBridgeStore``.
    public init(prefValue: PrefValue) throws {
        switch prefValue {
        case .date(let value): self = value
        case .string(let text):
            guard let date = Self.exactISO8601(text) else { throw mismatch("Date", prefValue) }
            self = date
        default: throw mismatch("Date", prefValue)
        }
    }

    /// `2001-01-02T10:17:36.789Z`: the whole seconds, plus the fraction read as a `Double`, so the text of a
    /// `UserDefaultsBridgeStore` date gives back exactly its date.
    private static func exactISO8601(_ text: String) -> Date? {
        guard text.hasSuffix("Z"), text.count >= 20 else { return nil }
        let body = text.dropLast()
        let (wholeText, fractionText): (Substring, Substring?) =
            if let dot = body.firstIndex(of: ".") {
                (body[..<dot], body[body.index(after: dot)...])
            } else {
                (body, nil)
            }
        guard let whole = try? Date(String(wholeText) + "Z", strategy: .iso8601) else { return nil }
        guard let fractionText else { return whole }
        guard !fractionText.isEmpty, fractionText.allSatisfy(\.isASCII), fractionText.allSatisfy(\.isNumber),
            let fraction = Double("0." + fractionText)
        else { return nil }
        return Date(timeIntervalSinceReferenceDate: whole.timeIntervalSinceReferenceDate + fraction)
    }
    /// `.date(self)`, with full sub-second precision.
    public var prefValue: PrefValue { .date(self) }
}

extension URL: PrefValueConvertible {
    /// `try URL(prefValue: .string("https://example.com/a?b=c"))` reads a URL stored as its full string (scheme,
    /// host, path, query and fragment).
    ///
    /// A path (`/srv/x`, `~/notes`) reads as the file URL Foundation's `url(forKey:)` makes of it,
    /// `URL(fileURLWithPath:)` with `~` expanded: the form Foundation stores a URL in, and how `-path /srv/x` is
    /// given on the command line.
    public init(prefValue: PrefValue) throws {
        guard case .string(let text) = prefValue else { throw mismatch("URL", prefValue) }
        if text.hasPrefix("/") || text.hasPrefix("~") {
            self = URL(fileURLWithPath: NSString(string: text).expandingTildeInPath)
            return
        }
        guard let url = URL(string: text) else { throw mismatch("URL", prefValue) }
        self = url
    }
    /// `.string(absoluteString)`: unlike Foundation on Linux, which keeps only the path, the whole URL is kept.
    public var prefValue: PrefValue { .string(absoluteString) }
}

extension Array: PrefValueConvertible where Element: PrefValueConvertible {
    /// `try [String](prefValue: .array(…))` reads a stored array whose every element converts to `Element`.
    public init(prefValue: PrefValue) throws {
        guard case .array(let values) = prefValue else { throw mismatch("array", prefValue) }
        self = try values.map(Element.init(prefValue:))
    }
    /// `.array(…)` of each element's stored form.
    public var prefValue: PrefValue {
        get throws { .array(try map { try $0.prefValue }) }
    }
}

extension Dictionary: PrefValueConvertible where Key == String, Value: PrefValueConvertible {
    /// `try [String: Bool](prefValue: .dictionary(…))` reads a stored dictionary whose every value converts to
    /// `Value`.
    public init(prefValue: PrefValue) throws {
        guard case .dictionary(let values) = prefValue else { throw mismatch("dictionary", prefValue) }
        self = try values.mapValues(Value.init(prefValue:))
    }
    /// `.dictionary(…)` of each value's stored form.
    public var prefValue: PrefValue {
        get throws { .dictionary(try mapValues { try $0.prefValue }) }
    }
}
