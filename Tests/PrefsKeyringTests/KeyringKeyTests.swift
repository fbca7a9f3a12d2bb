import Foundation
import PrefsTestSupport
import TestThreads
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The vault key in a real GNOME Keyring, on a session bus each test starts for itself (`SecretServiceSession`),
/// reached from child processes (`PrefsKeyringTestHelper`).
@Suite(.ownThreads) struct KeyringKeyTests {
    static let app = "com.example.notes"

    @Test func aSecretWrittenInOneProcessIsReadInAnotherWithTheKeyInTheKeyringOnly() throws {
        let session = try SecretServiceSession()
        defer { session.stop() }
        #expect(try session.helper(["default-set", Self.app, "authToken", "eyJhbGciOi.token"]) == ["ok"])
        #expect(try session.helper(["default-get", Self.app, "authToken"]) == ["eyJhbGciOi.token"])

        // The item a person finds with secret-tool, labelled and found by application and vault.
        let vault = session.data.appending(path: "\(Self.app)/secrets.vault").path(percentEncoded: false)
        let search = try session.secretTool(["search", "--all", "application", Self.app])
        #expect(search.output.contains("label = \(Self.app) secrets vault key (\(vault))"), "\(search)")
        #expect((search.output + search.error).contains("attribute.vault = \(vault)"), "\(search)")
        let lookup = try session.secretTool(["lookup", "application", Self.app, "vault", vault])
        let key = try #require(Data(base64Encoded: lookup.output), "\(lookup)")
        #expect(key.count == 32)

        // No file holds the key: no key file was made, and neither the key nor its base64 text is in any file of
        // the session (the vault, its record, the keyring's own encrypted files).
        #expect(!FileManager.default.fileExists(atPath: session.config.appending(path: "\(Self.app)/secrets.key").path))
        let files = try Self.regularFiles(under: session.folder.url)
        #expect(files.contains { $0.hasSuffix("secrets.vault") } && files.contains { $0.hasSuffix(".keyring") })
        for file in files {
            let bytes = try Data(contentsOf: URL(filePath: file))
            #expect(bytes.range(of: key) == nil && bytes.range(of: Data(lookup.output.utf8)) == nil, "\(file)")
        }
    }

