import CSodium
import Foundation

/// Where a vault's key was kept when the vault was last written, recorded in its header (not secret: it names a
/// kind of place, never the key or where exactly), so that a vault opened with the wrong kind of key can say which
/// kind it needs. Vaults written before it was recorded say `unrecorded`.
package enum VaultKeyKind: UInt8, Sendable {
    case unrecorded = 0
    case keyFile = 1
    case keyring = 2
    case credential = 3
    /// A ``VaultKeySource`` of the app's own.
    case source = 4
    case raw = 5
    /// Derived from a passphrase: told by the header's key derivation, never stored in this field.
    case passphrase = 255

    /// `the desktop keyring`, `a key file`: how a message names the place.
    package var phrase: String {
        switch self {
        case .unrecorded: "an unrecorded place"
        case .keyFile: "a key file"
        case .keyring: "the desktop keyring"
        case .credential: "a service credential"
        case .source: "a key source of the app's own"
        case .raw: "a raw key the app keeps"
        case .passphrase: "a passphrase"
        }
    }
}

/// A key source that tells which kind of place it keeps keys in, so a vault records it (PrefsKeyring's keyring).
package protocol VaultKeyKindTelling {
    var vaultKeyKind: VaultKeyKind { get }
}

/// How a vault key is derived, as recorded in the vault header.
///
/// Without derivation the cost fields and the salt are zero, but for the salt's first byte: the ``VaultKeyKind`` of
/// the key (zero in vaults written before it was recorded).
struct KDFParameters: Sendable, Equatable {
    /// The key-derivation function, stored as one byte in the header.
    enum Algorithm: UInt8, Sendable {
        /// The key is used as is (key file or raw key); the header's cost fields and salt are all zero.
        case none = 0
        /// Argon2id version 1.3 through `crypto_pwhash`.
        case argon2id13 = 1
    }

    /// The cost of one Argon2id derivation.
    struct Cost: Sendable, Equatable {
        var opsLimit: UInt64
        var memLimit: UInt64

        /// libsodium's interactive limits (64 MiB): the default for new passphrase vaults.
        static var interactive: Cost {
            Cost(
                opsLimit: UInt64(crypto_pwhash_opslimit_interactive()),
                memLimit: UInt64(crypto_pwhash_memlimit_interactive())
            )
        }
    }

    static let saltCount = 16
    /// The most a header may ask for: the cost this build writes (libsodium's interactive limits). The cost fields
    /// are only authenticated once the key has been derived with them, so anything above is refused before
    /// deriving: a tampered file cannot make opening (or every reload on the watcher thread) slow or memory-hungry.
    static var maxOpsLimit: UInt64 { Cost.interactive.opsLimit }
    static var maxMemLimit: UInt64 { Cost.interactive.memLimit }

    var algorithm: Algorithm
    var opsLimit: UInt64
    var memLimit: UInt64
    /// `saltCount` bytes.
    var salt: [UInt8]

    /// No derivation: the key is used as is.
    static let none = KDFParameters.none(kind: .unrecorded)

    /// No derivation, for a key kept in a place of `kind`.
    static func none(kind: VaultKeyKind) -> KDFParameters {
        KDFParameters(
            algorithm: .none, opsLimit: 0, memLimit: 0,
            salt: [kind.rawValue] + [UInt8](repeating: 0, count: saltCount - 1))
    }

    /// The kind of place the key was kept in when the vault was written.
    var keyKind: VaultKeyKind {
        guard algorithm == .none else { return .passphrase }
        return salt.first.flatMap(VaultKeyKind.init(rawValue:)).flatMap { $0 == .passphrase ? nil : $0 } ?? .unrecorded
    }

    /// The same derivation: where the key was kept does not change how it is derived.
    static func == (a: KDFParameters, b: KDFParameters) -> Bool {
        a.algorithm == b.algorithm && a.opsLimit == b.opsLimit && a.memLimit == b.memLimit
            && (a.algorithm == .none || a.salt == b.salt)
    }

    /// Argon2id13 with a fresh random salt.
    static func argon2id(cost: Cost) -> KDFParameters {
        KDFParameters(
            algorithm: .argon2id13, opsLimit: cost.opsLimit, memLimit: cost.memLimit,
            salt: randomBytes(count: saltCount))
    }

