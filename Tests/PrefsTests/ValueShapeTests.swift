import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

/// A key's published shape and route read a stored value as the app's own declaration reads it in a UserDefaults
/// domain: for every stored value tried, `prefs`'s reading (``KeyDescription/read(_:)``) accepts it exactly when the
/// typed read of a real `SuiteFileStore` does.
@Suite(.ownThreads) struct ValueShapeTests {
    enum Mode: String, Codable, CaseIterable, Sendable {
        case fast, slow
    }

    struct Inner: Codable, Equatable, Sendable {
        var level: UInt8 = 3
        var enabled: Bool?
    }

    struct Settings: Codable, Equatable, Sendable {
        var size = 12
        var name = "main"
        var ratio = 0.5
        var tags: [String] = []
        var inner = Inner()
        var flags: [String: Bool] = [:]
        var when = Date(timeIntervalSinceReferenceDate: 0)
        var limit: Int?
        var mode = Mode.fast
        var layers: [Inner] = [Inner()]
    }

    /// Each stored value as the app reads it (`reads`) and as the published description reads it (`described`).
    func compare<Value: Sendable & Equatable>(
        _ key: PrefKey<Value>, _ stored: [PrefValue], sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let folder = try TempDir("prefs-shapes")
        defer { folder.cleanup() }
        let store = try SuiteFileStore(suiteName: "shapes", directory: folder.url)
        defer { store.close() }
        let description = key.describe()
        #expect(description.shape?.unknownReason == nil, "\(String(describing: description.shape))")
        var outcomes: Set<Bool> = []
        defer { #expect(outcomes == [true, false], "some values read and some not", sourceLocation: sourceLocation) }
        for value in stored {
            try store.setValue(value, forKey: key.name)
            let reads = (try? store.value(for: key)) != nil
            outcomes.insert(reads)
            let described: Bool
            switch description.read(value) {
            case .reads: described = true
            case .refused: described = false
            case .unknown(let reason):
                Issue.record("unknown: \(reason)", sourceLocation: sourceLocation)
                continue
            }
            #expect(
                reads == described, "\(value): the app \(reads ? "reads" : "refuses") it",
                sourceLocation: sourceLocation)
        }
    }

    /// The default's JSON, changed at every place in every way the derivation probes, and other libraries' forms.
    func variants(of key: PrefKey<Settings>) throws -> [PrefValue] {
        let description = key.describe()
        let shape = try #require(description.shape)
        let text = try #require(
            description.defaultValue.flatMap { value -> String? in
                if case .string(let text) = value { return text }
                return nil
            })
        let tree = try JSONSerialization.jsonObject(with: Data(text.utf8))
        var found = try shape.variants(of: tree, at: "").map { variant, _ in
            PrefValue.string(
                String(
                    decoding: try JSONSerialization.data(withJSONObject: variant, options: [.fragmentsAllowed]),
                    as: UTF8.self))
        }
        found += [
            .string("garbage"), .string(""), .int(3), .data(Data(text.utf8)), .data(Data("{\"value\": \(text)}".utf8)),
            .data(Data("{\"value\": 5}".utf8)), .string("\"\(text)\""), .string(#"{"size": 1.5}"#),
            .string(#"{"size": 99999999999999999999}"#), .string(#"{"inner": {"level": 300}}"#),
            .string(#"{"inner": {"level": -1}}"#), .string(#"{"layers": [{}]}"#), .string(#"{"layers": [{}, {}]}"#),
            .dictionary(["size": .int(4)]), .dictionary(["size": .string("x")]),
        ]
        return found
    }

    @Test func aStructsShapeReadsExactlyWhatTheStructReads() throws {
        let key = PrefKey("settings", default: Settings())
        let shape = try #require(key.describe().shape)
        guard case .object(let members) = shape else {
            Issue.record("\(shape)")
            return
        }
        #expect(
            members.map(\.name) == [
                "size", "name", "ratio", "tags", "inner", "flags", "when", "limit", "mode", "layers",
            ])
        #expect(members.first { $0.name == "limit" }?.isOptional == true)
        #expect(members.first { $0.name == "tags" }?.shape == .array(.leaf(.string)))
        #expect(members.first { $0.name == "flags" }?.shape == .dictionary(.leaf(.bool)))
        #expect(members.first { $0.name == "mode" }?.shape == .choices(.string, [.string("fast"), .string("slow")]))
        #expect(
            members.first { $0.name == "inner" }?.shape
                == .object([.init("level", .leaf(.uint8)), .init("enabled", .leaf(.bool), isOptional: true)]))
        let stored = try variants(of: key)
        #expect(stored.count > 200)
        try compare(key, stored)
        try compare(PrefKey<Settings?>("optional", default: nil), stored + [.string("null")])
    }

