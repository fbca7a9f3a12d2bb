import EngineTestSupport
import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

/// A vault in a fresh folder, opened with a key file.
struct Vault {
    let directory: TempDir
    let store: EncryptedFileStore
    var url: URL { directory.file("secrets.vault") }
    var keyFile: URL { directory.file("secrets.key") }

    init(fileSystem: any FileSystem = POSIXFileSystem()) throws {
        directory = try TempDir()
        store = try EncryptedFileStore(
            url: directory.file("secrets.vault"), key: .keyFile(directory.file("secrets.key")), cost: .testing,
            fileSystem: fileSystem)
    }

    func reopen(key: VaultKey? = nil) throws -> EncryptedFileStore {
        try EncryptedFileStore(url: url, key: key ?? .keyFile(keyFile), cost: .testing)
    }
}

@Suite(.ownThreads)
struct SecureStoredValueTests {
    @Test func secretsAreOptionalAndRemovable() throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        @SecureStoredValue<String>(key: "authToken", store: vault.store) var authToken
        #expect(authToken == nil)
        try $authToken.set("eyJhbGciOi")
        #expect(authToken == "eyJhbGciOi")
        try $authToken.reset()
        #expect(authToken == nil)
        try $authToken.set("again")
        try $authToken.set(nil)
        #expect(authToken == nil)
        #expect(try vault.store.allValues().isEmpty)
    }

    @Test func everyHelper() throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        let store = vault.store
        let biometrics = SecureStoredValue<Bool>(key: "biometricsEnabled", store: store)
        try biometrics.toggle()
        #expect(biometrics.wrappedValue == true)
        try biometrics.toggle()
        #expect(biometrics.wrappedValue == false)

        let devices = SecureStoredValue<[String]>(key: "trustedDevices", store: store)
        try devices.append("device-abc")
        try devices.append("old")
        try devices.replace("old", with: "new")
        try devices.togglePresence("device-abc")
        #expect(devices.wrappedValue == ["new"])
        try devices.remove("new")
        #expect(devices.wrappedValue == [])

        let credentials = SecureStoredValue<Credentials>(key: "credentials", store: store)
        try credentials.set(\.accessToken, to: "ignored while nothing is stored")
        #expect(credentials.wrappedValue == nil)
        try credentials.set(Credentials(accessToken: "a", refreshToken: "r"))
        try credentials.set(\.accessToken, to: "new-token")
        #expect(credentials.wrappedValue == Credentials(accessToken: "new-token", refreshToken: "r"))

        let keys = SecureStoredValue<[String: String]>(key: "apiKeys", store: store)
        try keys.update(key: "github", value: "ghp_1")
        try keys.update(key: "gitlab", value: "glpat_2")
        try keys.update(key: "github", value: nil)
        #expect(keys.wrappedValue == ["gitlab": "glpat_2"])

        // Everything survives a fresh open of the file.
        let reopened = try vault.reopen()
        #expect(
            SecureStoredValue<Credentials>(key: "credentials", store: reopened).wrappedValue?.accessToken == "new-token"
        )
    }

    @Test func keysNamingTheirServiceKeepTwoAccountsApart() throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        let work = SecureStoredValue<String>(key: "work.token", store: vault.store)
        let home = SecureStoredValue<String>(key: "home.token", store: vault.store)
        try work.set("w")
        try home.set("h")
        #expect(work.wrappedValue == "w")
        #expect(home.wrappedValue == "h")
        #expect(Set(try vault.store.allValues().keys) == ["work.token", "home.token"])
    }

    @Test func descriptionsAndMirrorsNeverShowTheSecret() throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        let token = SecureStoredValue<String>(key: "authToken", store: vault.store)
        try token.set("super-secret-value")
        var dumped = ""
        dump(token, to: &dumped)
        for text in [token.description, token.debugDescription, String(describing: token), dumped] {
            #expect(!text.contains("super-secret-value"))
            #expect(text.contains("authToken"))
        }
    }

    @Test func plaintextAndKeyNamesAreAbsentFromTheFile() throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        try SecureStoredValue<String>(key: "githubPersonalToken", store: vault.store).set("ghp_plaintextneedle")
        let bytes = try Data(contentsOf: vault.url)
        #expect(bytes.range(of: Data("ghp_plaintextneedle".utf8)) == nil)
        #expect(bytes.range(of: Data("githubPersonalToken".utf8)) == nil)
        let vaultMode = try FileManager.default.attributesOfItem(atPath: vault.url.path)[.posixPermissions] as? Int
        let keyMode = try FileManager.default.attributesOfItem(atPath: vault.keyFile.path)[.posixPermissions] as? Int
        #expect(vaultMode == 0o600)
        #expect(keyMode == 0o600)
    }

    @Test func valuesStreamYieldsNilOnRemoval() async throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        let token = SecureStoredValue<String>(key: "authToken", store: vault.store)
        let stream = token.values
        try token.set("a")
        try token.reset()
        #expect(try await first(3, of: stream) == [nil, "a", nil])
    }

    @Test func aWrongKeyIsRefusedAndTheFileLeftUntouched() throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        try SecureStoredValue<String>(key: "k", store: vault.store).set("v")
        let before = try Data(contentsOf: vault.url)
        let otherKey = vault.directory.file("other.key")
        try Data((0..<32).map { _ in UInt8.random(in: 0...255) }).write(to: otherKey)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: otherKey.path)
        #expect(throws: VaultError.authenticationFailed) { try vault.reopen(key: .keyFile(otherKey)) }
        // A missing key file for an existing vault is an error too, and is not created.
        let missing = vault.directory.file("missing.key")
        #expect(throws: VaultError.self) { try vault.reopen(key: .keyFile(missing)) }
        #expect(!FileManager.default.fileExists(atPath: missing.path))
        #expect(throws: VaultError.authenticationFailed) { try vault.reopen(key: .raw(Data(repeating: 7, count: 32))) }
        #expect(try Data(contentsOf: vault.url) == before)
    }

    @Test func passphraseVaultsReopenOnlyWithThePassphrase() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let url = directory.file("p.vault")
        let store = try EncryptedFileStore(url: url, key: .passphrase("correct horse"), cost: .testing)
        try store.setValue(.string("s3cret"), forKey: "pin")
        let before = try Data(contentsOf: url)
        #expect(throws: VaultError.authenticationFailed) {
            try EncryptedFileStore(url: url, key: .passphrase("wrong horse"), cost: .testing)
        }
        #expect(try Data(contentsOf: url) == before)
        let reopened = try EncryptedFileStore(url: url, key: .passphrase("correct horse"), cost: .testing)
        #expect(try reopened.value(forKey: "pin") == .string("s3cret"))
    }

    @Test func rekeyMovesTheVaultToTheNewKeyAtomically() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let url = directory.file("r.vault")
        let oldKey = VaultKey.passphrase("old passphrase")
        let newKey = VaultKey.raw(Data((0..<32).map { UInt8($0) }))
        let store = try EncryptedFileStore(url: url, key: oldKey, cost: .testing)
        try store.setValue(.string("v"), forKey: "k")
        try store.rekey(to: newKey)
        #expect(throws: VaultError.self) { try EncryptedFileStore(url: url, key: oldKey, cost: .testing) }
        #expect(try EncryptedFileStore(url: url, key: newKey, cost: .testing).value(forKey: "k") == .string("v"))
        // The store keeps working under the new key.
        try store.setValue(.string("w"), forKey: "k")
        #expect(try EncryptedFileStore(url: url, key: newKey, cost: .testing).value(forKey: "k") == .string("w"))
    }

    @Test func aFutureFormatVersionIsRefusedUntouched() throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        try vault.store.setValue(.int(1), forKey: "k")
        var bytes = try Data(contentsOf: vault.url)
        bytes[8] = 4  // the little-endian format version follows the 8-byte magic
        try bytes.write(to: vault.url)
        #expect(throws: VaultError.unsupportedFormatVersion(4)) { try vault.reopen() }
        #expect(try Data(contentsOf: vault.url) == bytes)
    }

    @Test func replaceAllSealsEverySecretAtOnceAndAnnouncesOnlyChangedKeys() async throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        try vault.store.setValue(.string("old"), forKey: "kept")
        try vault.store.setValue(.string("gone"), forKey: "removed")
        let token = SecureStoredValue<String>(key: "kept", store: vault.store)
        #expect(token.wrappedValue == "old")
        var changes = vault.store.changedKeys().makeAsyncIterator()

        try vault.store.replaceAll(["kept": .string("new"), "added": .int(7)])

        #expect(token.wrappedValue == "new")
        let reopened = try vault.reopen()
        #expect(try reopened.allValues() == ["kept": .string("new"), "added": .int(7)])
        var announced: Set<String> = []
        for _ in 0..<3 { if let key = await changes.next() { announced.insert(key) } }
        #expect(announced == ["kept", "added", "removed"])
    }

    @Test func unopenableVaultReadsNilReportsAndThrowsOnWrite() throws {
        // What PrefsConfig.secureStore falls back to when the default vault cannot be opened.
        Reports.install()
        let key = uniqueKey("token")
        let failure = VaultError.insecureKeyFile(path: "/tmp/secrets.key", mode: 0o644)
        let unavailable = UnavailableStore(failure)
        @SecureStoredValue<String>(key: key, store: unavailable) var token
        #expect(token == nil)
        #expect(Reports.for(key).contains { ($0.error as? VaultError) == failure && $0.operation == .read })
        #expect(throws: failure) { try $token.set("eyJ") }
        #expect(throws: failure) { try unavailable.allValues() }
    }

    @Test func secureUpdateIsAtomicAndSeesNil() throws {
        let folder = try TempDir()
        defer { folder.cleanup() }
        let vault = try EncryptedFileStore(url: folder.file("v.vault"), key: .keyFile(folder.file("v.key")))
        @SecureStoredValue<Int>(key: "refreshCount", store: vault) var refreshCount
        try $refreshCount.update { $0 = ($0 ?? 0) + 1 }
        try $refreshCount.update { $0 = ($0 ?? 0) + 1 }
        #expect(refreshCount == 2)
        try $refreshCount.update { $0 = nil }
        #expect(try vault.allValues().isEmpty)
    }

    @Test func secureChangesYieldOldAndNewSecrets() async throws {
        let vault = InMemoryStore()
        let token = SecureStoredValue<String>(key: "token", store: vault)
        let changes = token.changes
        try token.set("a")
        try token.reset()
        let pairs = try await first(2, of: changes)
        #expect(pairs.map(\.old) == [nil, "a"])
        #expect(pairs.map(\.new) == ["a", nil])
    }

    @Test func secureArraysAppendContentsOf() throws {
        let devices = SecureStoredValue<[String]>(key: "devices", store: InMemoryStore())
        try devices.append(contentsOf: ["a", "b"])
        try devices.append(contentsOf: ["c"])
        #expect(devices.wrappedValue == ["a", "b", "c"])
    }
}

