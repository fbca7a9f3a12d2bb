import EngineTestSupport
import Foundation
import PrefsTestSupport
import Synchronization
import TestThreads
import Testing

@testable import Prefs

#if canImport(Glibc)
    import Glibc
#endif

/// The races of the file engine, played step by step through the file-system seam (`SteppingFileSystem`) instead of
/// hoped for: two engines on one file exclude each other as two processes do, and an engine made with
/// `watching: false` sees another's writes only when the test says. Each test names the lost write it guards.
@Suite(.ownThreads) struct CommitTests {
    // MARK: Deferred changes

    /// A deferred change gives way to another writer's later write of its key: that write was acknowledged to its
    /// writer, this one not written yet. The engine compares the file's value with the one the change replaced.
    @Test(arguments: [Backend.file, .userDefaults, .vault])
    func aDeferredChangeGivesWayToALaterWriteOfItsKey(_ backend: Backend) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let clock = ManualClock()
        let spec = backend.spec(in: directory)
        let a = try #require(
            try StoreSpec.open(spec, fileSystem: SteppingFileSystem(watching: false), clock: clock.engineClock)
                as? FileBackedStore)
        try a.setValue(.int(0), forKey: "k")
        try a.setValue(.int(5), forKey: "other")
        let quick = a.deferringWrites(window: .seconds(30))
        try quick.setValue(.int(1), forKey: "k")
        let b = try StoreSpec.open(spec, fileSystem: POSIXFileSystem(), clock: .system)
        try b.setValue(.int(2), forKey: "k")
        try quick.flush()
        #expect(try StoreSpec.open(spec).value(forKey: "k") == .int(2), "B's acknowledged write was overwritten")
        #expect(try a.value(forKey: "k") == .int(2))
        #expect(try a.value(forKey: "other") == .int(5))
    }

    /// A deferred change of a key nobody else wrote stands, however many other keys were written meanwhile.
    @Test func aDeferredChangeStandsWhenOnlyOtherKeysWereWritten() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let clock = ManualClock()
        let url = directory.file("prefs.json")
        let a = try FileStore(url: url, fileSystem: SteppingFileSystem(watching: false), clock: clock.engineClock)
        try a.setValue(.int(0), forKey: "k")
        let quick = a.deferringWrites(window: .seconds(30))
        try quick.setValue(.int(1), forKey: "k")
        let b = try FileStore(url: url, fileSystem: POSIXFileSystem(), clock: .system)
        for round in 0..<5 { try b.setValue(.int(Int64(round)), forKey: "x\(round)") }
        try quick.flush()
        #expect(try FileStore(url: url).value(forKey: "k") == .int(1))
        #expect(try FileStore(url: url).value(forKey: "x4") == .int(4))
    }

    /// `close()` of the last handle commits the deferred changes and shuts the engine in one step under its writer
    /// lock: a deferred `set` from another thread meanwhile is either in that commit or refused with `storeClosed`,
    /// never accepted and dropped. (38 of 1 500 runs dropped one when the commit and the shut were two steps.)
    @Test func aDeferredSetRacingTheLastCloseIsCommittedOrRefused() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let fileSystem = SteppingFileSystem(watching: false)
        let url = directory.file("prefs.json")
        let store = try FileStore(url: url, fileSystem: fileSystem, clock: .system)
        try store.setValue(.int(0), forKey: "seed")
        let quick = store.deferringWrites(window: .seconds(3600)) as! FileBackedStore
        try quick.setValue(.int(1), forKey: "first")
        store.close()
        let inCommit = fileSystem.pause(at: .beforeRename)
        let closing = Thread { quick.close() }
        closing.start()
        #expect(inCommit.waitUntilReached(), "the last close commits what was deferred")
        let outcome = Mutex<Result<Void, any Error>?>(nil)
        // A set through the closing handle that passed its open check just before `close()` marked it closed.
        let engine = quick.engine
        let setting = Thread {
            let result = Result { try engine.setDeferred(.int(2), forKey: "second", within: .seconds(3600)) }
            outcome.withLock { $0 = result }
        }
        setting.start()
        inCommit.open()
        try eventually("the racing set to end") { outcome.withLock { $0 != nil } }
        let written = try FileStore(url: url)
        #expect(try written.value(forKey: "first") == .int(1))
        switch outcome.withLock({ $0 }) {
        case .success?:
            #expect(try written.value(forKey: "second") == .int(2), "a set that returned was dropped")
        case .failure(let error)?:
            #expect(error as? PrefsError == .storeClosed(path: url.path))
        case nil:
            Issue.record("the set never ended")
        }
    }

    // MARK: Commits

    /// The identity memory records for a write is its own file's, from the written descriptor, even when the folder
    /// sync fails and another writer replaced the file right after the rename: the store then reads that newer
    /// file, rather than taking it for its own and losing its change.
    @Test func aWriteWhoseFolderSyncFailsRecordsItsOwnFileNotTheName() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let url = directory.file("prefs.json")
        let fileSystem = SteppingFileSystem(watching: false)
        let store = try FileStore(url: url, fileSystem: fileSystem, clock: .system)
        try store.setValue(.int(1), forKey: "k")
        fileSystem.run(at: .afterRename) {
            // Another process's write lands right after the rename (it waited on the file this write replaced).
            _ = try? replaceFile(at: url, with: Data(#"{"k": 3, "theirs": true}"#.utf8))
        }
        fileSystem.fail(
            at: .beforeFolderSync, with: SystemCallError(path: directory.path, operation: "sync", errno: EIO))
        let error = #expect(throws: PrefsError.self) { try store.setValue(.int(2), forKey: "k") }
        guard case .durabilityNotConfirmed? = error else {
            Issue.record("expected durabilityNotConfirmed, got \(String(describing: error))")
            return
        }
        store.engine.lookAtFile()
        #expect(try store.value(forKey: "theirs") == .bool(true), "the newer file was taken for this write's")
        #expect(try store.value(forKey: "k") == .int(3))
    }

    /// Beside a writer that takes no lock, the last whole-file write wins: a write reads the file under its lock
    /// and writes its change on top of what it read there, so a rewrite in place that landed before the lock keeps
    /// its keys; one that lands between that read and the rename is written over, as between two Foundation
    /// processes. The rewrite is read at the next look or write, never reported as damage.
    @Test func aRewriteInPlaceBeforeAWriteKeepsItsKeysAndOneDuringItIsWrittenOver() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        Reports.install()
        let url = directory.file("prefs.json")
        let fileSystem = SteppingFileSystem(watching: false)
        let store = try FileStore(url: url, fileSystem: fileSystem, clock: .system)
        try store.setValue(.int(1), forKey: "a")
        @Sendable func rewrite(_ text: String) {
            guard let handle = try? FileHandle(forWritingTo: url) else { return }
            try? handle.truncate(atOffset: 0)
            try? handle.write(contentsOf: Data(text.utf8))
            try? handle.close()
        }
        rewrite(#"{"a": 1, "theirs": 7}"#)
        try store.setValue(.int(2), forKey: "a")
        var file = try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Int]
        #expect(file == ["a": 2, "theirs": 7], "a rewrite before the write lost its key")
        fileSystem.run(at: .beforeRename) { rewrite(#"{"a": 2, "theirs": 8, "late": 1}"#) }
        try store.setValue(.int(3), forKey: "a")
        file = try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Int]
        #expect(file == ["a": 3, "theirs": 7], "the last whole-file write is this one")
        #expect(try store.value(forKey: "theirs") == .int(7))
        #expect(Reports.everything().filter { "\($0.error)".contains(directory.path) }.isEmpty)
    }

    // MARK: Temporary files

    /// The sweep of temporary files left by killed writers reads every name whole (a normal `~/.config` holds
    /// hundreds: glibc packs `readdir` entries, so copying the 256-byte name field read past the buffer) and
    /// removes only this store's.
    @Test func aFirstWriteInAFolderOfAThousandFilesSweepsOnlyItsOwnStaleTemporaryFiles() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        for index in 0..<1_000 {
            let name = String(format: "%04d-", index) + String(repeating: "e", count: index % 3 == 0 ? 200 : 7)
            #expect(FileManager.default.createFile(atPath: directory.path(name), contents: nil))
        }
        try replaceFile(at: directory.file("settings.json"), with: Data("{}".utf8))
        let store = try FileStore(url: directory.file("settings.json"))
        let path = directory.path("settings.json")
        let leftover = directory.file(POSIXFileSystem.temporaryPrefix(of: path) + "abc123")
        let others = directory.file(POSIXFileSystem.temporaryPrefix(of: directory.path("other.json")) + "abc123")
        #expect(FileManager.default.createFile(atPath: leftover.path(percentEncoded: false), contents: Data()))
        #expect(FileManager.default.createFile(atPath: others.path(percentEncoded: false), contents: Data()))
        try store.setValue(.int(1), forKey: "launches")
        #expect(!FileManager.default.fileExists(atPath: leftover.path(percentEncoded: false)))
        #expect(FileManager.default.fileExists(atPath: others.path(percentEncoded: false)), "another file's was swept")
        #expect(
            try directory.contents().count == 1_002, "the thousand files, the store, the other's temporary file")
        #expect(try FileStore(url: directory.file("settings.json")).value(forKey: "launches") == .int(1))
    }

    /// A commit leaves the store file and nothing else: no temporary file, no file beside it.
    @Test(arguments: [Backend.file, .userDefaults])
    func aCommitLeavesTheFileAndNothingElse(_ backend: Backend) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try backend.open(in: directory)
        for value: Int64 in 1...3 { try store.setValue(.int(value), forKey: "launches") }
        let quick = store.deferringWrites(window: .zero)
        try quick.setValue(.int(4), forKey: "launches")
        try quick.flush()
        let name = try #require((store as? FileBackedStore)?.url.lastPathComponent)
        #expect(try directory.contents() == [name])
    }

    @Test func theTemporaryPrefixOfALongNameKeepsTwoNamesApart() {
        let shared = String(repeating: "n", count: 200)
        for (mine, theirs) in [
            (shared + "-a.json", shared + "-b.json"),
            (shared + "a" + String(repeating: "x", count: 40), shared + "b" + String(repeating: "x", count: 40)),
        ] {
            let first = POSIXFileSystem.temporaryPrefix(of: "/d/" + mine)
            let second = POSIXFileSystem.temporaryPrefix(of: "/d/" + theirs)
            #expect(first != second && !first.hasPrefix(second) && !second.hasPrefix(first))
            #expect(first.utf8.count + 16 <= 255)
        }
    }
}
