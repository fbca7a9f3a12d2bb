import Foundation
import Testing

@testable import Prefs

/// A small deterministic generator so that fuzz runs are reproducible.
private struct SplitMix64 {
    var state: UInt64

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var mixed = state
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return mixed ^ (mixed >> 31)
    }

    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
}

/// Applies one to four random truncations, bit flips, insertions, overwrites or deletions.
private func mutate(_ original: [UInt8], _ random: inout SplitMix64) -> [UInt8] {
    var bytes = original
    for _ in 0..<(1 + random.below(4)) {
        switch random.below(5) {
        case 0: bytes = Array(bytes.prefix(random.below(bytes.count + 1)))
        case 1 where !bytes.isEmpty: bytes[random.below(bytes.count)] ^= UInt8(1) << random.below(8)
        case 2: bytes.insert(UInt8(truncatingIfNeeded: random.next()), at: random.below(bytes.count + 1))
        case 3 where !bytes.isEmpty: bytes[random.below(bytes.count)] = UInt8(truncatingIfNeeded: random.next())
        case 4 where !bytes.isEmpty: bytes.remove(at: random.below(bytes.count))
        default: break
        }
    }
    return bytes
}

/// Equality that also tells `-0.0` from `0.0` and compares floats by bit pattern.
private func identical(_ lhs: PrefValue, _ rhs: PrefValue) -> Bool {
    switch (lhs, rhs) {
    case (.float(let left), .float(let right)): left.bitPattern == right.bitPattern
    case (.double(let left), .double(let right)): left.bitPattern == right.bitPattern
    case (.date(let left), .date(let right)):
        left.timeIntervalSinceReferenceDate.bitPattern == right.timeIntervalSinceReferenceDate.bitPattern
    case (.array(let left), .array(let right)):
        left.count == right.count && zip(left, right).allSatisfy { identical($0, $1) }
    case (.dictionary(let left), .dictionary(let right)):
        left.count == right.count && left.allSatisfy { key, value in right[key].map { identical(value, $0) } ?? false }
    default: lhs == rhs
    }
}

private func isCorruptFile(_ error: PrefsError) -> Bool {
    if case .corruptFile = error { return true }
    return false
}

/// Every kind of value, with the edge cases that lossy formats get wrong.
private let sampleStore: [String: PrefValue] = [
    "boolTrue": .bool(true),
    "boolFalse": .bool(false),
    "zero": .int(0),
    "one": .int(1),
    "intMin": .int(.min),
    "intMax": .int(.max),
    "unsignedMax": .unsignedInt(.max),
    "unsignedJustAbove": .unsignedInt(UInt64(Int64.max) + 1),
    "float": .float(0.1),
    "floatSubnormal": .float(.leastNonzeroMagnitude),
    "floatNegativeZero": .float(-0.0),
    "floatMax": .float(.greatestFiniteMagnitude),
    "double": .double(0.1),
    "doubleWhole": .double(3),
    "doubleNegativeZero": .double(-0.0),
    "doubleTiny": .double(.leastNonzeroMagnitude),
    "doubleMax": .double(.greatestFiniteMagnitude),
    "doubleSmall": .double(1e-5),
    "date": .date(Date(timeIntervalSinceReferenceDate: 123456.789)),
    "dateNegative": .date(Date(timeIntervalSinceReferenceDate: -1e9 - 0.125)),
    "dataEmpty": .data(Data()),
    "data": .data(Data([0xCA, 0xFE, 0x00, 0xFF])),
    "stringEmpty": .string(""),
    "stringTricky": .string("nul\u{0}quote\"back\\slash\nnew\ttab\u{1F}\u{7F}"),
    "stringUnicode": .string("héllo 👨‍👩‍👧 \u{2028} 中文"),
    "emptyArray": .array([]),
    "emptyDictionary": .dictionary([:]),
    "nested": .array([.int(1), .array([.string("x"), .dictionary(["a": .float(1.5)])]), .data(Data([1]))]),
    "dictionary": .dictionary(["b": .bool(false), "a": .array([.date(Date(timeIntervalSinceReferenceDate: 0.5))])]),
    "dollarDictionary": .dictionary(["$float": .string("not a tag")]),
    "dollarDictionaryTwo": .dictionary(["$a": .int(1), "$b": .int(2)]),
    "$topLevelDollar": .int(7),
    "$dict": .float(0.5),
    "$float": .dictionary(["$data": .string("x")]),
    "nestedTags": .dictionary(["$dict": .dictionary(["$float": .int(1)]), "b": .int(1)]),
    "wrappedWrapper": .dictionary(["$dict": .dictionary(["$dict": .data(Data([9]))])]),
    "": .string("empty key"),
]

