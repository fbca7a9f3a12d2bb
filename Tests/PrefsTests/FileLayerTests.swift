import Dispatch
import EngineTestSupport
import Foundation
import PrefsTestSupport
import Synchronization
import TestThreads
import Testing

@testable import Prefs

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Counts events and lets a test wait for the n-th one; the deadline only guards against hangs.
private final class EventCounter: Sendable {
    private struct Waiter {
        var target: Int
        var continuation: CheckedContinuation<Bool, Never>
    }

    private struct State {
        var count = 0
        var waiters: [UUID: Waiter] = [:]
        var expired: Set<UUID> = []
    }

    private let state = Mutex(State())

    var count: Int { state.withLock { $0.count } }

    func fire() {
        let ready: [CheckedContinuation<Bool, Never>] = state.withLock { state in
            state.count += 1
            let done = state.waiters.filter { $0.value.target <= state.count }
            for id in done.keys { state.waiters[id] = nil }
            return done.values.map(\.continuation)
        }
        for continuation in ready { continuation.resume(returning: true) }
    }

    /// True once `target` events have happened, false if `timeout` passes first.
    func wait(for target: Int, timeout: Duration = .seconds(10)) async -> Bool {
        let id = UUID()
        let deadline = Task {
            guard (try? await Task.sleep(for: timeout)) != nil else { return }
            self.expire(id)
        }
        defer { deadline.cancel() }
        return await withCheckedContinuation { continuation in
            let resumeNow: Bool? = state.withLock { state in
                if state.count >= target { return true }
                if state.expired.contains(id) { return false }
                state.waiters[id] = Waiter(target: target, continuation: continuation)
                return nil
            }
            if let resumeNow { continuation.resume(returning: resumeNow) }
        }
    }

    private func expire(_ id: UUID) {
        let waiter = state.withLock { state in
            state.expired.insert(id)
            return state.waiters.removeValue(forKey: id)
        }
        waiter?.continuation.resume(returning: false)
    }
}

private func permissions(of url: URL) -> mode_t {
    var info = stat()
    guard stat(url.path(percentEncoded: false), &info) == 0 else { return 0 }
    return info.st_mode & 0o7777
}

@Suite(.ownThreads)
struct FileLayerTests {
    @Test func writeThenReadRoundTrips() throws {
        let directory = try TempDir("PrefsFileLayerTests", create: false)
        defer { directory.cleanup() }
        let fileSystem = POSIXFileSystem()
        let url = directory.file("prefs.json")
        let path = url.path(percentEncoded: false)
        #expect(try fileSystem.read(path, through: nil) == nil)
        #expect(try fileSystem.identity(at: path) == nil)

        let bytes = Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let written = try replaceFile(at: url, with: bytes)
        let read = try #require(try fileSystem.read(path, through: nil))
        #expect(read.data == bytes)
        #expect(read.identity == written)
        #expect(try fileSystem.identity(at: path) == written)

        // Read through the file's lock: the same bytes.
        let lock = try fileSystem.lock(path, timeout: .seconds(5), clock: .system)
        #expect(!lock.createdEmpty)
        #expect(try fileSystem.read(path, through: lock)?.data == bytes)
        lock.release()

        try replaceFile(at: url, with: Data())
        #expect(try fileSystem.read(path, through: nil)?.data == Data())
    }

    @Test func readingCreatesNothing() throws {
        let directory = try TempDir("PrefsFileLayerTests", create: false)
        defer { directory.cleanup() }
        let fileSystem = POSIXFileSystem()
        let path = directory.file("sub/prefs.json").path(percentEncoded: false)
        #expect(try fileSystem.read(path, through: nil) == nil)
        #expect(try fileSystem.identity(at: path) == nil)
        #expect(!FileManager.default.fileExists(atPath: directory.url.path(percentEncoded: false)))
    }

