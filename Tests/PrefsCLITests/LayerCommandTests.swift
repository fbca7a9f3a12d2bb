import Foundation
import Prefs
import PrefsCLICore
import PrefsTestSupport
import TestThreads
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The in-process tests that point forced values at a folder of their own (`ManagedLocation.useForTesting`, one
/// setting for the whole process) take turns.
enum ManagedHook {
    static let turn = DispatchSemaphore(value: 1)
}

/// True when this process has private XDG folders (as `make test` runs it), so an in-process `prefs` command may
/// open domains without touching the real ~/.config.
private let privateXDGFolders: Bool = {
    let environment = ProcessInfo.processInfo.environment
    guard let config = environment["XDG_CONFIG_HOME"] else { return false }
    let home = FileManager.default.homeDirectoryForCurrentUser.path(percentEncoded: false)
    return !config.hasPrefix(home + "/.config")
}()

/// `prefs read` over layered domains: system-wide defaults under `$XDG_CONFIG_DIRS`, where a `managed-preferences`
/// file is a default too (forced values come only from `/etc/xdg/managed-preferences`: LayerTests).
@Suite(.ownThreads) struct LayerCommandTests {
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

    /// In this process, through the package's test hook (a `prefs` child cannot be pointed elsewhere, as no user can
    /// point an app elsewhere): forced keys are marked, explained and their writes refused.
    @Test(.enabled(if: privateXDGFolders, "opens a domain in this process's XDG_CONFIG_HOME"))
    func forcedKeysAreMarkedExplainedAndRefused() async throws {
        ManagedHook.turn.wait()
        defer { ManagedHook.turn.signal() }
        let folder = try TempDir()
        defer { folder.cleanup() }
        let managed = folder.file("managed-preferences")
        try FileManager.default.createDirectory(at: managed, withIntermediateDirectories: true)
        for path in [folder.path, managed.path] { chmod(path, 0o755) }
        ManagedLocation.useForTesting(folder: managed.path, checkedFrom: folder.path, owner: getuid())
        let domain = "forced-\(UUID().uuidString)"
        let file = managed.appending(path: domain + ".plist")
        let data = try PropertyListSerialization.data(fromPropertyList: ["volume": 9], format: .xml, options: 0)
        try data.write(to: file)
        chmod(file.path, 0o644)

        func run(_ arguments: String...) async -> (status: Int32, output: String, error: String) {
            let console = CapturedConsole()
            let status = await PrefsTool.run(arguments, console: console.console)
            return (status, console.output, console.error)
        }
        let written = await run("write", domain, "theme", "dark")
        #expect(written.status == 0, "\(written)")
        for arguments in [
            ["write", domain, "volume", "4"], ["write", domain, "volume", "-int", "4"], ["delete", domain, "volume"],
            ["rename", domain, "theme", "volume"],
        ] {
            let console = CapturedConsole()
            let status = await PrefsTool.run(arguments, console: console.console)
            #expect(status == 5, "a forced key is not a usage error: \(arguments) \(console.error)")
            #expect(console.error.contains("forced by the system administrator"), "\(console.error)")
        }
        #expect(
            await run("read", domain, "--types").output == """
                theme   string  dark
                volume  int     9  (forced)

                """)
        #expect(
            await run("read", domain).output == """
                {
                    theme = dark;
                    volume = 9; /* forced */
                }

                """)
        #expect(
            await run("read", domain, "volume", "--explain").output
                == "9\nlayer: managed: forced by the administrator (/etc/xdg/managed-preferences)\n")
    }
}
