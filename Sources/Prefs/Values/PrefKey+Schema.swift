import Foundation

extension PrefKey {
    /// `schema: .init("Editor font size, in points", range: 8...72)` describes a key beside its name, type and
    /// default: what it means, and which values it allows.
    ///
    /// Give it to the declaration you already write; there is no other file to keep in step:
    ///
    /// ```swift
    /// extension PrefKey where Value == Int {
    ///     static let fontSize = PrefKey("fontSize", default: 13, schema: .init("Font size, in points", range: 8...72))
    /// }
    ///
    /// @StoredValue(key: "accent", schema: .init("Accent colour", choices: ["blue", "green"])) var accent = "blue"
    /// @StoredValue(key: "theme", schema: "Colour scheme of the windows") var theme: Theme = .light
    /// ```
    ///
    /// A string literal is a description alone. A range suits any `Comparable` type (numbers, dates, and optionals of
    /// them); choices suit any type. An enum that is `CaseIterable` lists its cases as its choices in the published
    /// schema without being told (a value that is not a case cannot be stored or read anyway).
    ///
    /// Writing a value that the key does not allow through the typed API throws
    /// ``PrefsError/notAllowed(key:value:allowed:)`` and writes nothing; a wrapper's setter reports it and keeps the
    /// value it had. A value read from any file (the user's, a system-wide default, a managed value) that the key does
    /// not allow reads as the declared default and is reported once; it is never overwritten. The declared default is
    /// always allowed. See <doc:DescribingYourPreferences>.
    public struct Schema: Sendable, ExpressibleByStringLiteral {
        /// What the key allows, when it says.
        enum Rule: Sendable {
            case range(lower: Value, upper: Value, contains: @Sendable (Value) -> Bool)
            case choices([Value])
        }

        /// `schema.summary` is the description given, or empty.
        public let summary: String
        let rule: Rule?

        /// `.init("Colour scheme of the windows")`, or the string literal alone: a description without a rule.
        public init(_ description: String = "") {
            summary = description
            rule = nil
        }

        /// `schema: "Colour scheme of the windows"`: a description without a rule.
        public init(stringLiteral description: String) { self.init(description) }

        /// `.init("Font size, in points", range: 8...72)` allows the values of `range` only.
        public init(_ description: String = "", range: ClosedRange<Value>) where Value: Comparable {
            summary = description
            rule = .range(lower: range.lowerBound, upper: range.upperBound, contains: { range.contains($0) })
        }

        /// `.init("Limit", range: 1...100)` for an optional key: nil (nothing stored) is allowed too.
        public init<Wrapped: Comparable & Sendable>(_ description: String = "", range: ClosedRange<Wrapped>)
        where Value == Wrapped? {
            summary = description
            rule = .range(
                lower: range.lowerBound, upper: range.upperBound, contains: { $0.map(range.contains) ?? true })
        }

        /// `.init("Accent colour", choices: ["blue", "green"])` allows these values only (for an optional key, nil
        /// too).
        public init(_ description: String = "", choices: [Value]) {
            summary = description
            rule = .choices(choices)
        }

        /// Whether the rule allows `value`.
        func allows(_ value: Value) -> Bool {
            switch rule {
            case nil: true
            case .range(_, _, let contains): contains(value)
            case .choices(let choices): choices.contains(value)
            }
        }

        /// The rule in stored form, through `codec`: for messages and the published schema.
        func allowedValues(_ codec: ValueCodec<Value>) -> AllowedValues? {
            func encoded(_ value: Value) -> PrefValue? { (try? codec.encode(value)) ?? nil }
            switch rule {
            case nil: return nil
            case .range(let lower, let upper, _):
                guard let lower = encoded(lower), let upper = encoded(upper) else { return nil }
                return .range(lower, upper)
            case .choices(let choices): return .choices(choices.compactMap(encoded))
            }
        }
    }

    /// `key.schema` is what the declaration says about the key beyond its name, type and default.
    public var schema: Schema { declaredSchema }
}

