import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

#if canImport(Glibc)
    import Glibc
#endif

/// `VaultKey.credential(name)`: the key systemd passes a service in `$CREDENTIALS_DIRECTORY/<name>`, read from a
/// faked credentials folder (the process's own variable is read the same way: `ServiceCredentialProcessTests`).
@Suite(.ownThreads) struct ServiceCredentialTests {
    /// A credentials folder holding `name` with `bytes`, read-only as systemd makes it.
    static func credentials(_ folder: TempDir, _ name: String, _ bytes: Data) throws -> [String: String] {
        try folder.createFolders(["credentials"])
        let file = folder.file("credentials/\(name)")
        try bytes.write(to: file)
        chmod(file.path, 0o400)
        return ["CREDENTIALS_DIRECTORY": folder.path("credentials")]
    }

    static func key(_ name: String, _ environment: [String: String]) -> VaultKey {
        .source(ServiceCredential(name: name, environment: environment))
    }

    @Test func aVaultOpensWithItsKeyFromACredentialAndTheCredentialIsOnlyRead() throws {
        let folder = try TempDir()
        defer { folder.cleanup() }
        let environment = try Self.credentials(folder, "vault-key", Data((0..<32).map { UInt8($0) }))
        let url = folder.file("secrets.vault")
        try EncryptedFileStore(url: url, key: Self.key("vault-key", environment)).setValue(.string("t"), forKey: "a")
        let reopened = try EncryptedFileStore(url: url, key: Self.key("vault-key", environment))
        #expect(try reopened.value(forKey: "a") == .string("t"))
        // The same bytes as a raw key open it: the credential is the key itself.
        let raw = try EncryptedFileStore(url: url, key: .raw(Data((0..<32).map { UInt8($0) })))
        #expect(try raw.value(forKey: "a") == .string("t"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path("credentials")) == ["vault-key"])
    }

    @Test func everyUnusableCredentialIsItsOwnError() throws {
        let folder = try TempDir()
        defer { folder.cleanup() }
        let url = folder.file("secrets.vault")
        func failure(_ name: String, _ environment: [String: String]) -> CredentialError? {
            let store = try? EncryptedFileStore(url: url, key: Self.key(name, environment))
            return #expect(throws: CredentialError.self) { try store?.setValue(.int(1), forKey: "n") }
        }
        #expect(failure("vault-key", [:]) == .directoryNotSet(name: "vault-key"))
        #expect(failure("vault-key", ["CREDENTIALS_DIRECTORY": ""]) == .directoryNotSet(name: "vault-key"))
        let environment = try Self.credentials(folder, "empty", Data())
        for name in ["", ".", "..", "a/b", "../secrets.key"] {
            #expect(failure(name, environment) == .invalidName(name))
        }
        let directory = folder.path("credentials")
        #expect(failure("absent", environment) == .missing(path: directory + "/absent"))
        #expect(failure("empty", environment) == .empty(path: directory + "/empty"))
        _ = try Self.credentials(folder, "short", Data(repeating: 1, count: 31))
        _ = try Self.credentials(folder, "long", Data(repeating: 1, count: 33))
        #expect(failure("short", environment) == .wrongSize(path: directory + "/short", size: 31))
        #expect(failure("long", environment) == .wrongSize(path: directory + "/long", size: 33))
        try folder.createFolders(["credentials/folder"])
        if case .unreadable(let path, let reason)? = failure("folder", environment) {
            #expect(path == directory + "/folder" && reason.contains("directory"), "\(reason)")
        } else {
            Issue.record("a folder in place of the credential is not unreadable")
        }
        // A trailing slash on the folder is the same folder.
        #expect(failure("absent", ["CREDENTIALS_DIRECTORY": directory + "/"]) == .missing(path: directory + "/absent"))
        // Nothing was created: no vault, no credential.
        #expect(!FileManager.default.fileExists(atPath: url.path))
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: directory).sorted() == [
                "empty", "folder", "long", "short",
            ])
        #expect(
            CredentialError.wrongSize(path: "/c/k", size: 31).description.contains("is 31 bytes, expected the 32-byte"))
    }

    @Test func movingAVaultAwayFromACredentialMovesItButLeavesTheCredentialToSystemd() throws {
        let folder = try TempDir()
        defer { folder.cleanup() }
        let environment = try Self.credentials(folder, "vault-key", Data(repeating: 9, count: 32))
        let url = folder.file("secrets.vault")
        let store = try EncryptedFileStore(url: url, key: Self.key("vault-key", environment))
        try store.setValue(.string("t"), forKey: "a")
        let keyFile = folder.file("secrets.key")
        #expect(throws: CredentialError.notRemovable(name: "vault-key")) { try store.moveKey(to: .keyFile(keyFile)) }
        #expect(try EncryptedFileStore(url: url, key: .keyFile(keyFile)).value(forKey: "a") == .string("t"))
        #expect(FileManager.default.fileExists(atPath: folder.path("credentials/vault-key")))
        #expect(CredentialError.notRemovable(name: "vault-key").description.contains("remove it from the unit"))
    }
}