    /// Checks values read from a header; throws `.notAVault` for anything this build would not have written.
    func validate() throws(VaultError) {
        guard salt.count == Self.saltCount else { throw .notAVault(reason: "salt is not \(Self.saltCount) bytes") }
        switch algorithm {
        case .none:
            guard opsLimit == 0, memLimit == 0, salt.dropFirst().allSatisfy({ $0 == 0 }) else {
                throw .notAVault(reason: "key-derivation fields set for a vault without key derivation")
            }
        case .argon2id13:
            Sodium.ensureInitialized()
            let minOps = UInt64(crypto_pwhash_opslimit_min())
            let minMem = UInt64(crypto_pwhash_memlimit_min())
            guard opsLimit >= minOps, opsLimit <= Self.maxOpsLimit else {
                throw .notAVault(reason: "Argon2id opslimit \(opsLimit) outside \(minOps)...\(Self.maxOpsLimit)")
            }
            guard memLimit >= minMem, memLimit <= Self.maxMemLimit else {
                throw .notAVault(reason: "Argon2id memlimit \(memLimit) outside \(minMem)...\(Self.maxMemLimit)")
            }
        }
    }
}

/// Which vault a file is, and how many times it has been written: bound into the authenticated header (format
/// version 2) so that an older copy of a vault, or another vault under the same key, can be told apart.
struct VaultIdentity: Sendable, Equatable {
    static let idCount = 16

    /// `idCount` random bytes chosen when the vault is created, kept across writes and rekeys.
    var id: [UInt8]
    /// 1 for the first write, one more for every write after it.
    var generation: UInt64

    /// A new vault's identity: a fresh random id, generation 1.
    static func fresh() -> VaultIdentity { VaultIdentity(id: randomBytes(count: idCount), generation: 1) }

    /// The identity of the write after this one.
    var next: VaultIdentity { VaultIdentity(id: id, generation: generation &+ 1) }

    /// The id in hexadecimal, for records and messages.
    var idText: String { id.map { String($0 >> 4, radix: 16) + String($0 & 0xf, radix: 16) }.joined() }
}

/// Everything in a vault file before the ciphertext; all of it is authenticated as associated data.
///
/// ```
/// magic "PREFSVLT" (8) | version u16 LE | kdf id u8 | opslimit u64 LE | memlimit u64 LE | salt (16) | nonce (24)
/// | ciphertext length u64 LE | vault id (16) | generation u64 LE | ciphertext (plaintext + 16-byte tag)
/// ```
///
/// The version says what the plaintext is (``VaultPayload``): in version 3, which every write produces, a binary
/// property list of the store's values; in version 2, still read, the compact encoding that came before it.
struct VaultHeader: Sendable, Equatable {
    static let magic: [UInt8] = Array("PREFSVLT".utf8)
    static let currentVersion: UInt16 = 3
    /// The versions this build reads.
    static let readableVersions: ClosedRange<UInt16> = 2...3
    static let nonceCount = 24
    static let tagCount = 16
    /// 8 + 2 + 1 + 8 + 8 + 16 + 24 + 8 + 16 + 8 = 99 bytes.
    static let count = 8 + 2 + 1 + 8 + 8 + KDFParameters.saltCount + nonceCount + 8 + VaultIdentity.idCount + 8
    /// The shortest possible vault: a header and the tag of an empty plaintext.
    static let minimumFileCount = count + tagCount

    var version: UInt16
    var kdf: KDFParameters
    /// `nonceCount` bytes.
    var nonce: [UInt8]
    /// The length of ciphertext plus tag that follows the header.
    var ciphertextLength: UInt64
    /// Which vault this is and which of its writes.
    var identity: VaultIdentity

    /// A header to write, of the current version.
    init(
        kdf: KDFParameters, nonce: [UInt8], ciphertextLength: UInt64, identity: VaultIdentity,
        version: UInt16 = Self.currentVersion
    ) {
        self.version = version
        self.kdf = kdf
        self.nonce = nonce
        self.ciphertextLength = ciphertextLength
        self.identity = identity
    }

