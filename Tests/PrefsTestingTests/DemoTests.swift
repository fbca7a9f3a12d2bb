import Foundation
import PrefsTestSupport
import TestThreads
import Testing

/// `make demo` runs `prefs-demo`: it must write only inside its own temporary folder and print its sections in order.
@Suite(.ownThreads) struct DemoTests {
    static let root = URL(filePath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    @Test func theDemoWritesOnlyInItsTemporaryFolderAndReadsTopToBottom() throws {
        let root = try TempDir("prefs-demo-test")
        defer { root.cleanup() }
        let folders = ["home", "config", "data", "state", "tmp"]
        try root.createFolders(folders)
        var environment = ProcessInfo.processInfo.environment
        environment["PREFS_DEMO_DIR"] = nil
        environment["HOME"] = root.path("home")
        environment["XDG_CONFIG_HOME"] = root.path("config")
        environment["XDG_DATA_HOME"] = root.path("data")
        environment["XDG_STATE_HOME"] = root.path("state")
        environment["TMPDIR"] = root.path("tmp")
        // Under `make asan`, LeakSanitizer counts the demo's top-level strings (globals of its main.swift, alive
        // until exit) as leaks and ends the process before standard output is flushed; this test reads the output.
        environment["ASAN_OPTIONS"] = "detect_leaks=0"

        let executable = builtExecutable(named: "prefs-demo")
        let demo = try ChildProcess.run(
            executable, environment: environment, inheritingEnvironment: false,
            mergingErrors: true)
        let (status, output) = (demo.status, demo.output)
        #expect(status == 0, "\(output)")

        for name in ["home", "config", "data", "state"] {
            let left = FileManager.default.subpaths(atPath: root.path(name)) ?? []
            #expect(left.isEmpty, "the demo wrote \(left) into \(name)")
        }
        // Its own folder, standing for the XDG folders, with the files where the README's "Where files go" puts an
        // app's (<app> being com.example.demo), and the vault's rollback record.
        let own = try FileManager.default.contentsOfDirectory(atPath: root.path("tmp"))
        #expect(own.count == 1 && own[0].hasPrefix("prefs-demo-"), "\(own)")
        let files = Set(FileManager.default.subpaths(atPath: root.path("tmp/\(own.first ?? "")")) ?? [])
        let readme = try String(contentsOf: DemoTests.root.appending(path: "README.md"), encoding: .utf8)
        for (written, file) in [
            ("$XDG_CONFIG_HOME/<app>.plist", "config/com.example.demo.plist"),
            ("$XDG_DATA_HOME/<app>/secrets.vault", "data/com.example.demo/secrets.vault"),
            ("$XDG_CONFIG_HOME/<app>/secrets.key", "config/com.example.demo/secrets.key"),
        ] {
            #expect(readme.contains("`\(written)"), "the README puts an app's file at \(written)")
            #expect(files.contains(file), "\(files)")
            #expect(output.contains("  \(written): "), "the demo says where \(file) is: \(output)")
        }
        #expect(files.contains { $0.hasPrefix("state/prefs/vaults/") && $0.hasSuffix(".record") }, "\(files)")
        // Every file the demo left is one the README's "Where files go" lists.
        let listed = try Self.filesListed(in: readme)
        for file in files where !FileManager.default.isDirectory(root.file("tmp/\(own[0])/\(file)")) {
            #expect(listed.contains { file.wholeMatch(of: $0) != nil }, "the README's table does not list \(file)")
        }

        let lines = output.split(separator: "\n").map(String.init)
        let headings = lines.filter { $0.hasPrefix("== ") }
        #expect(
            headings == [
                "== Setting values",
                "== Observation framework: withObservationTracking sees a change made elsewhere",
                "== Observing currentTheme with for await (current value first, then changes)",
                "== A secret in the encrypted vault",
                "== Bad input is an error, not a crash",
                "== On disk",
                "== Described keys: what `prefs` sees from outside the app",
            ])
        // Each line sits under its own heading.
        func section(of text: String) -> String? {
            guard let index = lines.firstIndex(where: { $0.contains(text) }) else { return nil }
            return lines[..<index].last { $0.hasPrefix("== ") }
        }
        let observed = lines.filter { $0.hasPrefix("  observer saw: ") }
        #expect(observed == ["  observer saw: light", "  observer saw: dark", "  observer saw: light"])
        #expect(
            section(of: "observer saw")
                == "== Observing currentTheme with for await (current value first, then changes)")
        #expect(
            section(of: "onChange fired")
                == "== Observation framework: withObservationTracking sees a change made elsewhere")
        #expect(section(of: "plaintext in file: false") == "== A secret in the encrypted vault")
        #expect(section(of: "the files as they are now") == "== On disk")
        #expect(section(of: "the standard domain as Foundation reads it") == "== On disk")
        // It ends with `prefs` (built beside it, as for `make demo`) describing the demo's keys from their published
        // schema, the value the demo stored and the file it is in. A sanitizer build leaves the tool out: the demo
        // then says how to build it.
        #expect(files.contains("data/prefs/schemas/com.example.demo.json"), "\(files)")
        let described = "== Described keys: what `prefs` sees from outside the app"
        #expect(section(of: "fontSize is still 15") == "== Bad input is an error, not a crash")
        let tool = executable.deletingLastPathComponent().appending(path: "prefs")
        if FileManager.default.isExecutableFile(atPath: tool.path(percentEncoded: false)) {
            #expect(section(of: "$ prefs describe com.example.demo fontSize") == described)
            #expect(
                lines.contains { $0.split(separator: " ") == ["fontSize", "int", "13"] }
                    && lines.contains { $0.split(separator: " ").prefix(3) == ["editor", "JSON", "{fontSize:"] },
                "the struct's members, as list-keys shows them: \(output)")
            #expect(lines.contains("    allowed: from 8 to 72") && lines.contains("    value: 15"), "\(output)")
            #expect(
                lines.contains { $0.hasPrefix("    set by: user (") && $0.hasSuffix("/config/com.example.demo.plist)") }
            )
        } else {
            #expect(section(of: "build the tool to see it here") == described, "\(output)")
        }
        #expect(lines.last?.hasPrefix("Done.") == true)
        #expect(section(of: "Done.") == described)
    }

    /// The paths of the README's "Where files go" table, as patterns over the demo's folder: `config/`, `data/` and
    /// `state/` for the XDG folders, `com.example.demo` for `<app>` and `<domain>`, any name for another `<…>`.
    static func filesListed(in readme: String) throws -> [Regex<Substring>] {
        let table = try #require(
            readme.components(separatedBy: "## Where files go").last?.components(separatedBy: "\n## ").first)
        let rows = table.split(separator: "\n").filter { $0.hasPrefix("| ") && !$0.hasPrefix("| what") }
        var patterns: [Regex<Substring>] = []
        for row in rows {
            let columns = row.split(separator: "|")
            guard columns.count >= 2 else { continue }
            for path in columns[1].split(separator: "`").enumerated().filter({ $0.offset % 2 == 1 }).map(\.element)
            where path.hasPrefix("$XDG_") {
                var pattern = NSRegularExpression.escapedPattern(for: String(path))
                for (variable, folder) in [
                    ("\\$XDG_CONFIG_HOME", "config"), ("\\$XDG_DATA_HOME", "data"), ("\\$XDG_STATE_HOME", "state"),
                ] {
                    pattern = pattern.replacingOccurrences(of: variable, with: folder)
                }
                pattern = pattern.replacingOccurrences(of: "<app>", with: "com\\.example\\.demo")
                    .replacingOccurrences(of: "<domain>", with: "com\\.example\\.demo")
                pattern = pattern.replacing(try Regex("<[a-z]+>"), with: "[^/]+")
                patterns.append(try Regex(pattern))
            }
        }
        #expect(patterns.count >= 6, "\(patterns.count) paths in the table")
        return patterns
    }
}

extension FileManager {
    fileprivate func isDirectory(_ url: URL) -> Bool {
        var directory: ObjCBool = false
        return fileExists(atPath: url.path(percentEncoded: false), isDirectory: &directory) && directory.boolValue
    }
}
