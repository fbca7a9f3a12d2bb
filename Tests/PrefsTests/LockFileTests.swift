import Foundation
import PrefsTestSupport
import Synchronization
import TestThreads
import Testing

@testable import Prefs

#if canImport(Glibc)
    import Glibc
#endif

/// The lock file and the temporary files beside a store: a link at the lock path is not followed, the sweep of
/// stale temporary files reads every name whole and removes only this store's, and a commit stays whole when the
/// lock file is deleted in the middle of it. Two `LockedFile` objects for one file exclude each other as two
/// processes do, so the interleavings a deleted lock file allows are played here step by step. (Processes holding a
/// deleted lock file: LockFileProcessTests and the reliability suite's LockFileDeletionTests.)
@Suite(.ownThreads) struct LockFileTests {
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

    /// A write's last checks and its rename are one step for every writer of the folder. Here the lock file is
    /// deleted while a write is between its checks and its rename, and a second writer locks a new lock file and
    /// reads the file the first is about to replace: it cannot commit before that rename (given no time to wait, it
    /// gives up naming the folder and our process) and writes nothing. Before, it committed, and the first write's
    /// rename then replaced its acknowledged write.
    @Test func noOtherWriterCommitsBetweenAWritesChecksAndItsRename() throws {
        try withTwoWritersOfOneFile { url, first, second in
            try first.withLock(.exclusive) { try first.writeAtomically(Data("0".utf8)) }
            nonisolated(unsafe) var secondWrite: Result<FileIdentity, any Error>?
            try first.withLock(.exclusive) {
                let read = try first.read()
                try first.writeAtomically(Data("first".utf8), expecting: .some(read?.identity)) {
                    #expect(unlink(first.lockPath) == 0)
                    secondWrite = Result {
                        try PrefsConfig.withLockTimeout(.zero) {
                            try second.withLock(.exclusive) {
                                let seen = try second.read()
                                #expect(seen.map { String(decoding: $0.data, as: UTF8.self) } == "0")
                                return try second.writeAtomically(Data("second".utf8), expecting: .some(seen?.identity))
                            }
                        }
                    }
                }
            }
            guard case .failure(let error) = secondWrite,
                case .lockTimedOut(let path, let holder, _)? = error as? PrefsError
            else {
                Issue.record(
                    "the second writer committed inside the first one's commit: \(String(describing: secondWrite))")
                return
            }
            #expect(path == first.directoryPath)
            #expect(holder == getpid())
            #expect(try String(contentsOf: url, encoding: .utf8) == "first")
        }
    }

    /// The identity a write returns (the one memory records for the values it wrote) is its own file's, even when
    /// another writer replaced the file right after the rename (the lock file deleted meanwhile). It was read from
    /// the name after the folder was synced: the newer file's identity then passed for this write's values, the
    /// next write thought them current, and the other writer's change was lost (1 append of 400 in some loaded
    /// runs of LockFileDeletionTests).
    @Test func aWriteReturnsItsOwnFilesIdentityEvenIfItWasReplacedAtOnce() throws {
        try withTwoWritersOfOneFile { url, first, second in
            let lockPath = first.lockPath  // not `first` itself: the hook it holds would hold it
            first.directorySyncFault.withLock {
                $0 = { _ in
                    // Just after the rename: the lock file is deleted and another writer replaces the file.
                    unlink(lockPath)
                    _ = try? second.withLock(.exclusive) { try second.writeAtomically(Data("the second write".utf8)) }
                    return nil
                }
            }
            let identity = try first.withLock(.exclusive) { try first.writeAtomically(Data("first".utf8)) }
            #expect(try String(contentsOf: url, encoding: .utf8) == "the second write")
            #expect(identity.size == 5)
            #expect(identity != (try FileIdentity.of(path: first.path)))
        }
    }

    /// A temporary file stays locked until it is renamed into place, so the sweep of another writer that got in
    /// beside this one (the lock file deleted) leaves it alone. It was unlocked once synced, and such a sweep
    /// removed it: the rename failed with "No such file or directory" and the write was lost.
    @Test func aTemporaryFileAboutToBeRenamedIsNotSweptAway() throws {
        try withTwoWritersOfOneFile { url, first, second in
            nonisolated(unsafe) var swept = -1
            try first.withLock(.exclusive) {
                try first.writeAtomically(Data("first".utf8)) {
                    unlink(first.lockPath)
                    swept = try second.withLock(.exclusive) { second.removeStaleTemporaryFiles() }
                }
            }
            #expect(swept == 0)
            #expect(try String(contentsOf: url, encoding: .utf8) == "first")
        }
    }
    /// A temporary file removed before its rename (by the sweep of a writer that got in beside this one in the
    /// instant before this one locked it) is a lost race, not a failure: the write says so with `LockLostError`,
    /// which makes the store redo its change, and writes nothing.
    @Test func aTemporaryFileRemovedBeforeItsRenameMakesTheWriteStartAgain() throws {
        try withTwoWritersOfOneFile { url, first, _ in
            try first.withLock(.exclusive) { try first.writeAtomically(Data("0".utf8)) }
            #expect(throws: LockLostError.self) {
                try first.withLock(.exclusive) {
                    try first.writeAtomically(Data("first".utf8)) {
                        let folder = url.deletingLastPathComponent()
                        for name in try FileManager.default.contentsOfDirectory(atPath: folder.path)
                        where name.hasPrefix(first.temporaryPrefix) {
                            #expect(unlink(folder.appending(path: name).path) == 0)
                        }
                    }
                }
            }
            #expect(try String(contentsOf: url, encoding: .utf8) == "0")
        }
    }

    /// A store file in a new folder and two `LockedFile` objects for it, which exclude each other as two processes do.
    private func withTwoWritersOfOneFile(_ body: (URL, LockedFile, LockedFile) throws -> Void) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let url = directory.file("store.json")
        try body(url, LockedFile(url: url), LockedFile(url: url))
    }
}
