import Foundation
import PrefsTestSupport
import Synchronization
import Testing

@testable import Prefs

#if canImport(Glibc)
    import Glibc
#endif

// Issue 13: each test reproduces one hole found by the security review of the vault and the file layer.

/// Runs the helper as a child that must finish within `seconds`; a child still running then is killed and the test
/// fails, so a hang is a failure and not a stuck suite.
private func runChild(_ arguments: [String], within seconds: Int = 20) throws -> ChildProcess.Exit {
    let exit = try ChildProcess.run(arguments, timeLimit: .seconds(seconds))
    if exit.timedOut { Issue.record("\(arguments) still running after \(seconds) s: killed") }
    return exit
}

/// Polls `condition` every 10 ms until it holds or `seconds` pass; returns whether it held.
private func eventually(within seconds: Double = 10, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < deadline {
        if try condition() { return true }
        usleep(10_000)
    }
    return try condition()
}

private func isRollback(_ error: any Error) -> Bool {
    if case .rollbackDetected? = error as? VaultError { return true }
    return false
}

// MARK: - 1. Rollback and swap

@Suite struct VaultRollbackTests {
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

    @Test func theRecordGrowsByOneLinePerWriteAndStillCatchesAnOlderCopy() throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        let record = VaultRecord.path(forVault: vault.url.path(percentEncoded: false))
        try vault.store.setValue(.int(0), forKey: "counter")
        let old = try Data(contentsOf: vault.url)
        for value in Int64(1)...5 { try vault.store.setValue(.int(value), forKey: "counter") }
        let lines = try String(contentsOfFile: record, encoding: .utf8).split(separator: "\n")
        #expect(lines.first == "prefs vault record 2" && lines.suffix(6) == ["1", "2", "3", "4", "5", "6"])
        // A last line cut short (a crash in the middle of an append) is ignored: generation 6 still counts.
        let handle = try #require(FileHandle(forWritingAtPath: record))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("99".utf8))
        try handle.close()
        try old.write(to: vault.url)
        let error = #expect(throws: VaultError.self) { try vault.reopen() }
        #expect(error?.description.contains("older copy (generation 1)") == true, "\(String(describing: error))")
        #expect(error?.description.contains("generation 6 was seen") == true, "\(String(describing: error))")
    }

    @Test func aRecordIsRewrittenWholeForAnotherVaultOrOnceItIsLong() throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        let record = VaultRecord.path(forVault: vault.url.path(percentEncoded: false))
        var written: Int64 = 0
        // About 4 KiB of generations, then the record starts again from its header.
        repeat {
            written += 1
            try vault.store.setValue(.int(written), forKey: "counter")
        } while (try Data(contentsOf: URL(filePath: record))).count < 4096
        try vault.store.setValue(.int(written + 1), forKey: "counter")
        let lines = try String(contentsOfFile: record, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 4 && lines.last == "\(written + 1)")
        // A version 1 record (one generation line) still reads.
        let text = try String(contentsOfFile: record, encoding: .utf8)
        try text.replacingOccurrences(of: "prefs vault record 2", with: "prefs vault record 1")
            .write(toFile: record, atomically: true, encoding: .utf8)
        #expect(try vault.reopen().value(forKey: "counter") == .int(written + 1))
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
        vault.store.storage.reloadFromDisk()
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

    @Test func version1VaultsOpenAndAreUpgradedOnTheirNextWrite() throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        try vault.store.setValue(.string("v"), forKey: "k")  // creates the key file
        let key = try VaultKey.keyFile(vault.keyFile).resolve(for: nil, creating: false)
        let plaintext = try VaultPayload.encode(["k": .string("from version 1")])
        let version1 = vault.directory.file("old.vault")
        try VaultFormat.seal(plaintext, key: key.key, kdf: .none, identity: nil).write(to: version1)
        #expect(try VaultFormat.parseHeader(Data(contentsOf: version1)).version == 1)

        let store = try EncryptedFileStore(url: version1, key: .keyFile(vault.keyFile))
        #expect(try store.value(forKey: "k") == .string("from version 1"))
        try store.setValue(.string("upgraded"), forKey: "k")
        let header = try VaultFormat.parseHeader(Data(contentsOf: version1))
        #expect(header.version == 2 && header.identity?.generation == 1)
        // Once upgraded, the version 1 copy is an older vault.
        let upgraded = try Data(contentsOf: version1)
        try VaultFormat.seal(plaintext, key: key.key, kdf: .none, identity: nil).write(to: version1)
        #expect(throws: VaultError.self) { try EncryptedFileStore(url: version1, key: .keyFile(vault.keyFile)) }
        try upgraded.write(to: version1)
        #expect(
            try EncryptedFileStore(url: version1, key: .keyFile(vault.keyFile)).value(forKey: "k")
                == .string("upgraded"))
    }

    @Test func everyWriteAdvancesTheGenerationAndRekeyKeepsTheVaultID() throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        try vault.store.setValue(.int(1), forKey: "k")
        let first = try #require(VaultFormat.parseHeader(Data(contentsOf: vault.url)).identity)
        try vault.store.setValue(.int(2), forKey: "k")
        try vault.store.rekey(to: .raw(Data(repeating: 9, count: 32)))
        let third = try #require(VaultFormat.parseHeader(Data(contentsOf: vault.url)).identity)
        #expect(third.id == first.id && third.generation == first.generation + 2)
    }
}

