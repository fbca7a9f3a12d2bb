import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

@Suite(.ownThreads)
struct VaultCryptoTests {
    // MARK: Helpers

    /// A fresh private folder for one test; remove it with `cleanUp`.
    private static func makeTemporaryDirectory() throws -> URL { try TempDir("prefs-vault").url }

    private static func cleanUp(_ url: URL) { try? FileManager.default.removeItem(at: url) }

    private static func rawKey(_ fill: UInt8) -> Data { Data(repeating: fill, count: 32) }

    private static func resolveRaw(_ fill: UInt8) throws -> SecureBytes {
        try VaultKey.raw(rawKey(fill)).resolve(for: nil, creating: true).key
    }

    private static func mode(of url: URL) -> UInt32 {
        var info = stat()
        #expect(stat(url.path(percentEncoded: false), &info) == 0)
        return UInt32(info.st_mode & 0o7777)
    }

    private static let sixtyBytes = Data("sixty bytes of plaintext: the quick brown fox jumps over it!".utf8)

    /// Offsets of the header fields.
    private enum Offset {
        static let version = 8
        static let kdfID = 10
        static let opsLimit = 11
        static let memLimit = 19
        static let salt = 27
        static let nonce = 43
        static let ciphertextLength = 67
        static let vaultID = 75
        static let generation = 91
        static let ciphertext = 99
    }

    private static func writeLittleEndian(_ value: UInt64, into data: inout Data, at offset: Int) {
        for index in 0..<8 { data[offset + index] = UInt8(truncatingIfNeeded: value >> (index * 8)) }
    }

    // MARK: Round trips

