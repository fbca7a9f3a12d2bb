import Foundation
import Prefs
import TestThreads
import Testing

@testable import PrefsCLICore

/// `prefs secure` as a user runs it, over real vault files in a temporary folder.
@Suite(.ownThreads) struct SecureCommandTests {
    static let secret = "sk_live_123RecognisableSecret"

    @Test func keyFileVaultLifecycle() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        let vault = ["--vault", sandbox.path("secrets.vault"), "--key-file", sandbox.path("secrets.key")]
        let created = try sandbox.prefs(["secure", "init"] + vault)
        #expect(created.status == 0 && created.output.hasPrefix("created vault"), "\(created)")
        let keyMode = try FileManager.default.attributesOfItem(atPath: sandbox.path("secrets.key"))[.posixPermissions]
        #expect(keyMode as? Int == 0o600)
        #expect(try sandbox.prefs(["secure", "list"] + vault).output.isEmpty)

        let secret = "eyJhbGciOi.secret-token"
        let set = try sandbox.prefs(["secure", "set", "authToken"] + vault, stdin: secret + "\n")
        #expect(set.status == 0 && set.output.isEmpty && set.error.isEmpty, "\(set)")
        try sandbox.prefs(["secure", "set", "pin", "--type", "int"] + vault, stdin: "1234")

        let hidden = try sandbox.prefs(["secure", "get", "authToken"] + vault)
        #expect(hidden.status == 0 && hidden.output.contains("--reveal"))
        #expect(!hidden.output.contains(secret) && !hidden.error.contains(secret))
        let revealed = try sandbox.prefs(["secure", "get", "authToken", "--reveal"] + vault)
        #expect(revealed.status == 0 && revealed.output == secret + "\n")
        #expect(try sandbox.prefs(["secure", "get", "pin", "--reveal", "--json"] + vault).output == "1234\n")

        let list = try sandbox.prefs(["secure", "list"] + vault)
        #expect(list.output == "authToken\npin\n")
        let verify = try sandbox.prefs(["secure", "verify"] + vault)
        #expect(verify.status == 0 && verify.output.contains("2 secrets"), "\(verify)")

        // The file holds no plaintext, and the library opens what the tool wrote.
        let bytes = try Data(contentsOf: sandbox.file("secrets.vault"))
        #expect(bytes.range(of: Data(secret.utf8)) == nil && bytes.range(of: Data("authToken".utf8)) == nil)
        let store = try EncryptedFileStore(
            url: sandbox.file("secrets.vault"), key: .keyFile(sandbox.file("secrets.key")))
        #expect(try store.value(forKey: "authToken") == .string(secret))
        #expect(try store.value(forKey: "pin") == .int(1234))

        // Without --type the stored type is kept: a pin stays an int.
        let refused = try sandbox.prefs(["secure", "set", "pin"] + vault, stdin: "12ab")
        #expect(refused.status == 2 && refused.isOneLineFailure && !refused.error.contains("12ab"), "\(refused)")