/// What a key allows, in stored form: a range or a list of choices. The same text names it in an error, in
/// `prefs describe` and in a refused `prefs write`.
package enum AllowedValues: Sendable, Equatable {
    /// From the first value to the second, both included.
    case range(PrefValue, PrefValue)
    /// One of these.
    case choices([PrefValue])

    /// `from 8 to 72`, `one of "light", "dark"`.
    package var text: String {
        switch self {
        case .range(let lower, let upper): "from \(Self.shown(lower)) to \(Self.shown(upper))"
        case .choices(let choices): "one of " + choices.map(Self.shown).joined(separator: ", ")
        }
    }

    /// A value as a message shows it: text quoted, anything else as it prints.
    package static func shown(_ value: PrefValue) -> String {
        if case .string(let text) = value { return String(reflecting: text) }
        return value.description
    }

    /// Whether `value` is allowed: inside the range (numbers compared as numbers, dates as dates, text as text) or
    /// equal to one of the choices (a whole number equal to a real choice counts).
    package func allows(_ value: PrefValue) -> Bool {
        switch self {
        case .range(let lower, let upper):
            guard let low = Self.compare(lower, value), let high = Self.compare(value, upper) else { return false }
            return low && high
        case .choices(let choices):
            return choices.contains {
                $0 == value || (Self.compare($0, value) == true && Self.compare(value, $0) == true)
            }
        }
    }

    /// `a <= b` for two values of comparable kinds; nil when they cannot be compared.
    private static func compare(_ a: PrefValue, _ b: PrefValue) -> Bool? {
        switch (a, b) {
        case (.date(let x), .date(let y)): return x <= y
        case (.string(let x), .string(let y)): return x <= y
        case (.int(let x), .int(let y)): return x <= y
        case (.unsignedInt(let x), .unsignedInt(let y)): return x <= y
        case (.int, .unsignedInt): return true
        case (.unsignedInt, .int): return false
        default:
            guard let x = number(a), let y = number(b) else { return nil }
            return x <= y
        }
    }

    private static func number(_ value: PrefValue) -> Double? {
        switch value {
        case .int(let value): Double(value)
        case .unsignedInt(let value): Double(value)
        case .float(let value): Double(value)
        case .double(let value): value
        default: nil
        }
    }
}

extension ValueCodec where Value: Equatable {
    /// This codec, refusing what `schema` does not allow with ``PrefsError/notAllowed(key:value:allowed:)``: a value
    /// to encode (nothing is written) and a stored value decoded (its reader falls back to the default). The
    /// declared default (nil for a computed one) and a removal (an optional's nil) are always allowed.
    func checking(_ schema: PrefKey<Value>.Schema, default defaultValue: Value?) -> ValueCodec {
        guard schema.rule != nil else { return self }
        let base = self
        @Sendable func check(_ value: Value, _ stored: PrefValue?) throws {
            guard let stored, defaultValue.map({ value != $0 }) ?? true, !schema.allows(value) else { return }
            throw PrefsError.notAllowed(
                key: "", value: AllowedValues.shown(stored), allowed: schema.allowedValues(base)?.text ?? "none")
        }
        return ValueCodec(
            encode: { value in
                let stored = try base.encode(value)
                try check(value, stored)
                return stored
            },
            decode: { stored in
                let value = try base.decode(stored)
                try check(value, stored)
                return value
            }, route: base.route)
    }
}

