import Foundation
import Prefs
import Testing

/// `prefs read` over layered domains: system-wide defaults and managed values under `$XDG_CONFIG_DIRS`.
@Suite struct LayerCommandTests {
    /// A sandbox with a system folder given to `prefs` as `$XDG_CONFIG_DIRS`.
    struct Layered {
        let sandbox: Sandbox
        var system: URL { sandbox.file("etc") }
        var environment: [String: String] { ["XDG_CONFIG_DIRS": system.path(percentEncoded: false)] }

        init() throws {
            sandbox = try Sandbox()
            try FileManager.default.createDirectory(
                at: system.appending(path: "managed-preferences"), withIntermediateDirectories: true)
        }

        func writeSystem(_ values: [String: Any], managed: Bool = false) throws {
            let folder = managed ? system.appending(path: "managed-preferences") : system
            let data = try PropertyListSerialization.data(fromPropertyList: values, format: .xml, options: 0)
            try data.write(to: folder.appending(path: "app.plist"), options: .atomic)
        }

        @discardableResult
        func prefs(_ arguments: String...) throws -> PrefsResult {
            try sandbox.prefs(arguments, environment: environment)
        }
    }

    @Test func explainPrintsTheValueAndItsLayer() throws {
        let layered = try Layered()
        defer { layered.sandbox.cleanup() }
        try layered.prefs("write", "app", "theme", "dark")
        try layered.writeSystem(["zoom": 1.5, "theme": "light"])
        try layered.writeSystem(["locked": true], managed: true)
        #expect(
            try layered.prefs("read", "app", "theme", "--explain").output
                == "dark\nlayer: user: the domain's own file\n")
        #expect(
            try layered.prefs("read", "app", "zoom", "--explain").output
                == "1.5\nlayer: system defaults: a system-wide default ($XDG_CONFIG_DIRS)\n")
        #expect(
            try layered.prefs("read", "app", "locked", "--explain").output
                == "true\nlayer: managed: forced by the administrator ($XDG_CONFIG_DIRS/managed-preferences)\n")
        #expect(try layered.prefs("read", "app", "zoom").output == "1.5\n", "a bare read shows the effective value")
    }

    @Test func readMarksForcedKeysAndWriteIsRefused() throws {
        let layered = try Layered()
        defer { layered.sandbox.cleanup() }
        try layered.prefs("write", "app", "theme", "dark")
        try layered.prefs("write", "app", "volume", "3", "--type", "int")
        try layered.writeSystem(["volume": 9, "locked": "yes"], managed: true)
        try layered.writeSystem(["zoom": 1.5, "theme": "light"])
        #expect(
            try layered.prefs("read", "app", "--types").output == """
                locked  string  yes  (forced)
                theme   string  dark
                volume  int     9  (forced)
                zoom    double  1.5  (system default)

                """)
        #expect(
            try layered.prefs("read", "app").output == """
                {
                    locked = yes; /* forced */
                    theme = dark;
                    volume = 9; /* forced */
                    zoom = "1.5"; /* system default */
                }

                """)
        for arguments in [
            ["write", "app", "volume", "4"], ["write", "app", "volume", "-int", "4"], ["delete", "app", "volume"],
        ] {
            let refused = try layered.sandbox.prefs(arguments, environment: layered.environment)
            #expect(refused.status == 5, "a forced key is not a usage error: \(refused)")
            #expect(
                refused.isOneLineFailure && refused.error.contains("forced by the system administrator"), "\(refused)")
        }
        let rename = try layered.prefs("rename", "app", "theme", "volume")
        #expect(rename.status == 5 && rename.isOneLineFailure, "\(rename)")
        #expect(try layered.prefs("read", "app", "theme").output == "dark\n")
        #expect(try layered.prefs("export", "app").output.contains("\"volume\": 3"), "the user's own value is kept")
    }
}
