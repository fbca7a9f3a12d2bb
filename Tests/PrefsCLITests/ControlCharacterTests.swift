import Foundation
import PrefsTestSupport
import TestThreads
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Stored data cannot forge what `prefs` shows a person: control characters in keys, values, domain file names and
/// paths are printed escaped (`\u{1B}`, `\n`) in tables, `watch`, `domains` and error messages, while `--json`
/// stays exact; a domain name with a control character is refused.
@Suite(.ownThreads) struct ControlCharacterTests {
    static let key = "k\u{1B}[31mRED\u{1B}[0m\nfake  string  forged"

    private static func hasRawControl(_ text: String) -> Bool {
        text.unicodeScalars.contains { $0.properties.generalCategory == .control && $0 != "\n" }
    }

    @Test func aTableOfKeysShowsControlCharactersEscaped() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try sandbox.prefs("write", "esc", Self.key, "v\u{1B}[2J\rback").expectSuccess()
        let table = try sandbox.prefs("read", "esc", "--types")
        #expect(table.status == 0)
        #expect(!Self.hasRawControl(table.output), "\(table.output.debugDescription)")
        #expect(table.output.split(separator: "\n").count == 1, "\(table.output.debugDescription)")
        #expect(table.output.hasPrefix(#"k\u{1B}[31mRED\u{1B}[0m\nfake  string  forged  string  v\u{1B}[2J\rback"#))
        // JSON stays exact.
        let json = try sandbox.prefs("read", "esc", "--json")
        #expect(json.output.contains(#"k\u001B[31mRED\u001B[0m\nfake"#), "\(json.output)")
    }

    @Test func domainNamesWithControlCharactersAreRefusedAndListedEscaped() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        let refused = try sandbox.prefs("write", "a\u{1B}[2Jb", "k", "v")
        #expect(refused.status == 2 && refused.error.contains("control characters"), "\(refused)")
        #expect(!Self.hasRawControl(refused.error), "\(refused.error.debugDescription)")
        try sandbox.prefs("write", "plain", "k", "v").expectSuccess()
        // A file another tool made.
        try Data("<plist><dict/></plist>".utf8).write(to: sandbox.config.appending(path: "evil\u{1B}[2J\nforged.plist"))
        let listed = try sandbox.prefs("domains")
        #expect(listed.status == 0)
        #expect(!Self.hasRawControl(listed.output), "\(listed.output.debugDescription)")
        #expect(listed.output.split(separator: "\n").sorted() == [#"evil\u{1B}[2J\nforged"#, "plain"])
    }

    @Test func errorMessagesShowControlCharactersEscaped() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        let result = try sandbox.prefs("import", "app", sandbox.path("absent\u{1B}[2J\rfile.json"))
        #expect(result.status == 1 && result.isOneLineFailure, "\(result)")
        #expect(!Self.hasRawControl(result.error), "\(result.error.debugDescription)")
        #expect(result.error.contains(#"absent\u{1B}[2J\rfile.json"#))
    }

    @Test func watchShowsControlCharactersEscaped() async throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try sandbox.prefs("write", "app", "a", "1").expectSuccess()
        let watcher = try PrefsProcess.start(["watch", "app"], environment: sandbox.environment)
        defer { watcher.signal(SIGKILL) }
        let lines = watcher.linesWithErrors()
        let seen = try await withTimeout {
            for await (isError, line) in lines {
                if isError {
                    _ = try sandbox.prefs("write", "app", Self.key, "\u{1B}[2J")
                    continue
                }
                return line
            }
            return ""
        }
        #expect(seen == #"k\u{1B}[31mRED\u{1B}[0m\nfake  string  forged = \u{1B}[2J (string)"#)
        watcher.signal(SIGINT)
        #expect(watcher.wait().status == 0)
    }
}