/// One declared key as a published schema describes it, in stored form: what `prefs list-keys` and `prefs describe`
/// print and `prefs write` and `prefs check` check against.
package struct KeyDescription: Sendable, Equatable {
    /// The stored form's type, as ``PrefValue/typeName`` names it; nil when the declaration does not tell (an
    /// optional of a type of its own, with no default).
    package var type: String?
    /// The declared default in stored form; nil for an optional key whose default is nil, and for a default computed
    /// when it is read.
    package var defaultValue: PrefValue?
    package var summary: String
    package var allowed: AllowedValues?
    /// Which stored forms the app reads, in which order; nil in a schema published before Prefs said (then only
    /// ``type`` is checked).
    package var route: ReadRoute?
    /// What the declared type reads; nil where ``route`` is.
    package var shape: ValueShape?
    /// Whether the default is computed by the app each time no layer holds a value, so no schema can hold it.
    package var isComputed = false

    package init(
        type: String?, defaultValue: PrefValue?, summary: String, allowed: AllowedValues?, route: ReadRoute? = nil,
        shape: ValueShape? = nil, isComputed: Bool = false
    ) {
        self.type = type
        self.defaultValue = defaultValue
        self.summary = summary
        self.allowed = allowed
        self.route = route
        self.shape = shape
        self.isComputed = isComputed
    }
}

extension KeyDescription {
    /// Why `value` does not fit the key, as a phrase that follows the value (`is a string, not an int`, `is not
    /// allowed (from 8 to 72)`); nil when it fits. A value fits a type when the app reads it as one: a whole number
    /// a real, a double that is whole an integer, 0 and 1 a bool.
    package func problem(with value: PrefValue) -> String? {
        if let type, !Self.value(value, fits: type) {
            return "is \(Self.phrase(value.typeName)), not \(Self.phrase(type))"
        }
        if let allowed, !allowed.allows(value), !isDefault(value) { return "is not allowed (\(allowed.text))" }
        return nil
    }

    /// Whether `value` is the declared default (a whole number equal to a real default counts): always allowed, as
    /// the library allows it, whatever the range or choices say.
    package func isDefault(_ value: PrefValue) -> Bool {
        guard let defaultValue else { return false }
        return AllowedValues.choices([defaultValue]).allows(value)
    }

    /// Why an entry of a schema file cannot be what a declaration published, as a phrase; nil when it is consistent.
    /// A declaration cannot make these (a `ClosedRange` is never inverted, its bounds and choices are of the key's
    /// type), so a file that has one was written or edited by hand, and it would refuse values the app allows.
    var contradiction: String? {
        if let type, let defaultValue, !Self.value(defaultValue, fits: type) {
            return "its default \(AllowedValues.shown(defaultValue)) is \(Self.phrase(defaultValue.typeName)), "
                + "not \(Self.phrase(type))"
        }
        switch allowed {
        case .range(let lower, let upper)?:
            if let type, let bound = [lower, upper].first(where: { !Self.value($0, fits: type) }) {
                return "its range bound \(AllowedValues.shown(bound)) is \(Self.phrase(bound.typeName)), "
                    + "not \(Self.phrase(type))"
            }
            // A range allows its lower bound exactly when the bounds compare and are in order.
            if !AllowedValues.range(lower, upper).allows(lower) {
                return "its range \(AllowedValues.range(lower, upper).text) allows no value"
            }
        case .choices(let choices)?:
            if let type, let choice = choices.first(where: { !Self.value($0, fits: type) }) {
                return "its choice \(AllowedValues.shown(choice)) is \(Self.phrase(choice.typeName)), "
                    + "not \(Self.phrase(type))"
            }
            if choices.isEmpty, defaultValue == nil { return "it lists no choice and has no default" }
        case nil: break
        }
        return nil
    }

    private static func value(_ value: PrefValue, fits type: String) -> Bool {
        if value.typeName == type { return true }
        switch (type, value) {
        case ("bool", .int(0)), ("bool", .int(1)): return true
        case ("int", .double(let real)): return real.rounded() == real && Int64(exactly: real) != nil
        case ("double", .int), ("double", .unsignedInt), ("double", .float), ("float", .int), ("float", .double):
            return true
        default: return false
        }
    }

    /// `an int`, `a string`.
    private static func phrase(_ type: String) -> String {
        (type.first.map { "aeiou".contains($0) } ?? false ? "an " : "a ") + type
    }
}
