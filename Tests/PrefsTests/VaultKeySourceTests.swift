import Foundation
import PrefsTestSupport
import Synchronization
import TestThreads
import Testing

@testable import Prefs

/// A key source that keeps keys in memory, by vault, and counts how it is asked.
final class MemoryKeySource: VaultKeySource, CustomStringConvertible {
    struct State {
        var keys: [URL: [UInt8]] = [:]
        var asked: [(vault: URL, creating: Bool)] = []
        var failure: (any Error & Sendable)?
        /// Thrown by removals only.
        var removalFailure: (any Error & Sendable)?
        /// The length of the keys it makes (32 unless a test asks for a broken source).
        var length = 32
        var makesKeys = true
    }

    let state = Mutex(State())
    var description: String { "the memory source" }

    func key(forVault vault: URL, creating: Bool) throws -> SecureBytes? {
        let bytes = try state.withLock { state throws -> [UInt8]? in
            state.asked.append((vault, creating))
            if let failure = state.failure { throw failure }
            if let key = state.keys[vault] { return key }
            guard creating, state.makesKeys else { return nil }
            let made = (0..<state.length).map { _ in UInt8.random(in: 0...255) }
            state.keys[vault] = made
            return made
        }
        guard let bytes else { return nil }
        let key = SecureBytes(count: bytes.count)
        key.withUnsafeMutableBytes { $0.copyBytes(from: bytes) }
        return key
    }

    func removeKey(forVault vault: URL) throws {
        try state.withLock { state in
            if let failure = state.failure ?? state.removalFailure { throw failure }
            state.keys[vault] = nil
        }
    }

    var keyCount: Int { state.withLock { $0.keys.count } }
}

struct SourceFailure: Error, Equatable {
    let reason: String
}

/// `VaultKey.source`: how a vault asks a key source for its key, and moving a vault's key between a key file and a
/// source (`moveKey(to:)`, `init(url:key:movingFrom:)`).
@Suite(.ownThreads) struct VaultKeySourceTests {
    /// A vault records the kind of place its key is kept in, nothing of the key: opened with a key file that does not
    /// exist, the error names the kind of key that opens it; opened with a source that has no key, it names the key
    /// file the vault was written with.
    @Test func aVaultOpenedWithTheWrongKindOfKeyNamesTheKindItNeeds() throws {
        let folder = try TempDir()
        defer { folder.cleanup() }
        let source = MemoryKeySource()
        let vault = folder.file("source.vault")
        try EncryptedFileStore(url: vault, key: .source(source)).setValue(.string("t"), forKey: "token")
        #expect(EncryptedFileStore.recordedKeyKind(ofVaultAt: vault.path(percentEncoded: false)) == .source)
        let missing = folder.path("missing.key")
        #expect(
            throws: VaultError.invalidKey(
                reason: "there is no key file \(missing): the vault was written with its key in a key source of the "
                    + "app's own; open it with that VaultKey.source(_:)")
        ) { try EncryptedFileStore(url: vault, key: .keyFile(URL(filePath: missing))) }

