import Foundation
import Prefs
import PrefsTestSupport
import Synchronization
import TestThreads
import Testing

@testable import PrefsCLICore

/// The parsing and formatting inside `prefs`, tested in process.
@Suite(.ownThreads) struct ArgumentParserTests {
    let command = Command(
        "write", arguments: "DOMAIN KEY VALUE", positionals: 3...3,
        options: [.value("--type", "TYPE", "the type"), .flag("--json", "JSON")], summary: "Write.", help: "",
        run: { _ in })
    let console = CapturedConsole().console

    func parse(_ arguments: [String]) throws -> Invocation {
        try ArgumentParser.parse(arguments, for: command, path: "prefs write", console: console)
    }

    func failure(_ arguments: [String]) -> Failure? {
        do {
            _ = try parse(arguments)
            return nil
        } catch {
            return error as? Failure
        }
    }

    @Test func optionsGoAnywhereInEitherForm() throws {
        for arguments in [
            ["--type", "int", "app", "n", "5", "--json"], ["app", "--type=int", "n", "--json", "5"],
            ["app", "n", "5", "--json", "--type", "int"],
        ] {
            let parsed = try parse(arguments)
            #expect(parsed.positionals == ["app", "n", "5"])
            #expect(parsed["--type"] == "int" && parsed.has("--json"))
        }
    }

    @Test func negativeNumbersAndDashesAreValues() throws {
        #expect(try parse(["app", "n", "-5"]).positionals == ["app", "n", "-5"])
        #expect(try parse(["app", "n", "-"]).positionals == ["app", "n", "-"])
        #expect(try parse(["app", "n", "--", "--json"]).positionals == ["app", "n", "--json"])
        #expect(try parse(["app", "--", "n", "--type"]).positionals == ["app", "n", "--type"])
        #expect(try parse(["--type=", "app", "n", "v"])["--type"] == "")
    }

    @Test func mistakesAreUsageErrors() {
        let cases: [[String]] = [
            ["app", "n"], ["app", "n", "v", "extra"], ["app", "n", "v", "--nope"], ["app", "n", "v", "--type"],
            ["app", "n", "v", "--json=1"], ["app", "n", "v", "--type", "a", "--type", "b"],
        ]
        for arguments in cases {
            let failure = failure(arguments)
            #expect(failure?.status == .usage, "\(arguments)")
            #expect(failure?.message.hasPrefix("prefs write: ") == true)
        }
    }

    @Test func secretOptionsAreRefusedWithoutEchoingTheSecret() {
        for arguments in [
            ["app", "n", "v", "--passphrase", "pw-123"], ["--passphrase=pw-123", "app", "n", "v"],
            ["app", "n", "v", "--new-passphrase", "pw-123"], ["app", "n", "v", "--password=pw-123"],
        ] {
            let failure = failure(arguments)
            #expect(failure?.status == .usage)
            #expect(failure?.message.contains("`ps`") == true)
            #expect(failure?.message.contains("pw-123") == false)
        }
    }

    @Test func helpIsRequestedBeforeDoubleDashOnly() {
        #expect(ArgumentParser.asksForHelp(["app", "--help"]))
        #expect(ArgumentParser.asksForHelp(["-h"]))
        #expect(!ArgumentParser.asksForHelp(["app", "k", "--", "--help"]))
    }

    @Test func helpShowsUsageAndEveryOption() {
        let help = ArgumentParser.help(of: command, path: "prefs write")
        #expect(help.hasPrefix("usage: prefs write DOMAIN KEY VALUE [--type TYPE] [--json]\n"))
        #expect(help.contains("  --type TYPE  the type\n"))
        #expect(help.contains("  -h, --help   show this help\n"))
    }

    @Test func everyCommandOfTheTableHasHelp() {
        for command in PrefsTool.commands + PrefsTool.secureCommands {
            #expect(!command.summary.isEmpty && command.summary.hasSuffix("."), "\(command.name)")
            #expect(Set(command.options.map(\.name)).count == command.options.count, "\(command.name)")
        }
    }
}

