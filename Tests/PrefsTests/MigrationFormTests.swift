import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

/// The exact forms sindresorhus/Defaults, Boutique and `@AppStorage` write, in a property list
/// written by Foundation, read as the declared type; the next write stores Prefs' own form.
@Suite(.ownThreads)
struct MigrationFormTests {
    enum Level: Int, Codable, Sendable {
        case one = 1
        case two = 2
    }
    struct Tag: RawRepresentable, Codable, Sendable, Equatable, Hashable {
        var rawValue: String
    }

    /// One cell of a migration guide's table: what a library stores for a kind of value, and what it reads as.
    struct Cell: Sendable, CustomTestStringConvertible {
        let name: String
        /// The property-list object the library stores (built from the bytes its source writes).
        let stored: @Sendable () -> Any
        /// Reads the key as the declared type, expects the value, writes it back and returns what is stored now.
        let check:
            @Sendable (any KeyValueStore, String) throws -> (matches: Bool, rewritten: PrefValue?, native: PrefValue?)
        var testDescription: String { name }

        /// `prefKey` is built where its type is known, so it has the codec a declaration of that type has.
        init<T: Sendable & Equatable>(
            _ name: String, _ stored: @autoclosure @escaping @Sendable () -> Any, as prefKey: PrefKey<T>,
            reads expected: T
        ) {
            self.name = name
            self.stored = stored
            self.check = { store, key in
                let read = try store.value(for: prefKey)
                try store.set(read, for: prefKey)
                let native = InMemoryStore()
                try native.set(expected, for: prefKey)
                return (read == expected, try store.value(forKey: key), try native.value(forKey: key))
            }
        }
    }

    static func json(_ text: String) -> Data { Data(text.utf8) }
    static let date = Date(timeIntervalSinceReferenceDate: 786_123_456)
    static let url = URL(string: "https://example.com/a?b=c")!
    static let prefs = UserPreferences(hasHapticsEnabled: false, prefersDarkMode: true, fontScale: 1.5)
    static let prefsJSON = #"{"hasHapticsEnabled":false,"prefersDarkMode":true,"fontScale":1.5}"#

