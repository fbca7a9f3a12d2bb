import Foundation

extension PrefValue {
    /// `try PrefValue(encoding: user)` is the form Prefs stores any `Codable` value in: its JSON text, with sorted
    /// keys, so a ``PrefValueConvertible`` conformance can store a `Codable` type the way Prefs would.
    ///
    /// ```swift
    /// extension User: PrefValueConvertible {
    ///     init(prefValue: PrefValue) throws { self = try prefValue.decoded(as: User.self) }
    ///     var prefValue: PrefValue { get throws { try PrefValue(encoding: self) } }
    /// }
    /// ```
    ///
    /// Non-finite `Float` and `Double` members are written as `"inf"`, `"-inf"` and `"nan"`, so they round-trip.
    ///
    /// - Throws: ``PrefsError/encodingFailed(key:reason:)`` when the value's `encode(to:)` throws.
    public init<T: Encodable>(encoding value: T) throws {
        do {
            self = .string(try ForeignForms.jsonText(value))
        } catch {
            throw PrefsError.encodingFailed(key: "", reason: String(describing: error))
        }
    }

    /// `try stored.decoded(as: User.self)` reads a `Codable` value from its stored form: the JSON text
    /// ``init(encoding:)`` writes, JSON data, and the forms sindresorhus/Defaults, Boutique and `@AppStorage` write
    /// (see <doc:MigratingFromDefaults>).
    ///
    /// - Throws: ``PrefsError/decodingFailed(key:reason:)`` when no form decodes as `T`.
    public func decoded<T: Decodable>(as type: T.Type) throws -> T {
        if let value = ForeignForms.plainlyForeign(self, as: T.self, hasNativeForm: false) { return value }
        do {
            return try ForeignForms.decodeJSON(self, as: T.self)
        } catch {
            if let value = ForeignForms.decode(self, as: T.self, hasNativeForm: false) { return value }
            throw PrefsError.decodingFailed(key: "", reason: String(describing: error))
        }
    }
}

extension Set: PrefValueConvertible where Element: PrefValueConvertible {
    /// `try Set<String>(prefValue: .array(…))` reads a stored array (in any order) whose every element converts to
    /// `Element`.
    public init(prefValue: PrefValue) throws {
        guard case .array(let values) = prefValue else { throw mismatch("array", prefValue) }
        self = Set(try values.map(Element.init(prefValue:)))
    }

    /// `.array(…)` of each element's stored form, sorted, so an unchanged set is stored the same way every time.
    public var prefValue: PrefValue {
        get throws { .array(try map { try $0.prefValue }.sorted { $0.sortKey < $1.sortKey }) }
    }
}

/// A set of `Encodable` elements, which Prefs stores as JSON text with the elements in a fixed order.
protocol EncodableSet {
    func sortedJSONText() throws -> String
}

extension Set: EncodableSet where Element: Encodable {
    func sortedJSONText() throws -> String {
        "[" + (try map { try ForeignForms.jsonText($0) }.sorted().joined(separator: ",")) + "]"
    }
}

extension PrefValue {
    /// A total order for values without one of their own: a canonical text with dictionary keys sorted.
    var sortKey: String {
        switch self {
        case .array(let elements): "[" + elements.map(\.sortKey).joined(separator: ",") + "]"
        case .dictionary(let members):
            "{"
                + members.keys.sorted().map { "\(String(reflecting: $0)):\(members[$0]!.sortKey)" }
                .joined(separator: ",") + "}"
        default: String(reflecting: self)
        }
    }
}
