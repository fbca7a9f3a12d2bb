import Foundation
import PrefsTestSupport
import TestThreads
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

/// `PREFS_FUZZ_ITERATIONS=1000000 PREFS_FUZZ_SEED=42 swift test --filter FormatTests` runs longer fuzz campaigns.
/// `make test` runs a short fuzz of each decoder; `make reliability` runs each with `PREFS_FUZZ_ITERATIONS=10000` (`make soak`: 400000).
private let fuzzIterations = ProcessInfo.processInfo.environment["PREFS_FUZZ_ITERATIONS"].flatMap { Int($0) }
private let fuzzSeed = ProcessInfo.processInfo.environment["PREFS_FUZZ_SEED"].flatMap { UInt64($0) }

/// Equality that also tells `-0.0` from `0.0` and compares floats by bit pattern.
private func identical(_ lhs: PrefValue, _ rhs: PrefValue) -> Bool {
    switch (lhs, rhs) {
    // Bit for bit, so -0.0 is not 0.0; but a NaN is any NaN, of either width: CoreFoundation keeps a single NaN, a
    // double, and hands it out for every NaN it reads, whatever its payload or size.
    case (.float(let left), .float(let right)): left.bitPattern == right.bitPattern || (left.isNaN && right.isNaN)
    case (.double(let left), .double(let right)): left.bitPattern == right.bitPattern || (left.isNaN && right.isNaN)
    case (.float(let left), .double(let right)), (.double(let right), .float(let left)): left.isNaN && right.isNaN
    case (.date(let left), .date(let right)):
        left.timeIntervalSinceReferenceDate.bitPattern == right.timeIntervalSinceReferenceDate.bitPattern
    case (.array(let left), .array(let right)):
        left.count == right.count && zip(left, right).allSatisfy { identical($0, $1) }
    case (.dictionary(let left), .dictionary(let right)):
        left.count == right.count && left.allSatisfy { key, value in right[key].map { identical(value, $0) } ?? false }
    default: lhs == rhs
    }
}