// MARK: - 2. Failures after the commit point

@Suite struct CommittedWriteTests {
    private static let failingSync: @Sendable (String) -> SystemCallError? = { path in
        SystemCallError(path: path, operation: "sync directory", errno: EIO)
    }

    @Test func aRekeyWhoseFolderSyncFailsKeepsTheNewKey() throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        try vault.store.setValue(.string("secret"), forKey: "k")
        let newKeyFile = vault.directory.file("new.key")
        vault.store.storage.file.directorySyncFault.withLock { $0 = Self.failingSync }
        let error = #expect(throws: PrefsError.self) { try vault.store.rekey(to: .keyFile(newKeyFile)) }
        guard case .durabilityNotConfirmed? = error else {
            Issue.record("expected durabilityNotConfirmed, got \(String(describing: error))")
            return
        }
        #expect(error?.description.contains("was made") == true)
        vault.store.storage.file.directorySyncFault.withLock { $0 = nil }
        // The file is under the new key, and so is the store: its next write must not go back to the old key.
        #expect(try vault.reopen(key: .keyFile(newKeyFile)).value(forKey: "k") == .string("secret"))
        #expect(throws: VaultError.authenticationFailed) { try vault.reopen() }
        try vault.store.setValue(.string("after"), forKey: "k")
        #expect(try vault.reopen(key: .keyFile(newKeyFile)).value(forKey: "k") == .string("after"))
    }

    @Test func aWriteWhoseFolderSyncFailsIsReportedAsCommittedAndAnnounced() async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try FileStore(url: directory.file("store.json"))
        let key = uniqueKey()
        let changes = store.changes.keys([key])
        store.storage.file.directorySyncFault.withLock { $0 = Self.failingSync }
        defer { store.storage.file.directorySyncFault.withLock { $0 = nil } }
        let error = #expect(throws: PrefsError.self) { try store.setValue(.int(7), forKey: key) }
        guard case .durabilityNotConfirmed? = error else {
            Issue.record("expected durabilityNotConfirmed, got \(String(describing: error))")
            return
        }
        #expect(try store.value(forKey: key) == .int(7))
        let onDisk = try JSONSerialization.jsonObject(with: Data(contentsOf: directory.file("store.json")))
        #expect((onDisk as? [String: Any])?[key] as? Int == 7)
        // Other readers are told, as for any write.
        #expect(try await first(1, of: changes) == [key])
    }
}

// MARK: - 4. Argon2id cost from the unauthenticated header

@Suite struct ArgonCostTests {
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

// MARK: - 5. Key material in guarded memory

@Suite struct KeyMaterialTests {
    @Test func passphrasesAndRawKeysAreKeptInGuardedMemory() throws {
        guard case .passphrase(let bytes?) = VaultKeyMaterial(.passphrase("correct horse")) else {
            Issue.record("no guarded passphrase")
            return
        }
        #expect(bytes.withUnsafeBytes { Array($0) } == Array("correct horse".utf8))
        guard case .raw(let key?, 32) = VaultKeyMaterial(.raw(Data(repeating: 5, count: 32))) else {
            Issue.record("no guarded raw key")
            return
        }
        #expect(key.withUnsafeBytes { Array($0) } == [UInt8](repeating: 5, count: 32))
        guard case .raw(nil, 3) = VaultKeyMaterial(.raw(Data([1, 2, 3]))) else {
            Issue.record("a short raw key must be kept only as its length")
            return
        }
    }
}

// MARK: - 6. No secret in error text

private enum Tier: String, Codable, Sendable, Equatable { case free, gold }
private struct APICredentials: Codable, Sendable, Equatable { var token: String }

@Suite struct SecretRedactionTests {
    static let secret = "sk_live_4f9aXq81Recognisable"

