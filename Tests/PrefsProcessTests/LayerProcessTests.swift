import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

/// The layers that belong to a process (its arguments, its environment, its `$XDG_CONFIG_DIRS`), each through the
/// standard domain of a real child process: wrappers, the typed store API, Foundation beside it.
@Suite(.ownThreads) struct LayerProcessTests {
    /// A home and system folders for one child app.
    struct App {
        let directory: TempDir
        let name = "layers.\(UUID().uuidString.prefix(8))"
        var home: URL { directory.file("home") }
        var firstSystem: URL { directory.file("etc-first") }
        var secondSystem: URL { directory.file("etc-second") }
        /// The child's stand-in for `/etc/xdg/managed-preferences`, set through the package's test hook.
        var managed: URL { directory.file("managed") }

        init() throws {
            directory = try TempDir()
            for folder in [home, firstSystem, secondSystem, managed] {
                try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            }
            for folder in [directory.url, managed] {
                try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: folder.path)
            }
        }

        var environment: [String: String] {
            [
                "HOME": home.path, "XDG_CONFIG_HOME": home.path,
                "XDG_CONFIG_DIRS": firstSystem.path + ":" + secondSystem.path,
                "LAYERS_MANAGED_FOLDER": managed.path, "LAYERS_MANAGED_TOP": directory.path,
            ]
        }

        func run(_ arguments: [String] = [], environment extra: [String: String] = [:]) throws -> [String] {
            let result = try ChildProcess.run(
                ["layers-app", name] + arguments, environment: environment.merging(extra) { $1 })
            #expect(result.status == 0, "\(result.error)")
            return result.lines
        }

        func watch(count: Int) throws -> ChildProcess {
            try ChildProcess.start(["layers-watch", name, String(count)], environment: environment)
        }

