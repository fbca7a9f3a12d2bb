public import Foundation
public import Prefs

/// A theme enum stored as its raw value.
public enum FixtureTheme: String, Codable, Sendable, Equatable {
    case light, dark
}

/// A Codable struct stored as JSON text.
public struct FixtureSettings: Codable, Sendable, Equatable {
    public var volume: Double
    public var tags: [String]
    public var when: Date
}

/// One typed key of every supported kind, with a value that Foundation on Linux would not round-trip exactly.
public enum Fixtures {
    struct Check: Sendable {
        let name: String
        let write: @Sendable (any KeyValueStore) throws -> Void
        let verify: @Sendable (any KeyValueStore) throws -> Bool
    }

    static func check<V: Codable & Sendable & Equatable>(_ name: String, _ value: V, default: V) -> Check {
        let key = PrefKey(name, default: `default`)
        return Check(
            name: name, write: { try $0.set(value, for: key) },
            verify: { try $0.value(for: key) == value })
    }

    static let checks: [Check] = [
        check("bool", true, default: false),
        check("intMax", Int.max, default: 0),
        check("intMin", Int.min, default: 0),
        check("int8", Int8.min, default: 0),
        check("int16", Int16.max, default: 0),
        check("int32", Int32.min, default: 0),
        check("uint8", UInt8.max, default: 0),
        check("uint64Max", UInt64.max, default: 0),
        check("float", Float(0.1), default: 0),
        check("floatTiny", Float.leastNonzeroMagnitude, default: 0),
        check("double", Double.pi, default: 0),
        check("doubleTiny", Double.leastNonzeroMagnitude, default: 0),
        check("negativeZero", -0.0, default: 1),
        check("string", "héllo \"world\"\n\u{0}🚀", default: ""),
        check("emptyString", "", default: "x"),
        check("data", Data([0, 1, 2, 0xFE, 0xFF]), default: Data()),
        check("emptyData", Data(), default: Data([1])),
        check("date", Date(timeIntervalSinceReferenceDate: 123_456.789), default: .distantPast),
        check("url", URL(string: "https://example.com/a/b?c=d&e=f#frag")!, default: URL(string: "x:")!),
        check("fileURL", URL(filePath: "/tmp/some file.txt"), default: URL(string: "x:")!),
        check("strings", ["swift", "", "linux"], default: []),
        check("nested", [["a": 1], ["b": Int.max]], default: []),
        check("dictionary", ["darkMode": true, "beta": false], default: [:]),
        check("theme", FixtureTheme.dark, default: .light),
        check(
            "settings",
            FixtureSettings(volume: 0.1, tags: ["x"], when: Date(timeIntervalSinceReferenceDate: 0.123_456_789)),
            default: FixtureSettings(volume: 0, tags: [], when: .distantPast)),
        check("optionalDate", Date?.some(Date(timeIntervalSinceReferenceDate: -1.5)), default: nil),
    ]

    /// The names of every fixture key.
    public static var names: [String] { checks.map(\.name) }

    /// Writes every fixture value to `store`.
    public static func write(to store: any KeyValueStore) throws {
        for check in checks { try check.write(store) }
    }

    /// Returns the names of the fixtures whose value did not come back exactly.
    public static func mismatches(in store: any KeyValueStore) -> [String] {
        checks.filter { check in (try? check.verify(store)) != true }.map(\.name)
    }
}
