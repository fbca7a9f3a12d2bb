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

/// Where file stores meet the files and folders around them: their lifetime, size limit, symbolic links, damaged
/// files and a file changed under a write's lock by a writer that takes none.
@Suite(.ownThreads)
struct FileLifetimeTests {
    // MARK: close()

    @Test(arguments: Backend.persistent)
    func aClosedStoreRefusesEveryOperationAndReleasesItsFiles(_ backend: Backend) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try #require(try backend.open(in: directory) as? FileBackedStore)
        try store.setValue(.int(1), forKey: "kept")
        // A write holds its file (and its lock) for its own length only; the watcher's look at this process's own
        // commit is a `stat` (its modification time was set back, so its identity tells), and opens nothing.
        #expect(openFiles(in: directory).isEmpty, "open after the write: \(openFiles(in: directory))")
        store.close()
        #expect(store.isClosed)
        #expect(throws: PrefsError.storeClosed(path: store.url.path)) { try store.setValue(.int(2), forKey: "kept") }
        #expect(throws: PrefsError.storeClosed(path: store.url.path)) { try store.value(forKey: "kept") }
        #expect(throws: PrefsError.storeClosed(path: store.url.path)) { try store.allValues() }
        store.close()  // twice: nothing happens
        // A new store on the file starts afresh from it.
        let reopened = try backend.open(in: directory)
        #expect(try reopened.value(forKey: "kept") == .int(1))
    }

    @Test func closingOneOfTwoStoresOnAFileKeepsTheOtherOpen() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let first = try FileStore(url: directory.file("shared.json"))
        let second = try FileStore(url: directory.file("shared.json"))
        first.close()
        try second.setValue(.string("still open"), forKey: "k")
        #expect(try second.value(forKey: "k") == .string("still open"))
        #expect(throws: PrefsError.self) { try first.value(forKey: "k") }
    }

    @Test func aClosedStoresFolderCanBeDeletedAndStaysDeleted() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let folder = directory.file("app")
        let store = try FileStore(url: folder.appending(path: "settings.json"))
        try store.setValue(.bool(true), forKey: "flag")
        store.close()
        try FileManager.default.removeItem(at: folder)
        // Nothing of the closed store reacts to the folder going away; a write elsewhere triggers no reload.
        #expect(!FileManager.default.fileExists(atPath: folder.path(percentEncoded: false)))
    }

    /// Opening a store and reading from it creates nothing: no file, and no folder for it.
    @Test func openingAndReadingAStoreCreatesNothing() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let folder = directory.file("app")
        let stores: [any KeyValueStore] = [
            try FileStore(url: folder.appending(path: "settings.json")),
            try SuiteFileStore(suiteName: "suite", directory: folder),
            try EncryptedFileStore(url: folder.appending(path: "secrets.vault"), key: .raw(Data(count: 32))),
        ]
        for store in stores { #expect(try store.value(forKey: "k") == nil) }
        #expect(!FileManager.default.fileExists(atPath: folder.path(percentEncoded: false)))
        #expect(try directory.contents().isEmpty)
    }

    /// A live store whose file and folder are deleted: a look at the file (what the watcher's events make) creates
    /// nothing, so the folder can be removed.
    @Test func aLookNeverCreatesAnything() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let url = directory.file("live.json")
        let store = try FileStore(url: url)
        try store.setValue(.int(1), forKey: "k")
        #expect(try directory.contents() == ["live.json"], "the file alone")
        #expect(unlink(url.path(percentEncoded: false)) == 0)
        store.engine.lookAtFile()
        #expect(try store.value(forKey: "k") == nil)
        #expect(rmdir(directory.path) == 0, "the folder is empty, so it can be removed")
        store.engine.lookAtFile()
        #expect(!FileManager.default.fileExists(atPath: directory.path), "a look re-created the folder")
        // A write creates it again.
        try store.setValue(.int(2), forKey: "k")
        #expect(try FileStore(url: url).value(forKey: "k") == .int(2))
    }

    /// Idle open stores touch nothing in their folders: `rm -r` of folders holding open stores, entry by entry or
    /// with `FileManager.removeItem`, never fails with "Directory not empty" (it did for 9 of 30 folders when an
    /// idle store re-created its lock file).
    @Test func foldersOfIdleOpenStoresCanBeRemoved() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        var stores: [FileBackedStore] = []
        for index in 0..<30 {
            let folder = directory.file("app\(index)")
            let store: FileBackedStore =
                index.isMultiple(of: 2)
                ? try FileStore(url: folder.appending(path: "settings.json"))
                : try SuiteFileStore(suiteName: "suite\(index)", directory: folder)
            try store.setValue(.int(Int64(index)), forKey: "k")
            stores.append(store)
        }
        for (index, store) in stores.enumerated() {
            let folder = directory.file("app\(index)")
            if index.isMultiple(of: 3) {
                for name in try FileManager.default.contentsOfDirectory(atPath: folder.path) {
                    #expect(unlink(folder.appending(path: name).path) == 0)
                }
                store.engine.lookAtFile()
                #expect(rmdir(folder.path) == 0, "app\(index): \(String(cString: strerror(errno)))")
            } else {
                #expect(throws: Never.self) { try FileManager.default.removeItem(at: folder) }
            }
            store.engine.lookAtFile()
            #expect(!FileManager.default.fileExists(atPath: folder.path))
        }
    }

    /// The files of `directory` this process holds open.
    private func openFiles(in directory: TempDir) -> [String] {
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return descriptors.compactMap {
            try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0)
        }
        .filter { $0.hasPrefix(directory.path + "/") }
    }

    // MARK: One size limit for reads and writes

    @Test(arguments: Backend.persistent)
    func aWriteThatWouldMakeAnUnreadableFileIsRefused(_ backend: Backend) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try backend.open(in: directory)
        let chunk = Data(repeating: 0x5a, count: 36 << 20)
        try store.setValue(.data(chunk), forKey: "first")
        let before = try Data(contentsOf: try #require(backend.dataFile(in: directory)))
        let error = #expect(throws: PrefsError.self) { try store.setValue(.data(chunk), forKey: "second") }
        guard case .tooLarge(_, let size, let limit)? = error else {
            Issue.record("expected tooLarge, got \(String(describing: error))")
            return
        }
        #expect(size > limit && limit == 64 << 20)
        // Nothing changed: the file, memory, and a fresh open all agree.
        #expect(try Data(contentsOf: try #require(backend.dataFile(in: directory))) == before)
        #expect(try store.value(forKey: "second") == nil)
        #expect(try store.value(forKey: "first") == .data(chunk))
        try store.setValue(.int(1), forKey: "small")  // the store still writes
    }

    @Test(arguments: Backend.persistent)
    func aDeferredWriteThatWouldMakeAnUnreadableFileIsNeverCommitted(_ backend: Backend) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try #require(try backend.open(in: directory) as? FileBackedStore)
        let chunk = Data(repeating: 0x5a, count: 36 << 20)
        try store.setValue(.data(chunk), forKey: "first")
        let file = try #require(backend.dataFile(in: directory))
        let before = try Data(contentsOf: file)
        let quick = store.deferringWrites(window: .seconds(60))
        try quick.setValue(.data(chunk), forKey: "second")  // in memory at once; the commit is what must refuse
        let error = #expect(throws: PrefsError.self) { try quick.flush() }
        guard case .tooLarge(_, let size, let limit)? = error else {
            Issue.record("expected tooLarge, got \(String(describing: error))")
            return
        }
        #expect(size > limit)
        #expect(try Data(contentsOf: file) == before)
        // A durable write that leaves the file readable commits, and nothing deferred is left.
        try store.removeValue(forKey: "second")
        try quick.flush()
        #expect(try backend.open(in: directory).value(forKey: "second") == nil)
    }

    // MARK: Symbolic links

    @Test(arguments: [Backend.file, .userDefaults])
    func aSymlinkedPreferencesFileStaysALink(_ backend: Backend) throws {
        let dotfiles = try TempDir()
        let config = try TempDir()
        defer {
            dotfiles.cleanup()
            config.cleanup()
        }
        let name = try #require(backend.dataFile(in: config)).lastPathComponent
        let target = dotfiles.file(name)
        // The dotfiles copy holds a value already; the config folder links to it.
        let seed = try backend.open(in: dotfiles)
        try seed.setValue(.string("from dotfiles"), forKey: "theme")
        (seed as? FileBackedStore)?.close()
        let link = config.file(name)
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: target)

        let store = try backend.open(in: config)
        #expect(try store.value(forKey: "theme") == .string("from dotfiles"))
        try store.setValue(.string("dark"), forKey: "theme")

        let attributes = try FileManager.default.attributesOfItem(atPath: link.path(percentEncoded: false))
        #expect(attributes[.type] as? FileAttributeType == .typeSymbolicLink, "the link became a regular file")
        #expect(
            try FileManager.default.destinationOfSymbolicLink(atPath: link.path(percentEncoded: false))
                == target.path(percentEncoded: false))
        (store as? FileBackedStore)?.close()
        // The target holds the new value, and nothing but the link was left in the config folder.
        #expect(try backend.open(in: dotfiles).value(forKey: "theme") == .string("dark"))
        #expect(try config.contents() == [name])
    }

    /// A link is resolved when a store opens: re-pointed while the store is open, the store keeps writing the file
    /// it opened, and the next store opened follows the new target.
    @Test func aLinkRePointedWhileAStoreIsOpenIsFollowedFromTheNextOpen() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        try directory.createFolders(["old", "new"])
        let link = directory.file("settings.json")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: directory.file("old/settings.json"))
        let store = try FileStore(url: link)
        try store.setValue(.int(1), forKey: "k")
        try FileManager.default.removeItem(at: link)
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: directory.file("new/settings.json"))
        try store.setValue(.int(2), forKey: "k")
        #expect(try FileStore(url: directory.file("old/settings.json")).value(forKey: "k") == .int(2))
        store.close()
        let reopened = try FileStore(url: link)
        #expect(try reopened.value(forKey: "k") == nil, "the new target")
        try reopened.setValue(.int(3), forKey: "k")
        #expect(try FileStore(url: directory.file("new/settings.json")).value(forKey: "k") == .int(3))
    }

    // MARK: A way out of a damaged file

    @Test func aDamagedSuiteIsMovedAsideAndTheAppSavesAgain() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let file = directory.file("damaged.suite.plist")
        let garbage = Data("not a property list at all".utf8)
        try garbage.write(to: file)
        let error = #expect(throws: PrefsError.self) {
            try SuiteFileStore(suiteName: "damaged.suite", directory: directory.url)
        }
        #expect(error?.description.contains("moveDamagedFileAside") == true, "the report names the way out")

        let moved = try #require(
            try SuiteFileStore.moveDamagedFileAside(suiteName: "damaged.suite", directory: directory.url))
        #expect(moved.lastPathComponent.hasPrefix("damaged.suite.plist.damaged-"))
        #expect(try Data(contentsOf: moved) == garbage, "the damaged file is kept as it was")
        let store = try SuiteFileStore(suiteName: "damaged.suite", directory: directory.url)
        try store.setValue(.int(3), forKey: "launches")
        #expect(
            try SuiteFileStore(suiteName: "damaged.suite", directory: directory.url).value(forKey: "launches")
                == .int(3))
        // A file that reads fine is not moved.
        #expect(try SuiteFileStore.moveDamagedFileAside(suiteName: "damaged.suite", directory: directory.url) == nil)
    }

    @Test func aStoreWhoseFileIsDamagedLaterRecoversInPlace() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let url = directory.file("later.json")
        let store = try FileStore(url: url)
        try store.setValue(.string("before"), forKey: "k")
        try Data("{ broken".utf8).write(to: url)
        store.engine.lookAtFile()
        #expect(throws: PrefsError.self) { try store.setValue(.string("refused"), forKey: "k") }
        let moved = try #require(try store.moveDamagedFileAside())
        #expect(try Data(contentsOf: moved) == Data("{ broken".utf8))
        #expect(try store.value(forKey: "k") == nil)
        try store.setValue(.string("after"), forKey: "k")
        #expect(try FileStore.moveDamagedFileAside(at: url) == nil)
    }

    /// An app can tell that it reads defaults because its file is damaged: `damage` says so, and
    /// `damageValues` yields nil, the damage once however often it is met again, then nil once the file is
    /// moved aside; and again when another process (here, the test) repairs the file.
    @Test(arguments: Backend.persistent)
    func aStoreSaysWhenItsFileIsDamagedAndWhenItReadsAgain(_ backend: Backend) async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try #require(try backend.open(in: directory) as? FileBackedStore)
        try store.setValue(.string("before"), forKey: "k")
        let good = try Data(contentsOf: store.url)
        var updates = store.damageValues.makeAsyncIterator()
        #expect(await updates.next().map { $0 == nil } == true, "a readable file: no damage")
        #expect(store.damage == nil)

        try Data("{ broken".utf8).write(to: store.url)
        store.engine.lookAtFile()
        store.engine.lookAtFile()
        #expect(throws: (any Error).self) { try store.setValue(.string("refused"), forKey: "k") }
        #expect(store.damage != nil)
        #expect(await updates.next().map { $0 != nil } == true, "the damage is told once")

        _ = try store.moveDamagedFileAside()
        #expect(store.damage == nil)
        #expect(await updates.next().map { $0 == nil } == true, "moved aside: readable again")

        try Data("{ broken".utf8).write(to: store.url)
        store.engine.lookAtFile()
        #expect(await updates.next().map { $0 != nil } == true)
        try good.write(to: store.url)
        store.engine.lookAtFile()
        #expect(await updates.next().map { $0 == nil } == true, "repaired by someone else")
        #expect(try store.value(forKey: "k") == .string("before"))
    }

    // MARK: A file changed under a write's lock

    /// A writer that takes no lock (an editor, a script, Foundation) may replace the file while an update holds its
    /// lock: the last whole-file write wins. The transform runs once, on the file as the update read it under the
    /// lock, and its commit replaces the other writer's file (as between two Foundation processes); memory and the
    /// file agree.
    @Test func aTransformRunsOnceAndItsCommitIsTheLastWholeFileWrite() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let url = directory.file("once.json")
        let store = try FileStore(url: url)
        try store.setValue(.int(0), forKey: "n")
        let runs = Atomic(0)
        try store.updateValue(forKey: "n") { value in
            if runs.add(1, ordering: .relaxed).newValue == 1 {
                try? Data(#"{"n":10,"other":true}"#.utf8).write(to: url, options: .atomic)
            }
            guard case .int(let n)? = value else { return .int(-1) }
            return .int(n + 1)
        }
        #expect(runs.load(ordering: .relaxed) == 1)
        let reopened = try FileStore(url: directory.file("once.json"))
        #expect(try reopened.value(forKey: "n") == .int(1))
        #expect(try reopened.value(forKey: "other") == nil)
        #expect(try store.allValues() == reopened.allValues())
    }

    @Test func aBatchIsNeverRunAgainWhenTheFileIsRewrittenInPlaceDuringIt() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let url = directory.file("batch.json")
        let store = try FileStore(url: url)
        try store.setValue(.int(0), forKey: "n")
        let runs = Atomic(0)
        try store.batch {
            runs.add(1, ordering: .relaxed)
            try store.setValue(.int(5), forKey: "n")
            // Rewritten in place, as Foundation rewrites a suite: same file, new bytes.
            let handle = try FileHandle(forWritingTo: url)
            try handle.truncate(atOffset: 0)
            try handle.write(contentsOf: Data(#"{"n":100,"other":true}"#.utf8))
            try handle.close()
        }
        #expect(runs.load(ordering: .relaxed) == 1, "the batch body ran again")
        let reopened = try FileStore(url: directory.file("batch.json"))
        #expect(try reopened.value(forKey: "n") == .int(5))
        #expect(try store.allValues() == reopened.allValues())
    }
}