        func writeSystem(_ values: [String: PrefValue], managed: Bool = false, in folder: URL) throws {
            let target = managed ? folder.appending(path: "managed-preferences") : folder
            try FileManager.default.createDirectory(at: target, withIntermediateDirectories: true)
            let file = target.appending(path: name + ".plist")
            try PropertyListFormat.encode(values).write(to: file, options: .atomic)
            try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file.path)
        }
    }

    @Test func argumentsOverrideTheStandardDomainForOneRunAsFoundationDoes() throws {
        let app = try App()
        defer { app.directory.cleanup() }
        let lines = try app.run(["-volume", "3", "-verbose", "YES", "-tags", "(swift, linux)", "-ratio", "0.25"])
        #expect(lines.contains("volume=3 layer=arguments forced=false"))
        #expect(lines.contains("verbose=true layer=arguments"))
        #expect(lines.contains("tags=swift,linux layer=arguments"))
        #expect(lines.contains("ratio=0.25 layer=arguments"))
        #expect(lines.contains("typed-volume=3 raw-volume=3"))
        #expect(lines.contains("foundation-volume=3"), "Foundation reads the same argument")
        #expect(lines.contains("fontSize=12 font_size=12 layer=registered"))
        #expect(lines.contains("reports=0"))

        // A write goes to the user's values; the argument still wins for this run and is never written.
        let written = try app.run(["-volume", "3"], environment: ["LAYERS_ACTION": "set"])
        #expect(written.contains("volume=3 layer=arguments forced=false"))
        #expect(written.contains("user=volume:8"))
        let later = try app.run()
        #expect(later.contains("volume=8 layer=user forced=false"))
        #expect(later.contains("verbose=false layer=registered"))
    }

    @Test func environmentVariablesSetDeclaredKeysOnceAPrefixIsChosen() throws {
        let app = try App()
        defer { app.directory.cleanup() }
        let variables = ["MYAPP_VOLUME": "4", "MYAPP_VERBOSE": "true", "MYAPP_TAGS": "[\"a\", \"b\"]"]
        let without = try app.run(environment: variables)
        #expect(without.contains("volume=1 layer=registered forced=false"), "no prefix, no environment layer")

        let prefixed = ["LAYERS_PREFIX": "MYAPP_", "MYAPP_FONT_SIZE": "20"].merging(variables) { $1 }
        let lines = try app.run(environment: prefixed)
        #expect(lines.contains("volume=4 layer=environment forced=false"))
        #expect(lines.contains("verbose=true layer=environment"))
        #expect(lines.contains("tags=a,b layer=environment"))
        #expect(lines.contains("typed-volume=4 raw-volume=4"))
        // fontSize and font_size both map to MYAPP_FONT_SIZE: refused for both, and reported once.
        #expect(lines.contains("fontSize=12 font_size=12 layer=registered"))
        #expect(lines.filter { $0.hasPrefix("report:") && $0.contains("MYAPP_FONT_SIZE") }.count == 1)
        #expect(lines.contains("reports=1"))

        // Arguments are stronger than the environment.
        let both = try app.run(["-volume", "9"], environment: prefixed)
        #expect(both.contains("volume=9 layer=arguments forced=false"))
    }

    @Test func systemWideDefaultsComeFromXDGConfigDirsAndForcedValuesOnlyFromTheManagedFolder() throws {
        let app = try App()
        defer { app.directory.cleanup() }
        try app.writeSystem(["volume": .int(5), "ratio": .double(0.5)], in: app.firstSystem)
        try app.writeSystem(["volume": .int(6), "verbose": .bool(true)], in: app.secondSystem)
        let defaults = try app.run()
        #expect(defaults.contains("volume=5 layer=systemDefaults forced=false"), "the first folder wins")
        #expect(defaults.contains("verbose=true layer=systemDefaults"))
        #expect(defaults.contains("ratio=0.5 layer=systemDefaults"))
        let set = try app.run(environment: ["LAYERS_ACTION": "set"])
        #expect(set.contains("volume=8 layer=user forced=false"), "the user's value is above system defaults")
        let reset = try app.run(environment: ["LAYERS_ACTION": "reset"])
        #expect(reset.contains("volume=5 layer=systemDefaults forced=false"), "reset reveals the next layer")

        // A managed file in a folder of $XDG_CONFIG_DIRS, which anyone who starts the app chooses: a default only.
        try app.writeSystem(["volume": .int(4)], managed: true, in: app.firstSystem)
        let notForced = try app.run()
        #expect(notForced.contains("volume=4 layer=systemDefaults forced=false"), "\(notForced)")

        try app.writeSystem(["volume": .int(2)], in: app.managed)
        let forced = try app.run(["-volume", "3"], environment: ["LAYERS_ACTION": "set"])
        #expect(forced.contains("volume=2 layer=managed forced=true"), "forced beats arguments and the user")
        #expect(forced.contains { $0.hasPrefix("typed-set=") && $0.contains("forced by the system administrator") })
        #expect(forced.contains { $0.hasPrefix("report: write of \"volume\"") && $0.contains("forced") })
    }

    @Test func aDamagedSystemFileIsReportedAndSkipped() throws {
        let app = try App()
        defer { app.directory.cleanup() }
        try Data("<plist>broken".utf8).write(to: app.firstSystem.appending(path: app.name + ".plist"))
        try app.writeSystem(["verbose": .bool(true)], in: app.secondSystem)
        _ = try app.run(["-volume", "3"], environment: ["LAYERS_ACTION": "set"])
        let lines = try app.run()
        #expect(lines.contains("volume=8 layer=user forced=false"))
        #expect(lines.contains("verbose=true layer=systemDefaults"))
        #expect(lines.filter { $0.hasPrefix("report:") && $0.contains("etc-first") }.count == 1)
    }

    @Test(.timeLimit(.minutes(5))) func anAdministratorsEditReachesARunningApp() async throws {
        let app = try App()
        defer { app.directory.cleanup() }
        let child = try app.watch(count: 3)
        defer { child.kill() }
        var lines = child.lines().makeAsyncIterator()
        #expect(await lines.next() == "ready")
        #expect(await lines.next() == "volume=1 forced=false")
        try app.writeSystem(["volume": .int(4)], in: app.secondSystem)
        #expect(await lines.next() == "volume=4 forced=false")
        try app.writeSystem(["volume": .int(9)], in: app.managed)
        #expect(await lines.next() == "volume=9 forced=true")
    }

    /// LayeredPreferences: "`EncryptedFileStore` has the user's values and registered defaults only: secrets never
    /// come from the command line or the environment" (the default vault of an app whose standard domain reads both).
    @Test func theDefaultVaultIgnoresArgumentsAndTheEnvironment() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let app = "promises.\(UUID().uuidString.prefix(8))"
        let environment = [
            "HOME": directory.url.path, "XDG_CONFIG_HOME": directory.file("config").path,
            "XDG_DATA_HOME": directory.file("data").path, "XDG_STATE_HOME": directory.file("state").path,
            "XDG_CONFIG_DIRS": directory.file("etc").path,
        ]
        let fromArguments = try ChildProcess.run(
            ["promise-vault-layers", app, "-authToken", "injected"], environment: environment)
        #expect(fromArguments.status == 0, "\(fromArguments.error)")
        #expect(fromArguments.lines == ["setting=injected layer=arguments", "secret=nil layer=none"])

        let fromEnvironment = try ChildProcess.run(
            ["promise-vault-layers", app], environment: environment.merging(["PROMISE_AUTH_TOKEN": "injected"]) { $1 })
        #expect(fromEnvironment.status == 0, "\(fromEnvironment.error)")
        #expect(fromEnvironment.lines == ["setting=injected layer=environment", "secret=nil layer=none"])
    }
}
