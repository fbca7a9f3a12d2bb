import Foundation
import PrefsTestSupport
import TestThreads
import Testing

/// `-key value` on the command line, read by Foundation's typed getters and by Prefs' typed reads in the same child
/// process: the forms swift-corelibs-foundation's argument domain reads, and every place Prefs reads one otherwise,
/// each with its reason (docs/PROMISES.md, StoresAndBackends).
@Suite(.ownThreads) struct ArgumentDomainTests {
    /// What a typed read that throws looks like: a wrapper reads its declared default and reports the value.
    static let unreadable = "unreadable"

    /// Text holding no number Foundation reads: its getters give 0, as for a key that is not there; Prefs cannot
    /// tell that 0 from a real one either, so it reads the declared default and reports the text instead.
    static let noNumber = ["int": unreadable, "double": unreadable, "float": unreadable]
    /// Text Foundation's `bool(forKey:)` reads as false only because it starts with no `Y`, `T` or digit (`maybe`):
    /// the declared default and a report, for the same reason. Text starting with `N` or `F` reads false in both.
    static let noBool = ["bool": unreadable]
    static let neither = noNumber.merging(noBool) { $1 }

    /// Each form and the types Prefs reads otherwise than Foundation (every other type reads alike).
    static let forms: [(text: String, differences: [String: String])] = [
        // Numbers, as Foundation's scanner reads them: white space, a sign, leading zeros, what follows the number.
        ("5", [:]), ("+5", [:]), (" 42 ", [:]), ("00001", [:]), ("0", [:]), ("1234", [:]), ("12.34", [:]),
        ("12.9", [:]), (".5", [:]), ("1.", [:]), ("3abc", [:]), ("1,000", [:]), ("0x10", [:]), ("2", [:]),
        // Foundation's `integer(forKey:)` stops at a `.` or an exponent, so `1e3` is 1 there: Prefs reads the number
        // the text writes, and its whole part, as both read a number stored as a number.
        ("1e3", ["int": "1000"]), ("  -3.5e2xyz", ["int": "-350"]), ("1e400", ["int": unreadable]),
        // Beyond the range of an `Int` Foundation gives `Int.max`; Prefs gives no other number than the one written.
        ("99999999999999999999", ["int": unreadable]), ("9223372036854775808", ["int": unreadable]),
        ("inf", neither), ("nan", noNumber), ("", neither),
        // Booleans: `Y`, `y`, `T`, `t` or a digit other than 0 first is true (`yellow` too), as Foundation reads them.
        ("YES", noNumber), ("yes", noNumber), ("Y", noNumber), ("true", noNumber), ("TRUE", noNumber), ("t", noNumber),
        ("yellow", noNumber), ("NO", noNumber), ("no", noNumber), ("false", noNumber), ("f", noNumber),
        ("nope", noNumber), ("maybe", neither), ("+YES", neither), ("hello world", neither),
        // Property lists: a value starting with `(`, `{`, `<` or `"` that parses as one (OpenStep or XML).
        // An OpenStep array holds strings: Foundation's `array(forKey:) as? [Int]` of `(1, 2)` is nil, where Prefs
        // reads each element as an `Int` reads text; JSON (`[1,2]`) is beyond Foundation.
        ("\"quoted text\"", neither), ("<string>x</string>", neither),
        ("[1,2]", neither.merging(["ints": "[1, 2]"]) { $1 }),
        ("(a, b", neither), ("(a, b)", neither), ("(1, 2)", neither.merging(["ints": "[1, 2]"]) { $1 }),
        ("( \"a b\", c )", neither), ("()", neither),
        ("<array><string>a</string></array>", neither), ("{a = b;}", neither), ("{a = 1; c = (x, y);}", neither),
        ("{}", neither), ("<dict><key>a</key><string>b</string></dict>", neither), ("<integer>5</integer>", [:]),
        ("<true/>", [:]), ("<real>1.5</real>", [:]), ("<date>2020-01-01T00:00:00Z</date>", neither),
        ("<data>AQI=</data>", neither),
    ]

    @Test func argumentsReadAsFoundationsArgumentDomainReadsThem() throws {
        let app = try LayerProcessTests.App()
        defer { app.directory.cleanup() }
        var arguments = ["argument-forms", app.name]
        for (index, form) in Self.forms.enumerated() { arguments += ["-f\(index)", form.text] }
        let result = try ChildProcess.run(arguments, environment: app.environment)
        #expect(result.status == 0, "\(result.error)")
        var compared = 0
        for line in result.lines {
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard fields.count == 4, let index = Int(fields[0].dropFirst()) else { continue }
            let (type, foundation, prefs) = (fields[1], fields[2], fields[3])
            let form = Self.forms[index]
            // Foundation's getters of an optional (`string`, `stringArray`, `dictionary`) give nil where Prefs reads
            // the declared default: the same answer.
            let theirs = foundation == "nil" ? Self.unreadable : foundation
            if let documented = form.differences[type] {
                #expect(prefs == documented, "\(form.text.debugDescription) as \(type): Foundation \(foundation)")
                #expect(theirs != documented, "\(form.text.debugDescription) as \(type) is no difference")
            } else {
                #expect(prefs == theirs, "\(form.text.debugDescription) as \(type): Foundation \(foundation)")
            }
            compared += 1
        }
        #expect(compared == Self.forms.count * 8)
    }
}