    enum Level: Int, Codable, CaseIterable, Sendable {
        case low = 1
        case high = 5
    }

    /// Every width of number, required and optional, and an enum with integer raw values.
    struct Widths: Codable, Equatable, Sendable {
        var a: Int8 = 1
        var b: Int16 = 1
        var c: Int32 = 1
        var d: Int64 = 1
        var e: UInt = 1
        var f: UInt8 = 1
        var g: UInt16 = 1
        var h: UInt32 = 1
        var i: UInt64 = 1
        var j: Float = 1
        var k: Bool = true
        var l: Double = 1
        var level = Level.low
        var oa: Int8?
        var ob: Int16?
        var oc: Int32?
        var od: Int64?
        var oe: UInt?
        var of: UInt8?
        var og: UInt16?
        var oh: UInt32?
        var oi: UInt64?
        var oj: Float?
        var ok: Bool?
        var ol: Double?
        var om: Int?
        var on: String?
        var site = URL(string: "https://example.com")!
        var bytes = Data([1])
        var id = UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!
    }

    @Test func everyWidthOfNumberReadsAsItsTypeReads() throws {
        let key = PrefKey("widths", default: Widths())
        let description = key.describe()
        let shape = try #require(description.shape)
        guard case .object(let members) = shape else {
            Issue.record("\(shape)")
            return
        }
        #expect(members.count == 30 && members.filter(\.isOptional).count == 14)
        let text = try #require(
            description.defaultValue.flatMap { value -> String? in
                if case .string(let text) = value { return text }
                return nil
            })
        let tree = try JSONSerialization.jsonObject(with: Data(text.utf8))
        let stored = try shape.variants(of: tree, at: "").map { variant, _ in
            PrefValue.string(
                String(
                    decoding: try JSONSerialization.data(withJSONObject: variant, options: [.fragmentsAllowed]),
                    as: UTF8.self))
        }
        try compare(key, stored)
    }

    @Test func nativeShapesReadExactlyWhatTheirTypesRead() throws {
        let texts: [PrefValue] = [
            .string("5"), .string("5.5"), .string("abc"), .string("yes"), .string("[\"a\", \"b\"]"), .string("[1]"),
            .string("{\"a\": 1}"), .string("2024-05-01T12:00:00Z"), .string("\"dark\""), .string("fast"),
        ]
        let values: [PrefValue] =
            texts + [
                .int(5), .int(20), .int(300), .int(-1), .double(5.5), .double(5), .float(2), .bool(true),
                .date(Date(timeIntervalSinceReferenceDate: 5)), .data(Data([1, 2])), .unsignedInt(.max),
                .array([.string("a")]), .array([.string("a"), .int(1)]), .array([]), .dictionary(["a": .int(1)]),
                .dictionary(["a": .string("b")]), .data(Data("{\"value\": 5}".utf8)),
                .data(Data("{\"value\":null}".utf8)),
            ]
        try compare(PrefKey("size", default: 13, schema: .init(range: 8...72)), values)
        try compare(PrefKey("small", default: UInt8(1)), values)
        try compare(PrefKey("ratio", default: 0.5), values)
        try compare(PrefKey("flag", default: false), values)
        try compare(PrefKey("tags", default: [String]()), values)
        try compare(PrefKey("counts", default: [String: Int]()), values)
        try compare(PrefKey("unique", default: Set<String>()), values)
        try compare(PrefKey<Date?>("when"), values)
        try compare(PrefKey<Int?>("limit", schema: .init(range: 1...9)), values)
        try compare(PrefKey("mode", default: Mode.fast), values)
        try compare(PrefKey<Mode?>("maybeMode"), values)
        try compare(PrefKey("site", default: URL(string: "https://example.com")!), values)
    }

    /// A colour whose own decoding refuses text its one member allows.
    struct Colour: Codable, Equatable, Sendable {
        var hex = "#000000"
        init() {}
        init(from decoder: any Decoder) throws {
            hex = try decoder.singleValueContainer().decode(String.self)
            guard hex.hasPrefix("#") else {
                throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "not a colour"))
            }
        }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(hex)
        }
    }

    /// A struct whose own decoding fills a missing member itself, and one that reads its members as a list.
    struct Lenient: Codable, Equatable, Sendable {
        var size = 1
        init() {}
        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            size = (try? container.decode(Int.self, forKey: .size)) ?? 1
        }
    }

    struct Pair: Codable, Equatable, Sendable {
        var first = 1
        var second = 2
        init() {}
        init(from decoder: any Decoder) throws {
            var list = try decoder.unkeyedContainer()
            first = try list.decode(Int.self)
            second = try list.decode(Int.self)
        }
        func encode(to encoder: any Encoder) throws {
            var list = encoder.unkeyedContainer()
            try list.encode(first)
            try list.encode(second)
        }
    }

    final class Node: Codable, Equatable, @unchecked Sendable {
        var children: [Node] = []
        static func == (lhs: Node, rhs: Node) -> Bool { lhs.children == rhs.children }
    }

    enum Plain: String, Codable, Sendable {
        case a, b
    }

    /// Its own `init(from:)` that reads the same members the same way: as good as the synthesized one.
    struct Mirrored: Codable, Equatable, Sendable {
        var size = 1
        var note: String?
        init() {}
        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            size = try container.decode(Int.self, forKey: .size)
            note = try container.decodeIfPresent(String.self, forKey: .note)
        }
    }

    @Test func whatCannotBeDescribedIsSaidToBe() throws {
        func reason<Value>(_ key: PrefKey<Value>) -> String? { key.describe().shape?.unknownReason }
        #expect(reason(PrefKey("colour", default: Colour()))?.contains("Colour refuses") == true)
        #expect(reason(PrefKey("lenient", default: Lenient()))?.contains("Lenient reads") == true)
        #expect(reason(PrefKey("pair", default: Pair()))?.contains("a list of its own") == true)
        #expect(reason(PrefKey("node", default: Node()))?.contains("contains itself") == true)
        #expect(reason(PrefKey("plain", default: Plain.a))?.contains("not CaseIterable") == true)
        #expect(reason(PrefKey("mirrored", default: Mirrored())) == nil)
        let colour = PrefKey("colour", default: Colour()).describe()
        guard case .unknown = colour.read(.string("\"red\"")) else {
            Issue.record("a value of a type that cannot be described is not passed")
            return
        }
        try compare(
            PrefKey("mirrored", default: Mirrored()),
            [
                .string(#"{"size": 2}"#), .string(#"{"note": "x"}"#), .string(#"{"size": "x"}"#), .string("{}"),
            ])
    }

    /// The route and shape survive the schema file, and a form a later Prefs writes reads as unknown.
    @Test func routesAndShapesSurviveTheSchemaFile() throws {
        let described = PrefKey("settings", default: Settings()).describe()
        let schema = DomainSchema(
            domain: "d", keys: ["settings": described, "size": PrefKey("size", default: 1).describe()])
        let read = try DomainSchema(document: try schema.jsonDocument(), path: "test")
        #expect(read == schema)
        let later = #"""
            {"format": "prefs-schema", "version": 1, "domain": "d", "keys": {
              "a": {"type": "string", "read": {"form": "holographic"}, "shape": "String"},
              "b": {"type": "string", "read": {"form": "json"}, "shape": {"tensor": "String"}},
              "c": {"type": "string", "read": {"form": "json"}, "shape": "Quaternion"}}}
            """#
        let keys = try DomainSchema(document: Data(later.utf8), path: "test").keys
        for name in ["a", "b", "c"] {
            guard case .unknown = keys[name]?.read(.string("x")) else {
                Issue.record("\(name): \(String(describing: keys[name]))")
                continue
            }
        }
    }
}