    @Test func aLockedKeyringIsRefusedWithinTheBoundAndNothingIsWritten() throws {
        let session = try SecretServiceSession()
        defer { session.stop() }
        let vault = session.folder.path("locked.vault")
        #expect(try session.helper(["set", vault, Self.app, "token", "t1"]) == ["ok"])
        let before = try Data(contentsOf: URL(filePath: vault))
        try session.lockKeyring()

        let noPrompt = ["PREFS_KEYRING_PROMPTING": "0", "PREFS_KEYRING_TIMEOUT_MS": "3000"]
        let refused = try #require(
            HelperFailure(try session.helper(["get", vault, Self.app, "token"], environment: noPrompt).first))
        // Refused as locked, not after a prompt: no prompt was asked for (it would be dismissed or time out).
        #expect(refused.name == "KeyringError.locked" && refused.message.contains("login"), "\(refused)")
        // With a prompt allowed, the headless keyring cannot show one: the prompt is dismissed at once.
        let prompted = try #require(
            HelperFailure(
                try session.helper(
                    ["get", vault, Self.app, "token"], environment: ["PREFS_KEYRING_TIMEOUT_MS": "3000"]
                ).first))
        #expect(prompted.name == "KeyringError.unlockDismissed", "\(prompted)")
        // A new vault's key cannot be created in a locked keyring either, and no key file appears instead.
        let other = session.folder.path("new.vault")
        let creating = try #require(
            HelperFailure(try session.helper(["set", other, Self.app, "token", "t2"], environment: noPrompt).first))
        #expect(creating.name == "KeyringError.locked", "\(creating)")
        #expect(!FileManager.default.fileExists(atPath: other))
        // Nothing else was made: no key file, no vault.
        let contents = try session.folder.contents()
        #expect(
            contents == ["bus.conf", "config", "data", "home", "locked.vault", "run", "services", "state"],
            "\(contents)")
        #expect(try Data(contentsOf: URL(filePath: vault)) == before)
    }

    @Test func aKeyringRestartedLockedIsReportedAsLockedNotAsAMissingKey() throws {
        let session = try SecretServiceSession()
        defer { session.stop() }
        let vault = session.folder.path("restarted.vault")
        #expect(try session.helper(["set", vault, Self.app, "token", "t1"]) == ["ok"])
        let before = try Data(contentsOf: URL(filePath: vault))
        try session.restartKeyringLocked()

        // The item is there, locked, as secret-tool shows it.
        #expect(try session.items(["application", Self.app]).count == 1)
        let noPrompt = ["PREFS_KEYRING_PROMPTING": "0", "PREFS_KEYRING_TIMEOUT_MS": "3000"]
        let lines = try session.helper(["get", vault, Self.app, "token"], environment: noPrompt)
        let refused = try #require(HelperFailure(lines.first), "\(lines)")
        #expect(refused.name == "KeyringError.locked" && refused.message.contains("login"), "\(refused)")
        #expect(!refused.message.contains("keeps no key"), "\(refused)")

        // The tool: status 1, one line naming the locked keyring, nothing on standard output.
        let verify = try session.prefs(["secure", "verify", "--vault", vault, "--app", Self.app, "--keyring"])
        #expect(verify.status == 1 && verify.output.isEmpty, "\(verify)")
        #expect(verify.error.hasPrefix("prefs secure verify: the keyring login is locked"), "\(verify)")
        #expect(verify.error.split(separator: "\n").count == 1, "\(verify)")
        #expect(try Data(contentsOf: URL(filePath: vault)) == before)
        #expect(try session.items(["application", Self.app]).count == 1)
    }

    @Test func noSecretServiceAndNoSessionBusAreEachTheirOwnError() throws {
        let session = try SecretServiceSession(secretService: false)
        defer { session.stop() }
        let vault = session.folder.path("none.vault")
        let bounded = ["PREFS_KEYRING_TIMEOUT_MS": "3000"]
        let noService = try #require(
            HelperFailure(try session.helper(["set", vault, Self.app, "token", "t"], environment: bounded).first))
        #expect(noService.name == "KeyringError.noSecretService", "\(noService)")

        // No address and no $XDG_RUNTIME_DIR/bus: said at once, without trying to start a bus through X11.
        var noBus = session.environment
        noBus["DBUS_SESSION_BUS_ADDRESS"] = nil
        let unset = try ChildProcess.run(
            SecretServiceSession.helper, ["set", vault, Self.app, "token", "t"],
            environment: noBus.merging(bounded) { $1 },
            inheritingEnvironment: false, timeLimit: .seconds(30))
        let noSessionBus = try #require(HelperFailure(unset.lines.first), "\(unset)")
        #expect(
            noSessionBus.name == "KeyringError.noSessionBus" && noSessionBus.message.contains("not set"),
            "\(noSessionBus)")
        // An address where no bus listens.
        let gone = try session.helper(
            ["set", vault, Self.app, "token", "t"],
            environment: bounded.merging(["DBUS_SESSION_BUS_ADDRESS": "unix:path=\(session.folder.path("no-bus"))"]) {
                $1
            })
        #expect(HelperFailure(gone.first)?.name == "KeyringError.noSessionBus", "\(gone)")

        // Never a key file (or a vault) written instead: nothing at all.
        let contents = try session.folder.contents()
        #expect(
            contents == ["bus.conf", "config", "data", "home", "run", "services", "state"],
            "\(contents)")
        #expect(try Self.regularFiles(under: session.config).isEmpty && Self.regularFiles(under: session.data).isEmpty)
    }

    @Test func aStoppedKeyringDaemonOrBusTimesOutWithinTheBound() throws {
        let session = try SecretServiceSession()
        defer {
            session.signalBus(SIGCONT)
            session.stop()
        }
        let vault = session.folder.path("stopped.vault")
        #expect(try session.helper(["set", vault, Self.app, "token", "t"]) == ["ok"])
        let daemon = try #require(session.keyringDaemon())
        let bound = ["PREFS_KEYRING_TIMEOUT_MS": "400"]

        kill(daemon, SIGSTOP)
        let wedged = try session.helper(["get", vault, Self.app, "token"], environment: bound)
        kill(daemon, SIGCONT)
        let daemonFailure = try #require(HelperFailure(wedged.first), "\(wedged)")
        // Cut short at its bound: the call waited that long (at least), and says which bound ended it.
        #expect(daemonFailure.name == "KeyringError.timedOut", "\(daemonFailure)")
        #expect(daemonFailure.milliseconds >= 400 && daemonFailure.message.contains("0.4 seconds"), "\(daemonFailure)")

        session.signalBus(SIGSTOP)
        let stuck = try session.helper(["get", vault, Self.app, "token"], environment: bound)
        session.signalBus(SIGCONT)
        let busFailure = try #require(HelperFailure(stuck.first), "\(stuck)")
        #expect(busFailure.name == "KeyringError.timedOut", "\(busFailure)")
        #expect(busFailure.milliseconds >= 400 && busFailure.message.contains("0.4 seconds"), "\(busFailure)")

        // Resumed, the same vault opens again.
        #expect(try session.helper(["get", vault, Self.app, "token"]) == ["t"])
    }

    /// Unless told otherwise, each call waits at most 5 s and the unlock prompt 2 minutes: the bounds the key source
    /// keeps, and the call bound cutting a wedged daemon's call short after 5 s.
    @Test func theDefaultBoundsAreFiveSecondsACallAndTwoMinutesAPrompt() throws {
        let session = try SecretServiceSession()
        defer { session.stop() }
        #expect(
            try session.helper(["bounds"])
                == ["KeyringKey() 5.0 seconds 120.0 seconds", ".keyring() 5.0 seconds 120.0 seconds"])
        let vault = session.folder.path("default.vault")
        #expect(try session.helper(["set", vault, Self.app, "token", "t"]) == ["ok"])
        let daemon = try #require(session.keyringDaemon())
        kill(daemon, SIGSTOP)
        let wedged = try session.helper(["get", vault, Self.app, "token"])
        kill(daemon, SIGCONT)
        let failure = try #require(HelperFailure(wedged.first), "\(wedged)")
        #expect(failure.name == "KeyringError.timedOut" && failure.message.contains("within 5.0 seconds"), "\(failure)")
        #expect(failure.milliseconds >= 5000, "\(failure)")
    }

    /// An unlock prompt nobody answers is given up after the prompt's own bound, not the call's.
    @Test func anUnansweredUnlockPromptEndsAtThePromptsBound() throws {
        let session = try SecretServiceSession(unansweredPrompts: true)
        defer { session.stop() }
        let vault = session.folder.path("prompt.vault")
        #expect(try session.helper(["set", vault, Self.app, "token", "t1"]) == ["ok"])
        try session.lockKeyring()
        let bounds = ["PREFS_KEYRING_TIMEOUT_MS": "20000", "PREFS_KEYRING_PROMPT_TIMEOUT_MS": "700"]
        let lines = try session.helper(["get", vault, Self.app, "token"], environment: bounds)
        let failure = try #require(HelperFailure(lines.first), "\(lines)")
        #expect(failure.name == "KeyringError.timedOut", "\(failure)")
        #expect(failure.message.contains("unlocking the keyring"), "\(failure)")
        #expect(failure.message.contains("within 0.7 seconds"), "\(failure)")
        #expect(failure.milliseconds >= 700, "\(failure)")
    }

    @Test func processesCreatingTheKeyAtOnceEndWithOneKeyAndEverySecret() throws {
        let session = try SecretServiceSession()
        defer { session.stop() }
        let vault = session.folder.path("shared.vault")
        let count = 4
        let children = try (0..<count).map { index in
            try session.startHelper(
                ["set", vault, Self.app, "secret\(index)", "value\(index)"],
                environment: ["PREFS_KEYRING_WAIT_FOR_GO": "1"])
        }
        // All start at the same instant: each is waiting for its line.
        for child in children { child.write("go\n") }
        for child in children {
            child.closeInput()
            let exit = child.wait()
            #expect(exit.lines == ["ok"], "\(exit)")
        }
        #expect(try session.items(["application", Self.app, "vault", vault]).count == 1)
        for index in 0..<count {
            #expect(try session.helper(["get", vault, Self.app, "secret\(index)"]) == ["value\(index)"])
        }
    }

    /// Every regular file under `folder`, as paths.
    static func regularFiles(under folder: URL) throws -> [String] {
        guard
            let enumerator = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: [.isRegularFileKey])
        else { return [] }
        return try enumerator.compactMap { $0 as? URL }.filter {
            try $0.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile == true
        }.map { $0.path(percentEncoded: false) }
    }
}
