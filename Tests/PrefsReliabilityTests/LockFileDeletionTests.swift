import Foundation
import PrefsTestSupport
import Synchronization
import TestThreads
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The lock file deleted every 100 ms while four processes update one store: before processes
/// re-checked their lock descriptor after `flock` and before each commit, 4 × 300 updates kept 928 of 1 200.
@Suite(.enabled(if: Reliability.enabled), .ownThreads)
struct LockFileDeletionTests {
    @Test func deletingTheLockFileEvery100msLosesNoUpdate() async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let path = directory.path("store.json")
        let count = Reliability.scaled(100)
        let running = Atomic(true)
        let deletions = Atomic(0)
        let deleter = Thread {
            while running.load(ordering: .relaxed) {
                if unlink(path + ".lock") == 0 { deletions.add(1, ordering: .relaxed) }
                usleep(100_000)
            }
        }
        deleter.start()
        defer { running.store(false, ordering: .relaxed) }
        let started = ContinuousClock.now
        let children = try (0..<4).map { index in
            try ChildProcess.start(
                ["append-on-go", "json:\(path)", "list", String(count), "p\(index)"], input: .pipe,
                timeLimit: Reliability.timeLimit)
        }
        for child in children { child.write("go\n") }
        let exits = try await onThread { children.map { $0.wait() } }
        running.store(false, ordering: .relaxed)
        let elapsed = ContinuousClock.now - started
        for exit in exits { #expect(exit.status == 0, "\(exit.error)") }
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
        let list = object?["list"] as? [String] ?? []
        Reliability.report(
            "lock-file deletion: 4 processes × \(count) appends, lock file deleted \(deletions.load(ordering: .relaxed)) "
                + "times (every 100 ms): kept \(list.count) of \(4 * count), \(Set(list).count) distinct, time=\(elapsed)"
        )
        #expect(list.count == 4 * count && Set(list).count == 4 * count)
        #expect(deletions.load(ordering: .relaxed) > 0)
    }

    /// A deferred writer (5 ms window) beside two processes appending, the lock file deleted every 3 ms: a deferred
    /// commit is a write like any other, so it notices another writer that committed while its lock file was gone
    /// and redoes its commit on the new contents. Its commits wrote around that check before, and left 785–794 of
    /// 800 appends.
    @Test func aDeferredWriterBesideAppendersLosesNoAppendWhileTheLockFileIsDeleted() async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let path = directory.path("store.json")
        let count = Reliability.scaled(200)
        let running = Atomic(true)
        let deletions = Atomic(0)
        let deleter = Thread {
            while running.load(ordering: .relaxed) {
                if unlink(path + ".lock") == 0 { deletions.add(1, ordering: .relaxed) }
                usleep(3_000)  // the fault's pace; nothing waits on it
            }
        }
        deleter.start()
        defer { running.store(false, ordering: .relaxed) }
        let deferred = try ChildProcess.start(
            ["deferred-count-on", "json:\(path)", "n", "5", "1000000"], timeLimit: Reliability.timeLimit)
        defer { deferred.kill() }
        let appenders = try (0..<2).map { index in
            try ChildProcess.start(
                ["append-on-go", "json:\(path)", "list", String(count), "p\(index)"], input: .pipe,
                timeLimit: Reliability.timeLimit)
        }
        for child in appenders { child.write("go\n") }
        let exits = try await onThread { appenders.map { $0.wait() } }
        running.store(false, ordering: .relaxed)
        deferred.kill()
        for exit in exits { #expect(exit.status == 0, "\(exit.error)") }
        let object = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(filePath: path))) as? [String: Any]
        let list = object?["list"] as? [String] ?? []
        Reliability.report(
            "lock-file deletion beside a deferred writer: 2 processes × \(count) appends, lock file deleted "
                + "\(deletions.load(ordering: .relaxed)) times (every 3 ms): kept \(list.count) of \(2 * count), "
                + "\(Set(list).count) distinct, deferred writer reached n=\(object?["n"] ?? "none")")
        #expect(list.count == 2 * count && Set(list).count == 2 * count)
        #expect(deletions.load(ordering: .relaxed) > 0)
    }
}