    /// The header bytes as written to disk.
    func serialized() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(Self.count)
        out += Self.magic
        out.appendLittleEndian(version)
        out.append(kdf.algorithm.rawValue)
        out.appendLittleEndian(kdf.opsLimit)
        out.appendLittleEndian(kdf.memLimit)
        out += kdf.salt
        out += nonce
        out.appendLittleEndian(ciphertextLength)
        out += identity.id
        out.appendLittleEndian(identity.generation)
        assert(out.count == Self.count)
        return out
    }

    /// Parses and validates the header at the start of `bytes` (a whole vault file); see ``VaultFormat/parseHeader(_:)``.
    init(parsing bytes: Data) throws(VaultError) {
        let fileCount = bytes.count
        // A prefix that already differs from the magic is not a vault, however short; a matching but short one is
        // a truncated vault.
        let magicPrefix = Array(bytes.prefix(Self.magic.count))
        guard magicPrefix.elementsEqual(Self.magic.prefix(magicPrefix.count)) else {
            throw .notAVault(reason: "missing PREFSVLT signature")
        }
        let header = Array(bytes.prefix(Self.count))
        let parsed: Result<VaultHeader, VaultError> = header.withUnsafeBytes { buffer in
            var reader = LittleEndianReader(buffer)
            do throws(BinaryFormatFailure) {
                try reader.skip(Self.magic.count)
                let version = try reader.integer(UInt16.self)
                guard Self.readableVersions.contains(version) else {
                    return .failure(.unsupportedFormatVersion(version))
                }
                guard fileCount >= Self.minimumFileCount else {
                    return .failure(.truncated(expected: Self.minimumFileCount, actual: fileCount))
                }
                let kdfID = try reader.byte()
                guard let algorithm = KDFParameters.Algorithm(rawValue: kdfID) else {
                    return .failure(.notAVault(reason: "unknown key-derivation id \(kdfID)"))
                }
                let opsLimit = try reader.integer(UInt64.self)
                let memLimit = try reader.integer(UInt64.self)
                let salt = Array(try reader.slice(KDFParameters.saltCount))
                let kdf = KDFParameters(algorithm: algorithm, opsLimit: opsLimit, memLimit: memLimit, salt: salt)
                let nonce = Array(try reader.slice(Self.nonceCount))
                let ciphertextLength = try reader.integer(UInt64.self)
                let id = Array(try reader.slice(VaultIdentity.idCount))
                let identity = VaultIdentity(id: id, generation: try reader.integer(UInt64.self))
                return .success(
                    VaultHeader(
                        kdf: kdf, nonce: nonce, ciphertextLength: ciphertextLength, identity: identity,
                        version: version))
            } catch {
                // Only a file shorter than the smallest header gets here.
                return .failure(.truncated(expected: Self.minimumFileCount, actual: fileCount))
            }
        }
        self = try parsed.get()

        let headerCount = Self.count
        let remaining = UInt64(fileCount - headerCount)
        guard ciphertextLength >= UInt64(Self.tagCount) else {
            throw .notAVault(reason: "ciphertext length \(ciphertextLength) is shorter than the authentication tag")
        }
        guard ciphertextLength <= UInt64(Int.max - headerCount) else {
            throw .notAVault(reason: "ciphertext length \(ciphertextLength) is out of range")
        }
        guard ciphertextLength <= remaining else {
            throw .truncated(expected: headerCount + Int(ciphertextLength), actual: fileCount)
        }
        guard ciphertextLength == remaining else {
            throw .notAVault(reason: "\(remaining - ciphertextLength) unexpected bytes after the ciphertext")
        }
        try kdf.validate()
    }
}

/// Sealing and opening whole vault files with XChaCha20-Poly1305 (IETF), the header as associated data.
enum VaultFormat {
    static let keyCount = 32

    /// Encrypts `plaintext` (a ``VaultPayload`` of the current version) under `key` with a fresh random nonce and
    /// returns the complete vault file, whose header carries `identity` (by default a new vault's).
    static func seal(
        _ plaintext: Data, key: SecureBytes, kdf: KDFParameters, identity: VaultIdentity = .fresh()
    ) -> Data {
        precondition(key.count == keyCount, "vault keys are \(keyCount) bytes")
        Sodium.ensureInitialized()
        let ciphertextCount = plaintext.count + VaultHeader.tagCount
        let nonce = randomBytes(count: VaultHeader.nonceCount)
        let header = VaultHeader(
            kdf: kdf, nonce: nonce, ciphertextLength: UInt64(ciphertextCount), identity: identity
        ).serialized()
        var file = Data(count: header.count + ciphertextCount)
        file.replaceSubrange(0..<header.count, with: header)
        let status = file.withUnsafeMutableBytes { fileBuffer in
            plaintext.withUnsafeBytes { plainBuffer in
                key.withUnsafeBytes { keyBuffer in
                    var written: UInt64 = 0
                    return crypto_aead_xchacha20poly1305_ietf_encrypt(
                        bytePointer(fileBuffer.baseAddress!) + header.count, &written,
                        plainBuffer.baseAddress.map(bytePointer), UInt64(plainBuffer.count),
                        header, UInt64(header.count),
                        nil, nonce, bytePointer(keyBuffer.baseAddress!))
                }
            }
        }
        precondition(status == 0, "crypto_aead_xchacha20poly1305_ietf_encrypt failed")
        return file
    }