@Suite(.ownThreads)
struct VaultTamperingTests {
    /// Every single-bit flip and every truncation of a real vault file is refused by `EncryptedFileStore`, and the
    /// refused file is left exactly as it was. Cut to nothing, a vault whose record remembers it is refused too; an
    /// empty file that no vault was ever written to is no values, as a missing one is.
    @Test func everyBitFlipAndTruncationIsRefusedUntouched() throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        try SecureStoredValue<String>(key: "pin", store: vault.store).set("1234")
        let original = try Data(contentsOf: vault.url)
        vault.store.close()
        try Data().write(to: vault.url)
        #expect(throws: VaultError.self, "a remembered vault cut to nothing") {
            try EncryptedFileStore(url: vault.url, key: .keyFile(vault.keyFile))
        }
        #expect(try Data(contentsOf: vault.url).isEmpty)
        let probe = vault.directory.file("probe.vault")
        try Data().write(to: probe)
        #expect(try EncryptedFileStore(url: probe, key: .keyFile(vault.keyFile)).allValues().isEmpty)
        var refusals = 0
        var variants: [Data] = (1..<original.count).map { Data(original.prefix($0)) }
        for bit in 0..<(original.count * 8) {
            var flipped = original
            flipped[bit / 8] ^= UInt8(1) << UInt8(bit % 8)
            variants.append(flipped)
        }
        for variant in variants {
            try variant.write(to: probe)
            do {
                _ = try EncryptedFileStore(url: probe, key: .keyFile(vault.keyFile))
                Issue.record("a damaged vault of \(variant.count) bytes opened")
            } catch is VaultError {
                refusals += 1
            }
            #expect(try Data(contentsOf: probe) == variant)
        }
        #expect(refusals == original.count - 1 + original.count * 8)
    }
}