        let credentials = try TempDir()
        defer { credentials.cleanup() }
        try Data(repeating: 9, count: 32).write(to: credentials.file("vault-key"))
        let credential = ServiceCredential(
            name: "vault-key", environment: ["CREDENTIALS_DIRECTORY": credentials.url.path(percentEncoded: false)])
        let served = folder.file("credential.vault")
        try EncryptedFileStore(url: served, key: .source(credential)).setValue(.string("t"), forKey: "token")
        #expect(EncryptedFileStore.recordedKeyKind(ofVaultAt: served.path(percentEncoded: false)) == .credential)
        #expect(throws: VaultError.self) {
            do {
                _ = try EncryptedFileStore(url: served, key: .keyFile(URL(filePath: missing)))
            } catch {
                #expect(
                    "\(error)".contains(
                        "written with its key in a service credential; open it with VaultKey.credential(name)"))
                throw error
            }
        }

        let keyFile = folder.file("file.vault")
        try EncryptedFileStore(url: keyFile, key: .keyFile(folder.file("k"))).setValue(.int(1), forKey: "n")
        #expect(EncryptedFileStore.recordedKeyKind(ofVaultAt: keyFile.path(percentEncoded: false)) == .keyFile)
        #expect(throws: VaultError.self) {
            do {
                _ = try EncryptedFileStore(url: keyFile, key: .source(MemoryKeySource()))
            } catch {
                #expect("\(error)".hasSuffix("written with its key in a key file; open it with VaultKey.keyFile(url)"))
                throw error
            }
        }
        // The record is not secret and no derivation: the header holds the kind, and the file opens as before.
        #expect(try EncryptedFileStore(url: keyFile, key: .keyFile(folder.file("k"))).value(forKey: "n") == .int(1))
    }

    @Test func aSourceIsAskedToCreateTheKeyOnlyWhenANewVaultIsFirstWritten() throws {
        let folder = try TempDir()
        defer { folder.cleanup() }
        let source = MemoryKeySource()
        let url = folder.file("secrets.vault")
        let store = try EncryptedFileStore(url: url, key: .source(source))
        #expect(try store.value(forKey: "token") == nil)
        #expect(source.state.withLock { $0.asked.isEmpty }, "opening and reading a missing vault asks nothing")
        try store.setValue(.string("t"), forKey: "token")
        try store.setValue(.string("u"), forKey: "other")
        let asked = source.state.withLock { $0.asked }
        #expect(asked.count == 1 && asked[0].creating && asked[0].vault == url.standardizedFileURL)
        let reopened = try EncryptedFileStore(url: url, key: .source(source))
        #expect(try reopened.value(forKey: "token") == .string("t"))
        #expect(source.state.withLock { $0.asked.count == 2 && !$0.asked[1].creating })
    }

    @Test func aSourcesOwnErrorReachesTheCallerAndNothingIsWritten() throws {
        let folder = try TempDir()
        defer { folder.cleanup() }
        let source = MemoryKeySource()
        source.state.withLock { $0.failure = SourceFailure(reason: "locked") }
        let url = folder.file("secrets.vault")
        let store = try EncryptedFileStore(url: url, key: .source(source))
        #expect(throws: SourceFailure(reason: "locked")) { try store.setValue(.string("t"), forKey: "token") }
        #expect(!FileManager.default.fileExists(atPath: url.path))

        source.state.withLock { $0.failure = nil }
        try store.setValue(.string("t"), forKey: "token")
        source.state.withLock { $0.failure = SourceFailure(reason: "gone") }
        #expect(throws: SourceFailure(reason: "gone")) { try EncryptedFileStore(url: url, key: .source(source)) }
    }

    @Test func aKeyOfTheWrongLengthOrNoKeyIsAnInvalidKey() throws {
        let folder = try TempDir()
        defer { folder.cleanup() }
        let short = MemoryKeySource()
        short.state.withLock { $0.length = 16 }
        let store = try EncryptedFileStore(url: folder.file("short.vault"), key: .source(short))
        let error = #expect(throws: VaultError.self) { try store.setValue(.string("t"), forKey: "token") }
        #expect(error?.description.contains("the memory source gave a key of 16 bytes, expected 32") == true)

        let none = MemoryKeySource()
        none.state.withLock { $0.makesKeys = false }
        let empty = try EncryptedFileStore(url: folder.file("none.vault"), key: .source(none))
        let made = #expect(throws: VaultError.self) { try empty.setValue(.string("t"), forKey: "token") }
        #expect(made?.description.contains("the memory source made no key for a new vault") == true)

        // A vault whose key the source no longer keeps cannot be opened, and says so.
        let source = MemoryKeySource()
        let url = folder.file("forgotten.vault")
        try EncryptedFileStore(url: url, key: .source(source)).setValue(.string("t"), forKey: "token")
        try source.removeKey(forVault: url.standardizedFileURL)
        let forgotten = #expect(throws: VaultError.self) { try EncryptedFileStore(url: url, key: .source(source)) }
        #expect(forgotten?.description.contains("the memory source keeps no key for the vault") == true)
        // A source never opens a passphrase vault.
        let passphrase = folder.file("passphrase.vault")
        try EncryptedFileStore(url: passphrase, key: .passphrase("pw"), cost: .testing).setValue(.int(1), forKey: "n")
        #expect(throws: VaultError.invalidKey(reason: "this vault is protected by a passphrase")) {
            try EncryptedFileStore(url: passphrase, key: .source(source))
        }
    }

    @Test func movingAKeyFileVaultToASourceAndBackKeepsEveryValueAndTheRollbackRecord() throws {
        let folder = try TempDir()
        defer { folder.cleanup() }
        let url = folder.file("secrets.vault")
        let keyFile = folder.file("secrets.key")
        let store = try EncryptedFileStore(url: url, key: .keyFile(keyFile))
        try store.setValue(.string("t"), forKey: "token")
        try store.setValue(.int(7), forKey: "pin")
        let source = MemoryKeySource()

        try store.moveKey(to: .source(source))
        #expect(!FileManager.default.fileExists(atPath: keyFile.path))
        #expect(source.keyCount == 1)
        let moved = try EncryptedFileStore(url: url, key: .source(source))
        #expect(try moved.allValues() == ["token": .string("t"), "pin": .int(7)])
        moved.close()
        #expect(throws: VaultError.self) { try EncryptedFileStore(url: url, key: .keyFile(keyFile)) }

        // The store keeps working under its new key, and its record moved on: an older copy is refused.
        let older = try Data(contentsOf: url)
        try store.setValue(.string("newer"), forKey: "token")
        let newer = try Data(contentsOf: url)
        try older.write(to: url, options: .atomic)
        let refused = #expect(throws: VaultError.self) { try EncryptedFileStore(url: url, key: .source(source)) }
        if case .rollbackDetected? = refused {} else { Issue.record("not a rollback: \(String(describing: refused))") }
        try newer.write(to: url, options: .atomic)

        try store.moveKey(to: .keyFile(keyFile))
        #expect(source.keyCount == 0)
        let back = try EncryptedFileStore(url: url, key: .keyFile(keyFile))
        #expect(try back.value(forKey: "token") == .string("newer"))
    }

    @Test func aMoveToTheKeyTheVaultAlreadyHasRemovesNothing() throws {
        let folder = try TempDir()
        defer { folder.cleanup() }
        let url = folder.file("secrets.vault")
        let source = MemoryKeySource()
        let store = try EncryptedFileStore(url: url, key: .source(source))
        try store.setValue(.string("t"), forKey: "token")
        let error = #expect(throws: VaultError.self) { try store.moveKey(to: .source(source)) }
        #expect(error?.description.contains("the old one was not removed") == true)
        #expect(source.keyCount == 1)
        #expect(try EncryptedFileStore(url: url, key: .source(source)).value(forKey: "token") == .string("t"))
    }

    @Test func aMoveThatCannotMakeTheNewKeyLeavesTheVaultAndItsKeyFileAsTheyWere() throws {
        let folder = try TempDir()
        defer { folder.cleanup() }
        let url = folder.file("secrets.vault")
        let keyFile = folder.file("secrets.key")
        let store = try EncryptedFileStore(url: url, key: .keyFile(keyFile))
        try store.setValue(.string("t"), forKey: "token")
        let before = try Data(contentsOf: url)
        let source = MemoryKeySource()
        source.state.withLock { $0.failure = SourceFailure(reason: "locked") }
        #expect(throws: SourceFailure(reason: "locked")) { try store.moveKey(to: .source(source)) }
        #expect(try Data(contentsOf: url) == before)
        #expect(try EncryptedFileStore(url: url, key: .keyFile(keyFile)).value(forKey: "token") == .string("t"))
        // The store itself still writes under its key file.
        try store.setValue(.string("u"), forKey: "token")
        #expect(try EncryptedFileStore(url: url, key: .keyFile(keyFile)).value(forKey: "token") == .string("u"))
    }

    @Test func openingWhileMovingFromAKeyFileMovesOnceAndFinishesAMoveCutShort() throws {
        let folder = try TempDir()
        defer { folder.cleanup() }
        let url = folder.file("secrets.vault")
        let keyFile = folder.file("secrets.key")
        let source = MemoryKeySource()

        // No vault yet: it opens under the new key, and a key file already there is left alone.
        try Data(repeating: 1, count: 32).write(to: keyFile)
        chmod(keyFile.path, 0o600)
        let fresh = try EncryptedFileStore(url: url, key: .source(source), movingFrom: .keyFile(keyFile))
        #expect(try fresh.value(forKey: "token") == nil)
        #expect(FileManager.default.fileExists(atPath: keyFile.path) && source.keyCount == 0)
        try FileManager.default.removeItem(at: keyFile)

        // A vault under its key file moves.
        try EncryptedFileStore(url: url, key: .keyFile(keyFile)).setValue(.string("t"), forKey: "token")
        let oldKey = try Data(contentsOf: keyFile)
        let moved = try EncryptedFileStore(url: url, key: .source(source), movingFrom: .keyFile(keyFile))
        #expect(try moved.value(forKey: "token") == .string("t"))
        #expect(!FileManager.default.fileExists(atPath: keyFile.path) && source.keyCount == 1)

        // Stopped after the vault changed keys, before the key file went: that file is removed now.
        try oldKey.write(to: keyFile)
        chmod(keyFile.path, 0o600)
        let finished = try EncryptedFileStore(url: url, key: .source(source), movingFrom: .keyFile(keyFile))
        #expect(try finished.value(forKey: "token") == .string("t"))
        #expect(!FileManager.default.fileExists(atPath: keyFile.path))

        // Moved already, no key file: opening asks the source only.
        #expect(
            try EncryptedFileStore(url: url, key: .source(source), movingFrom: .keyFile(keyFile))
                .value(forKey: "token") == .string("t"))
        #expect(source.keyCount == 1)
    }

    @Test func aPreviousKeyThatCannotBeReachedOrRemovedNeverStopsTheVaultFromOpening() throws {
        Reports.install()
        let folder = try TempDir()
        defer { folder.cleanup() }
        let url = folder.file("secrets.vault")
        let keyFile = folder.file("secrets.key")
        try EncryptedFileStore(url: url, key: .keyFile(keyFile)).setValue(.string("t"), forKey: "token")

        // Moved back from a source that is out of reach now: the vault opens under its key file.
        let gone = MemoryKeySource()
        gone.state.withLock { $0.failure = SourceFailure(reason: "no bus") }
        let opened = try EncryptedFileStore(url: url, key: .keyFile(keyFile), movingFrom: .source(gone))
        #expect(try opened.value(forKey: "token") == .string("t"))
        // Neither opens it: the error that says why the previous key was out of reach.
        #expect(throws: SourceFailure(reason: "no bus")) {
            try EncryptedFileStore(url: url, key: .raw(Data(repeating: 1, count: 32)), movingFrom: .source(gone))
        }

        // A stale key the source keeps but cannot remove: reported, and the vault opens.
        let stuck = MemoryKeySource()
        _ = try stuck.key(forVault: url.standardizedFileURL, creating: true)
        stuck.state.withLock { $0.removalFailure = SourceFailure(reason: "read-only \(folder.path)") }
        let reopened = try EncryptedFileStore(url: url, key: .keyFile(keyFile), movingFrom: .source(stuck))
        #expect(try reopened.value(forKey: "token") == .string("t"))
        #expect(stuck.keyCount == 1)
        #expect(
            Reports.naming(folder).contains {
                $0.error as? SourceFailure == SourceFailure(reason: "read-only \(folder.path)")
            })
    }
}
