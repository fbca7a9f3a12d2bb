import Dispatch
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
        let file = LockedFile(url: directory.file("prefs.json"))
        #expect(try file.read() == nil)
        #expect(try file.identity() == nil)
        try file.remove()

        let bytes = Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let written = try file.writeAtomically(bytes)
        let read = try #require(try file.read())
        #expect(read.data == bytes)
        #expect(read.identity == written)
        #expect(try file.identity() == written)
        #expect(try FileIdentity.of(path: directory.file("prefs.json").path(percentEncoded: false)) == written)

        try file.writeAtomically(Data())
        #expect(try file.read()?.data == Data())

        try file.remove()
        #expect(try file.read() == nil)
    }

    @Test func initCreatesNothing() throws {
        let directory = try TempDir("PrefsFileLayerTests", create: false)
        defer { directory.cleanup() }
        let file = LockedFile(url: directory.file("sub/prefs.json"))
        #expect(file.lockURL == directory.file("sub/prefs.json.lock"))
        #expect(try file.read() == nil)
        #expect(!FileManager.default.fileExists(atPath: directory.url.path(percentEncoded: false)))

        // A reader in a missing folder creates nothing either: there is nothing to read.
        try file.withLock(.shared) {}
        #expect(!FileManager.default.fileExists(atPath: directory.url.path(percentEncoded: false)))
        try file.withLock(.exclusive) {}
        #expect(permissions(of: file.lockURL) == 0o600)
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

        let other = LockedFile(url: directory.file("f/prefs.json"))
        try other.writeAtomically(Data("y".utf8), mode: 0o644)
        #expect(permissions(of: other.url) == 0o644)
        #expect(permissions(of: directory.file("f")) == 0o700)
    }

    @Test func failedWriteThrowsIOError() throws {
        let directory = try TempDir("PrefsFileLayerTests", create: false)
        defer { directory.cleanup() }
        try directory.create()
        #expect(
            FileManager.default.createFile(atPath: directory.file("regular").path(percentEncoded: false), contents: nil)
        )
        let file = LockedFile(url: directory.file("regular/prefs.json"))

        #expect(throws: PrefsError.self) { try file.writeAtomically(Data("x".utf8)) }
        do {
            try file.writeAtomically(Data("x".utf8))
        } catch PrefsError.io(_, _, let code, let message) {
            #expect(code == ENOTDIR)
            #expect(message == String(cString: strerror(ENOTDIR)))
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func oldContentSurvivesFailedRename() throws {
        let directory = try TempDir("PrefsFileLayerTests", create: false)
        defer { directory.cleanup() }
        // The target name is a non-empty directory: the temporary file is written, then the rename fails.
        try FileManager.default.createDirectory(
            at: directory.file("prefs.json/keep"), withIntermediateDirectories: true)
        let file = LockedFile(url: directory.file("prefs.json"))
        #expect(throws: PrefsError.self) { try file.writeAtomically(Data("new".utf8)) }
        #expect(try directory.contents() == ["prefs.json"])
    }

    @Test func oldContentSurvivesFileSizeLimit() throws {
        let directory = try TempDir("PrefsFileLayerTests", create: false)
        defer { directory.cleanup() }
        let url = directory.file("prefs.json")
        let spec = "json:" + url.path(percentEncoded: false)
        #expect(try ChildProcess.run(["set-string", spec, "old", "old contents"]).lines == ["ok"])
        let file = LockedFile(url: url)
        let before = try #require(try file.read())

        // RLIMIT_FSIZE is per process: the child lowers it to 1 MiB and tries to store 2 MiB.
        let result = try ChildProcess.run(["fsize", spec, "big", String(2 << 20), String(1 << 20)])
        #expect(result.status == 0, "\(result.error)")
        #expect(result.lines == ["refused write \(EFBIG)", "kept 1", "small ok"])

        // The refused write left nothing behind; the small one that followed kept the old value.
        #expect(try directory.contents() == ["prefs.json", "prefs.json.lock"])
        let after = try #require(try file.read())
        #expect(after.identity != before.identity)
        let store = try JSONFormat.decode(after.data, path: "prefs.json")
        #expect(store["old"] == .string("old contents"))
        #expect(store["big"] == nil)
    }

    @Test func writesLeaveNoTemporaryFilesAndChangeIdentity() throws {
        let directory = try TempDir("PrefsFileLayerTests", create: false)
        defer { directory.cleanup() }
        let file = LockedFile(url: directory.file("prefs.json"))
        var identities: [FileIdentity] = []
        for index in 0..<5 {
            let identity = try file.withLock(.exclusive) { try file.writeAtomically(Data("value \(index)".utf8)) }
            #expect(try file.identity() == identity)
            identities.append(identity)
        }
        for (index, identity) in identities.enumerated() {
            #expect(!identities[..<index].contains(identity))
        }
        #expect(try directory.contents() == ["prefs.json", "prefs.json.lock"])
    }

    @Test func exclusiveLockSerializesReadModifyWrite() throws {
        let directory = try TempDir("PrefsFileLayerTests", create: false)
        defer { directory.cleanup() }
        let url = directory.file("counter")
        // Two objects for the same file: threads on one share the in-process lock, the two exclude via flock.
        let files = [LockedFile(url: url), LockedFile(url: url)]
        let failures = Mutex<[String]>([])
        let group = DispatchGroup()
        for index in 0..<8 {
            group.enter()
            let file = files[index % 2]
            let thread = Thread {
                defer { group.leave() }
                do {
                    for _ in 0..<200 {
                        try file.withLock(.exclusive) {
                            let current = try file.read().map { Int(String(decoding: $0.data, as: UTF8.self)) ?? -1 }
                            try file.writeAtomically(Data(String((current ?? 0) + 1).utf8))
                        }
                    }
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
            thread.start()
        }
        group.wait()
        #expect(failures.withLock { $0 } == [])
        let final = try files[0].withLock(.shared) { try files[0].read() }
        #expect(final.map { String(decoding: $0.data, as: UTF8.self) } == "1600")
        #expect(try directory.contents() == ["counter", "counter.lock"])
    }

    @Test func watcherFiresOnceForAnotherWriter() async throws {
        let directory = try TempDir("PrefsFileLayerTests")
        defer { directory.cleanup() }
        let watcher = DirectoryWatcher()
        let url = directory.file("prefs.json")
        let reader = LockedFile(url: url)
        let writer = LockedFile(url: url)  // stands in for another process
        let changes = EventCounter()
        let sentinelChanges = EventCounter()

        let token = watcher.watch(fileAt: url) {
            _ = try? reader.withLock(.shared) { try reader.read() }  // reloading must not cause more events
            changes.fire()
        }
        let sentinel = watcher.watch(fileAt: directory.file("sentinel")) { sentinelChanges.fire() }
        defer {
            token.cancel()
            sentinel.cancel()
        }

        try writer.withLock(.exclusive) { try writer.writeAtomically(Data("1".utf8)) }
        #expect(await changes.wait(for: 1))

        // Events arrive in order: once the sentinel's change is seen, any further event for the file would have been.
        try LockedFile(url: directory.file("sentinel")).writeAtomically(Data())
        #expect(await sentinelChanges.wait(for: 1))
        #expect(changes.count == 1)
        #expect(sentinelChanges.count == 1)

        try writer.withLock(.exclusive) { try writer.remove() }
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
        try LockedFile(url: directory.file("one/a.json")).writeAtomically(Data("1".utf8))
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
            try LockedFile(url: url).writeAtomically(Data("\(round)".utf8))
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
        try LockedFile(url: url).writeAtomically(Data("1".utf8))
        #expect(await changes.wait(for: 1))
        #expect(watcher.activeWatchCount == 1)
        for round in 2...4 {
            let before = changes.count
            try LockedFile(url: url).writeAtomically(Data("\(round)".utf8))
            #expect(await changes.wait(for: before + 1), "write \(round)")
        }

        // While a folder is missing, a file of the watched name in the ancestor watched instead is not the file.
        let waitingChanges = EventCounter()
        let waiting = watcher.watch(fileAt: directory.file("other/prefs.json")) { waitingChanges.fire() }
        defer { waiting.cancel() }
        let sentinelChanges = EventCounter()
        let sentinel = watcher.watch(fileAt: directory.file("sentinel")) { sentinelChanges.fire() }
        defer { sentinel.cancel() }
        try LockedFile(url: directory.file("prefs.json")).writeAtomically(Data())
        try LockedFile(url: directory.file("sentinel")).writeAtomically(Data())
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
        try LockedFile(url: url).writeAtomically(Data("1".utf8))
        #expect(await changes.wait(for: before + 1))
        before = changes.count
        try LockedFile(url: url).writeAtomically(Data("2".utf8))
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
        try LockedFile(url: url).writeAtomically(Data("1".utf8))
        #expect(await changes.wait(for: 1))
        token.cancel()
        #expect(watcher.activeWatchCount == 0)
    }
}
