import Foundation
import PrefsTestSupport
import TestThreads
import Testing

/// `prefs secure … --keyring` against a real GNOME Keyring on the test's own session bus.
@Suite(.ownThreads) struct KeyringCommandTests {
    @Test func everySecureCommandUsesTheKeyringAndSecretToolShowsTheItem() throws {
        let session = try SecretServiceSession()
        defer { session.stop() }
        let vault = session.folder.path("cli.vault")
        let keyring = ["--vault", vault, "--app", "com.example.cli", "--keyring"]
        let created = try session.prefs(["secure", "init"] + keyring)
        #expect(created.succeeded, "\(created)")
        #expect(
            created.output
                == "created vault \(vault), protected by the desktop keyring (application com.example.cli) (see it "
                + "with `secret-tool search application com.example.cli vault \(vault)`)\n")
        let search = try session.secretTool(["search", "application", "com.example.cli", "vault", vault])
        #expect(search.output.contains("label = com.example.cli secrets vault key (\(vault))"), "\(search)")

        #expect(try session.prefs(["secure", "set", "token"] + keyring, stdin: "abc\n").succeeded)
        #expect(try session.prefs(["secure", "get", "token", "--reveal"] + keyring).output == "abc\n")
        #expect(try session.prefs(["secure", "list"] + keyring).output == "token\n")
        #expect(try session.prefs(["secure", "verify"] + keyring).output.contains("1 secret"))
        // Another app's item is not this vault's key.
        let other = try session.prefs(["secure", "list", "--vault", vault, "--app", "com.example.other", "--keyring"])
        #expect(other.status == 3 && other.error.contains("keeps no key for the vault \(vault)"), "\(other)")
        // --vault with --app stays refused without the keyring, and two key sources at once too.
        #expect(try session.prefs(["secure", "list", "--vault", vault, "--app", "com.example.cli"]).status == 2)
        let both = try session.prefs(["secure", "list", "--vault", vault, "--keyring", "--key-file", "k"])
        #expect(both.status == 2 && both.error.contains("give one of"), "\(both)")
        let nowhere = try session.prefs(["secure", "move-key", "--vault", vault, "--keyring"])
        #expect(nowhere.status == 2 && nowhere.error.contains("say where the key moves"), "\(nowhere)")
    }

    /// A vault records which kind of place keeps its key: opened without `--keyring`, the tool names it, and the
    /// command it suggests works.
    @Test func aKeyringVaultOpenedWithoutKeyringNamesTheOption() throws {
        let session = try SecretServiceSession()
        defer { session.stop() }
        let app = "com.example.where"
        #expect(try session.prefs(["secure", "init", "--app", app, "--keyring"]).succeeded)
        #expect(try session.prefs(["secure", "set", "token", "--app", app, "--keyring"], stdin: "abc\n").succeeded)
        let vault = session.data.appending(path: "\(app)/secrets.vault").path(percentEncoded: false)
        let listed = try session.prefs(["secure", "list", "--app", app])
        #expect(listed.status == 3 && listed.output.isEmpty, "\(listed)")
        #expect(
            listed.error
                == "prefs secure list: the key of vault \(vault) is kept in the desktop keyring, not in a key file; "
                + "run `prefs secure list --app \(app) --keyring`\n", "\(listed)")
        #expect(try session.prefs(["secure", "list", "--app", app, "--keyring"]).output == "token\n")
        // A vault named by its path: --app too, which names the keyring item.
        let byPath = try session.prefs(["secure", "verify", "--vault", vault, "--key-file", session.folder.path("k")])
        #expect(byPath.status == 3 && byPath.error.contains("--keyring --app ID`"), "\(byPath)")
    }

    /// `move-key` says what it removed (the old key, not the keyring), and moving a key to where it is already kept
    /// changes nothing and says so.
    @Test func movingAKeyWhereItIsAlreadyKeptChangesNothing() throws {
        let session = try SecretServiceSession()
        defer { session.stop() }
        let vault = session.folder.path("same.vault")
        let app = "com.example.same"
        let keyring = ["--vault", vault, "--app", app, "--keyring"]
        #expect(try session.prefs(["secure", "init"] + keyring).succeeded)
        let before = try Data(contentsOf: URL(filePath: vault))
        let same = try session.prefs(["secure", "move-key", "--new-keyring"] + keyring)
        #expect(same.status == 0 && same.error.isEmpty, "\(same)")
        #expect(
            same.output
                == "vault \(vault)'s key is already kept in the desktop keyring (application \(app)); nothing was "
                + "changed\n", "\(same)")
        #expect(try Data(contentsOf: URL(filePath: vault)) == before)
        #expect(try session.items(["application", app, "vault", vault]).count == 1)

        let keyFile = session.folder.path("same.key")
        let moved = try session.prefs(["secure", "move-key", "--new-key-file", keyFile] + keyring)
        #expect(moved.status == 0, "\(moved)")
        #expect(moved.output.hasSuffix("; removed the old key from the desktop keyring (application \(app))\n"))
        #expect(try session.items(["application", app, "vault", vault]).isEmpty)
        // A copy of the key file holds the same key: the vault is under it, and both files are kept.
        let copy = session.folder.path("copy.key")
        try FileManager.default.copyItem(atPath: keyFile, toPath: copy)
        let copied = try session.prefs([
            "secure", "move-key", "--vault", vault, "--key-file", keyFile, "--new-key-file", copy,
        ])
        #expect(
            copied.status == 0 && copied.output.contains("which holds the same key as key file \(keyFile)"), "\(copied)"
        )
        #expect(FileManager.default.fileExists(atPath: keyFile) && FileManager.default.fileExists(atPath: copy))
    }

    @Test func withoutASecretServiceTheCommandFailsInOneLineAndWritesNothing() throws {
        let session = try SecretServiceSession(secretService: false)
        defer { session.stop() }
        let vault = session.folder.path("cli.vault")
        let failed = try session.prefs(["secure", "init", "--vault", vault, "--keyring"])
        #expect(failed.status == 1 && failed.output.isEmpty, "\(failed)")
        #expect(failed.error.hasPrefix("prefs secure init: no Secret Service on the session bus"), "\(failed)")
        #expect(failed.error.split(separator: "\n").count == 1)
        #expect(!FileManager.default.fileExists(atPath: vault))
    }
}