struct FormatTests {
    // MARK: JSON

    @Test func jsonRoundTripIsExact() throws {
        let data = try JSONFormat.encode(sampleStore)
        let decoded = try JSONFormat.decode(data, path: "test.json")
        #expect(identical(.dictionary(decoded), .dictionary(sampleStore)))
        // Encoding is deterministic.
        #expect(try JSONFormat.encode(decoded) == data)
    }

    @Test func jsonOutputShape() throws {
        let store: [String: PrefValue] = [
            "b": .array([.int(1), .double(2.5), .unsignedInt(.max)]),
            "a": .dictionary(["x": .float(0.5), "$y": .bool(true)]),
            "c": .string("é\u{1}"),
            "d": .date(Date(timeIntervalSinceReferenceDate: 1e-5)),
            "e": .dictionary(["$only": .array([])]),
            "f": .data(Data([1, 2, 3])),
            "g": .dictionary([:]),
        ]
        let text = String(decoding: try JSONFormat.encode(store), as: UTF8.self)
        let expected = """
            {
              "a": {
                "$y": true,
                "x": {
                  "$float": 0.5
                }
              },
              "b": [
                1,
                2.5,
                18446744073709551615
              ],
              "c": "é\\u0001",
              "d": {
                "$date": 1e-05
              },
              "e": {
                "$dict": {
                  "$only": []
                }
              },
              "f": {
                "$data": "AQID"
              },
              "g": {}
            }

            """
        #expect(text == expected)
        #expect(String(decoding: try JSONFormat.encode([:]), as: UTF8.self) == "{}\n")
    }

    @Test func jsonRandomFloatAndDoubleBitPatternsRoundTrip() throws {
        var random = SplitMix64(state: 7)
        var store: [String: PrefValue] = [:]
        for index in 0..<2000 {
            let float = Float(bitPattern: UInt32(truncatingIfNeeded: random.next()))
            let double = Double(bitPattern: random.next())
            if float.isFinite { store["f\(index)"] = .float(float) }
            if double.isFinite { store["d\(index)"] = .double(double) }
        }
        let decoded = try JSONFormat.decode(try JSONFormat.encode(store), path: "bits.json")
        #expect(identical(.dictionary(decoded), .dictionary(store)))
    }

    @Test(arguments: [
        PrefValue.double(.infinity), .double(-.infinity), .double(.nan), .float(.nan), .float(.infinity),
        .date(Date(timeIntervalSinceReferenceDate: .infinity)), .array([.double(.nan)]),
        .dictionary(["inner": .double(.nan)]),
    ])
    func jsonRejectsNonFiniteNumbers(value: PrefValue) {
        #expect(throws: PrefsError.self) { _ = try JSONFormat.encode(["key": value]) }
        do {
            _ = try JSONFormat.encode(["key": value])
        } catch {
            guard case .encodingFailed(let key, _) = error else {
                Issue.record("unexpected error \(error)")
                return
            }
            #expect(key == "key")
        }
    }

