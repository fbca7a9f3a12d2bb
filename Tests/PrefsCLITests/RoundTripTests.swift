import Foundation
import Prefs
import TestThreads
import Testing

/// `prefs export` then `prefs import` gives back the very same domain, for values and keys that other tools write
/// but that JSON or an app cannot spell plainly.
@Suite(.ownThreads) struct RoundTripTests {
    /// Values that are equal bit for bit: `==` would call two NaNs different.
    static func identical(_ left: PrefValue, _ right: PrefValue) -> Bool {
        switch (left, right) {
        case (.float(let a), .float(let b)): a.bitPattern == b.bitPattern
        case (.double(let a), .double(let b)): a.bitPattern == b.bitPattern
        case (.date(let a), .date(let b)):
            a.timeIntervalSinceReferenceDate.bitPattern == b.timeIntervalSinceReferenceDate.bitPattern
        case (.array(let a), .array(let b)): a.count == b.count && zip(a, b).allSatisfy(identical)
        case (.dictionary(let a), .dictionary(let b)):
            a.count == b.count && a.allSatisfy { key, value in b[key].map { identical(value, $0) } ?? false }
        case (.float, _), (.double, _), (.date, _), (.array, _), (.dictionary, _): false
        default: left == right
        }
    }

    static let odd: [String: PrefValue] = [
        "": .string("an empty key"), "with\u{0}nul": .int(2), "plain": .string("x"),
        "notADate": .date(Date(timeIntervalSinceReferenceDate: .nan)),
        "forever": .date(Date(timeIntervalSinceReferenceDate: .infinity)),
        "float": .float(0.1), "doubles": .array([.double(.infinity), .double(-.infinity), .double(.nan)]),
    ]

    @Test(arguments: [["--format", "json"], ["--format", "binary"]])
    func exportThenImportKeepsEveryKeyAndValue(format: [String]) throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        // Written as a file from another tool would have them: keys an app cannot write, dates that are no number.
        try SuiteFileStore(suiteName: "source", directory: sandbox.config).replaceAllAsImported(Self.odd)
        let export = try sandbox.prefs(["export", "source", sandbox.path("export")] + format)
        #expect(export.status == 0 && export.error.isEmpty, "one odd value does not fail the export: \(export)")
        let result = try sandbox.prefs("import", "target", sandbox.path("export"))
        #expect(result.status == 0 && result.error.isEmpty, "\(result)")
        let back = try SuiteFileStore(suiteName: "target", directory: sandbox.config).allValues()
        // Compared as Booleans: Swift Testing would print the values, and printing a NaN date traps in Foundation.
        let identical = Self.identical(.dictionary(back), .dictionary(Self.odd))
        let shown = try sandbox.prefs("export", "target").output
        #expect(identical, "\(shown)")
    }

    @Test func aDateThatIsNotANumberIsTaggedInJSON() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try SuiteFileStore(suiteName: "app", directory: sandbox.config).replaceAll([
            "bad": .date(Date(timeIntervalSinceReferenceDate: .nan)), "good": .string("kept"),
        ])
        let export = try sandbox.prefs("export", "app")
        #expect(export.status == 0, "\(export)")
        #expect(export.output.contains(#""$date": "nan""#) && export.output.contains(#""good": "kept""#))
        #expect(try sandbox.prefs("read", "app", "--json").output == export.output)
    }
}
