import EngineTestSupport
import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

/// What a durable commit asks of the file system, counted: with nobody else writing it is one open of the store
/// file (its lock), two files written (the temporary file renamed over it, and the commit file in place), two
/// `fsync`s (the temporary file and the folder) and no read at all; another writer's change costs one read of the
/// file and one of its commit file, at the commit after it, and nothing at the commits after that.
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
            return try UserDefaultsStore(
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
        expected.filesWritten = 20
        expected.syncs = 20
        #expect(fileSystem.counts == expected, "\(fileSystem.counts)")
    }

    @Test(arguments: ["json", "plist", "vault"])
    func anotherPrefsWritersCommitCostsOneReadOfTheFileAndItsRecord(_ kind: String) throws {
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
        expected.commitFileReads = 1
        expected.filesWritten = 4
        expected.syncs = 4
        #expect(fileSystem.counts == expected, "\(fileSystem.counts)")
        #expect(try store.value(forKey: "theirs") == .int(1))
    }

    /// Foundation rewriting the suite in place: the next commit reads the file and its record (and compares its
    /// bytes once more before its rename, the rewrite's time being within a tick of now); the commits after read
    /// nothing. Each keeps a copy of its bytes in the commit file.
    @Test func aFoundationRewriteCostsOneReadAndThenACopyInTheCommitFile() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let fileSystem = CountingFileSystem()
        let store = try Self.open("plist", in: directory, on: fileSystem)
        try store.setValue(.int(0), forKey: "mine")
        let url = directory.file("settings.plist")
        var values = try #require(
            try PropertyListSerialization.propertyList(from: Data(contentsOf: url), format: nil) as? [String: Any])
        values["foundation"] = 1
        let handle = try FileHandle(forWritingTo: url)
        try handle.truncate(atOffset: 0)
        try handle.write(contentsOf: PropertyListSerialization.data(fromPropertyList: values, format: .xml, options: 0))
        try handle.close()
        fileSystem.reset()
        try store.setValue(.int(1), forKey: "mine")
        // One read to load the rewrite, and, while its time is within a tick of now, one to compare its bytes just
        // before the rename (Foundation takes no lock, and could rewrite it again within that tick).
        #expect((1...2).contains(fileSystem.counts.storeFileReads), "\(fileSystem.counts)")
        #expect(fileSystem.counts.commitFileReads == 1, "\(fileSystem.counts)")
        #expect(try store.value(forKey: "foundation") == .int(1))
        let commitFile = try Data(contentsOf: URL(filePath: CommitFile.path(of: url.path(percentEncoded: false))))
        #expect(CommitFile.decode(commitFile)?.copy != nil, "a suite's commit keeps a copy of its bytes")
        fileSystem.reset()
        try store.setValue(.int(2), forKey: "mine")
        try store.setValue(.int(3), forKey: "mine")
        #expect(fileSystem.counts.storeFileReads == 0, "\(fileSystem.counts)")
        #expect(fileSystem.counts.filesWritten == 4 && fileSystem.counts.syncs == 4, "\(fileSystem.counts)")
    }
}
