import Foundation
import PrefsTestSupport
import TestThreads
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `PrefsConfig.secureStoreKey = .credential(name)` in processes given a `$CREDENTIALS_DIRECTORY`, as systemd starts
/// a service with `LoadCredential=`.
@Suite(.ownThreads) struct ServiceCredentialProcessTests {
    /// The folders of one test: XDG homes and a credentials folder holding `vault-key` with `key`.
    static func environment(_ folder: TempDir, key: Data?) throws -> [String: String] {
        try folder.createFolders(["credentials"])
        if let key {
            try key.write(to: folder.file("credentials/vault-key"))
            chmod(folder.path("credentials/vault-key"), 0o400)
        }
        return [
            "XDG_DATA_HOME": folder.path("data"), "XDG_CONFIG_HOME": folder.path("config"),
            "XDG_STATE_HOME": folder.path("state"), "CREDENTIALS_DIRECTORY": folder.path("credentials"),
        ]
    }

    @Test func theDefaultVaultTakesItsKeyFromTheServiceCredential() throws {
        let folder = try TempDir()
        defer { folder.cleanup() }
        let environment = try Self.environment(folder, key: Data(repeating: 7, count: 32))
        let set = try ChildProcess.run(["credential-default", "vault-key", "token", "t0k"], environment: environment)
        #expect(set.lines == ["t0k"], "\(set)")
        let get = try ChildProcess.run(["credential-default", "vault-key", "token"], environment: environment)
        #expect(get.lines == ["t0k"], "\(get)")
        #expect(FileManager.default.fileExists(atPath: folder.path("data/com.example.helper/secrets.vault")))
        #expect(!FileManager.default.fileExists(atPath: folder.path("config/com.example.helper/secrets.key")))
    }

    @Test func withoutAUsableCredentialSecretsReadNilTheErrorIsReportedAndNoKeyFileIsMade() throws {
        let folder = try TempDir()
        defer { folder.cleanup() }
        var environment = try Self.environment(folder, key: nil)
        environment["CREDENTIALS_DIRECTORY"] = ""
        let unset = try ChildProcess.run(["credential-default", "vault-key", "token", "t"], environment: environment)
        #expect(unset.lines.first?.hasPrefix("error CredentialError: no service credentials") == true, "\(unset)")
        #expect(unset.lines.last == "nil")

        environment = try Self.environment(folder, key: Data(repeating: 7, count: 31))
        let short = try ChildProcess.run(["credential-default", "vault-key", "token", "t"], environment: environment)
        #expect(short.lines.first?.contains("is 31 bytes, expected the 32-byte vault key") == true, "\(short)")
        // A vault under the credential, opened without it: reported once, read as nil, the vault untouched.
        environment = try Self.environment(folder, key: Data(repeating: 7, count: 32))
        #expect(
            try ChildProcess.run(["credential-default", "vault-key", "token", "t"], environment: environment).lines == [
                "t"
            ])
        let vault = try Data(contentsOf: folder.file("data/com.example.helper/secrets.vault"))
        try FileManager.default.removeItem(atPath: folder.path("credentials/vault-key"))
        let missing = try ChildProcess.run(["credential-default", "vault-key", "token"], environment: environment)
        #expect(
            missing.lines == [
                "reported CredentialError: credential \(folder.path("credentials/vault-key")) does not exist; add LoadCredential= (or LoadCredentialEncrypted=) for it to the unit",
                "nil",
            ], "\(missing)")
        #expect(try Data(contentsOf: folder.file("data/com.example.helper/secrets.vault")) == vault)
        #expect(!FileManager.default.fileExists(atPath: folder.path("config/com.example.helper/secrets.key")))
    }

    @Test func configuringTheVaultKeyAfterTheDefaultVaultOpenedIsRefusedAndReported() throws {
        let folder = try TempDir()
        defer { folder.cleanup() }
        let environment = try Self.environment(folder, key: nil)
        let late = try ChildProcess.run(["secure-store-key-late"], environment: environment)
        #expect(late.lines.count == 3, "\(late)")
        #expect(late.lines.first == "nil")
        #expect(
            late.lines.dropFirst().first?.contains(
                "PrefsConfig.configure was called after the default stores were in use; secureStoreKey left") == true,
            "\(late)")
        #expect(late.lines.last == "unchanged")
    }
}