    /// A file that does not exist has nothing to lock: the lock creates it empty (and its folders, 0700), locked
    /// before anyone else can lock it, and only if nothing is at its name; another writer that finds it then waits
    /// for that lock, and one that created nothing takes no part in a race.
    @Test func lockingAMissingFileCreatesItEmptyAndLockedOnce() throws {
        let directory = try TempDir("PrefsFileLayerTests", create: false)
        defer { directory.cleanup() }
        let fileSystem = POSIXFileSystem()
        let path = directory.file("sub/prefs.json").path(percentEncoded: false)
        let first = try fileSystem.lock(path, timeout: .seconds(5), clock: .system)
        #expect(first.createdEmpty)
        #expect(try fileSystem.read(path, through: first)?.data == Data())
        #expect(permissions(of: directory.file("sub/prefs.json")) == 0o600)
        #expect(permissions(of: directory.file("sub")) == 0o700)
        #expect(try directory.contents() == ["sub"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path("sub")) == ["prefs.json"])
        let taken = Atomic<Bool>(false)
        let other = Thread {
            guard let second = try? fileSystem.lock(path, timeout: .seconds(30), clock: .system)
            else { return }
            taken.store(!second.createdEmpty, ordering: .relaxed)
            second.release()
        }
        other.start()
        // The second writer waits for the first one's lock; once it is released it takes that same file.
        first.release()
        try eventually("the second writer to lock the file the first created") { taken.load(ordering: .relaxed) }
    }

    @Test func modesIgnoreUmaskAndDirectoriesAreCreated0700() throws {
        let directory = try TempDir("PrefsFileLayerTests", create: false)
        defer { directory.cleanup() }
        // The umask is per process: change it in a child so tests running in parallel here are not affected.
        for (mask, folder) in [("0", "a/b"), ("077", "c"), ("777", "d/e")] {
            let spec = "json:" + directory.file(folder + "/prefs.json").path(percentEncoded: false)
            let result = try ChildProcess.run(["umask-write", spec, mask, "key"])
            #expect(result.lines == ["ok"], "umask \(mask): \(result.error)")
            #expect(permissions(of: directory.file(folder + "/prefs.json")) == 0o600, "umask \(mask)")
            #expect(permissions(of: directory.file(folder)) == 0o700, "umask \(mask)")
        }
        #expect(permissions(of: directory.file("a")) == 0o700)
        #expect(permissions(of: directory.file("d")) == 0o700)

        try replaceFile(at: directory.file("f/prefs.json"), with: Data("y".utf8), mode: 0o644)
        #expect(permissions(of: directory.file("f/prefs.json")) == 0o644)
        #expect(permissions(of: directory.file("f")) == 0o700)
    }

