import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

#if canImport(Glibc)
    import Glibc
#endif

private func isRollback(_ error: any Error) -> Bool {
    if case .rollbackDetected? = error as? VaultError { return true }
    return false
}

/// A vault replaced by an older copy of itself, or by another vault sealed under the same key, is refused and left
/// as it is; the rollback record that catches it, and the generation every write advances.
@Suite(.ownThreads) struct VaultRollbackTests {
    @Test func anOlderCopyOfAVaultIsRefusedAndLeftUntouched() throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        try vault.store.setValue(.string("old-token"), forKey: "token")
        let old = try Data(contentsOf: vault.url)
        try vault.store.setValue(.string("new-token"), forKey: "token")
        try old.write(to: vault.url)
        let error = #expect(throws: VaultError.self) { try vault.reopen() }
        #expect(error.map(isRollback) == true, "\(String(describing: error))")
        #expect(error?.description.contains("older copy") == true)
        #expect(try Data(contentsOf: vault.url) == old)
        // Restored on purpose: deleting the record named in the message accepts it again.
        let record = VaultRecord.path(forVault: vault.url.path(percentEncoded: false))
        #expect(error?.description.contains(record) == true)
        try FileManager.default.removeItem(atPath: record)
        #expect(try vault.reopen().value(forKey: "token") == .string("old-token"))
    }

    @Test func anotherVaultUnderTheSameKeyIsRefused() throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        try vault.store.setValue(.string("mine"), forKey: "token")
        let other = vault.directory.file("other.vault")
        try EncryptedFileStore(url: other, key: .keyFile(vault.keyFile)).setValue(.string("theirs"), forKey: "token")
        let original = try Data(contentsOf: other)
        try FileManager.default.removeItem(at: vault.url)
        try FileManager.default.copyItem(at: other, to: vault.url)
        let error = #expect(throws: VaultError.self) { try vault.reopen() }
        #expect(error.map(isRollback) == true, "\(String(describing: error))")
        #expect(error?.description.contains("another vault") == true)
        #expect(try Data(contentsOf: vault.url) == original)
    }

    /// Each write replaces the record whole (a rename), with the vault's latest generation, and an older copy is
    /// still caught. A record an earlier version kept as one line per generation still reads, by its last complete
    /// line (a line cut short by a crash in the middle of an append is ignored).
    @Test func theRecordHoldsTheLatestGenerationAndStillCatchesAnOlderCopy() throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        let record = VaultRecord.path(forVault: vault.url.path(percentEncoded: false))
        try vault.store.setValue(.int(0), forKey: "counter")
        let old = try Data(contentsOf: vault.url)
        for value in Int64(1)...5 { try vault.store.setValue(.int(value), forKey: "counter") }
        let lines = try String(contentsOfFile: record, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 4 && lines.first == "prefs vault record 2" && lines.last == "6")
        // As an earlier version left it: every generation on a line of its own, the last one cut short.
        let appended = lines.prefix(3).joined(separator: "\n") + "\n1\n2\n3\n4\n5\n6\n99"
        try appended.write(toFile: record, atomically: true, encoding: .utf8)
        try old.write(to: vault.url)
        let error = #expect(throws: VaultError.self) { try vault.reopen() }
        #expect(error?.description.contains("older copy (generation 1)") == true, "\(String(describing: error))")
        #expect(error?.description.contains("generation 6 was seen") == true, "\(String(describing: error))")
    }

    /// A version 1 record still reads.
    @Test func aVersionOneRecordStillReads() throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        let record = VaultRecord.path(forVault: vault.url.path(percentEncoded: false))
        try vault.store.setValue(.int(1), forKey: "counter")
        let text = try String(contentsOfFile: record, encoding: .utf8)
        try text.replacingOccurrences(of: "prefs vault record 2", with: "prefs vault record 1")
            .write(toFile: record, atomically: true, encoding: .utf8)
        #expect(try vault.reopen().value(forKey: "counter") == .int(1))
    }

    /// A record another process wrote between two writes of a store (after the user deleted it) is read again by
    /// the next write, which replaces it with its own generation; an older copy is still caught.
    @Test func aRecordAnotherProcessRecreatedBetweenTwoWritesIsReadAgain() throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        let record = VaultRecord.path(forVault: vault.url.path(percentEncoded: false))
        try vault.store.setValue(.int(1), forKey: "counter")
        try vault.store.setValue(.int(2), forKey: "counter")
        // The user accepts the vault as it is (deleting its record), then another process writes it: a new record.
        try FileManager.default.removeItem(atPath: record)
        let spec = "vault:\(vault.url.path(percentEncoded: false)):\(vault.keyFile.path(percentEncoded: false))"
        let child = try ChildProcess.run(ChildProcess.helperURL, ["set-int", spec, "counter", "3"])
        #expect(child.status == 0, "\(child)")
        let copy = try Data(contentsOf: vault.url)
        try vault.store.setValue(.int(4), forKey: "counter")
        let lines = try String(contentsOfFile: record, encoding: .utf8).split(separator: "\n")
        #expect(lines.last == "4", "\(lines)")
        try copy.write(to: vault.url)
        let error = #expect(throws: VaultError.self) { try vault.reopen() }
        #expect(error?.description.contains("older copy (generation 3)") == true, "\(String(describing: error))")
    }

    /// A record replaced by another vault's between two writes of a store is rewritten for this vault by its next
    /// write, not appended to as the record the store appended to last.
    @Test func aRecordReplacedBetweenTwoWritesIsRewrittenForThisVault() throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        let record = VaultRecord.path(forVault: vault.url.path(percentEncoded: false))
        try vault.store.setValue(.int(1), forKey: "counter")
        try vault.store.setValue(.int(2), forKey: "counter")
        let other = vault.directory.file("other.vault")
        try EncryptedFileStore(url: other, key: .keyFile(vault.keyFile)).setValue(.int(9), forKey: "counter")
        let otherRecord = VaultRecord.path(forVault: other.path(percentEncoded: false))
        try FileManager.default.removeItem(atPath: record)
        try FileManager.default.copyItem(atPath: otherRecord, toPath: record)
        try vault.store.setValue(.int(3), forKey: "counter")
        #expect(try vault.reopen().value(forKey: "counter") == .int(3))
        let lines = try String(contentsOfFile: record, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 4 && lines.last == "3", "\(lines)")
    }

    @Test func everySpellingOfAVaultsPathSharesOneRecord() throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        let path = vault.url.path(percentEncoded: false)
        let folder = POSIX.parentPath(of: path)
        let name = POSIX.lastComponent(of: path)
        #expect(folder + "/" + name == path)
        let linked = vault.directory.file("linked").path(percentEncoded: false)
        #expect(symlink(folder, linked) == 0)
        let record = VaultRecord.path(forVault: path)
        #expect(VaultRecord.path(forVault: linked + "/" + name) == record, "through a symbolic link to the folder")
        #expect(VaultRecord.path(forVault: folder + "//./" + name) == record, "with extra separators")
        // An older copy reached through the link is refused as it is through the real path.
        try vault.store.setValue(.int(1), forKey: "counter")
        let old = try Data(contentsOf: vault.url)
        try vault.store.setValue(.int(2), forKey: "counter")
        try old.write(to: vault.url)
        let error = #expect(throws: VaultError.self) {
            try EncryptedFileStore(url: URL(filePath: linked + "/" + name), key: .keyFile(vault.keyFile))
        }
        #expect(error.map(isRollback) == true, "\(String(describing: error))")
        // The path helpers, on the shapes a path takes.
        #expect(POSIX.parentPath(of: "/a/b/c") == "/a/b" && POSIX.parentPath(of: "/a/b/c//") == "/a/b")
        #expect(POSIX.parentPath(of: "/a") == "/" && POSIX.parentPath(of: "/") == "/")
        #expect(POSIX.parentPath(of: "c") == ".")
        #expect(POSIX.lastComponent(of: "/a/b/c//") == "c" && POSIX.lastComponent(of: "c") == "c")
        #expect(POSIX.lastComponent(of: "/") == "" && POSIX.parentPath(of: "/dé/ü.vault") == "/dé")
    }

    @Test func aRunningStoreNeverMovesBackwardsEvenWithoutARecord() throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        try vault.store.setValue(.int(1), forKey: "counter")
        let old = try Data(contentsOf: vault.url)
        try vault.store.setValue(.int(2), forKey: "counter")
        try FileManager.default.removeItem(atPath: VaultRecord.path(forVault: vault.url.path(percentEncoded: false)))
        try old.write(to: vault.url)
        vault.store.engine.lookAtFile()
        let error = #expect(throws: VaultError.self) { try vault.store.value(forKey: "counter") }
        #expect(error.map(isRollback) == true, "\(String(describing: error))")
        // Its next write is refused too, rather than built on the old copy.
        #expect(throws: VaultError.self) { try vault.store.setValue(.int(3), forKey: "counter") }
        #expect(try Data(contentsOf: vault.url) == old)
    }

    /// A store's first load takes no lock, so it may read a vault that another process replaces (and records) a
    /// moment later: that read is out of date, not a rollback, and must not fail the open.
    @Test func aFirstLoadRacingAnotherWriterIsNotARollback() throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        try vault.store.setValue(.int(1), forKey: "k")
        let read = try Data(contentsOf: vault.url)
        try vault.store.setValue(.int(2), forKey: "k")  // the other writer, after the read
        let path = vault.url.path(percentEncoded: false)
        let opening = VaultSnapshotCodec(key: .keyFile(vault.keyFile), cost: .testing, vaultPath: path)
        #expect(try opening.decode(read, path: path) == ["k": .int(1)])
        // The same bytes still on disk are a rollback.
        try read.write(to: vault.url)
        let reopening = VaultSnapshotCodec(key: .keyFile(vault.keyFile), cost: .testing, vaultPath: path)
        #expect(throws: VaultError.self) { try reopening.decode(read, path: path) }
    }

    /// A vault of format 2 (its payload in the encoding that came before binary property lists), as abb1d51 wrote
    /// it under a raw key of the bytes 1 to 32: it opens with every value, and its next write rewrites it in format
    /// 3, keeping its id and counting on from its generation.
    @Test func aVersion2VaultOpensAndIsRewrittenInVersion3OnItsNextWrite() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let url = directory.file("old.vault")
        try Version2Vault.file.write(to: url)
        let key = VaultKey.raw(Data(1...32))
        let before = try VaultFormat.parseHeader(Version2Vault.file)
        #expect(before.version == 2)

        let store = try EncryptedFileStore(url: url, key: key)
        #expect(try store.allValues() == Version2Vault.values)
        try store.setValue(.string("rewritten"), forKey: "token")
        let after = try Data(contentsOf: url)
        let header = try VaultFormat.parseHeader(after)
        #expect(header.version == 3)
        #expect(header.identity.id == before.identity.id && header.identity.generation == 6)
        let plaintext = try VaultFormat.open(after, key: SecureBytes(copying: Data(1...32)))
        #expect(BinaryPropertyList.startsWithMagic(plaintext))
        var expected = Version2Vault.values
        expected["token"] = .string("rewritten")
        #expect(try EncryptedFileStore(url: url, key: key).allValues() == expected)
        // Once rewritten, the format 2 copy is an older vault.
        try Version2Vault.file.write(to: url)
        #expect(throws: VaultError.self) { try EncryptedFileStore(url: url, key: key) }
    }

    @Test func everyWriteAdvancesTheGenerationAndRekeyKeepsTheVaultID() throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        try vault.store.setValue(.int(1), forKey: "k")
        let first = try VaultFormat.parseHeader(Data(contentsOf: vault.url)).identity
        try vault.store.setValue(.int(2), forKey: "k")
        try vault.store.rekey(to: .raw(Data(repeating: 9, count: 32)))
        let third = try VaultFormat.parseHeader(Data(contentsOf: vault.url)).identity
        #expect(third.id == first.id && third.generation == first.generation + 2)
    }
}