    @Test func jsonNumberKinds() throws {
        let text = """
            {"a": 0, "b": -0, "c": 9223372036854775807, "d": -9223372036854775808, "e": 9223372036854775808,
             "f": 18446744073709551615, "g": 18446744073709551616, "h": -9223372036854775809, "i": 1.0,
             "j": 1E2, "k": 1e-400, "l": -0.0, "m": {"$date": 5}}
            """
        let values = try JSONFormat.decode(Data(text.utf8), path: "n.json")
        #expect(values["a"] == .int(0))
        #expect(values["b"] == .int(0))
        #expect(values["c"] == .int(.max))
        #expect(values["d"] == .int(.min))
        #expect(values["e"] == .unsignedInt(UInt64(Int64.max) + 1))
        #expect(values["f"] == .unsignedInt(.max))
        #expect(values["g"] == .double(18446744073709551616))
        #expect(values["h"] == .double(Double("-9223372036854775809")!))
        #expect(values["i"] == .double(1))
        #expect(values["j"] == .double(100))
        #expect(values["k"] == .double(0))
        #expect(values["l"].map { identical($0, .double(-0.0)) } == true)
        #expect(values["m"] == .date(Date(timeIntervalSinceReferenceDate: 5)))
    }

    @Test func jsonStringEscapes() throws {
        let text = #"{"s": "\"\\\/\b\f\n\r\t\u0000\u00e9\uD83D\uDE00😀"}"#
        let values = try JSONFormat.decode(Data(text.utf8), path: "s.json")
        #expect(values["s"] == .string("\"\\/\u{8}\u{C}\n\r\t\u{0}é😀😀"))
    }

    @Test(arguments: [
        "", " ", "[]", "1", "\"x\"", "null", "{", "}", "{\"a\":1,}", "{\"a\":1} x", "{\"a\":[1,]}", "{\"a\" 1}",
        "{a:1}", "{'a':1}", "{\"a\":01}", "{\"a\":-}", "{\"a\":1.}", "{\"a\":.5}", "{\"a\":1e}", "{\"a\":+1}",
        "{\"a\":0x10}", "{\"a\":NaN}", "{\"a\":Infinity}", "{\"a\":1e400}", "{\"a\":-1e400}", "{\"a\":null}",
        "{\"a\":tru}", "{\"a\":True}", "// c\n{}", "{/* c */}", "{\"a\":1,\"a\":2}", "{\"a\":\"\\ud800\"}",
        "{\"a\":\"\\udc00\"}", "{\"a\":\"\\ud800\\u0041\"}", "{\"a\":\"\\x41\"}", "{\"a\":\"\\u12\"}",
        "{\"a\":\"\\u12G4\"}", "{\"a\":\"tab\there\"}", "{\"a\":\"line\nbreak\"}", "{\"a\":\"unterminated}",
        "\u{FEFF}{}", "{\"a\":{\"$float\":0.1}}", "{\"a\":{\"$float\":\"x\"}}", "{\"a\":{\"$date\":\"x\"}}",
        "{\"a\":{\"$data\":\"!!\"}}", "{\"a\":{\"$data\":1}}", "{\"a\":{\"$dict\":{\"b\":1}}}", "{\"a\":{\"$what\":1}}",
        "{\"a\":{\"$float\":1}}", "{\"a\":1}\u{0}", "{\"a\"\u{0}:1}",
    ])
    func jsonRejectsMalformedDocuments(text: String) {
        do {
            let values = try JSONFormat.decode(Data(text.utf8), path: "bad.json")
            Issue.record("accepted \(String(reflecting: text)) as \(values)")
        } catch {
            guard case .corruptFile(let path, let reason) = error else {
                Issue.record("unexpected error \(error)")
                return
            }
            #expect(path == "bad.json")
            #expect(reason.contains("byte offset"))
        }
    }

