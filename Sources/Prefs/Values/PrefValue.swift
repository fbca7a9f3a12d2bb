public import Foundation

/// `.bool(true)`, `.int(42)`, `.string("dark")`, `.date(.now)`, …: a preference as a store keeps it.
///
/// `PrefValue` is the common language between typed preferences and the stores that persist them.
/// Each case maps to a native form in every backend (a property-list bool in a UserDefaults suite, a JSON
/// number in a ``FileStore``), so values stay readable by other tools. You meet it when you write your own
/// ``KeyValueStore`` or give a type its own representation with ``PrefValueConvertible``.
///
/// Conversions from a `PrefValue` back to a Swift type are exact: an `Int64.max` stays `Int64.max`, a `Float`
/// comes back bit-for-bit, a `Date` keeps its sub-second part, a `URL` keeps its query.
public enum PrefValue: Sendable, Hashable {
    /// `.bool(true)`: a Boolean.
    case bool(Bool)
    /// `.int(-3)`: a signed integer of any width up to 64 bits.
    case int(Int64)
    /// `.unsignedInt(UInt64.max)`: an unsigned integer above `Int64.max`. Smaller values use ``int(_:)``.
    case unsignedInt(UInt64)
    /// `.float(0.1)`: a single-precision float, kept apart from `Double` so it round-trips exactly.
    case float(Float)
    /// `.double(0.5)`: a double-precision float.
    case double(Double)
    /// `.string("dark")`: text. URLs and JSON-encoded values are stored as strings too.
    case string(String)
    /// `.data(Data([0xCA, 0xFE]))`: raw bytes.
    case data(Data)
    /// `.date(.now)`: a point in time, with its full sub-second precision.
    case date(Date)
    /// `.array([.string("swift"), .string("linux")])`: an ordered list.
    case array([PrefValue])
    /// `.dictionary(["darkMode": .bool(true)])`: a string-keyed dictionary.
    case dictionary([String: PrefValue])
}

extension PrefValue {
    /// The narrowest case that holds the integer exactly: ``int(_:)``, or ``unsignedInt(_:)`` above `Int64.max`.
    package static func exactInteger<T: BinaryInteger>(_ value: T) -> PrefValue {
        if let signed = Int64(exactly: value) { return .int(signed) }
        return .unsignedInt(UInt64(value))
    }

    /// `value.typeName` is a short name for the kind of value, as tools print it: `"bool"`, `"int"`, `"string"`, …
    package var typeName: String {
        switch self {
        case .bool: "bool"
        case .int, .unsignedInt: "int"
        case .float: "float"
        case .double: "double"
        case .string: "string"
        case .data: "data"
        case .date: "date"
        case .array: "array"
        case .dictionary: "dictionary"
        }
    }
}

extension PrefValue: CustomStringConvertible {
    /// `print(value)` prints a readable rendering of the value: `true`, `42`, `dark`, `[1, 2]`.
    public var description: String {
        switch self {
        case .bool(let value): String(value)
        case .int(let value): String(value)
        case .unsignedInt(let value): String(value)
        case .float(let value): String(value)
        case .double(let value): String(value)
        case .string(let value): value
        case .data(let value): "<\(value.map { String(format: "%02x", $0) }.joined())>"
        case .date(let value): value.formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true))
        case .array(let values): "[" + values.map(\.description).joined(separator: ", ") + "]"
        case .dictionary(let values):
            "{" + values.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ") + "}"
        }
    }
}