/// A value and its kind, so a failure tells `.float(nan)` from `.double(nan)`.
private func describe(_ value: PrefValue?) -> String {
    guard let value else { return "absent" }
    return "\(Mirror(reflecting: value).children.first?.label ?? "value")(\(value))"
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

@Suite(.ownThreads)
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
        PrefValue.date(Date(timeIntervalSinceReferenceDate: .infinity)),
        .array([.date(Date(timeIntervalSinceReferenceDate: -.infinity))]),
    ])
    func jsonRejectsNonFiniteDates(value: PrefValue) {
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
             "f": 18446744073709551615, "g": 18446744073709551616.0, "h": -9223372036854775809e0, "i": 1.0,
             "j": 1E2, "k": 1e-400, "l": -0.0, "m": {"$date": 5}}
            """
        let values = try JSONFormat.decode(Data(text.utf8), path: "n.json")
        #expect(values["a"] == .int(0))
        #expect(values["b"] == .int(0))
        #expect(values["c"] == .int(.max))
        #expect(values["d"] == .int(.min))
        #expect(values["e"] == .unsignedInt(UInt64(Int64.max) + 1))
        #expect(values["f"] == .unsignedInt(.max))
        #expect(values["g"] == .double(18_446_744_073_709_551_616))
        #expect(values["h"] == .double(Double("-9223372036854775809")!))
        #expect(values["i"] == .double(1))
        #expect(values["j"] == .double(100))
        #expect(values["k"] == .double(0))
        #expect(values["l"].map { identical($0, .double(-0.0)) } == true)
        #expect(values["m"] == .date(Date(timeIntervalSinceReferenceDate: 5)))
    }

    /// An integer no 64-bit kind holds is refused, not read as the nearest double.
    @Test(arguments: ["18446744073709551616", "-9223372036854775809", "123456789012345678901234567890"])
    func jsonIntegersThatDoNotFitAreRefused(_ number: String) {
        #expect(throws: PrefsError.self) { try JSONFormat.decode(Data(#"{"n": \#(number)}"#.utf8), path: "n.json") }
        #expect(throws: PrefsError.self) { try JSONFormat.decodeValue(number) }
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
            Data(
                ("{\"a\":" + String(repeating: "[", count: depth - 1) + String(repeating: "]", count: depth - 1) + "}")
                    .utf8)
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
        #expect(
            try JSONFormat.encodeValue(.dictionary(["b": .bool(true), "a": .string("x")])) == #"{"a": "x", "b": true}"#)
        #expect(try JSONFormat.encodeValue(.string("dark")) == #""dark""#)
        for value in sampleStore.values {
            #expect(identical(try JSONFormat.decodeValue(try JSONFormat.encodeValue(value)), value))
        }
        #expect(try JSONFormat.decodeValue(" 42 ") == .int(42))
        #expect(
            throws: PrefsError.decodingFailed(
                key: "k", reason: "invalid JSON value: unexpected end of input, expected a value at byte offset 0")
        ) {
            _ = try JSONFormat.decodeValue("", key: "k")
        }
        #expect(throws: PrefsError.self) { _ = try JSONFormat.decodeValue("dark") }
        #expect(try JSONFormat.encodeValue(.double(-.infinity)) == #"{"$double": "-inf"}"#)
        #expect(try JSONFormat.decodeValue(#"{"$float": "inf"}"#) == .float(.infinity))
        #expect(throws: PrefsError.self) { _ = try JSONFormat.decodeValue(#"{"$double": "infinite"}"#) }
    }

    @Test func jsonMutationFuzzNeverCrashes() throws {
        let seeds: [[UInt8]] = [
            Array(try JSONFormat.encode(sampleStore)),
            Array(#"{"a":[1,2.5e-3,{"b":"\u00e9\ud83d\ude00"}],"c":{"$data":"AQID"},"d":-0}"#.utf8),
            Array(#"{"x":{"$float":0.5},"y":{"$date":1.5},"z":{"$dict":{"$q":[]}}}"#.utf8),
        ]
        var random = SplitMix64(state: fuzzSeed ?? 0x5EED)
        var accepted = 0
        for _ in 0..<(fuzzIterations ?? 4000) {
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

    // MARK: Property list

    @Test func plistRoundTripIsExact() throws {
        let data = try PropertyListFormat.encode(sampleStore)
        #expect(data.starts(with: Array("bplist00".utf8)))
        let decoded = try PropertyListFormat.decode(data, path: "test.plist")
        #expect(identical(.dictionary(decoded), .dictionary(sampleStore)))
        #expect(decoded["float"] == .float(0.1))
        #expect(decoded["unsignedMax"] == .unsignedInt(.max))
        #expect(decoded["one"] == .int(1))
        #expect(decoded["boolTrue"] == .bool(true))
    }

    @Test func plistEmptyStore() throws {
        let data = try PropertyListFormat.encode([:])
        #expect(try PropertyListFormat.decode(data, path: "empty.plist").isEmpty)
    }

    @Test func plistReadsFoundationXML() throws {
        let plist = sampleStore.mapValues { FoundationBridge.object($0) }
        let xml = try PropertyListSerialization.data(fromPropertyList: plist, format: .xml, options: 0)
        let decoded = try PropertyListFormat.decode(xml, path: "xml.plist")
        #expect(Set(decoded.keys) == Set(sampleStore.keys))
        #expect(decoded["intMin"] == .int(.min))
        #expect(decoded["unsignedMax"] == .unsignedInt(.max))
        #expect(decoded["boolFalse"] == .bool(false))
        #expect(decoded["zero"] == .int(0))
        #expect(decoded["data"] == sampleStore["data"])
        #expect(decoded["stringUnicode"] == sampleStore["stringUnicode"])
        // Foundation's XML writer keeps floats as <real> doubles, which are read as the floats they were.
        #expect(decoded["float"] == .float(0.1))
        #expect(decoded["floatSubnormal"] == .float(.leastNonzeroMagnitude))
        #expect(try Double(prefValue: decoded["doubleTiny"]!) == .leastNonzeroMagnitude)
    }

    @Test func plistFoundationMapping() {
        #expect(FoundationBridge.value(true) == .bool(true))
        #expect(FoundationBridge.value(NSNumber(value: false)) == .bool(false))
        #expect(FoundationBridge.value(NSNumber(value: 1)) == .int(1))
        #expect(FoundationBridge.value(1) == .int(1))
        #expect(FoundationBridge.value(NSNumber(value: UInt64.max)) == .unsignedInt(.max))
        #expect(FoundationBridge.value(NSNumber(value: Float(1.5))) == .float(1.5))
        #expect(FoundationBridge.value(NSNumber(value: 1.5)) == .double(1.5))
        #expect(FoundationBridge.value(Double(1)) == .double(1))
        #expect(
            FoundationBridge.value(["a": [1, "b"]] as [String: Any])
                == .dictionary(["a": .array([.int(1), .string("b")])]))
        #expect(FoundationBridge.value([1: "a"] as [AnyHashable: Any]) == nil)
        #expect(FoundationBridge.value(NSNull()) == nil)
        let optionals: [Any?] = [true, Int64(2), nil]
        #expect(FoundationBridge.value(Array(optionals.prefix(2)) as Any) == .array([.bool(true), .int(2)]))
        #expect(FoundationBridge.value(optionals as Any) == nil)
        for value in sampleStore.values {
            #expect(
                FoundationBridge.value(FoundationBridge.object(value)).map { identical($0, value) }
                    == true)
        }
    }

    @Test func plistRejectsCorruptFiles() throws {
        let valid = try PropertyListFormat.encode(["a": .array([.string("x"), .string("y")])])
        var inputs: [Data] = [
            Data(), Data("garbage".utf8), Data("{ a = b; }".utf8), Data("<plist><array/></plist>".utf8),
            valid.prefix(valid.count / 2), valid.prefix(8), Data("bplist00".utf8),
            try PropertyListSerialization.data(fromPropertyList: ["a"], format: .binary, options: 0),
            try PropertyListSerialization.data(fromPropertyList: "text", format: .xml, options: 0),
        ]
        // A set: Foundation on Linux crashes bridging this one if it gets to parse it.
        inputs.append(binaryPlist([[0xD1, 1, 2], [0x51, 0x6B], [0xC2, 3, 4], [0x51, 0x78], [0x51, 0x79]]))
        // A cycle.
        inputs.append(binaryPlist([[0xD1, 1, 2], [0x51, 0x6B], [0xA1, 2]]))
        // A non-string key.
        inputs.append(binaryPlist([[0xD1, 1, 2], [0x10, 0x01], [0x09]]))
        // Shared arrays that would expand to 2^60 values.
        var laughs: [[UInt8]] = [[0xD1, 1, 2], [0x51, 0x6B]]
        for index in 2..<62 { laughs.append([0xA2, UInt8(index + 1), UInt8(index + 1)]) }
        laughs.append([0x09])
        inputs.append(binaryPlist(laughs))
        // A reference past the object table.
        inputs.append(binaryPlist([[0xD1, 1, 9], [0x51, 0x6B]]))
        for input in inputs {
            #expect(throws: PrefsError.self) { _ = try PropertyListFormat.decode(input, path: "bad.plist") }
            do {
                _ = try PropertyListFormat.decode(input, path: "bad.plist")
            } catch {
                #expect(isCorruptFile(error))
            }
        }
        // The hand-built writer itself produces files Foundation reads.
        let good = binaryPlist([[0xD2, 1, 2, 3, 4], [0x51, 0x6B], [0x51, 0x6C], [0xA2, 4, 4], [0x09]])
        #expect(
            try PropertyListFormat.decode(good, path: "good.plist") == [
                "k": .array([.bool(true), .bool(true)]), "l": .bool(true),
            ])
    }

    @Test func plistMutationFuzzNeverCrashes() throws {
        let seed = Array(try PropertyListFormat.encode(sampleStore))
        let xmlSeed = Array(
            try PropertyListSerialization.data(
                fromPropertyList: ["a": [1, "b", ["c": 2.5]] as [Any], "d": Data([1])] as [String: Any],
                format: .xml, options: 0))
        var random = SplitMix64(state: fuzzSeed ?? 0xB1157)
        for index in 0..<(fuzzIterations ?? 800) {
            let input = mutate(index % 4 == 0 ? xmlSeed : seed, &random)
            do {
                _ = try PropertyListFormat.decode(Data(input), path: "fuzz.plist")
            } catch {
                #expect(isCorruptFile(error))
            }
        }
    }
}

/// A binary property list with one-byte offsets and references, built by hand to describe malformed graphs.
private func binaryPlist(_ objects: [[UInt8]], top: UInt64 = 0) -> Data {
    var bytes = Array("bplist00".utf8)
    var offsets: [UInt8] = []
    for object in objects {
        offsets.append(UInt8(bytes.count))
        bytes += object
    }
    let table = UInt64(bytes.count)
    bytes += offsets
    bytes += [0, 0, 0, 0, 0, 0, 1, 1]
    for field in [UInt64(objects.count), top, table] {
        bytes += (0..<8).reversed().map { UInt8(truncatingIfNeeded: field >> (8 * $0)) }
    }
    return Data(bytes)
}

// MARK: - Binary property-list writer

/// Values that exercise every branch of the binary property-list writer: each kind, integer and length boundaries,
/// counts of 15 and more, non-ASCII text and enough objects for 2-byte references and 4-byte offsets.
private let writerEdgeCases: [String: PrefValue] = {
    var values: [String: PrefValue] = [
        "ints": .array(
            [0, 1, 14, 15, 16, 255, 256, 65_535, 65_536, 4_294_967_295, 4_294_967_296, -1, -256, .min, .max].map {
                PrefValue.int($0)
            }),
        "unsigned": .array([.unsignedInt(UInt64(Int64.max) + 1), .unsignedInt(.max)]),
        "reals": .array([
            .float(-0.0), .float(.greatestFiniteMagnitude), .float(.leastNonzeroMagnitude), .float(1.5),
            .double(-0.0), .double(.greatestFiniteMagnitude), .double(.leastNonzeroMagnitude), .double(1e-300),
        ]),
        "dates": .array([
            .date(Date(timeIntervalSinceReferenceDate: 0)), .date(Date(timeIntervalSinceReferenceDate: -1.25e9)),
            .date(Date(timeIntervalSinceReferenceDate: 7.123456789)),
        ]),
        "data": .array(
            [14, 15, 16, 255, 256, 70_000].map { .data(Data((0..<$0).map { UInt8(truncatingIfNeeded: $0) })) }),
        "ascii": .array([14, 15, 16, 300, 70_000].map { .string(String(repeating: "a", count: $0)) }),
        "nonASCII": .array([
            .string("é"), .string("€uro"), .string("👋🏽 emoji"), .string("👨‍👩‍👧"), .string("中文テキスト"),
            .string(String(repeating: "ü", count: 15)), .string(String(repeating: "🙂", count: 40)),
            .string("\u{7F}\u{80}"),
        ]),
        "asciiControl": .string("nul\u{0}tab\t\u{7F}"),
        "emptyString": .string(""),
        "emptyArray": .array([]),
        "emptyDictionary": .dictionary([:]),
        "emptyData": .data(Data()),
        "nestedEmpty": .array([.array([]), .dictionary([:]), .array([.dictionary(["": .array([])])])]),
        "sharedStrings": .array([.string("same"), .string("same"), .dictionary(["same": .string("same")])]),
        "bigDictionary": .dictionary(
            Dictionary(uniqueKeysWithValues: (0..<20).map { ("key \($0) ✓", PrefValue.int(Int64($0))) })),
        "manyObjects": .array((0..<400).map { .string("element \($0)") }),
        "booleans": .array([.bool(true), .bool(false), .int(0), .int(1), .double(1), .double(0)]),
    ]
    for index in 0..<17 { values["top \(index)"] = .bool(index % 2 == 0) }
    return values
}()

/// A random value tree of at most `depth` levels.
private func randomValue(_ random: inout SplitMix64, depth: Int, ascii: Bool = false) -> PrefValue {
    let kinds = depth > 0 ? 10 : 8
    switch random.below(kinds) {
    case 0: return .bool(random.below(2) == 0)
    case 1:
        let raw = random.next()
        return .int(Int64(bitPattern: raw) >> Int64(random.below(64)))
    case 2: return .exactInteger(random.next() | (random.below(2) == 0 ? 1 << 63 : 0))
    // Finite only: Foundation turns every non-finite number into a canonical double (see the test below).
    case 3: return .float(Float(bitPattern: UInt32(truncatingIfNeeded: random.next()) & 0xBF7F_FFFF))
    case 4: return .double(Double(bitPattern: random.next() & 0xBFEF_FFFF_FFFF_FFFF))
    case 5: return .date(Date(timeIntervalSinceReferenceDate: Double(Int64(bitPattern: random.next()) >> 30) / 1024))
    case 6: return .data(Data((0..<random.below(40)).map { _ in UInt8(truncatingIfNeeded: random.next()) }))
    case 7: return .string(randomString(&random, ascii: ascii))
    case 8: return .array((0..<random.below(20)).map { _ in randomValue(&random, depth: depth - 1, ascii: ascii) })
    default:
        var members: [String: PrefValue] = [:]
        for _ in 0..<random.below(20) {
            members[randomString(&random, ascii: ascii)] = randomValue(&random, depth: depth - 1, ascii: ascii)
        }
        return .dictionary(members)
    }
}

private func randomString(_ random: inout SplitMix64, ascii: Bool = false) -> String {
    let alphabet: [Character] = ["a", "Z", "0", " ", "\u{0}", "\u{7F}", "\n", "é", "€", "中", "👋", "🏽"]
    let letters = ascii ? 7 : alphabet.count
    return String((0..<random.below(24)).map { _ in alphabet[random.below(letters)] })
}

/// What Foundation's own binary reader makes of `data`, bypassing `PropertyListFormat`'s validator.
private func foundationDecode(_ data: Data) throws -> [String: PrefValue]? {
    var format = PropertyListSerialization.PropertyListFormat.xml
    let root = try PropertyListSerialization.propertyList(from: data, options: [], format: &format)
    guard format == .binary, case .dictionary(let values)? = FoundationBridge.value(root) else {
        return nil
    }
    return values
}

extension FormatTests {
    @Test func foundationReadsTheBinaryWriterExactly() throws {
        let data = try BinaryPropertyList.encode(writerEdgeCases)
        #expect(data.starts(with: Array("bplist00".utf8)))
        let decoded = try #require(try foundationDecode(data))
        #expect(identical(.dictionary(decoded), .dictionary(writerEdgeCases)))
        // Through the validator too, and for the sample store.
        #expect(
            identical(.dictionary(try PropertyListFormat.decode(data, path: "w.plist")), .dictionary(writerEdgeCases)))
        let sample = try #require(try foundationDecode(try BinaryPropertyList.encode(sampleStore)))
        #expect(identical(.dictionary(sample), .dictionary(sampleStore)))
        #expect(try foundationDecode(try BinaryPropertyList.encode([:])) == [:])
    }

    @Test func nonFiniteNumbersReadBackAsWithFoundationsOwnWriter() throws {
        let values: [String: PrefValue] = [
            "a": .float(.infinity), "b": .float(-.infinity), "c": .float(.nan), "d": .double(.infinity),
            "e": .double(-.infinity), "f": .double(Double(bitPattern: 0x7FF8_0000_0000_0001)),
        ]
        let ours = try #require(try foundationDecode(try BinaryPropertyList.encode(values)))
        let foundationBytes = try PropertyListSerialization.data(
            fromPropertyList: values.mapValues { FoundationBridge.object($0) }, format: .binary, options: 0)
        let theirs = try #require(try foundationDecode(foundationBytes))
        #expect(identical(.dictionary(ours), .dictionary(theirs)))
        #expect(ours["a"] == .double(.infinity) && ours["b"] == .double(-.infinity))
    }

    @Test func binaryWriterUsesCompactEncodings() throws {
        let bytes = Array(try BinaryPropertyList.encode(["k": .int(300)]))
        // Header, dictionary of one pair, "k", a 2-byte integer, three 1-byte offsets, the trailer.
        #expect(bytes.count == 8 + 3 + 2 + 3 + 3 + 32)
        #expect(Array(bytes[8..<19]) == [0xD1, 1, 2, 0x51, 0x6B, 0x11, 0x01, 0x2C, 8, 11, 13])
        let trailer = Array(bytes.suffix(32))
        #expect(trailer[6] == 1 && trailer[7] == 1)
        // Repeated strings are stored once: two keys, one shared value string.
        let shared = try BinaryPropertyList.encode(["a": .string("v"), "b": .string("v")])
        #expect(shared.suffix(32)[shared.count - 32 + 15] == 4)
        // Booleans and small integers too: a dictionary, its key, the array and one zero (not a million objects).
        let zeros: [String: PrefValue] = [
            "k": .array(Array(repeating: .int(0), count: 1_000) + [.bool(true), .int(256)])
        ]
        let zeroBytes = try BinaryPropertyList.encode(zeros)
        #expect(zeroBytes.suffix(32)[zeroBytes.count - 32 + 15] == 6)
        #expect(try foundationDecode(zeroBytes) == zeros)
        #expect(try PropertyListFormat.decode(zeroBytes, path: "zeros.plist") == zeros)
        // Every offset fits in one byte, but the table starts at 266: Foundation wants 2-byte offsets then.
        let long: [String: PrefValue] = ["k": .string(String(repeating: "x", count: 250))]
        let longBytes = try BinaryPropertyList.encode(long)
        #expect(Array(longBytes.suffix(32))[6] == 2)
        #expect(try foundationDecode(longBytes) == long)
    }

    @Test func binaryWriterRandomValuesRoundTripThroughFoundation() throws {
        var random = SplitMix64(state: fuzzSeed ?? 0xB1_A7_17)
        for _ in 0..<(fuzzIterations.map { $0 / 20 } ?? 300) {
            var values: [String: PrefValue] = [:]
            for _ in 0..<random.below(12) { values[randomString(&random)] = randomValue(&random, depth: 3) }
            let data = try BinaryPropertyList.encode(values)
            let decoded = try #require(try foundationDecode(data))
            #expect(identical(.dictionary(decoded), .dictionary(values)), "\(values)")
            #expect(identical(.dictionary(try PropertyListFormat.decode(data, path: "r.plist")), .dictionary(values)))
        }
    }
}

// MARK: - Vault payload

extension FormatTests {
    private func payloadDecodes(_ bytes: [UInt8]) throws(PrefsError) -> [String: PrefValue] {
        let result = bytes.withUnsafeBytes { buffer in
            Result { () throws(PrefsError) in try VaultPayload.decode(buffer, path: "test.vault") }
        }
        return try result.get()
    }

    /// A vault's payload is a binary property list: every kind round-trips exactly, non-finite numbers and NaN
    /// payloads too (nothing in the payload goes through Foundation).
    @Test func vaultPayloadRoundTripsEveryKindExactly() throws {
        let odd: [String: PrefValue] = [
            "a": .float(.infinity), "b": .float(Float(bitPattern: 0x7FC0_0001)), "c": .double(-.infinity),
            "e": .unsignedInt(.max), "f": .date(.distantPast),
        ]
        for store in [sampleStore, writerEdgeCases, [:], odd] {
            let payload = Array(try VaultPayload.encode(store))
            #expect(BinaryPropertyList.startsWithMagic(payload))
            #expect(identical(.dictionary(try payloadDecodes(payload)), .dictionary(store)))
        }
    }

    /// The payload of a vault of format 2, as abb1d51 wrote it, reads to its values.
    @Test func aFormat2PayloadReads() throws {
        let payload = Array(try Version2Vault.payload())
        #expect(payload.first == VaultPayload.legacyVersion)
        #expect(identical(.dictionary(try payloadDecodes(payload)), .dictionary(Version2Vault.values)))
        // The entries are in no particular order: "b" before "a".
        #expect(
            try payloadDecodes([1, 2, 0, 0, 0, 1, 0, 0, 0, 0x62, 1, 1, 0, 0, 0, 0x61, 0]) == [
                "a": .bool(false), "b": .bool(true),
            ])
    }

    @Test func aFormat2PayloadIsRefusedAtEveryTruncation() throws {
        let full = Array(try Version2Vault.payload())
        for length in 0..<full.count {
            #expect(throws: PrefsError.self) { try payloadDecodes(Array(full.prefix(length))) }
        }
    }

    @Test func aMalformedFormat2PayloadIsRefused() throws {
        let malformed: [(String, [UInt8])] = [
            ("bytes after the payload", [1, 0, 0, 0, 0, 0]),
            ("unknown tag", [1, 1, 0, 0, 0, 1, 0, 0, 0, 0x6B, 11]),
            ("repeated key", [1, 2, 0, 0, 0, 1, 0, 0, 0, 0x6B, 1, 1, 0, 0, 0, 0x6B, 0]),
            ("invalid UTF-8 key", [1, 1, 0, 0, 0, 1, 0, 0, 0, 0xFF, 1]),
            ("invalid UTF-8 value", [1, 1, 0, 0, 0, 1, 0, 0, 0, 0x6B, 7, 2, 0, 0, 0, 0xC3, 0x28]),
            (
                "invalid UTF-8 in a long value",
                [1, 1, 0, 0, 0, 1, 0, 0, 0, 0x6B, 7, 11, 0, 0, 0] + Array("abcdefghi".utf8) + [0xC3, 0x28]
            ),
            ("huge entry count", [1, 0xFF, 0xFF, 0xFF, 0xFF]),
            ("huge array count", [1, 1, 0, 0, 0, 1, 0, 0, 0, 0x6B, 9, 0xFF, 0xFF, 0xFF, 0xFF, 1]),
            ("huge data length", [1, 1, 0, 0, 0, 1, 0, 0, 0, 0x6B, 8, 0xFF, 0xFF, 0xFF, 0x7F, 1]),
            ("empty", []),
        ]
        for (name, bytes) in malformed {
            do {
                _ = try payloadDecodes(bytes)
                Issue.record("\(name) was read")
            } catch {
                #expect(isCorruptFile(error), "\(name): \(error)")
            }
        }
        // Nested one level deeper than a binary property list may be.
        var nested: [UInt8] = [1, 1, 0, 0, 0, 1, 0, 0, 0, 0x6B]
        for _ in 0..<(BinaryPropertyList.maximumDepth - 1) { nested += [9, 1, 0, 0, 0] }
        #expect(try payloadDecodes(nested + [1])["k"] != nil)
        #expect(throws: PrefsError.self) { try payloadDecodes(nested + [9, 1, 0, 0, 0, 1]) }
    }

    @Test func aMutatedFormat2PayloadNeverCrashes() throws {
        let seed = Array(try Version2Vault.payload())
        var random = SplitMix64(state: fuzzSeed ?? 0x5AFE)
        var accepted = 0
        for _ in 0..<(fuzzIterations ?? 800) {
            do {
                _ = try payloadDecodes(mutate(seed, &random))
                accepted += 1
            } catch {
                #expect(isCorruptFile(error), "unexpected error \(error)")
            }
        }
        #expect(accepted > 0)
    }
}

// MARK: - Binary property list reader

extension FormatTests {
    /// What the reader makes of `data`, after the validator accepted it; nil when it leaves the file to Foundation.
    private func readDirectly(_ data: Data) throws -> [String: PrefValue]? {
        try data.withUnsafeBytes { bytes throws(BinaryFormatFailure) in try BinaryPropertyList.values(in: bytes) }
    }

    /// Checks that the reader and Foundation both read `data`, to the same values.
    private func expectReadAlike(_ data: Data, _ comment: Comment) throws {
        let direct = try #require(try readDirectly(data), comment)
        let viaFoundation = try #require(try foundationDecode(data), comment)
        #expect(identical(.dictionary(direct), .dictionary(viaFoundation)), comment)
    }

    @Test func theBinaryReaderReadsExactlyWhatFoundationReads() throws {
        // Reals Foundation changes: non-finite doubles become canonical ones. (Non-finite floats stay floats in
        // Prefs, where Foundation makes doubles of them: `PropertyListFidelityTests`.)
        let odd: [String: PrefValue] = [
            "d": .double(-.infinity), "e": .double(Double(bitPattern: 0xFFF8_0000_0000_0001)), "f": .float(-0.0),
            "g": .double(-0.0),
            "h": .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: 0x7FF8_0000_0000_0001))),
            "i": .int(-1), "j": .unsignedInt(.max), "k": .int(.min),
        ]
        let oddFromFoundation = try PropertyListSerialization.data(
            fromPropertyList: FoundationBridge.object(.dictionary(odd)), format: .binary, options: 0)
        for data in [try BinaryPropertyList.encode(odd), oddFromFoundation] {
            try expectReadAlike(data, "\(odd)")
        }
        var random = SplitMix64(state: fuzzSeed ?? 0xB1_2EAD)
        for _ in 0..<(fuzzIterations.map { $0 / 20 } ?? 300) {
            var values: [String: PrefValue] = [:]
            for _ in 0..<random.below(12) { values[randomString(&random)] = randomValue(&random, depth: 3) }
            let foundationWritten = try PropertyListSerialization.data(
                fromPropertyList: FoundationBridge.object(.dictionary(values)), format: .binary, options: 0)
            for data in [try BinaryPropertyList.encode(values), foundationWritten] {
                try expectReadAlike(data, "\(values)")
            }
        }
    }

    @Test func theBinaryReaderAgreesWithFoundationOnDamagedFiles() throws {
        let seeds = [
            Array(try BinaryPropertyList.encode(sampleStore)),
            Array(
                try PropertyListSerialization.data(
                    fromPropertyList: FoundationBridge.object(.dictionary(sampleStore)), format: .binary,
                    options: 0)),
        ]
        var random = SplitMix64(state: fuzzSeed ?? 0xB1_2EAE)
        var compared = 0
        for index in 0..<(fuzzIterations ?? 1_500) {
            let input = Data(mutate(seeds[index % seeds.count], &random))
            guard let direct = try? readDirectly(input) else { continue }
            // Whatever both read, they read alike. (A few damaged files that pass the validator, Foundation's
            // binary parser refuses for reasons of its own: those the reader reads, rather than losing the suite.)
            guard let viaFoundation = try? foundationDecode(input) else { continue }
            let differing = Set(direct.keys).union(viaFoundation.keys).filter { key in
                guard let left = direct[key], let right = viaFoundation[key] else { return true }
                return !identical(left, right)
            }
            #expect(
                differing.isEmpty,
                "\(differing.sorted().map { "\($0.debugDescription): \(describe(direct[$0])) vs \(describe(viaFoundation[$0]))" }) in \(Array(input))"
            )
            compared += 1
        }
        #expect(compared > 0)
    }
}
