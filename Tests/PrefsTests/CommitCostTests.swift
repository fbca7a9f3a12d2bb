import EngineTestSupport
import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

/// What a durable commit asks of the file system, counted through the seam: with nobody else writing it is one open
/// of the store file (its lock), one file written (the temporary file, renamed over it), two `fsync`s (the
/// temporary file and the folder) and no read at all, and the watcher's look at the store's own rename reads
/// nothing either; another writer's change costs one read of the file, at the commit after it, and nothing at the
/// commits after that. Each test fails if a commit stops syncing the file or its folder.
@Suite(.ownThreads)
struct CommitCostTests {
    /// A store of each kind on `fileSystem`, in `directory`.
    private static func open(_ kind: String, in directory: TempDir, on fileSystem: any FileSystem) throws
        -> any KeyValueStore
    {
        switch kind {
        case "json":
            return try FileStore(url: directory.file("settings.json"), fileSystem: fileSystem, clock: .system)
        case "plist":
            return try SuiteFileStore(
                suiteName: "settings", directory: directory.url, fileSystem: fileSystem, clock: .system)
        default:
            let key = directory.file("vault.key")
            return try EncryptedFileStore(
                url: directory.file("secrets.vault"), key: .keyFile(key), fileSystem: fileSystem, clock: .system)
        }
    }

    @Test(arguments: ["json", "plist", "vault"])
    func aCommitWithNobodyElseWritingReadsNothing(_ kind: String) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let fileSystem = CountingFileSystem()
        let store = try Self.open(kind, in: directory, on: fileSystem)
        try store.setValue(.int(0), forKey: "count")
        fileSystem.reset()
        for value: Int64 in 1...10 {
            try store.setValue(.int(value), forKey: "count")
            (store as? FileBackedStore)?.engine.lookAtFile()  // the watcher's look at the store's own commit
        }
        var expected = CountingFileSystem.Counts()
        expected.storeFileOpens = 10
        expected.filesWritten = 10
        expected.syncs = 20
        expected.renames = 10
        #expect(fileSystem.counts == expected, "\(fileSystem.counts)")
    }

    @Test(arguments: ["json", "plist", "vault"])
    func anotherPrefsWritersCommitCostsOneReadOfTheFile(_ kind: String) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let fileSystem = CountingFileSystem()
        let store = try Self.open(kind, in: directory, on: fileSystem)
        let other = try Self.open(kind, in: directory, on: CountingFileSystem())
        try store.setValue(.int(0), forKey: "mine")
        try other.setValue(.int(1), forKey: "theirs")
        fileSystem.reset()
        try store.setValue(.int(2), forKey: "mine")
        try store.setValue(.int(3), forKey: "mine")
        var expected = CountingFileSystem.Counts()
        expected.storeFileOpens = 2
        expected.storeFileReads = 1
        expected.filesWritten = 2
        expected.syncs = 4
        expected.renames = 2
        #expect(fileSystem.counts == expected, "\(fileSystem.counts)")
        #expect(try store.value(forKey: "theirs") == .int(1))
    }

    /// Foundation rewriting the suite in place: the next commit reads the file once; the commits after read
    /// nothing, and a look at the rewrite reads it without writing anything.
    @Test func aFoundationRewriteCostsOneReadAndWritesNothingUntilAWrite() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let fileSystem = CountingFileSystem()
        let store = try Self.open("plist", in: directory, on: fileSystem)
        try store.setValue(.int(0), forKey: "mine")
        let url = directory.file("settings.plist")
        let rewrite = try PropertyListSerialization.data(
            fromPropertyList: ["mine": 0, "theirs": 1], format: .xml, options: 0)
        let handle = try FileHandle(forWritingTo: url)
        try handle.truncate(atOffset: 0)
        try handle.write(contentsOf: rewrite)
        try handle.close()
        fileSystem.reset()
        (store as? FileBackedStore)?.engine.lookAtFile()
        var expected = CountingFileSystem.Counts()
        expected.storeFileOpens = 1
        expected.storeFileReads = 1
        #expect(fileSystem.counts == expected, "a look only reads: \(fileSystem.counts)")
        #expect(try Data(contentsOf: url) == rewrite, "a look changed the file")
        fileSystem.reset()
        try store.setValue(.int(2), forKey: "mine")
        try store.setValue(.int(3), forKey: "mine")
        expected = CountingFileSystem.Counts()
        expected.storeFileOpens = 2
        expected.filesWritten = 2
        expected.syncs = 4
        expected.renames = 2
        #expect(fileSystem.counts == expected, "\(fileSystem.counts)")
        #expect(try store.value(forKey: "theirs") == .int(1))
    }
}
