import Foundation
import Prefs
import Testing

/// `prefs read` over layered domains: system-wide defaults under `$XDG_CONFIG_DIRS`, where a `managed-preferences`
/// file is a default too (forced values come only from `/etc/xdg/managed-preferences`: LayerTests).
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
                == "true\nlayer: system defaults: a system-wide default ($XDG_CONFIG_DIRS)\n")
        #expect(try layered.prefs("read", "app", "zoom").output == "1.5\n", "a bare read shows the effective value")
    }

    @Test func aManagedFileUnderXDGConfigDirsForcesNothing() throws {
        let layered = try Layered()
        defer { layered.sandbox.cleanup() }
        try layered.prefs("write", "app", "theme", "dark")
        try layered.prefs("write", "app", "volume", "3", "--type", "int")
        try layered.writeSystem(["volume": 9, "locked": "yes"], managed: true)
        try layered.writeSystem(["zoom": 1.5, "theme": "light"])
        #expect(
            try layered.prefs("read", "app", "--types").output == """
                locked  string  yes  (system default)
                theme   string  dark
                volume  int     3
                zoom    double  1.5  (system default)

                """)
        #expect(
            try layered.prefs("read", "app").output == """
                {
                    locked = yes; /* system default */
                    theme = dark;
                    volume = 3;
                    zoom = "1.5"; /* system default */
                }

                """)
        #expect(try layered.prefs("read", "app", "locked").output == "yes\n", "a system-wide default")
        let written = try layered.prefs("write", "app", "volume", "4")
        #expect(written.status == 0, "\(written)")
        #expect(try layered.prefs("read", "app", "volume").output == "4\n")
    }
}