    @Test func failedWriteThrowsIOError() throws {
        let directory = try TempDir("PrefsFileLayerTests", create: false)
        defer { directory.cleanup() }
        try directory.create()
        #expect(
            FileManager.default.createFile(atPath: directory.file("regular").path(percentEncoded: false), contents: nil)
        )
        let url = directory.file("regular/prefs.json")
        do {
            try replaceFile(at: url, with: Data("x".utf8))
            Issue.record("a file in place of the folder was written through")
        } catch let error as SystemCallError {
            let code = error.errno
            let message = error.message
            #expect(code == ENOTDIR)
            #expect(message == String(cString: strerror(ENOTDIR)))
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    /// A store's write whose rename fails has not touched the file: its old bytes read back as they were, and its
    /// temporary file is gone.
    @Test(arguments: Backend.persistent)
    func oldContentSurvivesFailedRename(_ backend: Backend) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let fileSystem = SteppingFileSystem(watching: false)
        let store = try #require(
            try StoreSpec.open(backend.spec(in: directory), fileSystem: fileSystem, clock: .system)
                as? FileBackedStore)
        defer { store.close() }
        try store.setValue(.string("old"), forKey: "k")
        let path = store.url.path(percentEncoded: false)
        let before = try Data(contentsOf: store.url)
        let files = try directory.contents()
        fileSystem.fail(at: .beforeRename, with: SystemCallError(path: path, operation: "rename", errno: EIO))
        #expect(throws: PrefsError.self) { try store.setValue(.string("new"), forKey: "k") }
        #expect(try Data(contentsOf: store.url) == before)
        #expect(try directory.contents() == files)
        #expect(try backend.open(in: directory).value(forKey: "k") == .string("old"))
    }

    @Test func oldContentSurvivesFileSizeLimit() throws {
        let directory = try TempDir("PrefsFileLayerTests", create: false)
        defer { directory.cleanup() }
        let url = directory.file("prefs.json")
        let spec = "json:" + url.path(percentEncoded: false)
        #expect(try ChildProcess.run(["set-string", spec, "old", "old contents"]).lines == ["ok"])
        let fileSystem = POSIXFileSystem()
        let before = try #require(try fileSystem.read(url.path(percentEncoded: false), through: nil))

        // RLIMIT_FSIZE is per process: the child lowers it to 1 MiB and tries to store 2 MiB.
        let result = try ChildProcess.run(["fsize", spec, "big", String(2 << 20), String(1 << 20)])
        #expect(result.status == 0, "\(result.error)")
        #expect(result.lines == ["refused write \(EFBIG)", "kept 1", "small ok", "SIGXFSZ untouched"])

        // The refused write left nothing behind; the small one that followed kept the old value.
        #expect(try directory.contents() == ["prefs.json"])
        let after = try #require(try fileSystem.read(url.path(percentEncoded: false), through: nil))
        #expect(after.identity != before.identity)
        let store = try JSONFormat.decode(after.data, path: "prefs.json")
        #expect(store["old"] == .string("old contents"))
        #expect(store["big"] == nil)
    }

    /// Every write of a store puts a new file at the name (a rename, never a write in place: the file a reader has
    /// open keeps its bytes) and leaves no temporary file beside it.
    @Test(arguments: Backend.persistent)
    func writesLeaveNoTemporaryFilesAndChangeIdentity(_ backend: Backend) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try #require(try backend.open(in: directory) as? FileBackedStore)
        defer { store.close() }
        let path = store.url.path(percentEncoded: false)
        try store.setValue(.int(0), forKey: "k")
        let files = try directory.contents()
        var identities: [FileIdentity] = []
        for index in 1...5 {
            let reader = try FileHandle(forReadingFrom: store.url)
            let read = try reader.readToEnd()
            try store.setValue(.int(Int64(index)), forKey: "k")
            try reader.seek(toOffset: 0)
            #expect(try reader.readToEnd() == read, "write \(index) changed the file in place")
            try reader.close()
            identities.append(try #require(try POSIXFileSystem().identity(at: path)))
        }
        for (index, identity) in identities.enumerated() {
            #expect(!identities[..<index].contains(identity))
        }
        #expect(try directory.contents() == files)
        #expect(files.contains(store.url.lastPathComponent))
    }

    @Test func exclusiveLockSerializesReadModifyWrite() throws {
        let directory = try TempDir("PrefsFileLayerTests", create: false)
        defer { directory.cleanup() }
        let url = directory.file("counter")
        let path = url.path(percentEncoded: false)
        try replaceFile(at: url, with: Data("0".utf8))
        // Every thread locks the file itself, each lock on a descriptor of its own, as processes do; each write
        // replaces the file, and a writer that waited on the version replaced locks the new one.
        let fileSystem = POSIXFileSystem()
        let failures = Mutex<[String]>([])
        let group = DispatchGroup()
        for _ in 0..<8 {
            group.enter()
            let thread = Thread {
                defer { group.leave() }
                do {
                    for _ in 0..<200 {
                        let lock = try fileSystem.lock(path, timeout: .seconds(60), clock: .system)
                        defer { lock.release() }
                        let current = try fileSystem.read(path, through: lock).map {
                            Int(String(decoding: $0.data, as: UTF8.self)) ?? -1
                        }
                        try replaceFile(at: url, with: Data(String((current ?? 0) + 1).utf8))
                    }
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
            thread.start()
        }
        group.wait()
        #expect(failures.withLock { $0 } == [])
        #expect(try String(contentsOf: url, encoding: .utf8) == "1600")
        #expect(try directory.contents() == ["counter"])
    }

    @Test func watcherFiresOnceForAnotherWriter() async throws {
        let directory = try TempDir("PrefsFileLayerTests")
        defer { directory.cleanup() }
        let watcher = DirectoryWatcher()
        let url = directory.file("prefs.json")
        let reader = POSIXFileSystem()
        let changes = EventCounter()
        let sentinelChanges = EventCounter()

        let token = watcher.watch(fileAt: url) {
            _ = try? reader.read(url.path(percentEncoded: false), through: nil)  // reloading must cause no events
            changes.fire()
        }
        let sentinel = watcher.watch(fileAt: directory.file("sentinel")) { sentinelChanges.fire() }
        defer {
            token.cancel()
            sentinel.cancel()
        }

        try replaceFile(at: url, with: Data("1".utf8))
        #expect(await changes.wait(for: 1))

        // Events arrive in order: once the sentinel's change is seen, any further event for the file would have been.
        try replaceFile(at: directory.file("sentinel"), with: Data())
        #expect(await sentinelChanges.wait(for: 1))
        #expect(changes.count == 1)
        #expect(sentinelChanges.count == 1)

        #expect(unlink(url.path(percentEncoded: false)) == 0)
        #expect(await changes.wait(for: 2))
    }

    @Test func onlyTemporaryAndLockFileNamesAreScratch() {
        for name in [".prefs.json.tmp-0123abcd", ".tmp-", ".a.tmp-", "prefs.json.lock", ".lock"] {
            #expect(WatcherCore.isScratchName(name), "\(name)")
        }
        for name in ["prefs.json", "prefs.tmp-json", ".prefs.json", ".prefs.tmp", "lock", "prefs.lock.json", "é.tmp-"] {
            #expect(!WatcherCore.isScratchName(name), "\(name)")
        }
    }

    @Test func cancellingTokensRemovesDirectoryWatches() throws {
        let directory = try TempDir("PrefsFileLayerTests")
        defer { directory.cleanup() }
        try directory.createFolders(["one", "two"])
        let watcher = DirectoryWatcher()
        let baseline = watcher.activeWatchCount
        let first = watcher.watch(fileAt: directory.file("one/a.json")) {}
        let second = watcher.watch(fileAt: directory.file("one/b.json")) {}
        #expect(watcher.activeWatchCount == baseline + 1)
        var third: FileWatchToken? = watcher.watch(fileAt: directory.file("two/a.json")) {}
        #expect(watcher.activeWatchCount == baseline + 2)
        #expect(watcher.callbackCount == 3)

        first.cancel()
        first.cancel()
        #expect(watcher.activeWatchCount == baseline + 2)
        second.cancel()
        #expect(watcher.activeWatchCount == baseline + 1)
        _ = third
        third = nil
        #expect(watcher.activeWatchCount == baseline)
        #expect(watcher.callbackCount == 0)
    }

    @Test func aFolderWatchOutlivesItsLastTokenForReuseUpToALimit() async throws {
        let directory = try TempDir("PrefsFileLayerTests")
        defer { directory.cleanup() }
        try directory.createFolders(["one"] + (0..<(DirectoryWatcher.idleWatchLimit + 4)).map { "folder-\($0)" })
        let watcher = DirectoryWatcher()
        watcher.watch(fileAt: directory.file("one/a.json")) {}.cancel()
        #expect(watcher.activeWatchCount == 0 && watcher.idleWatchCount == 1)
        // Watching the folder again takes the idle watch back, and it reports changes as a fresh one would.
        let changes = EventCounter()
        let token = watcher.watch(fileAt: directory.file("one/a.json")) { changes.fire() }
        #expect(watcher.activeWatchCount == 1 && watcher.idleWatchCount == 0)
        try replaceFile(at: directory.file("one/a.json"), with: Data("1".utf8))
        #expect(await changes.wait(for: 1))
        token.cancel()
        // Only the newest idle watches are kept.
        for index in 0..<(DirectoryWatcher.idleWatchLimit + 4) {
            watcher.watch(fileAt: directory.file("folder-\(index)/a.json")) {}.cancel()
        }
        #expect(watcher.idleWatchCount == DirectoryWatcher.idleWatchLimit)
        #expect(watcher.activeWatchCount == 0)
    }

    @Test func aFolderReplacedWhileItsWatchIsIdleIsWatchedAgain() async throws {
        let directory = try TempDir("PrefsFileLayerTests")
        defer { directory.cleanup() }
        try directory.createFolders(["folder"])
        let watcher = DirectoryWatcher()
        let url = directory.file("folder/a.json")
        watcher.watch(fileAt: url) {}.cancel()
        try FileManager.default.removeItem(at: directory.file("folder"))
        try FileManager.default.createDirectory(at: directory.file("folder"), withIntermediateDirectories: false)
        // Watching again may take the idle watch of the old folder before its removal is noticed; then the watch
        // is re-armed on the new folder (one extra callback). Either way every later change is reported.
        let changes = EventCounter()
        let token = watcher.watch(fileAt: url) { changes.fire() }
        for round in 1...3 {
            let before = changes.count
            try replaceFile(at: url, with: Data("\(round)".utf8))
            #expect(await changes.wait(for: before + 1), "write \(round)")
        }
        token.cancel()
    }

    @Test func watchingAFileInMissingFoldersCreatesNothingAndSeesThemAppear() async throws {
        let directory = try TempDir("PrefsFileLayerTests")
        defer { directory.cleanup() }
        let watcher = DirectoryWatcher()
        let url = directory.file("app/nested/prefs.json")
        let changes = EventCounter()
        let token = watcher.watch(fileAt: url) { changes.fire() }
        defer { token.cancel() }
        #expect(try directory.contents() == [])

        // Another writer creates both folders and the file: the watch moves down to the file's folder and reports.
        try replaceFile(at: url, with: Data("1".utf8))
        #expect(await changes.wait(for: 1))
        #expect(watcher.activeWatchCount == 1)
        for round in 2...4 {
            let before = changes.count
            try replaceFile(at: url, with: Data("\(round)".utf8))
            #expect(await changes.wait(for: before + 1), "write \(round)")
        }

        // While a folder is missing, a file of the watched name in the ancestor watched instead is not the file.
        let waitingChanges = EventCounter()
        let waiting = watcher.watch(fileAt: directory.file("other/prefs.json")) { waitingChanges.fire() }
        defer { waiting.cancel() }
        let sentinelChanges = EventCounter()
        let sentinel = watcher.watch(fileAt: directory.file("sentinel")) { sentinelChanges.fire() }
        defer { sentinel.cancel() }
        try replaceFile(at: directory.file("prefs.json"), with: Data())
        try replaceFile(at: directory.file("sentinel"), with: Data())
        #expect(await sentinelChanges.wait(for: 1))
        #expect(waitingChanges.count == 0)
        #expect(!FileManager.default.fileExists(atPath: directory.path("other")))
    }

    @Test func aRemovedFolderIsWatchedThroughItsParentUntilItComesBack() async throws {
        let directory = try TempDir("PrefsFileLayerTests")
        defer { directory.cleanup() }
        try directory.createFolders(["folder"])
        let watcher = DirectoryWatcher()
        let url = directory.file("folder/a.json")
        let changes = EventCounter()
        let token = watcher.watch(fileAt: url) { changes.fire() }
        defer { token.cancel() }
        try FileManager.default.removeItem(at: directory.file("folder"))
        #expect(await changes.wait(for: 1))  // the folder went away: the file must be read again
        #expect(!FileManager.default.fileExists(atPath: directory.path("folder")))

        var before = changes.count
        try replaceFile(at: url, with: Data("1".utf8))
        #expect(await changes.wait(for: before + 1))
        before = changes.count
        try replaceFile(at: url, with: Data("2".utf8))
        #expect(await changes.wait(for: before + 1))
        #expect(watcher.activeWatchCount == 1)
    }

    @Test func pollingFallbackNoticesChanges() async throws {
        let directory = try TempDir("PrefsFileLayerTests", create: false)
        defer { directory.cleanup() }
        let watcher = DirectoryWatcher(forcePolling: true)
        let url = directory.file("prefs.json")
        let changes = EventCounter()
        let token = watcher.watch(fileAt: url) { changes.fire() }
        #expect(watcher.activeWatchCount == 1)
        try replaceFile(at: url, with: Data("1".utf8))
        #expect(await changes.wait(for: 1))
        token.cancel()
        #expect(watcher.activeWatchCount == 0)
    }
}
