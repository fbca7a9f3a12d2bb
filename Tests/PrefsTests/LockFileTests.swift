import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

#if canImport(Glibc)
    import Glibc
#endif

/// The lock file and the temporary files beside a store: a link at the lock path is not followed, and the sweep of
/// stale temporary files reads every name whole and removes only this store's. (Processes holding a deleted lock
/// file: LockFileProcessTests.)
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
}