    @Test func sealOpenRoundTrip() throws {
        let key = try Self.resolveRaw(7)
        let large = Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0) })
        for plaintext in [Data(), Data([0]), Self.sixtyBytes, large] {
            let sealed = VaultFormat.seal(plaintext, key: key, kdf: .none)
            #expect(sealed.count == VaultHeader.count + plaintext.count + 16)
            #expect(try VaultFormat.open(sealed, key: key) == plaintext)
        }
    }

    @Test func theDecryptedPlaintextIsZeroedOnceItIsDecoded() throws {
        let key = try Self.resolveRaw(7)
        let sealed = VaultFormat.seal(Self.sixtyBytes, key: key, kdf: .none)
        var buffer: [UInt8] = []
        let seen = try VaultFormat.withPlaintext(of: sealed, key: key, in: &buffer) { Data($0) }
        #expect(seen == Self.sixtyBytes, "the body reads the plaintext")
        #expect(buffer.count == Self.sixtyBytes.count && buffer.allSatisfy { $0 == 0 }, "zeroed when the body returns")
        // Zeroed too when the body throws (a payload that does not decode).
        #expect(throws: PrefsError.self) {
            try VaultFormat.withPlaintext(of: sealed, key: key, in: &buffer) { (bytes) throws(PrefsError) in
                try VaultPayload.decode(bytes, path: "v")
            }
        }
        #expect(buffer.count == Self.sixtyBytes.count && buffer.allSatisfy { $0 == 0 })
    }

    @Test func openAcceptsDataSlices() throws {
        let key = try Self.resolveRaw(7)
        let sealed = VaultFormat.seal(Self.sixtyBytes, key: key, kdf: .none)
        let slice = (Data([1, 2, 3]) + sealed).dropFirst(3)
        #expect(try VaultFormat.open(slice, key: key) == Self.sixtyBytes)
    }

    @Test func headerLayout() throws {
        let key = try Self.resolveRaw(7)
        let sealed = VaultFormat.seal(Self.sixtyBytes, key: key, kdf: .none)
        #expect(Array(sealed.prefix(8)) == Array("PREFSVLT".utf8))
        #expect(sealed[Offset.version] == 3 && sealed[Offset.version + 1] == 0)
        #expect(sealed[Offset.kdfID] == 0)
        #expect(sealed[Offset.ciphertextLength] == 76)
        let header = try VaultFormat.parseHeader(sealed)
        #expect(header.version == 3)
        #expect(header.kdf == .none)
        #expect(header.identity.id == Array(sealed[Offset.vaultID..<Offset.vaultID + 16]))
        #expect(header.identity.generation == 1 && sealed[Offset.generation] == 1)
        #expect(header.ciphertextLength == 76)
        #expect(header.nonce == Array(sealed[Offset.nonce..<Offset.nonce + 24]))
    }

    @Test func plaintextIsAbsentFromSealedBytes() throws {
        let key = try Self.resolveRaw(7)
        let sealed = VaultFormat.seal(Self.sixtyBytes, key: key, kdf: .none)
        #expect(sealed.firstRange(of: Self.sixtyBytes) == nil)
        #expect(sealed.firstRange(of: Data("quick brown".utf8)) == nil)
    }

    /// Every save draws a new random nonce: the nonces themselves, read from the headers, differ, for two seals of the
    /// same plaintext under the same key and identity (where nothing else may differ) and for every save of a store.
    @Test func sealingTwiceUsesFreshNonces() throws {
        let key = try Self.resolveRaw(7)
        let identity = VaultIdentity.fresh()
        let first = VaultFormat.seal(Self.sixtyBytes, key: key, kdf: .none, identity: identity)
        let second = VaultFormat.seal(Self.sixtyBytes, key: key, kdf: .none, identity: identity)
        let nonces = try [first, second].map { try VaultFormat.parseHeader($0).nonce }
        #expect(nonces[0] != nonces[1])
        #expect(first[Offset.ciphertext...] != second[Offset.ciphertext...])

        let directory = try TempDir()
        defer { directory.cleanup() }
        let url = directory.file("nonces.vault")
        let store = try EncryptedFileStore(url: url, key: .raw(Self.rawKey(7)))
        var seen: Set<[UInt8]> = []
        for save in 1...8 {
            try store.setValue(.int(Int64(save)), forKey: "k")
            let header = try VaultFormat.parseHeader(try Data(contentsOf: url))
            #expect(header.identity.generation == UInt64(save), "save \(save) was written")
            #expect(header.nonce.count == VaultHeader.nonceCount && header.nonce.contains { $0 != 0 })
            #expect(seen.insert(header.nonce).inserted, "save \(save) reused a nonce")
        }
    }

    // MARK: Wrong keys

    @Test func wrongRawKeyFailsAuthentication() throws {
        let sealed = VaultFormat.seal(Self.sixtyBytes, key: try Self.resolveRaw(7), kdf: .none)
        #expect(throws: VaultError.authenticationFailed) { try VaultFormat.open(sealed, key: try Self.resolveRaw(8)) }
    }

    @Test func wrongPassphraseFailsAuthentication() throws {
        let (key, kdf) = try VaultKey.passphrase("correct horse").resolve(for: nil, creating: true, cost: .testing)
        let sealed = VaultFormat.seal(Self.sixtyBytes, key: key, kdf: kdf)
        let header = try VaultFormat.parseHeader(sealed)
        let wrong = try VaultKey.passphrase("correct horsf").resolve(for: header, creating: false).key
        #expect(throws: VaultError.authenticationFailed) { try VaultFormat.open(sealed, key: wrong) }
    }

    @Test func passphraseParametersAreStoredAndReused() throws {
        let (key, kdf) = try VaultKey.passphrase("correct horse").resolve(for: nil, creating: true, cost: .testing)
        #expect(kdf.algorithm == .argon2id13)
        #expect(kdf.opsLimit == 1 && kdf.memLimit == 8 << 20)
        #expect(kdf.salt.count == 16 && kdf.salt != [UInt8](repeating: 0, count: 16))
        let sealed = VaultFormat.seal(Self.sixtyBytes, key: key, kdf: kdf)
        #expect(sealed[Offset.kdfID] == 1)
        #expect(Array(sealed[Offset.salt..<Offset.nonce]) == kdf.salt)

        let header = try VaultFormat.parseHeader(sealed)
        #expect(header.kdf == kdf)
        let reopened = try VaultKey.passphrase("correct horse").resolve(for: header, creating: false)
        #expect(reopened.kdf == kdf)
        #expect(try VaultFormat.open(sealed, key: reopened.key) == Self.sixtyBytes)
    }

    @Test func newPassphraseVaultsGetFreshSalts() throws {
        let first = try VaultKey.passphrase("same").resolve(for: nil, creating: true, cost: .testing)
        let second = try VaultKey.passphrase("same").resolve(for: nil, creating: true, cost: .testing)
        #expect(first.kdf.memLimit == 8 << 20)
        #expect(first.kdf.salt != second.kdf.salt)
        let differ = first.key.withUnsafeBytes { a in second.key.withUnsafeBytes { b in !a.elementsEqual(b) } }
        #expect(differ)
    }

    @Test func aNewPassphraseVaultIsDerivedWithInteractiveArgon2id() throws {
        let vault = try TempDir()
        defer { vault.cleanup() }
        let url = vault.file("passphrase.vault")
        try EncryptedFileStore(url: url, key: .passphrase("pw")).setValue(.int(1), forKey: "n")
        let header = try VaultFormat.parseHeader(try Data(contentsOf: url))
        #expect(header.kdf.algorithm == .argon2id13)
        // libsodium's interactive cost, crypto_pwhash_argon2id_OPSLIMIT_INTERACTIVE and _MEMLIMIT_INTERACTIVE.
        #expect(header.kdf.memLimit == 64 << 20)
        #expect(header.kdf.opsLimit == 2)
    }

    @Test func emptyPassphraseIsInvalid() {
        #expect {
            try VaultKey.passphrase("").resolve(for: nil, creating: true, cost: .testing)
        } throws: { ($0 as? VaultError).map { if case .invalidKey = $0 { true } else { false } } ?? false }
    }

    @Test func keyKindMustMatchVault() throws {
        let (key, kdf) = try VaultKey.passphrase("pw").resolve(for: nil, creating: true, cost: .testing)
        let passphraseHeader = try VaultFormat.parseHeader(VaultFormat.seal(Data(), key: key, kdf: kdf))
        let rawHeader = try VaultFormat.parseHeader(VaultFormat.seal(Data(), key: key, kdf: .none))
        for (vaultKey, header) in [(VaultKey.raw(Self.rawKey(1)), passphraseHeader), (.passphrase("pw"), rawHeader)] {
            #expect {
                try vaultKey.resolve(for: header, creating: false)
            } throws: { ($0 as? VaultError).map { if case .invalidKey = $0 { true } else { false } } ?? false }
        }
    }

    // MARK: Tampering

    private static func expectEveryBitFlipRefused(_ sealed: Data, key: SecureBytes) {
        for byteIndex in sealed.indices {
            for bit in 0..<8 {
                var tampered = sealed
                tampered[byteIndex] ^= 1 << bit
                let error: VaultError
                do {
                    _ = try VaultFormat.open(tampered, key: key)
                    Issue.record("flip of bit \(bit) in byte \(byteIndex) was accepted")
                    continue
                } catch let caught {
                    error = caught
                }
                switch byteIndex {
                case 0..<Offset.version:
                    #expect(error == .notAVault(reason: "missing PREFSVLT signature"))
                case Offset.version..<Offset.kdfID:
                    // Another readable version (3 to 2) is another header, which the AEAD refuses.
                    switch error {
                    case .unsupportedFormatVersion(let version) where !VaultHeader.readableVersions.contains(version):
                        break
                    case .authenticationFailed where VaultHeader.readableVersions.contains(3 ^ UInt16(1 << bit)):
                        break
                    default: Issue.record("byte \(byteIndex): \(error)")
                    }
                case Offset.ciphertextLength..<Offset.vaultID:
                    switch error {
                    case .truncated, .notAVault: break
                    default: Issue.record("length byte \(byteIndex): \(error)")
                    }
                case Offset.nonce..<Offset.ciphertextLength, Offset.vaultID...:
                    #expect(error == .authenticationFailed, "byte \(byteIndex) bit \(bit)")
                default:  // kdf id, cost and salt: refused as malformed or by the AEAD
                    break
                }
            }
        }
    }

    @Test func everyBitFlipOfARawKeyVaultIsRefused() throws {
        let key = try Self.resolveRaw(7)
        Self.expectEveryBitFlipRefused(VaultFormat.seal(Self.sixtyBytes, key: key, kdf: .none), key: key)
    }

    @Test func everyBitFlipOfAPassphraseVaultIsRefused() throws {
        // The key stays the one derived from the untampered header: a flipped salt or cost must still fail as
        // associated data, without paying for a derivation per flip.
        let (key, kdf) = try VaultKey.passphrase("pw").resolve(for: nil, creating: true, cost: .testing)
        let sealed = VaultFormat.seal(Self.sixtyBytes, key: key, kdf: kdf)
        Self.expectEveryBitFlipRefused(sealed, key: key)
        // Flips that keep the header well-formed reach the AEAD and fail there.
        for offset in [Offset.salt, Offset.salt + 15, Offset.opsLimit] {
            var tampered = sealed
            tampered[offset] ^= offset == Offset.opsLimit ? 0b11 : 1  // opslimit 1 → 2, within the cap
            #expect(throws: VaultError.authenticationFailed) { try VaultFormat.open(tampered, key: key) }
        }
    }

    @Test func truncationAtEveryLengthIsRefused() throws {
        let key = try Self.resolveRaw(7)
        let sealed = VaultFormat.seal(Self.sixtyBytes, key: key, kdf: .none)
        for length in 0..<sealed.count {
            #expect(
                throws: VaultError.truncated(
                    expected: length < VaultHeader.minimumFileCount ? VaultHeader.minimumFileCount : sealed.count,
                    actual: length)
            ) {
                try VaultFormat.open(sealed.prefix(length), key: key)
            }
        }
    }

    @Test func trailingBytesAreRefused() throws {
        let key = try Self.resolveRaw(7)
        let sealed = VaultFormat.seal(Self.sixtyBytes, key: key, kdf: .none)
        #expect(throws: VaultError.notAVault(reason: "1 unexpected bytes after the ciphertext")) {
            try VaultFormat.open(sealed + [0], key: key)
        }
    }

    @Test func notAVaultIsRecognizedEvenWhenShort() throws {
        let key = try Self.resolveRaw(7)
        for text in ["", "{}", "bplist00", String(repeating: "x", count: 500)] {
            let error = #expect(throws: VaultError.self) { try VaultFormat.open(Data(text.utf8), key: key) }
            if text.isEmpty {
                #expect(error == .truncated(expected: VaultHeader.minimumFileCount, actual: 0))
            } else {
                #expect(error == .notAVault(reason: "missing PREFSVLT signature"))
            }
        }
    }

    @Test func futureVersionIsRefused() throws {
        let key = try Self.resolveRaw(7)
        var sealed = VaultFormat.seal(Self.sixtyBytes, key: key, kdf: .none)
        sealed[Offset.version] = 4
        #expect(throws: VaultError.unsupportedFormatVersion(4)) { try VaultFormat.open(sealed, key: key) }
        sealed[Offset.version] = 0x34
        sealed[Offset.version + 1] = 0x12
        #expect(throws: VaultError.unsupportedFormatVersion(0x1234)) { try VaultFormat.parseHeader(sealed) }
        #expect(VaultError.unsupportedFormatVersion(4).description.contains("update the app"))
    }

    /// The version says which payload a vault holds: a version 3 vault holding the encoding of version 2 is refused.
    @Test func aPayloadOtherThanTheVersionSaysIsRefused() throws {
        let key = try Self.resolveRaw(7)
        let sealed = VaultFormat.seal(Data([VaultPayload.legacyVersion, 0, 0, 0, 0]), key: key, kdf: .none)
        #expect(throws: VaultError.self) {
            try VaultFormat.withPlaintext(of: sealed, key: key) { (bytes) throws(PrefsError) in
                try VaultPayload.decode(bytes, path: "v")
            }
        }
    }

    /// Version 1 (no vault id, no generation) was written only by development builds before version 2: refused,
    /// with a message that does not send the user to update.
    @Test func aVersion1VaultIsRefused() throws {
        let key = try Self.resolveRaw(7)
        var sealed = VaultFormat.seal(Self.sixtyBytes, key: key, kdf: .none)
        sealed[Offset.version] = 1
        #expect(throws: VaultError.unsupportedFormatVersion(1)) { try VaultFormat.parseHeader(sealed) }
        #expect(!VaultError.unsupportedFormatVersion(1).description.contains("update the app"))
    }

    @Test func unknownKDFIsRefused() throws {
        let key = try Self.resolveRaw(7)
        var sealed = VaultFormat.seal(Self.sixtyBytes, key: key, kdf: .none)
        sealed[Offset.kdfID] = 9
        #expect(throws: VaultError.notAVault(reason: "unknown key-derivation id 9")) {
            try VaultFormat.parseHeader(sealed)
        }
    }

    @Test func absurdCiphertextLengthsAreRefusedWithoutAllocating() throws {
        let key = try Self.resolveRaw(7)
        let sealed = VaultFormat.seal(Self.sixtyBytes, key: key, kdf: .none)
        for length: UInt64 in [0, 15, 77, 1 << 40, UInt64(Int.max), UInt64(Int.max) - 74, .max] {
            var tampered = sealed
            Self.writeLittleEndian(length, into: &tampered, at: Offset.ciphertextLength)
            let error = #expect(throws: VaultError.self) { try VaultFormat.open(tampered, key: key) }
            switch error {
            case .truncated(let expected, let actual)?: #expect(expected > actual && actual == sealed.count)
            case .notAVault?: break
            default: Issue.record("length \(length): \(String(describing: error))")
            }
        }
    }

    @Test func absurdKDFCostIsRefusedBeforeDeriving() throws {
        let (key, kdf) = try VaultKey.passphrase("pw").resolve(for: nil, creating: true, cost: .testing)
        let sealed = VaultFormat.seal(Self.sixtyBytes, key: key, kdf: kdf)
        let cases: [(offset: Int, value: UInt64)] = [
            (Offset.opsLimit, 17), (Offset.opsLimit, .max), (Offset.opsLimit, 0),
            (Offset.memLimit, (1 << 30) + 1), (Offset.memLimit, .max), (Offset.memLimit, 1024),
        ]
        for (offset, value) in cases {
            var tampered = sealed
            Self.writeLittleEndian(value, into: &tampered, at: offset)
            // Refused as not a vault: a derivation would have run (at that cost) and then failed authentication.
            #expect {
                let header = try VaultFormat.parseHeader(tampered)
                _ = try VaultKey.passphrase("pw").resolve(for: header, creating: false)
            } throws: { ($0 as? VaultError).map { if case .notAVault = $0 { true } else { false } } ?? false }
            // Deriving directly from such parameters is refused as well.
            var absurd = kdf
            if offset == Offset.opsLimit { absurd.opsLimit = value } else { absurd.memLimit = value }
            #expect(throws: VaultError.self) { try VaultKey.deriveArgon2id(passphrase: "pw", kdf: absurd) }
        }
    }

    @Test func keyFieldsOfARawVaultMustBeZero() throws {
        let key = try Self.resolveRaw(7)
        var sealed = VaultFormat.seal(Self.sixtyBytes, key: key, kdf: .none)
        sealed[Offset.salt + 3] = 1
        #expect(throws: VaultError.self) { try VaultFormat.parseHeader(sealed) }
    }

    // MARK: Raw keys

    @Test func rawKeyMustBe32Bytes() throws {
        for count in [0, 31, 33, 64] {
            #expect {
                try VaultKey.raw(Data(repeating: 1, count: count)).resolve(for: nil, creating: true)
            } throws: { ($0 as? VaultError).map { if case .invalidKey = $0 { true } else { false } } ?? false }
        }
        let key = try Self.resolveRaw(0xAB)
        #expect(key.count == 32)
        #expect(key.withUnsafeBytes { $0.allSatisfy { $0 == 0xAB } })
    }

    // MARK: Key files

    @Test func keyFileIsCreatedPrivateOnFirstUse() throws {
        let directory = try Self.makeTemporaryDirectory()
        defer { Self.cleanUp(directory) }
        let nested = directory.appending(path: "a/b")
        let url = nested.appending(path: "vault.key")
        let (key, kdf) = try VaultKey.keyFile(url).resolve(for: nil, creating: true)
        #expect(kdf == .none)
        #expect(Self.mode(of: url) == 0o600)
        #expect(Self.mode(of: nested) == 0o700)
        #expect(Self.mode(of: directory.appending(path: "a")) == 0o700)
        let contents = try Data(contentsOf: url)
        #expect(contents.count == 32)
        #expect(key.withUnsafeBytes { Data($0) } == contents)
        // No temporary files are left behind.
        #expect(try FileManager.default.contentsOfDirectory(atPath: nested.path) == ["vault.key"])

        // The second use reads the same key, and a vault sealed with it opens.
        let again = try VaultKey.keyFile(url).resolve(for: nil, creating: true).key
        #expect(again.withUnsafeBytes { Data($0) } == contents)
        let sealed = VaultFormat.seal(Self.sixtyBytes, key: key, kdf: kdf)
        let reopened = try VaultKey.keyFile(url).resolve(for: try VaultFormat.parseHeader(sealed), creating: false)
        #expect(try VaultFormat.open(sealed, key: reopened.key) == Self.sixtyBytes)
    }

    @Test func missingKeyFileIsNotCreatedWhenOpening() throws {
        let directory = try Self.makeTemporaryDirectory()
        defer { Self.cleanUp(directory) }
        let url = directory.appending(path: "missing.key")
        #expect(throws: VaultError.self) { try VaultKey.keyFile(url).resolve(for: nil, creating: false) }
        do {
            _ = try VaultKey.keyFile(url).resolve(for: nil, creating: false)
        } catch {
            guard case VaultError.io(_, _, let code, _) = error else { throw error }
            #expect(code == ENOENT)
        }
        #expect(!FileManager.default.fileExists(atPath: url.path))
    }

    @Test func keyFileReadableByOthersIsRefused() throws {
        let directory = try Self.makeTemporaryDirectory()
        defer { Self.cleanUp(directory) }
        let url = directory.appending(path: "vault.key")
        _ = try VaultKey.keyFile(url).resolve(for: nil, creating: true)
        for mode: mode_t in [0o644, 0o640, 0o604, 0o601, 0o610, 0o700 | 0o020] {
            #expect(chmod(url.path(percentEncoded: false), mode) == 0)
            #expect(throws: VaultError.insecureKeyFile(path: url.path(percentEncoded: false), mode: UInt32(mode))) {
                try VaultKey.keyFile(url).resolve(for: nil, creating: true)
            }
        }
        #expect(chmod(url.path(percentEncoded: false), 0o400) == 0)
        #expect(throws: Never.self) { try VaultKey.keyFile(url).resolve(for: nil, creating: false) }
    }

    @Test func keyFileOfTheWrongSizeIsRefused() throws {
        let directory = try Self.makeTemporaryDirectory()
        defer { Self.cleanUp(directory) }
        let url = directory.appending(path: "vault.key")
        for count in [0, 31, 33, 4096] {
            try Data(repeating: 1, count: count).write(to: url)
            #expect(chmod(url.path(percentEncoded: false), 0o600) == 0)
            #expect {
                try VaultKey.keyFile(url).resolve(for: nil, creating: true)
            } throws: { ($0 as? VaultError).map { if case .invalidKey = $0 { true } else { false } } ?? false }
        }
    }

    @Test func keyFileThatIsADirectoryIsRefused() throws {
        let directory = try Self.makeTemporaryDirectory()
        defer { Self.cleanUp(directory) }
        #expect(chmod(directory.path(percentEncoded: false), 0o700) == 0)
        #expect(throws: VaultError.self) { try VaultKey.keyFile(directory).resolve(for: nil, creating: true) }
    }

    // MARK: Errors

    @Test func errorMessagesAreOneLine() {
        let errors: [VaultError] = [
            .authenticationFailed, .unsupportedFormatVersion(2), .notAVault(reason: "x"),
            .truncated(expected: 91, actual: 3), .insecureKeyFile(path: "/k", mode: 0o100644),
            .invalidKey(reason: "y"), .io(path: "/p", operation: "open key file", errno: 2, message: "No such file"),
        ]
        for error in errors {
            #expect(!error.description.contains("\n"))
            #expect(error.errorDescription == error.description)
        }
        #expect(VaultError.authenticationFailed.description.contains("wrong key or the vault was modified"))
        #expect(VaultError.insecureKeyFile(path: "/k", mode: 0o100644).description.contains("mode 644"))
        #expect(VaultError.insecureKeyFile(path: "/k", mode: 0o644).description.contains("chmod 600 /k"))
    }
}