    @Test func jsonRejectsInvalidUTF8() {
        for bytes: [UInt8] in [
            [0x7B, 0x22, 0xFF, 0x22, 0x3A, 0x31, 0x7D],  // {"\xFF":1}
            Array(#"{"a":""#.utf8) + [0xC3] + Array(#""}"#.utf8),  // truncated sequence
            Array(#"{"a":""#.utf8) + [0xED, 0xA0, 0x80] + Array(#""}"#.utf8),  // encoded surrogate
            Array(#"{"a":""#.utf8) + [0xC0, 0xAF] + Array(#""}"#.utf8),  // overlong
            [0xFF, 0xFE, 0x7B, 0x00, 0x7D, 0x00],  // UTF-16
        ] {
            #expect(throws: PrefsError.self) { _ = try JSONFormat.decode(Data(bytes), path: "u.json") }
        }
    }

    @Test func jsonDepthLimit() throws {
        func nested(_ depth: Int) -> Data {
            Data(("{\"a\":" + String(repeating: "[", count: depth - 1) + String(repeating: "]", count: depth - 1) + "}").utf8)
        }
        #expect(try JSONFormat.decode(nested(512), path: "deep.json")["a"] != nil)
        #expect(throws: PrefsError.self) { _ = try JSONFormat.decode(nested(513), path: "deep.json") }
        #expect(throws: PrefsError.self) { _ = try JSONFormat.decode(nested(100_000), path: "deep.json") }

        var value = PrefValue.int(1)
        for _ in 0..<511 { value = .array([value]) }
        let encoded = try JSONFormat.encode(["a": value])
        #expect(identical(try JSONFormat.decode(encoded, path: "deep.json")["a"]!, value))
        #expect(throws: PrefsError.self) { _ = try JSONFormat.encode(["a": .array([value])]) }
    }

    @Test func jsonLargeDocument() throws {
        var store: [String: PrefValue] = [:]
        for index in 0..<20000 {
            store["key\(index)"] = .array([.int(Int64(index)), .string("value \(index)"), .double(Double(index) / 7)])
        }
        let decoded = try JSONFormat.decode(try JSONFormat.encode(store), path: "big.json")
        #expect(decoded == store)
    }

    @Test func jsonSingleValues() throws {
        #expect(try JSONFormat.encodeValue(.array([.int(1), .float(0.5)])) == #"[1, {"$float": 0.5}]"#)
        #expect(try JSONFormat.encodeValue(.dictionary(["b": .bool(true), "a": .string("x")])) == #"{"a": "x", "b": true}"#)
        #expect(try JSONFormat.encodeValue(.string("dark")) == #""dark""#)
        for value in sampleStore.values {
            #expect(identical(try JSONFormat.decodeValue(try JSONFormat.encodeValue(value)), value))
        }
        #expect(try JSONFormat.decodeValue(" 42 ") == .int(42))
        #expect(throws: PrefsError.decodingFailed(key: "k", reason: "invalid JSON value: unexpected end of input, expected a value at byte offset 0")) {
            _ = try JSONFormat.decodeValue("", key: "k")
        }
        #expect(throws: PrefsError.self) { _ = try JSONFormat.decodeValue("dark") }
        #expect(throws: PrefsError.self) { _ = try JSONFormat.encodeValue(.double(.nan)) }
    }

    @Test func jsonMutationFuzzNeverCrashes() throws {
        let seeds: [[UInt8]] = [
            Array(try JSONFormat.encode(sampleStore)),
            Array(#"{"a":[1,2.5e-3,{"b":"\u00e9\ud83d\ude00"}],"c":{"$data":"AQID"},"d":-0}"#.utf8),
            Array(#"{"x":{"$float":0.5},"y":{"$date":1.5},"z":{"$dict":{"$q":[]}}}"#.utf8),
        ]
        var random = SplitMix64(state: 0x5EED)
        var accepted = 0
        for _ in 0..<20000 {
            let input = mutate(seeds[random.below(seeds.count)], &random)
            do {
                let values = try JSONFormat.decode(Data(input), path: "fuzz.json")
                accepted += 1
                // Whatever is accepted must re-encode and decode to the same values.
                let again = try JSONFormat.decode(try JSONFormat.encode(values), path: "again.json")
                #expect(identical(.dictionary(again), .dictionary(values)))
            } catch {
                #expect(isCorruptFile(error), "unexpected error \(error)")
            }
        }
        #expect(accepted > 0)
    }
}
