import Foundation
import Prefs
import PrefsTestSupport
import TestThreads
import Testing

@Suite(.ownThreads) struct PrefValueJSONTests {
    @Test func singleValuesRoundTripExactly() throws {
        let values: [PrefValue] = [
            .bool(true), .int(-3), .unsignedInt(.max), .float(0.1), .double(0.5), .string("a \"quoted\"\nline"),
            .data(Data([0xCA, 0xFE])), .date(Date(timeIntervalSinceReferenceDate: 123_456.789)),
            .array([.int(1), .string("two")]), .dictionary(["$only": .bool(false)]),
        ]
        for value in values {
            let text = try value.jsonText()
            #expect(!text.contains("\n"))
            #expect(try PrefValue(jsonText: text) == value)
        }
        #expect(try PrefValue(jsonText: #"{"a": [1, 2.5]}"#) == .dictionary(["a": .array([.int(1), .double(2.5)])]))
    }

    @Test func malformedTextIsRefused() {
        for text in ["", "null", "[1,", "{\"a\": 1} x", "'single'"] {
            #expect(throws: PrefsError.self) { try PrefValue(jsonText: text) }
        }
        #expect(throws: PrefsError.self) { try PrefValue.date(Date(timeIntervalSinceReferenceDate: .nan)).jsonText() }
    }

    @Test func documentsRoundTripAndRejectPartialInput() throws {
        let values: [String: PrefValue] = ["theme": .string("dark"), "when": .date(Date(timeIntervalSince1970: 1.5))]
        let data = try PrefValue.jsonDocument(values)
        #expect(try PrefValue.values(fromJSONDocument: data) == values)
        let cut = data.prefix(data.count - 3)
        #expect(throws: PrefsError.self) { try PrefValue.values(fromJSONDocument: cut, source: "cut.json") }
        #expect(throws: PrefsError.self) { try PrefValue.values(fromJSONDocument: Data("[1]".utf8)) }
    }
}