/// A passphrase vault's Argon2id cost is read from its unauthenticated header: a cost above what this build writes
/// is refused before deriving.
@Suite(.ownThreads) struct ArgonCostTests {
    @Test func aPassphraseVaultAskingForMoreThanThisBuildWritesIsRefusedBeforeDeriving() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let url = directory.file("p.vault")
        try EncryptedFileStore(url: url, key: .passphrase("pw"), cost: .testing).setValue(.int(1), forKey: "k")
        let sealed = try Data(contentsOf: url)
        let interactive = KDFParameters.Cost.interactive
        // Within the old bounds (16 passes, 1 GiB) but above what this build writes.
        for (offset, value) in [(11, interactive.opsLimit + 1), (19, interactive.memLimit + (1 << 20))] {
            var patched = sealed
            for index in 0..<8 { patched[offset + index] = UInt8(truncatingIfNeeded: value >> (index * 8)) }
            try patched.write(to: url)
            let error = #expect(throws: VaultError.self) {
                try EncryptedFileStore(url: url, key: .passphrase("pw"), cost: .testing)
            }
            guard case .notAVault? = error else {
                Issue.record("offset \(offset): \(String(describing: error))")
                continue
            }
            #expect(try Data(contentsOf: url) == patched)
        }
    }
}

/// Passphrases and raw keys, and every key made from them, are kept in guarded memory: `sodium_malloc`'s, whose
/// bytes end where a page nobody may read or write begins.
@Suite(.ownThreads) struct KeyMaterialTests {
    @Test func passphrasesAndRawKeysAreKeptInGuardedMemory() throws {
        guard case .passphrase(let bytes?) = VaultKeyMaterial(.passphrase("correct horse"), vaultPath: "/v") else {
            Issue.record("no guarded passphrase")
            return
        }
        #expect(bytes.withUnsafeBytes { Array($0) } == Array("correct horse".utf8))
        #expect(Self.guardProblem(bytes) == nil, "the passphrase")
        guard case .raw(let key?, 32) = VaultKeyMaterial(.raw(Data(repeating: 5, count: 32)), vaultPath: "/v") else {
            Issue.record("no guarded raw key")
            return
        }
        #expect(key.withUnsafeBytes { Array($0) } == [UInt8](repeating: 5, count: 32))
        #expect(Self.guardProblem(key) == nil, "the raw key")
        guard case .raw(nil, 3) = VaultKeyMaterial(.raw(Data([1, 2, 3])), vaultPath: "/v") else {
            Issue.record("a short raw key must be kept only as its length")
            return
        }
        // The keys a vault is sealed with: derived from a passphrase, read from a key file, made at random.
        let derived = try VaultKey.passphrase("correct horse").resolve(for: nil, creating: true, cost: .testing).key
        #expect(Self.guardProblem(derived) == nil, "the key derived from a passphrase")
        let directory = try TempDir()
        defer { directory.cleanup() }
        let keyFile = try VaultKey.keyFile(directory.file("k.key")).resolve(for: nil, creating: true).key
        #expect(Self.guardProblem(keyFile) == nil, "the key of a key file")
        #expect(Self.guardProblem(SecureBytes.random(count: 32)) == nil, "a random key")
    }

