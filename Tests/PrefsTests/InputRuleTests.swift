import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

/// One answer per input question, the same in XML and binary property lists and in JSON, as docs/CLI.md and
/// StoresAndBackends state it: a key twice in one dictionary is refused, a number beyond its type's range is
/// refused, one too small for a double reads as the nearest double (zero), and a date Foundation writes reads back
/// as the same `Date` whatever its year.
@Suite(.ownThreads) struct InputRuleTests {
    private static func xml(_ body: String) -> Data {
        Data(
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <plist version="1.0">
            \(body)
            </plist>
            """.utf8)
    }

    /// A binary property list of `objects` (one-byte offsets and references), the first one the top object.
    private static func binary(_ objects: [[UInt8]]) -> Data {
        var bytes = Array("bplist00".utf8)
        var offsets: [UInt8] = []
        for object in objects {
            offsets.append(UInt8(bytes.count))
            bytes += object
        }
        let table = bytes.count
        bytes += offsets
        bytes +=
            [0, 0, 0, 0, 0, 0, 1, 1] + [0, 0, 0, 0, 0, 0, 0, UInt8(objects.count)] + [UInt8](repeating: 0, count: 8)
        bytes += [0, 0, 0, 0, 0, 0, 0, UInt8(table)]
        return Data(bytes)
    }

    private static func refusal(_ data: Data, json: Bool = false) -> String? {
        do {
            _ =
                json
                ? try JSONFormat.decode(data, path: "input") : try PropertyListFormat.decode(data, path: "input")
            return nil
        } catch {
            guard case .corruptFile = error else { return "not corruptFile: \(error)" }
            return error.description
        }
    }

    @Test func aKeyTwiceInOneDictionaryIsRefusedInEveryFormat() throws {
        let composed = "caf\u{E9}"
        let decomposed = "cafe\u{301}"
        let inputs: [(String, Data, Bool)] = [
            ("XML", Self.xml("<dict><key>v</key><true/><key>v</key><false/></dict>"), false),
            (
                "XML nested", Self.xml("<dict><key>d</key><dict><key>v</key><true/><key>v</key><true/></dict></dict>"),
                false
            ),
            ("XML entities", Self.xml("<dict><key>a&amp;b</key><true/><key>a&#38;b</key><false/></dict>"), false),
            (
                "XML normalization",
                Self.xml("<dict><key>\(composed)</key><true/><key>\(decomposed)</key><false/></dict>"), false
            ),
            // {"a": 1, "a": 2}: a dictionary of two pairs (keys 1, 1; values 2, 3), "a", 1, 2.
            ("binary", Self.binary([[0xD2, 1, 1, 2, 3], [0x51, 0x61], [0x10, 1], [0x10, 2]]), false),
            // {"d": {"a": 1, "a": 2}}
            (
                "binary nested",
                Self.binary([[0xD1, 1, 2], [0x51, 0x64], [0xD2, 3, 3, 4, 4], [0x51, 0x61], [0x10, 1]]), false
            ),
            ("JSON", Data(#"{"v": true, "v": false}"#.utf8), true),
            ("JSON normalization", Data("{\"\(composed)\": 1, \"\(decomposed)\": 2}".utf8), true),
        ]
        for (name, data, isJSON) in inputs {
            let refusal = Self.refusal(data, json: isJSON)
            #expect(
                refusal?.contains("twice") == true || refusal?.contains("duplicate key") == true,
                "\(name): \(String(describing: refusal))")
        }
        // Keys that only look alike stay apart.
        let distinct = Self.xml(
            "<dict><key>v</key><true/><key>V</key><false/><key>d</key><dict><key>v</key><true/></dict></dict>")
        #expect(try PropertyListFormat.decode(distinct, path: "input").count == 3)
    }

    @Test func numbersBeyondTheirRangeAreRefusedAndTooSmallOnesReadAsZero() throws {
        for text in ["1e999", "-1e999", "1.8e308", " 2e400 "] {
            let refusal = Self.refusal(Self.xml("<dict><key>r</key><real>\(text)</real></dict>"))
            #expect(
                refusal?.contains("beyond the range of a double") == true, "\(text): \(String(describing: refusal))")
        }
        for text in ["1e400", "-1e400"] {
            #expect(Self.refusal(Data("{\"r\": \(text)}".utf8), json: true)?.contains("out of range") == true)
        }
        #expect(Self.refusal(Self.xml("<dict><key>i</key><integer>99999999999999999999</integer></dict>")) != nil)
        #expect(Self.refusal(Data(#"{"i": 99999999999999999999}"#.utf8), json: true) != nil)
        // Underflow: the nearest double, as IEEE conversion gives it.
        let xml = try PropertyListFormat.decode(
            Self.xml("<dict><key>r</key><real>1e-400</real><key>s</key><real>-1e-400</real></dict>"), path: "input")
        #expect(xml["r"] == .double(0))
        let json = try JSONFormat.decode(Data(#"{"r": 1e-400}"#.utf8), path: "input")
        #expect(json["r"] == .double(0))
        // Names of non-finite reals, as Foundation writes them, still read.
        let named = try PropertyListFormat.decode(
            Self.xml("<dict><key>a</key><real>+infinity</real><key>b</key><real>nan</real></dict>"), path: "input")
        #expect(named["a"] == .double(.infinity))
    }

    /// Foundation's XML writer gives a finite date of any year: `-285196646-06-10T08:00:00Z`, `11507-…`, `-002-…`.
    @Test(arguments: [-9.0e15, 9.0e15, -63_200_000_000, 300_000_000_000, -63_114_076_801, -1e12, 0])
    func aDateFoundationWritesInXMLReadsBackAsTheSameDate(seconds: Double) throws {
        let date = Date(timeIntervalSinceReferenceDate: seconds)
        let data = try PropertyListSerialization.data(fromPropertyList: ["d": date], format: .xml, options: 0)
        let values = try PropertyListFormat.decode(data, path: "foundation.plist")
        #expect(values["d"] == .date(date), "\(String(decoding: data, as: UTF8.self))")
    }

    @Test func damagedFarDatesAreStillRefused() {
        for text in [
            "-", "1234567890123-01-01T00:00:00Z", "--5-01-01T00:00:00Z", "-5-02-30T00:00:00Z", "+5-01-01T00:00:00Z",
        ] {
            let refusal = Self.refusal(Self.xml("<dict><key>d</key><date>\(text)</date></dict>"))
            #expect(refusal?.contains("not a date that exists") == true, "\(text): \(String(describing: refusal))")
        }
    }
}