    /// Parses and validates a vault's header without decrypting: length, magic, version, key-derivation id and
    /// bounds, and that the ciphertext length matches the file exactly.
    static func parseHeader(_ bytes: Data) throws(VaultError) -> VaultHeader {
        try VaultHeader(parsing: bytes)
    }

    /// Validates and decrypts a complete vault file. Throws `.authenticationFailed` for a wrong key or any
    /// modification that leaves the header well-formed.
    static func open(_ bytes: Data, key: SecureBytes) throws(VaultError) -> Data {
        let header = try parseHeader(bytes)
        var plaintext = Data(count: plaintextCount(of: header))
        let result = plaintext.withUnsafeMutableBytes { buffer in
            Result { () throws(VaultError) in try decrypt(bytes, header: header, key: key, into: buffer) }
        }
        try result.get()
        return plaintext
    }

    /// Decrypts a complete vault file into a buffer, hands the plaintext to `body`, and zeroes the buffer before it
    /// returns, whatever `body` does: the plaintext lives only as long as `body` runs. A plaintext whose encoding is
    /// not the one its header's version says throws ``VaultError/notAVault(reason:)``.
    static func withPlaintext<Result>(
        of bytes: Data, key: SecureBytes, _ body: (UnsafeRawBufferPointer) throws(PrefsError) -> Result
    ) throws -> Result {
        var buffer: [UInt8] = []
        return try withPlaintext(of: bytes, key: key, in: &buffer, body)
    }

    /// ``withPlaintext(of:key:_:)`` decrypting into `buffer` (sized here, before anything is decrypted into it), so a
    /// test can see it zeroed afterwards.
    static func withPlaintext<Result>(
        of bytes: Data, key: SecureBytes, in buffer: inout [UInt8],
        _ body: (UnsafeRawBufferPointer) throws(PrefsError) -> Result
    ) throws -> Result {
        let header = try parseHeader(bytes)
        buffer = [UInt8](repeating: 0, count: plaintextCount(of: header))
        return try buffer.withUnsafeMutableBytes { plaintext in
            defer { secureZero(plaintext) }
            try decrypt(bytes, header: header, key: key, into: plaintext)
            let payload = UnsafeRawBufferPointer(plaintext)
            guard VaultPayload.isLegacy(payload) == (header.version < 3) else {
                throw VaultError.notAVault(reason: "its payload is not the one format version \(header.version) holds")
            }
            return try body(payload)
        }
    }

    private static func plaintextCount(of header: VaultHeader) -> Int {
        Int(header.ciphertextLength) - VaultHeader.tagCount
    }

    /// Decrypts the ciphertext of `bytes` (whose parsed header is `header`) into `plainBuffer`, which holds exactly
    /// the plaintext; on failure the buffer is zeroed and `.authenticationFailed` thrown.
    private static func decrypt(
        _ bytes: Data, header: VaultHeader, key: SecureBytes, into plainBuffer: UnsafeMutableRawBufferPointer
    ) throws(VaultError) {
        precondition(key.count == keyCount, "vault keys are \(keyCount) bytes")
        let headerCount = VaultHeader.count
        let headerBytes = Array(bytes.prefix(headerCount))  // authenticate exactly what is on disk
        let status = bytes.withUnsafeBytes { fileBuffer in
            key.withUnsafeBytes { keyBuffer in
                var written: UInt64 = 0
                let status = crypto_aead_xchacha20poly1305_ietf_decrypt(
                    plainBuffer.baseAddress.map(bytePointer), &written, nil,
                    bytePointer(fileBuffer.baseAddress!) + headerCount, header.ciphertextLength,
                    headerBytes, UInt64(headerBytes.count),
                    header.nonce, bytePointer(keyBuffer.baseAddress!))
                if status != 0 { secureZero(plainBuffer) }
                return status
            }
        }
        guard status == 0 else { throw .authenticationFailed }
    }
}

private func bytePointer(_ raw: UnsafeRawPointer) -> UnsafePointer<UInt8> { raw.assumingMemoryBound(to: UInt8.self) }

private func bytePointer(_ raw: UnsafeMutableRawPointer) -> UnsafeMutablePointer<UInt8> {
    raw.assumingMemoryBound(to: UInt8.self)
}

extension VaultFormat {
    /// The kind of place the key of the vault whose file holds `bytes` was kept in, as its header records it; nil
    /// when it is not a vault. Reads the header only: no key is needed.
    static func keyKind(of bytes: Data) -> VaultKeyKind? { (try? VaultHeader(parsing: bytes))?.kdf.keyKind }
}