    /// Why `bytes` is not in `sodium_malloc` memory, or nil when it is: its bytes are readable and writable, and end
    /// exactly where a page the process can neither read nor write begins (libsodium's guard page), as
    /// `/proc/self/maps` shows.
    private static func guardProblem(_ bytes: SecureBytes) -> String? {
        let (start, end) = bytes.withUnsafeBytes { buffer in
            let start = UInt(bitPattern: buffer.baseAddress)
            return (start, start + UInt(buffer.count))
        }
        let page = UInt(sysconf(Int32(_SC_PAGESIZE)))
        guard end % page == 0 else { return "its bytes end at \(end), inside a page" }
        // Read to its end: the kernel gives a /proc file a page at a time.
        guard let handle = FileHandle(forReadingAtPath: "/proc/self/maps"),
            let maps = try? handle.readToEnd().map({ String(decoding: $0, as: UTF8.self) })
        else { return "no /proc/self/maps to read" }
        try? handle.close()
        func permissions(at address: UInt) -> String {
            for line in maps.split(separator: "\n") {
                let fields = line.split(separator: " ")
                let range = fields[0].split(separator: "-").compactMap { UInt($0, radix: 16) }
                if range.count == 2, range[0] <= address, address < range[1] { return String(fields[1]) }
            }
            return "unmapped"
        }
        guard permissions(at: start).hasPrefix("rw") else { return "its bytes are \(permissions(at: start))" }
        guard permissions(at: end) == "---p" else { return "the page after it is \(permissions(at: end))" }
        return nil
    }
}