@Suite(.ownThreads) struct ValueTextTests {
    @Test func boolsAcceptTheUsualSpellings() {
        for text in ["true", "YES", "1", "True"] { #expect(ValueText.parse(text, as: .bool) == .bool(true)) }
        for text in ["false", "no", "0", "NO"] { #expect(ValueText.parse(text, as: .bool) == .bool(false)) }
        for text in ["", "on", "2", "truthy"] { #expect(ValueText.parse(text, as: .bool) == nil) }
    }

    @Test func numbers() {
        #expect(ValueText.parse("9223372036854775807", as: .int) == .int(.max))
        #expect(ValueText.parse("-9223372036854775808", as: .int) == .int(.min))
        #expect(ValueText.parse("18446744073709551615", as: .int) == .unsignedInt(.max))
        #expect(ValueText.parse("18446744073709551616", as: .int) == nil)
        #expect(ValueText.parse("1.0", as: .int) == nil)
        #expect(ValueText.parse("0.1", as: .float) == .double(0.1))
        #expect(ValueText.parse("0.1", as: .singleFloat) == .float(0.1))
        #expect(ValueText.parse("ten", as: .float) == nil)
        for value in [0.1, 1e-300, 123_456.789, -2.5e20, Double.pi] {
            #expect(ValueText.parse(ValueText.format(.double(value)), as: .float) == .double(value))
        }
    }

    @Test func hexData() {
        #expect(ValueText.hexBytes("") == Data())
        #expect(ValueText.hexBytes("00ff10") == Data([0, 255, 16]))
        #expect(ValueText.hexBytes("0xCAFE") == Data([0xCA, 0xFE]))
        #expect(ValueText.hexBytes("abc") == nil)
        #expect(ValueText.hexBytes("gg") == nil)
        #expect(ValueText.format(.data(Data([0, 255, 16]))) == "00ff10")
    }

    @Test func theStoredTypeDecidesHowTextIsRead() throws {
        #expect(ValueType(of: .unsignedInt(1)) == .int)
        #expect(ValueType(of: .float(1)) == .singleFloat)
        #expect(ValueType(of: .double(1)) == .float)
        #expect(ValueType(of: .dictionary([:])) == .json)
        #expect(throws: Failure.self) { try ValueType(option: "single-precision float") }
        #expect(try ValueType(option: "double") == .float)
    }

    @Test func inlineFormattingKeepsOneLine() {
        #expect(ValueText.formatInline(.string("a\nb\tc\\")) == "a\\nb\\tc\\\\")
    }
}

@Suite(.ownThreads) struct ISODateTests {
    @Test func parsesOffsetsAndFractions() {
        let noon = Date(timeIntervalSinceReferenceDate: 736_257_600)  // 2024-05-01T12:00:00Z
        #expect(ISODate.parse("2024-05-01T12:00:00Z") == noon)
        #expect(ISODate.parse("2024-05-01t12:00:00z") == noon)
        #expect(ISODate.parse("2024-05-01 14:00:00+02:00") == noon)
        #expect(ISODate.parse("2024-05-01T09:30:00-0230") == noon)
        #expect(ISODate.parse("2024-05-01T12:00:00.5Z") == noon + 0.5)
        #expect(ISODate.format(noon) == "2024-05-01T12:00:00Z")
        #expect(ISODate.format(noon + 0.25) == "2024-05-01T12:00:00.25Z")
    }

    @Test func refusesWhatIsNotADate() {
        for text in [
            "", "2024-05-01", "2024-05-01T12:00:00", "2024-02-30T00:00:00Z", "2024-13-01T00:00:00Z",
            "2024-05-01T24:00:00Z", "2024-05-01T12:00:60Z", "2024-05-01T12:00:00.Z", "2024-05-01T12:00:00+25:00",
            "2024-5-1T12:00:00Z", "2024-05-01T12:00:00Z trailing", "yesterday",
        ] {
            #expect(ISODate.parse(text) == nil, "\(text)")
        }
        #expect(ISODate.parse("2024-02-29T00:00:00Z") != nil)
    }

    /// ISO 8601's proleptic Gregorian calendar for any year, counted independently: days from 1970-01-01 times
    /// 86 400, less the 978 307 200 seconds from 1970 to 2001.
    @Test(arguments: [
        (-719_162, "0001-01-01T00:00:00Z"),  // no Julian calendar before 1582
        (-141_432, "1582-10-10T00:00:00Z"),  // a day the Julian-to-Gregorian switch skipped
        (-719_528, "0000-01-01T00:00:00Z"),  // year 0 is 1 BC, a leap year
        (-719_529, "-0001-12-31T00:00:00Z"), (2_932_897, "+10000-01-01T00:00:00Z"),
        (-3_652_425 - 719_528, "-10000-01-01T00:00:00Z"), (11_322, "2000-12-31T00:00:00Z"),
    ])
    func anyYearIsExact(days: Int64, text: String) {
        let date = Date(timeIntervalSinceReferenceDate: Double(days * 86_400 - 978_307_200))
        #expect(ISODate.format(date) == text)
        #expect(ISODate.parse(text) == date)
    }

    @Test func theSecondBefore2001IsExact() {
        for (seconds, text) in [
            (-1.0, "2000-12-31T23:59:59Z"), (-0.5, "2000-12-31T23:59:59.5Z"),
            (-1e-07, "2000-12-31T23:59:59.9999999Z"), (-Double.leastNonzeroMagnitude, nil),
        ] as [(Double, String?)] {
            let date = Date(timeIntervalSinceReferenceDate: seconds)
            let formatted = ISODate.format(date)
            if let text { #expect(formatted == text) }
            #expect(ISODate.parse(formatted) == date, "\(seconds) → \(formatted)")
        }
        #expect(
            ISODate.format(Date(timeIntervalSinceReferenceDate: 0), style: .foundation) == "2001-01-01 00:00:00 +0000")
        #expect(ISODate.parse("2024-05-01 12:00:00 +0000") == Date(timeIntervalSinceReferenceDate: 736_257_600))
    }

    /// Formatting then parsing gives back the very same `Date`, whatever its sub-second part.
    @Test func roundTripIsExact() {
        var generator = SystemRandomNumberGenerator()
        var samples: [Double] = [0, -0.5, 123_456.789, -978_307_200, 3_000_000_000.000001, 0.1]
        for _ in 0..<2000 { samples.append(Double.random(in: -2e9...2e9, using: &generator)) }
        for _ in 0..<2000 { samples.append(Double.random(in: -1e15...1e15, using: &generator)) }
        for seconds in samples {
            let date = Date(timeIntervalSinceReferenceDate: seconds)
            let text = ISODate.format(date)
            #expect(ISODate.parse(text) == date, "\(seconds) → \(text)")
            #expect(text.hasSuffix("Z") && !text.contains("0Z") || !text.contains("."), "not shortest: \(text)")
        }
    }
}

/// Whole commands run in process with a captured console: the terminal prompts, without a terminal.
@Suite(.ownThreads) struct InProcessCommandTests {
    @Test func aPassphraseTypedOnTheTerminalIsAskedTwiceWhenCreating() async throws {
        let folder = try TempDir("prefs-cli", create: false)
        defer { folder.cleanup() }
        let vault = folder.path("v.vault")

        let mismatch = CapturedConsole(secrets: ["first try", "second try"])
        #expect(await PrefsTool.run(["secure", "init", "--vault", vault], console: mismatch.console) == 2)
        #expect(mismatch.error.contains("differ"))
        #expect(!FileManager.default.fileExists(atPath: vault))

        let created = CapturedConsole(secrets: ["typed passphrase", "typed passphrase"])
        #expect(await PrefsTool.run(["secure", "init", "--vault", vault], console: created.console) == 0)
        #expect(created.output.contains("protected by a passphrase"))

        let set = CapturedConsole(input: Data("value\n".utf8), secrets: ["typed passphrase"])
        #expect(await PrefsTool.run(["secure", "set", "s", "--vault", vault], console: set.console) == 0)
        let store = try EncryptedFileStore(url: URL(filePath: vault), key: .passphrase("typed passphrase"))
        #expect(try store.value(forKey: "s") == .string("value"))

        let wrong = CapturedConsole(secrets: ["not it"])
        #expect(await PrefsTool.run(["secure", "list", "--vault", vault], console: wrong.console) == 3)
        let none = CapturedConsole()
        #expect(await PrefsTool.run(["secure", "list", "--vault", vault], console: none.console) == 2)
        #expect(none.error.hasPrefix("prefs secure list: cannot ask for the passphrase"))
    }

    @Test func failuresPrintOneLineAndNothingOnStandardOutput() async {
        let console = CapturedConsole()
        #expect(await PrefsTool.run(["bogus"], console: console.console) == 2)
        #expect(console.output.isEmpty)
        #expect(console.error == "prefs: unknown command \"bogus\"; run `prefs --help` for the list\n")
    }

    /// "`set` reads the value from standard input …, or asks for it without echo when standard input is a
    /// terminal."
    @Test func aSecretIsAskedForWithoutEchoWhenStandardInputIsATerminal() async throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        let vault = ["--vault", sandbox.path("v.vault"), "--key-file", sandbox.path("v.key")]
        try sandbox.prefs(["secure", "init"] + vault).expectSuccess()
        let prompts = Mutex<[String]>([])
        let output = Mutex("")
        let console = Console(
            writeOutput: { text in output.withLock { $0 += text } },
            writeData: { data in output.withLock { $0 += String(decoding: data, as: UTF8.self) } },
            writeError: { text in output.withLock { $0 += text } },
            readInput: { _ in Data("from stdin".utf8) },
            inputIsTerminal: true,
            readSecret: { prompt in
                prompts.withLock { $0.append(prompt) }
                return "typed"
            },
            environment: [:])
        #expect(await PrefsTool.run(["secure", "set", "token"] + vault, console: console) == 0)
        #expect(prompts.withLock { $0.count } == 1)
        #expect(!output.withLock { $0 }.contains("typed"))
        let store = try EncryptedFileStore(url: sandbox.file("v.vault"), key: .keyFile(sandbox.file("v.key")))
        #expect(try store.value(forKey: "token") == .string("typed"))
    }
}
