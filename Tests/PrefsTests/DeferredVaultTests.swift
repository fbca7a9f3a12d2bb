import Foundation
import PrefsTestSupport
import Testing

@testable import Prefs

/// A vault opens without decoding its values: each read decodes one value from the decrypted payload, and the whole
/// snapshot is decoded only when a write, a reload or a listing needs it. These tests hold that to the behaviour of
/// a vault decoded at open.
@Suite struct DeferredVaultTests {
    static let secrets: [String: PrefValue] = {
        var values: [String: PrefValue] = [:]
        for index in 0..<200 {
            values["secret-\(index)"] = .string("token-\(index)-\(String(repeating: "x", count: 40))")
        }
        values["nested"] = .dictionary([
            "b": .array([.int(1), .data(Data([7, 8]))]), "a": .date(Date(timeIntervalSinceReferenceDate: 5)),
        ])
        values["K"] = .bool(true)
        return values
    }()

    /// A vault holding `secrets`, reopened: the store a user gets at launch.
    private func reopenedVault(_ vault: Vault) throws -> EncryptedFileStore {
        try vault.store.replaceAll(Self.secrets)
        return try vault.reopen()
    }

    @Test func aReopenedVaultReadsEveryValueWithoutDecodingTheOthers() throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        let store = try reopenedVault(vault)
        #expect(store.storage.holdsEncodedValues)
        for (key, value) in Self.secrets { #expect(try store.value(forKey: key) == value, "\(key)") }
        #expect(try store.value(forKey: "absent") == nil)
        #expect(try store.value(forKey: "\u{212A}") == .bool(true), "KELVIN SIGN is \"K\", as in a dictionary")
        // Reads decoded nothing for good: the values are still held encoded.
        #expect(store.storage.holdsEncodedValues)
        @SecureStoredValue<String>(key: "secret-7", store: store) var secret
        #expect(secret == "token-7-" + String(repeating: "x", count: 40))
        #expect(try store.allValues() == Self.secrets)
        #expect(!store.storage.holdsEncodedValues, "a listing decodes everything once")
    }

    @Test func theDecryptedPayloadIsKeptInLockedMemory() throws {
        let bytes = SecureBytes(count: 20_000, protection: .locked)
        // Root may always lock memory; another user only within its RLIMIT_MEMLOCK, which may be smaller.
        #expect(bytes.isLocked || getuid() != 0)
        bytes.withUnsafeBytes { #expect($0.allSatisfy { $0 == 0 }, "allocated zeroed") }
    }

    @Test func aWriteAfterOpeningKeepsEveryOtherValue() throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        let store = try reopenedVault(vault)
        try store.setValue(.string("new"), forKey: "secret-3")
        #expect(!store.storage.holdsEncodedValues)
        var expected = Self.secrets
        expected["secret-3"] = .string("new")
        #expect(try store.allValues() == expected)
        #expect(try vault.reopen().allValues() == expected, "the file holds every value")
    }

    @Test func aWriteAnnouncesOnlyTheKeyItChanged() async throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        let store = try reopenedVault(vault)
        let keys = store.changes.keys()
        try store.setValue(.string("new"), forKey: "secret-3")
        try store.setValue(.string("newer"), forKey: "secret-4")
        #expect(try await first(2, of: keys) == ["secret-3", "secret-4"])
    }

    @Test func anotherWritersChangeIsAnnouncedAgainstTheEncodedValues() async throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        let store = try reopenedVault(vault)
        let keys = store.changes.keys()
        let other = try vault.reopen()
        try other.setValue(.string("theirs"), forKey: "secret-9")
        try other.setValue(nil, forKey: "secret-10")
        // Exactly the keys that changed, in order, though the store had decoded none of its values.
        let announced = try await first(2, of: keys)
        #expect(Set(announced) == ["secret-9", "secret-10"])
        #expect(try store.value(forKey: "secret-9") == .string("theirs"))
        #expect(try store.value(forKey: "secret-10") == nil)
        #expect(try store.value(forKey: "secret-11") == Self.secrets["secret-11"])
    }

    @Test func registeredDefaultsResolveAgainstTheEncodedValues() async throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        let store = try reopenedVault(vault)
        let keys = store.changes.keys()
        // A default under a value the user holds changes nothing anyone sees: nothing is announced for it.
        store.register(defaults: ["secret-1": .string("default"), "unset": .string("default")])
        #expect(try await first(1, of: keys) == ["unset"])
        #expect(try store.value(forKey: "secret-1") == Self.secrets["secret-1"])
        #expect(store.layer(ofKey: "secret-1") == .user)
        #expect(try store.value(forKey: "unset") == .string("default"))
        #expect(store.layer(ofKey: "unset") == .registered)
        #expect(store.storage.holdsEncodedValues)
        // After a write decodes everything, the layers still agree.
        try store.setValue(nil, forKey: "secret-1")
        #expect(try store.value(forKey: "secret-1") == .string("default"))
        #expect(store.layer(ofKey: "secret-2") == .user)
        #expect(store.values(in: .user)["secret-2"] == Self.secrets["secret-2"])
    }

    @Test func aVaultWrittenInHashOrderStillOpens() throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        // Vaults written before keys were sorted: the payload is decoded whole at open.
        let key = SecureBytes.random(count: VaultFormat.keyCount)
        let payload: [UInt8] = [1, 2, 0, 0, 0, 1, 0, 0, 0, 0x62, 1, 1, 0, 0, 0, 0x61, 0]
        let file = VaultFormat.seal(Data(payload), key: key, kdf: .none, identity: nil)
        try file.write(to: vault.url)
        let raw = key.withUnsafeBytes { Data($0) }
        let store = try vault.reopen(key: .raw(raw))
        #expect(!store.storage.holdsEncodedValues)
        #expect(try store.allValues() == ["a": .bool(false), "b": .bool(true)])
    }
}