/// A vault written by abb1d51 (format 2): the values below, sealed under the raw key of the bytes 1 to 32, with the
/// vault id A0…AF and generation 5.
enum Version2Vault {
    static let values: [String: PrefValue] = [
        "flag": .bool(true), "off": .bool(false), "count": .int(-42), "big": .unsignedInt(.max),
        "ratio": .float(0.1), "pi": .double(3.141592653589793), "negativeZero": .double(-0.0),
        "when": .date(Date(timeIntervalSinceReferenceDate: 786_123_456.789)),
        "token": .string("eyJhbGciOi…é👋"), "blob": .data(Data([0, 1, 2, 0xFE, 0xFF])),
        "list": .array([.string("a"), .int(1), .array([]), .dictionary(["x": .bool(false)])]),
        "nested": .dictionary(["inner": .dictionary(["deep": .string("value")]), "empty": .dictionary([:])]),
        "": .string("empty key"),
    ]

    static let file = Data(
        base64Encoded: """
            UFJFRlNWTFQCAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAIaXFwQQ3r99HwILbJSdv8MYWWrOkBVUZj0BAAAAAAAA
            oKGio6SlpqeoqaqrrK2urwUAAAAAAAAAAgse8ArXo08QKOINWOosjh1l7ZscCUhpRLipLuQCIBCg071xhr2Luj3Wi2KkuP+2O8aG
            EOZkZ1R77jKq6e5dalFAh9Yjy/xsdvbfscD8yNbRRLv03nsZ4ldMpaSOgv5V1Y75EdCzJyPiqb/ImecmyMy9FwvkSORUF93zsljS
            XsZTsr4UkYt8N0bp+G80O0fZEKmVz85EECXa5FYEK1kJFM+h2rppZ4CQwYszgMdMQIQohVEtZfRH6H8Jun/aeG6eySjUDHhRUkOS
            644P4XRu/1iOoAPsGwm4RePrQZl67LfDoFxnkKJ71vkKp19FwVNSwj7qWWOHu1q02AExk9osJHOAkAc8FA3XCT5LhZk42Na5CRan
            emIwuE9mu/rStQQtIrq5Z3S14tmcfHH0aoPaqz2otggevSsoKCNvd3M=
            """, options: .ignoreUnknownCharacters)!

    /// The plaintext inside ``file``: a payload of format 2.
    static func payload() throws -> Data { try VaultFormat.open(file, key: SecureBytes(copying: Data(1...32))) }
}
