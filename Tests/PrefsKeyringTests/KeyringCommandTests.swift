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
