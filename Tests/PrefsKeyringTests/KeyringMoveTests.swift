import Foundation
import PrefsTestSupport
import TestThreads
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Moving a vault's key between its key file and a real GNOME Keyring: nothing lost, no key left behind, whenever
/// the move stops.
@Suite(.ownThreads) struct KeyringMoveTests {
    static let app = "com.example.notes"

    @Test func movingAVaultsKeyIntoTheKeyringAndBackLosesNothingAndKeepsTheRollbackRecord() throws {
        let session = try SecretServiceSession()
        defer { session.stop() }
        let vault = session.folder.path("team.vault")
        let keyFile = session.folder.path("team.key")
        let byFile = ["--vault", vault, "--key-file", keyFile]
        #expect(try session.prefs(["secure", "init"] + byFile).succeeded)
        #expect(try session.prefs(["secure", "set", "token"] + byFile, stdin: "first\n").succeeded)
        #expect(try session.prefs(["secure", "set", "pin", "--type", "int"] + byFile, stdin: "1234").succeeded)

        let moved = try session.prefs([
            "secure", "move-key", "--vault", vault, "--key-file", keyFile, "--app", Self.app, "--new-keyring",
        ])
        #expect(
            moved.succeeded && moved.output.contains("secret-tool search application \(Self.app) vault \(vault)"),
            "\(moved)")
        #expect(moved.output.contains("removed the old key file \(keyFile)"), "\(moved)")
        #expect(!FileManager.default.fileExists(atPath: keyFile))
        #expect(try session.items(["application", Self.app, "vault", vault]).count == 1)
        #expect(try session.helper(["get", vault, Self.app, "token"]) == ["first"])
        #expect(try session.helper(["get", vault, Self.app, "pin"]) == ["1234"])

        // The rollback record moved on with the vault: an older copy put back is refused.
        let older = try Data(contentsOf: URL(filePath: vault))
        #expect(try session.helper(["set", vault, Self.app, "token", "second"]) == ["ok"])
        let newer = try Data(contentsOf: URL(filePath: vault))
        try older.write(to: URL(filePath: vault), options: .atomic)
        let refused = try session.helper(["get", vault, Self.app, "token"])
        #expect(HelperFailure(refused.first)?.name == "VaultError.rollbackDetected", "\(refused)")
        try newer.write(to: URL(filePath: vault), options: .atomic)

        let back = try session.prefs([
            "secure", "move-key", "--vault", vault, "--app", Self.app, "--keyring", "--new-key-file", keyFile,
        ])
        #expect(
            back.succeeded
                && back.output.contains("removed the old key from the desktop keyring (application \(Self.app))"),
            "\(back)")
        #expect(try session.items(["application", Self.app, "vault", vault]).isEmpty)
        let mode = try FileManager.default.attributesOfItem(atPath: keyFile)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let revealed = try session.prefs(["secure", "get", "token", "--reveal"] + byFile)
        #expect(revealed.output == "second\n", "\(revealed)")
    }

    @Test func theDefaultVaultMovesIntoTheKeyringOnceConfiguredAndAMoveCutShortIsFinished() throws {
        let session = try SecretServiceSession()
        defer { session.stop() }
        let app = ["--app", Self.app]
        #expect(try session.prefs(["secure", "init"] + app).succeeded)
        #expect(try session.prefs(["secure", "set", "authToken"] + app, stdin: "s3cret\n").succeeded)
        let keyFile = session.config.appending(path: "\(Self.app)/secrets.key")
        let oldKey = try Data(contentsOf: keyFile)

        // The app now says `PrefsConfig.secureStoreKey = .keyring()`: its vault moves as it opens.
        #expect(try session.helper(["default-get", Self.app, "authToken"]) == ["s3cret"])
        #expect(!FileManager.default.fileExists(atPath: keyFile.path))
        let vault = session.data.appending(path: "\(Self.app)/secrets.vault").path(percentEncoded: false)
        #expect(try session.items(["application", Self.app, "vault", vault]).count == 1)

        // Stopped after the vault changed keys but before the key file went: the file is removed at the next open.
        try oldKey.write(to: keyFile)
        chmod(keyFile.path, 0o600)
        #expect(try session.helper(["default-get", Self.app, "authToken"]) == ["s3cret"])
        #expect(!FileManager.default.fileExists(atPath: keyFile.path))
        #expect(try session.items(["application", Self.app, "vault", vault]).count == 1)
    }

    @Test func aMoveStoppedBeforeTheVaultChangedKeysFinishesWithTheKeyAlreadyInTheKeyring() throws {
        let session = try SecretServiceSession()
        defer { session.stop() }
        let vault = session.folder.path("app.vault")
        let keyFile = session.folder.path("app.key")
        #expect(try session.prefs(["secure", "init", "--vault", vault, "--key-file", keyFile]).succeeded)
        #expect(
            try session.prefs(["secure", "set", "token", "--vault", vault, "--key-file", keyFile], stdin: "kept")
                .succeeded)
        // The keyring item a move made before it was stopped, the vault still under its key file.
        #expect(try session.helper(["make-key", vault, Self.app]) == ["ok"])
        let made = try session.secretTool(["lookup", "application", Self.app, "vault", vault]).output
        #expect(made.count == 44)

        #expect(try session.helper(["open-moving", vault, Self.app, keyFile, "token"]) == ["kept"])
        #expect(!FileManager.default.fileExists(atPath: keyFile))
        #expect(try session.items(["application", Self.app, "vault", vault]).count == 1)
        #expect(try session.secretTool(["lookup", "application", Self.app, "vault", vault]).output == made)
    }

    @Test func processesOpeningTheDefaultVaultAtOnceMoveItOnce() throws {
        let session = try SecretServiceSession()
        defer { session.stop() }
        #expect(try session.prefs(["secure", "init", "--app", Self.app]).succeeded)
        #expect(try session.prefs(["secure", "set", "authToken", "--app", Self.app], stdin: "shared").succeeded)
        let children = try (0..<4).map { _ in
            try session.startHelper(
                ["default-get", Self.app, "authToken"], environment: ["PREFS_KEYRING_WAIT_FOR_GO": "1"])
        }
        for child in children { child.write("go\n") }
        for child in children {
            child.closeInput()
            let exit = child.wait()
            // A process that loses the race to move the vault reads it under the new key, and reports nothing: its
            // first load waits for the mover's commit, and the temporary store that tried the move reports nothing
            // once closed.
            #expect(exit.lines == ["shared"] && exit.succeeded, "\(exit)")
        }
        #expect(!FileManager.default.fileExists(atPath: session.config.appending(path: "\(Self.app)/secrets.key").path))
        #expect(try session.items(["application", Self.app]).count == 1)
    }
}
