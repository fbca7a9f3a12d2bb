import Foundation
import TestThreads
import Testing

@testable import Prefs
@testable import PrefsCLICore

/// What `prefs` prints when the library reports instead of throwing: a warning that names the
/// file, not an empty key, once per cause.
@Suite(.ownThreads) struct WarningTests {
    @Test func aDamagedSystemFileIsOneWarningThatNamesTheFile() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        let system = sandbox.file("etc")
        try FileManager.default.createDirectory(at: system, withIntermediateDirectories: true)
        try Data("garbage".utf8).write(to: system.appending(path: "app.plist"))
        let environment = ["XDG_CONFIG_DIRS": system.path(percentEncoded: false)]
        for (arguments, output) in [
            (["write", "app", "theme", "dark"], ""), (["read", "app", "theme"], "dark\n"),
            (["read", "app", "--types"], "theme  string  dark\n"),
        ] {
            let result = try sandbox.prefs(arguments, environment: environment)
            #expect(result.status == 0 && result.output == output, "\(arguments): \(result)")
            let lines = result.error.split(separator: "\n")
            #expect(lines.count == 1, "one line, however many reads ran into the file: \(result)")
            #expect(result.error.hasPrefix("prefs: warning: ") && result.error.contains("etc/app.plist"), "\(result)")
            #expect(!result.error.contains(#"of """#), "no empty key: \(result)")
        }
    }

    @Test func eachCauseIsPrintedOnce() {
        let captured = CapturedConsole()
        let handler = Warnings.handler(console: captured.console)
        let damaged = PrefsError.corruptFile(path: "/etc/app.plist", reason: "empty file")
        for _ in 0..<60 { handler(PrefsReport(key: "", operation: .write, error: damaged)) }
        handler(PrefsReport(key: "theme", operation: .read, error: damaged))
        #expect(
            captured.error == """
                prefs: warning: /etc/app.plist is not a valid preferences file (empty file); left untouched
                prefs: warning: read of "theme" failed: /etc/app.plist is not a valid preferences file (empty file); left untouched

                """)
    }
}