        try sandbox.prefs(["secure", "delete", "pin"] + vault).expectSuccess()
        #expect(try sandbox.prefs(["secure", "list"] + vault).output == "authToken\n")
        for command in [["get", "pin"], ["delete", "pin"]] {
            let missing = try sandbox.prefs(["secure"] + command + vault)
            #expect(missing.status == 1 && missing.isOneLineFailure, "\(missing)")
        }
        let again = try sandbox.prefs(["secure", "init"] + vault)
        #expect(again.status == 2 && again.isOneLineFailure)
    }

    @Test func wrongKeysAndTamperingAreAuthenticationFailures() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        let path = sandbox.path("v.vault")
        let good = ["--vault", path, "--key-file", sandbox.path("good.key")]
        try sandbox.prefs(["secure", "init"] + good)
        try sandbox.prefs(["secure", "set", "token"] + good, stdin: "s3cret")
        try sandbox.prefs([
            "secure", "init", "--vault", sandbox.path("other.vault"), "--key-file", sandbox.path("bad.key"),
        ])
        let before = try Data(contentsOf: sandbox.file("v.vault"))

        let wrongKey = ["--vault", path, "--key-file", sandbox.path("bad.key")]
        for command in [["verify"], ["list"], ["get", "token", "--reveal"], ["delete", "token"]] {
            let result = try sandbox.prefs(["secure"] + command + wrongKey)
            #expect(result.status == 3 && result.isOneLineFailure, "\(command): \(result)")
            #expect(result.error.contains("authentication failed"))
        }
        let set = try sandbox.prefs(["secure", "set", "token"] + wrongKey, stdin: "overwrite")
        #expect(set.status == 3)
        #expect(try Data(contentsOf: sandbox.file("v.vault")) == before)

        var tampered = before
        tampered[tampered.count - 5] ^= 0x01
        try tampered.write(to: sandbox.file("v.vault"))
        let verify = try sandbox.prefs(["secure", "verify"] + good)
        #expect(verify.status == 3 && verify.isOneLineFailure, "\(verify)")
        #expect(try Data(contentsOf: sandbox.file("v.vault")) == tampered)

        try Data("not a vault at all".utf8).write(to: sandbox.file("v.vault"))
        #expect(try sandbox.prefs(["secure", "verify"] + good).status == 3)
        let missing = try sandbox.prefs([
            "secure", "verify", "--vault", sandbox.path("absent.vault"), "--key-file",
            sandbox.path("good.key"),
        ])
        #expect(missing.status == 1 && missing.isOneLineFailure)
    }

    @Test func passphraseFromTheEnvironmentAndRekey() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        let passphrase = ["PREFS_TEST_PASSPHRASE": "correct horse battery staple", "WRONG": "tr0ub4dor"]
        let vault = ["--vault", sandbox.path("p.vault")]
        let withPassphrase = vault + ["--passphrase-env", "PREFS_TEST_PASSPHRASE"]
        try sandbox.prefs(["secure", "init"] + withPassphrase, environment: passphrase).expectSuccess()
        try sandbox.prefs(["secure", "set", "token"] + withPassphrase, stdin: "abc", environment: passphrase)
        let wrong = try sandbox.prefs(
            ["secure", "get", "token", "--reveal", "--passphrase-env", "WRONG"] + vault, environment: passphrase)
        #expect(wrong.status == 3 && wrong.isOneLineFailure, "\(wrong)")
        let unset = try sandbox.prefs(["secure", "list", "--passphrase-env", "PREFS_UNSET_VARIABLE"] + vault)
        #expect(unset.status == 2 && unset.isOneLineFailure && unset.error.contains("PREFS_UNSET_VARIABLE"))
        let keyFileOnPassphraseVault = try sandbox.prefs(["secure", "list", "--key-file", sandbox.path("k")] + vault)
        #expect(keyFileOnPassphraseVault.status != 0 && keyFileOnPassphraseVault.isOneLineFailure)

        // Passphrase to key file: afterwards only the key file opens it, and the secret is intact.
        let rekey = try sandbox.prefs(
            ["secure", "rekey", "--new-key-file", sandbox.path("new.key")] + withPassphrase, environment: passphrase)
        #expect(rekey.status == 0, "\(rekey)")
        #expect(try sandbox.prefs(["secure", "verify"] + withPassphrase, environment: passphrase).status == 3)
        let withKeyFile = vault + ["--key-file", sandbox.path("new.key")]
        #expect(try sandbox.prefs(["secure", "get", "token", "--reveal"] + withKeyFile).output == "abc\n")
        // And back to a passphrase.
        let back = try sandbox.prefs(
            ["secure", "rekey", "--new-passphrase-env", "WRONG"] + withKeyFile, environment: passphrase)
        #expect(back.status == 0, "\(back)")
        let reopened = try sandbox.prefs(
            ["secure", "get", "token", "--reveal", "--passphrase-env", "WRONG"] + vault, environment: passphrase)
        #expect(reopened.output == "abc\n")
    }

    /// A passphrase (or a secret) on the command line is refused before anything is opened or written.
    @Test(arguments: [
        ["secure", "init", "--passphrase", "hunter2"], ["secure", "list", "--passphrase=hunter2"],
        ["secure", "rekey", "--new-passphrase", "hunter2"], ["secure", "verify", "--password", "hunter2"],
        ["secure", "--passphrase", "hunter2", "list"], ["secure", "set", "token", "--secret=hunter2"],
    ])
    func passphraseOnTheCommandLineIsRefused(arguments: [String]) throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        let result = try sandbox.prefs(arguments + ["--vault", sandbox.path("v.vault")])
        #expect(result.status == 2 && result.isOneLineFailure, "\(result)")
        #expect(result.error.contains("ps") && result.error.contains("--passphrase-env"))
        #expect(!result.error.contains("hunter2"))
        #expect(!FileManager.default.fileExists(atPath: sandbox.path("v.vault")))
    }

    @Test(.enabled(if: !hasControllingTerminal, "a child would prompt on this terminal"))
    func withoutATerminalAPassphraseMustComeFromElsewhere() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        let result = try sandbox.prefs("secure", "init", "--vault", sandbox.path("v.vault"))
        #expect(result.status == 2 && result.isOneLineFailure, "\(result)")
        #expect(result.error.contains("--passphrase-env"))
        #expect(!FileManager.default.fileExists(atPath: sandbox.path("v.vault")))
    }

    /// Without --vault, the app's default vault and key file in the XDG folders are used.
    @Test func defaultVaultOfAnApp() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try sandbox.prefs("secure", "init", "--app", "com.example.notes").expectSuccess()
        try sandbox.prefs("secure", "set", "token", "--app", "com.example.notes", stdin: "xyz")
        let location = sandbox.data.appending(path: "com.example.notes/secrets.vault")
        let key = sandbox.config.appending(path: "com.example.notes/secrets.key")
        #expect(try EncryptedFileStore(url: location, key: .keyFile(key)).value(forKey: "token") == .string("xyz"))
        #expect(try sandbox.prefs("secure", "list").status == 1)  // the tool's own vault does not exist yet
        let both = try sandbox.prefs("secure", "list", "--app", "x", "--vault", sandbox.path("v"))
        #expect(both.status == 2 && both.isOneLineFailure)
    }

    /// "With neither [`--vault` nor `--app`], the tool's own vault is used (`--app prefs`)."
    @Test func withoutVaultOrAppTheToolsOwnVaultIsUsed() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try sandbox.prefs("secure", "init").expectSuccess()
        try sandbox.prefs("secure", "set", "token", stdin: "abc\n").expectSuccess()
        let vault = sandbox.data.appending(path: "prefs/secrets.vault")
        let key = sandbox.config.appending(path: "prefs/secrets.key")
        #expect(try EncryptedFileStore(url: vault, key: .keyFile(key)).value(forKey: "token") == .string("abc"))
        #expect(try sandbox.prefs("secure", "list", "--app", "prefs").output == "token\n")
    }

    @Test func aSecretGivenAsAnArgumentIsNeverEchoed() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        let vault = ["--vault", sandbox.path("s.vault"), "--key-file", sandbox.path("s.key")]
        try sandbox.prefs(["secure", "init"] + vault)
        for arguments in [["secure", "set", "tok", Self.secret] + vault, ["secure", Self.secret] + vault] {
            let result = try sandbox.prefs(arguments, stdin: "")
            #expect(result.status == ExitStatus.usage.rawValue, "\(result)")
            #expect(result.isOneLineFailure, "\(result)")
            #expect(!result.error.contains("sk_live"), "\(result)")
        }
    }

    @Test func anAppIdentifierLongerThanAFolderNameIsRefused() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        let app = String(repeating: "a", count: 300)
        let result = try sandbox.prefs("secure", "init", "--app", app)
        #expect(result.status == ExitStatus.usage.rawValue, "\(result)")
        #expect(result.error.contains("--app"), "\(result)")
        // Nothing went to the `prefs` vault instead.
        #expect(!FileManager.default.fileExists(atPath: sandbox.data.appending(path: "prefs").path()))
    }

    @Test func anOlderCopyOfAVaultExitsWithStatus3AndStaysUntouched() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        let state = ["XDG_STATE_HOME": sandbox.path("state")]
        let vault = ["--vault", sandbox.path("s.vault"), "--key-file", sandbox.path("s.key")]
        try sandbox.prefs(["secure", "init"] + vault, environment: state)
        try sandbox.prefs(["secure", "set", "tok"] + vault, stdin: "old-token\n", environment: state)
        let old = try Data(contentsOf: sandbox.file("s.vault"))
        try sandbox.prefs(["secure", "set", "tok"] + vault, stdin: "new-token\n", environment: state)
        try old.write(to: sandbox.file("s.vault"))
        let result = try sandbox.prefs(["secure", "get", "tok", "--reveal"] + vault, environment: state)
        #expect(result.status == ExitStatus.integrity.rawValue, "\(result)")
        #expect(result.isOneLineFailure && result.error.contains("older copy"), "\(result)")
        #expect(try Data(contentsOf: sandbox.file("s.vault")) == old)
    }

    @Test func aServiceCredentialKeysTheVaultAndEveryUnusableOneIsAOneLineFailure() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try FileManager.default.createDirectory(at: sandbox.file("credentials"), withIntermediateDirectories: true)
        try Data(repeating: 3, count: 32).write(to: sandbox.file("credentials/vault-key"))
        try Data(repeating: 3, count: 16).write(to: sandbox.file("credentials/short"))
        let credentials = ["CREDENTIALS_DIRECTORY": sandbox.path("credentials")]
        let vault = sandbox.path("service.vault")
        let byCredential = ["--vault", vault, "--credential", "vault-key"]
        let created = try sandbox.prefs(["secure", "init"] + byCredential, environment: credentials)
        #expect(created.output == "created vault \(vault), protected by service credential vault-key\n", "\(created)")
        try sandbox.prefs(["secure", "set", "token"] + byCredential, stdin: "abc\n", environment: credentials)
            .expectSuccess()
        let revealed = try sandbox.prefs(
            ["secure", "get", "token", "--reveal"] + byCredential, environment: credentials)
        #expect(revealed.output == "abc\n", "\(revealed)")

        let unset = try sandbox.prefs(["secure", "list"] + byCredential)
        #expect(
            unset.status == 1 && unset.isOneLineFailure && unset.error.contains("$CREDENTIALS_DIRECTORY"), "\(unset)")
        let short = try sandbox.prefs(
            ["secure", "list", "--vault", vault, "--credential", "short"], environment: credentials)
        #expect(short.status == 3 && short.isOneLineFailure && short.error.contains("16 bytes"), "\(short)")
        let traversal = try sandbox.prefs(
            ["secure", "list", "--vault", vault, "--credential", "../x"], environment: credentials)
        #expect(traversal.status == 2 && traversal.isOneLineFailure, "\(traversal)")
        #expect(try Data(contentsOf: sandbox.file("credentials/vault-key")) == Data(repeating: 3, count: 32))
    }
}