    @Test func aStoredSecretThatDoesNotDecodeNeverAppearsInErrors() throws {
        Reports.install()
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        let tierKey = uniqueKey("tier")
        let credentialsKey = uniqueKey("credentials")
        try vault.store.setValue(.string(Self.secret), forKey: tierKey)
        try vault.store.setValue(.string("{\"token\": \(Self.secret)}"), forKey: credentialsKey)

        let tier = SecureStoredValue<Tier>(key: tierKey, store: vault.store)
        #expect(tier.wrappedValue == nil)
        let tierError = #expect(throws: PrefsError.self) { try tier.update { $0 = .gold } }
        let credentials = SecureStoredValue<APICredentials>(key: credentialsKey, store: vault.store)
        #expect(credentials.wrappedValue == nil)
        let credentialsError = #expect(throws: PrefsError.self) { try credentials.set(\.token, to: "x") }

        let texts =
            [tierError, credentialsError].map { String(describing: $0) + ($0?.localizedDescription ?? "") }
            + (Reports.for(tierKey) + Reports.for(credentialsKey)).map { "\($0) \($0.error)" }
        #expect(texts.count == 4)
        for text in texts {
            #expect(!text.contains("sk_live"), "\(text)")
            #expect(text.contains("string"), "\(text)")  // still says what was found
        }
        // The secret is still stored: nothing was overwritten.
        #expect(try vault.store.value(forKey: tierKey) == .string(Self.secret))
    }
}

// MARK: - 3, 8. Special files, in a child with a deadline

@Suite struct SpecialFileTests {
    private static func expectRefused(
        _ spec: String, saying phrase: String, type: String = "PrefsError", maxMiB: Int = 100
    ) throws {
        let started = ContinuousClock.now
        let result = try runChild(["try-open", spec])
        let elapsed = ContinuousClock.now - started
        #expect(result.status == 0, "\(result.error)")
        let lines = result.lines
        #expect(lines.first?.hasPrefix("error \(type)") == true, "\(lines)")
        #expect(lines.first?.contains(phrase) == true, "\(lines)")
        let rss = lines.last.flatMap { Int($0.split(separator: " ").last ?? "") } ?? .max
        #expect(rss < maxMiB << 10, "max resident \(rss) KiB")
        #expect(elapsed < .seconds(10))
    }

    @Test func aFIFOAsTheDataFileIsRefusedWithoutBlocking() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let path = directory.file("store.json").path(percentEncoded: false)
        #expect(mkfifo(path, 0o600) == 0)
        try Self.expectRefused("json:\(path)", saying: "a FIFO, not a regular file")
    }

    @Test func aFIFOAsTheKeyFileIsRefusedWithoutBlocking() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let vault = directory.file("v.vault").path(percentEncoded: false)
        let key = directory.file("v.key").path(percentEncoded: false)
        #expect(mkfifo(key, 0o600) == 0)
        try Self.expectRefused("vault:\(vault):\(key)", saying: "a FIFO, not a regular file", type: "VaultError")
    }

    @Test func aDataFileLinkedToDevZeroIsRefusedWithoutReadingIt() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let path = directory.file("store.json").path(percentEncoded: false)
        #expect(symlink("/dev/zero", path) == 0)
        try Self.expectRefused("json:\(path)", saying: "a character device")
    }

    @Test func aHugeSparseFileIsRefusedBeforeItIsRead() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let path = directory.file("suite.plist").path(percentEncoded: false)
        let fd = open(path, O_CREAT | O_WRONLY, 0o600)
        #expect(fd >= 0 && ftruncate(fd, 300 << 20) == 0)
        close(fd)
        try Self.expectRefused(
            "plist:\(directory.url.path(percentEncoded: false)):suite", saying: "more than the 64 MiB", maxMiB: 100)
    }

    @Test func aDanglingKeyFileSymlinkIsRefusedAtOnceAndLeavesNothing() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let vault = directory.file("v.vault").path(percentEncoded: false)
        let key = directory.file("v.key").path(percentEncoded: false)
        #expect(symlink(directory.file("missing.key").path(percentEncoded: false), key) == 0)
        try Self.expectRefused("vault:\(vault):\(key)", saying: "symbolic link to a missing file", type: "VaultError")
        let left = try FileManager.default.contentsOfDirectory(atPath: directory.url.path(percentEncoded: false))
        #expect(!left.contains { $0.contains(".tmp-") }, "\(left)")
        #expect(!FileManager.default.fileExists(atPath: vault))
    }
}

// MARK: - 9, 11. The lock file and temporary files