    static let defaults: [Cell] = [
        Cell("Defaults Bool", true, as: PrefKey("value", default: false), reads: true),
        Cell("Defaults Int", 42, as: PrefKey("value", default: 0), reads: 42),
        Cell("Defaults Double", 0.5, as: PrefKey("value", default: 0.0), reads: 0.5),
        Cell("Defaults String", "dark", as: PrefKey("value", default: ""), reads: "dark"),
        Cell("Defaults Date", date, as: PrefKey("value", default: Date.distantPast), reads: date),
        Cell("Defaults Data", Data([1, 2]), as: PrefKey("value", default: Data()), reads: Data([1, 2])),
        Cell(
            "Defaults URL", #""https:\/\/example.com\/a?b=c""#,
            as: PrefKey("value", default: URL(string: "about:blank")!), reads: url),
        Cell("Defaults String enum", #""dark""#, as: PrefKey("value", default: Theme.light), reads: .dark),
        Cell("Defaults Int enum", "2", as: PrefKey("value", default: Level.one), reads: .two),
        Cell(
            "Defaults RawRepresentable struct", #""swift""#, as: PrefKey("value", default: Tag(rawValue: "")),
            reads: Tag(rawValue: "swift")),
        Cell("Defaults Codable struct", prefsJSON, as: PrefKey("value", default: UserPreferences()), reads: prefs),
        Cell("Defaults [String]", ["a", "b"], as: PrefKey("value", default: [String]()), reads: ["a", "b"]),
        Cell(
            "Defaults [enum]", [#""light""#, #""dark""#], as: PrefKey("value", default: [Theme]()),
            reads: [.light, .dark]),
        Cell("Defaults [struct]", [prefsJSON], as: PrefKey("value", default: [UserPreferences]()), reads: [prefs]),
        Cell("Defaults [String: Int]", ["a": 1], as: PrefKey("value", default: [String: Int]()), reads: ["a": 1]),
        Cell(
            "Defaults [String: enum]", ["a": #""dark""#], as: PrefKey("value", default: [String: Theme]()),
            reads: ["a": .dark]),
        Cell("Defaults Set<String>", ["b", "a"], as: PrefKey("value", default: Set<String>()), reads: ["a", "b"]),
        Cell(
            "Defaults Set<enum>", [#""dark""#, #""light""#], as: PrefKey("value", default: Set<Theme>()),
            reads: [.light, .dark]),
        Cell("Defaults Optional enum", #""dark""#, as: PrefKey("value", default: Theme?.none), reads: .dark),
    ]

    static let boutique: [Cell] = [
        Cell("Boutique Bool", json(#"{"value":true}"#), as: PrefKey("value", default: false), reads: true),
        Cell("Boutique Int", json(#"{"value":42}"#), as: PrefKey("value", default: 0), reads: 42),
        Cell("Boutique Double", json(#"{"value":0.5}"#), as: PrefKey("value", default: 0.0), reads: 0.5),
        Cell("Boutique String", json(#"{"value":"dark"}"#), as: PrefKey("value", default: ""), reads: "dark"),
        Cell(
            "Boutique Date", json(#"{"value":786123456.789}"#), as: PrefKey("value", default: Date.distantPast),
            reads: Date(timeIntervalSinceReferenceDate: 786_123_456.789)),
        Cell("Boutique Data", json(#"{"value":"AQI="}"#), as: PrefKey("value", default: Data()), reads: Data([1, 2])),
        Cell(
            "Boutique URL", json(#"{"value":"https:\/\/example.com\/a?b=c"}"#),
            as: PrefKey("value", default: URL(string: "about:blank")!),
            reads: url),
        Cell("Boutique enum", json(#"{"value":"dark"}"#), as: PrefKey("value", default: Theme.light), reads: .dark),
        Cell(
            "Boutique Codable struct", json(#"{"value":\#(prefsJSON)}"#),
            as: PrefKey("value", default: UserPreferences()), reads: prefs),
        Cell(
            "Boutique [String]", json(#"{"value":["a","b"]}"#), as: PrefKey("value", default: [String]()),
            reads: ["a", "b"]),
        Cell(
            "Boutique [String: Int]", json(#"{"value":{"a":1}}"#), as: PrefKey("value", default: [String: Int]()),
            reads: ["a": 1]),
        Cell(
            "Boutique Set<String>", json(#"{"value":["b","a"]}"#), as: PrefKey("value", default: Set<String>()),
            reads: ["a", "b"]),
        Cell(
            "Boutique Optional nil", json(#"{"value":null}"#), as: PrefKey("value", default: Theme?.some(.light)),
            reads: nil),
        Cell(
            "Boutique Optional value", json(#"{"value":"dark"}"#), as: PrefKey("value", default: Theme?.none),
            reads: .dark),
    ]

    static let appStorage: [Cell] = [
        Cell("AppStorage Bool", true, as: PrefKey("value", default: false), reads: true),
        Cell("AppStorage Int", 42, as: PrefKey("value", default: 0), reads: 42),
        Cell("AppStorage Double", 0.5, as: PrefKey("value", default: 0.0), reads: 0.5),
        Cell("AppStorage String", "dark", as: PrefKey("value", default: ""), reads: "dark"),
        Cell("AppStorage Data", Data([1, 2]), as: PrefKey("value", default: Data()), reads: Data([1, 2])),
        Cell("AppStorage Date", date, as: PrefKey("value", default: Date.distantPast), reads: date),
        Cell("AppStorage String enum", "dark", as: PrefKey("value", default: Theme.light), reads: .dark),
        Cell("AppStorage Int enum", 2, as: PrefKey("value", default: Level.one), reads: .two),
        Cell(
            "AppStorage Codable as JSON text", #"["a","b"]"#, as: PrefKey("value", default: [String]()),
            reads: ["a", "b"]),
        Cell(
            "AppStorage Codable as JSON data", json(prefsJSON), as: PrefKey("value", default: UserPreferences()),
            reads: prefs),
        Cell("AppStorage Optional String", "dark", as: PrefKey("value", default: String?.none), reads: "dark"),
    ]

    @Test(arguments: defaults + boutique + appStorage)
    func userDefaultsStoreReadsTheFormAndRewritesItNatively(_ cell: Cell) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        // The suite as Foundation writes it: an XML property list holding what the library stored.
        let plist = try PropertyListSerialization.data(
            fromPropertyList: ["value": cell.stored()], format: .xml, options: 0)
        try plist.write(to: directory.file("migrated.plist"))
        let store = try SuiteFileStore(suiteName: "migrated", directory: directory.url)
        let foreign = try store.value(forKey: "value")
        let result = try cell.check(store, "value")
        #expect(result.matches)
        #expect(result.rewritten == result.native)
        // The same stored value inside a FileStore file reads the same way.
        try PrefValue.jsonDocument(["value": foreign!]).write(to: directory.file("migrated.json"))
        let fileResult = try cell.check(try FileStore(url: directory.file("migrated.json")), "value")
        #expect(fileResult.matches)
        #expect(fileResult.rewritten == fileResult.native)
    }

    @Test func aSetIsStoredSortedSoAnUnchangedSetLeavesTheFileAlone() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try FileStore(url: directory.file("sets.json"))
        let words = Set((0..<50).map { "word\($0)" })
        try store.set(words, for: PrefKey("words", default: Set<String>()))
        try store.set(Set([Theme.dark, .light, .system]), for: PrefKey("themes", default: Set<Theme>()))
        let first = try Data(contentsOf: directory.file("sets.json"))
        #expect(try store.value(forKey: "words") == .array(words.sorted().map { .string($0) }))
        #expect(try store.value(forKey: "themes") == .string(#"["dark","light","system"]"#))
        for _ in 0..<5 {
            try store.set(Set(Array(words).shuffled()), for: PrefKey("words", default: Set<String>()))
            try store.set(Set([Theme.system, .light, .dark]), for: PrefKey("themes", default: Set<Theme>()))
        }
        #expect(try Data(contentsOf: directory.file("sets.json")) == first)
    }
}

/// A type with its own stored form (which wins over `Codable`'s), in optionals and collections.
struct Member: PrefValueConvertible, Codable, Hashable {
    var name: String
    init(_ name: String) { self.name = name }
    init(prefValue: PrefValue) throws {
        guard case .string(let text) = prefValue, text.hasPrefix("member:") else {
            throw PrefsError.typeMismatch(key: "", expected: "member", found: prefValue.typeName)
        }
        name = String(text.dropFirst("member:".count))
    }
    var prefValue: PrefValue { .string("member:" + name) }
}

@Suite(.ownThreads)
struct ConvertibleCollectionTests {
    @Test func optionalsArraysDictionariesAndSetsOfAConvertibleTypeWork() throws {
        let store = InMemoryStore()
        let owner = PrefKey<Member?>("owner")
        #expect(try store.value(for: owner) == nil)
        try store.set(Member("ada"), for: owner)
        #expect(try store.value(forKey: "owner") == .string("member:ada"))
        #expect(try store.value(for: owner) == Member("ada"))
        try store.set(nil, for: owner)
        #expect(try store.value(forKey: "owner") == nil)

        let team = PrefKey("team", default: [Member]())
        try store.set([Member("b"), Member("a")], for: team)
        #expect(try store.value(for: team) == [Member("b"), Member("a")])
        let roles = PrefKey("roles", default: [String: Member]())
        try store.set(["lead": Member("ada")], for: roles)
        #expect(try store.value(forKey: "roles") == .dictionary(["lead": .string("member:ada")]))
        let everyone = PrefKey("everyone", default: Set<Member>())
        try store.set([Member("b"), Member("a"), Member("c")], for: everyone)
        #expect(try store.value(forKey: "everyone") == .array(["a", "b", "c"].map { .string("member:" + $0) }))
        #expect(try store.value(for: everyone) == [Member("a"), Member("b"), Member("c")])

        @StoredValue(key: "wrapped-owner", store: store) var wrappedOwner: Member?
        #expect(wrappedOwner == nil)
        $wrappedOwner.set(Member("grace"))
        #expect(wrappedOwner == Member("grace"))
        @StoredValue(key: "wrapped-member", store: store) var member = Member("x")
        #expect(member == Member("x"))
    }

    @Test func aCodableTypeGetsItsStoredFormFromTheHelper() throws {
        struct Point: Codable, Equatable, PrefValueConvertible {
            var x: Double
            var y: Double
            init(x: Double, y: Double) {
                self.x = x
                self.y = y
            }
            init(prefValue: PrefValue) throws { self = try prefValue.decoded(as: Point.self) }
            var prefValue: PrefValue { get throws { try PrefValue(encoding: self) } }
        }
        let store = InMemoryStore()
        try store.set([Point(x: 1, y: .infinity)], for: PrefKey("points", default: [Point]()))
        #expect(try store.value(forKey: "points") == .array([.string(#"{"x":1,"y":"inf"}"#)]))
        #expect(try store.value(for: PrefKey("points", default: [Point]())) == [Point(x: 1, y: .infinity)])
        #expect(try PrefValue.data(Data(#"{"value":{"x":2,"y":3}}"#.utf8)).decoded(as: Point.self) == Point(x: 2, y: 3))
    }
}

/// FileStore keeps non-finite numbers.
@Suite(.ownThreads)
struct NonFiniteNumberTests {
    @Test func infinitiesAndNaNRoundTripThroughAFileStore() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let url = directory.file("numbers.json")
        let store = try FileStore(url: url)
        let values: [String: PrefValue] = [
            "inf": .double(.infinity), "minusInf": .double(-.infinity), "nan": .double(.nan),
            "floatInf": .float(.infinity), "floatMinusInf": .float(-.infinity), "floatNaN": .float(.nan),
            "nested": .array([.double(.infinity), .dictionary(["x": .float(-.infinity)])]),
        ]
        try store.replaceAll(values)
        let reopened = try JSONFormat.decode(Data(contentsOf: url), path: url.path)
        #expect(reopened["inf"] == .double(.infinity))
        #expect(reopened["minusInf"] == .double(-.infinity))
        #expect(reopened["floatInf"] == .float(.infinity))
        #expect(reopened["floatMinusInf"] == .float(-.infinity))
        #expect(reopened["nested"] == .array([.double(.infinity), .dictionary(["x": .float(-.infinity)])]))
        if case .double(let nan)? = reopened["nan"] { #expect(nan.isNaN) } else { Issue.record("nan lost") }
        if case .float(let nan)? = reopened["floatNaN"] { #expect(nan.isNaN) } else { Issue.record("float nan lost") }

        let wrapped = StoredValue(key: "wrapped", default: 0.0, store: store)
        wrapped.set(-.infinity)
        #expect(try FileStore(url: url).value(for: PrefKey("wrapped", default: 0.0)) == -.infinity)
        let codable = StoredValue(key: "codable", default: UserPreferences(), store: store)
        codable.set(UserPreferences(fontScale: .infinity))
        #expect(try store.value(for: PrefKey("codable", default: UserPreferences())).fontScale == .infinity)
    }
}