@Suite struct LockFileTests {
    /// Three processes each open the lock file, which is deleted after each of them has: each holds a different
    /// lock file (the first two deleted). Their appends must still exclude each other: after `flock` each sees that
    /// its descriptor is no longer the lock file at the path and opens the current one. (The continuous version,
    /// the lock file deleted every 100 ms under load, is in the reliability suite.)
    @Test func processesHoldingADeletedLockFileStillExcludeEachOther() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let path = directory.file("store.json").path(percentEncoded: false)
        let count = 60
        var children: [ChildProcess] = []
        defer { for child in children { child.kill() } }
        for index in 0..<3 {
            let child = try ChildProcess.start(
                ["append-on-go", "json:\(path)", "list", String(count), "p\(index)"], input: .pipe,
                timeLimit: .seconds(60))
            children.append(child)
            #expect(child.readLine() == "ready")
            #expect(unlink(path + ".lock") == 0)
        }
        for child in children { child.write("go\n") }
        for child in children {
            let exit = child.wait()
            #expect(exit.status == 0 && exit.lines == ["ready", "done"], "\(exit)")
        }
        let list = try FileStore(url: URL(filePath: path)).value(forKey: "list")
        guard case .array(let elements)? = list else {
            Issue.record("no list: \(String(describing: list))")
            return
        }
        #expect(elements.count == 3 * count)
        #expect(Set(elements).count == 3 * count)
    }

    @Test func aSymbolicLinkAtTheLockPathIsNotFollowed() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let target = directory.file("elsewhere/created-through-link")
        try FileManager.default.createDirectory(
            at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
        #expect(
            symlink(target.path(percentEncoded: false), directory.file("store.json.lock").path(percentEncoded: false))
                == 0)
        let file = LockedFile(url: directory.file("store.json"))
        let error = #expect(throws: PrefsError.self) { try file.withLock(.exclusive) {} }
        #expect(error?.description.contains("symbolic link") == true, "\(String(describing: error))")
        #expect(!FileManager.default.fileExists(atPath: target.path(percentEncoded: false)))
    }

    /// A normal `~/.config` holds hundreds of entries. glibc packs `readdir` entries to their real length, so the
    /// sweep must read each name up to its NUL, not copy the 256-byte field (which ran past the end of the buffer
    /// and crashed about one first write in 150; AddressSanitizer, which CI runs, reports it every time).
    @Test func aFirstWriteInAFolderOfAThousandFilesSweepsOnlyStaleTemporaryFiles() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        for index in 0..<1_000 {
            let name = String(format: "%04d-", index) + String(repeating: "e", count: index % 3 == 0 ? 200 : 7)
            #expect(
                FileManager.default.createFile(atPath: directory.file(name).path(percentEncoded: false), contents: nil))
        }
        let store = try FileStore(url: directory.file("settings.json"))
        let file = LockedFile(url: directory.file("settings.json"))
        let leftover = directory.file(file.temporaryPrefix + "abc123")
        #expect(FileManager.default.createFile(atPath: leftover.path(percentEncoded: false), contents: Data()))
        try store.setValue(.int(1), forKey: "launches")
        #expect(!FileManager.default.fileExists(atPath: leftover.path(percentEncoded: false)))
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.url.path(percentEncoded: false))
        #expect(names.count == 1_002, "the thousand files, the store and its lock file")
        #expect(try FileStore(url: directory.file("settings.json")).value(forKey: "launches") == .int(1))
    }

    @Test func theTemporaryFileSweepMatchesTheWholeName() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        // Two names that share their first 200 bytes, one short enough to be used whole and one that is not.
        let shared = String(repeating: "n", count: 200)
        for (mine, theirs) in [
            (shared + "-a.json", shared + "-b.json"),
            (shared + "a" + String(repeating: "x", count: 40), shared + "b" + String(repeating: "x", count: 40)),
        ] {
            let theirFile = LockedFile(url: directory.file(theirs))
            let inFlight = directory.file(theirFile.temporaryPrefix + "1a2b3c")
            #expect(FileManager.default.createFile(atPath: inFlight.path(percentEncoded: false), contents: Data()))
            #expect(LockedFile(url: directory.file(mine)).removeStaleTemporaryFiles() == 0)
            #expect(FileManager.default.fileExists(atPath: inFlight.path(percentEncoded: false)))
            #expect(theirFile.removeStaleTemporaryFiles() == 1)
            #expect(theirFile.temporaryPrefix.utf8.count + 16 <= 255)
        }
    }
}

// MARK: - 10. The folder replaced while watching

@Suite struct FolderReplacedTests {
    @Test func aWatcherFollowsTheFolderPathAfterTheFolderIsReplaced() throws {
        let root = try TempDir()
        defer { root.cleanup() }
        let folder = root.file("prefs")
        let path = folder.appending(path: "store.json").path(percentEncoded: false)
        let store = try FileStore(url: URL(filePath: path))
        try store.setValue(.int(1), forKey: "k")
        #expect(rename(folder.path(percentEncoded: false), root.file("prefs.old").path(percentEncoded: false)) == 0)
        #expect(mkdir(folder.path(percentEncoded: false), 0o700) == 0)
        // The store now reads the (missing) file at its path, not the moved one.
        #expect(try eventually { try store.value(forKey: "k") == nil })
        let result = try runChild(["set-int", "json:\(path)", "k", "2"])
        #expect(result.lines == ["ok"], "\(result.error)")
        #expect(try eventually { try store.value(forKey: "k") == .int(2) })
    }
}
