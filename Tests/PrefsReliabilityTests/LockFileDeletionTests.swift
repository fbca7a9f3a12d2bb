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
        let deleter = LockFileDeleter(path + ".lock", everyMicroseconds: 100_000)
        defer { deleter.stop() }
        let started = ContinuousClock.now
        let children = try (0..<4).map { index in
            try ChildProcess.start(
                ["append-on-go", "json:\(path)", "list", String(count), "p\(index)"], input: .pipe,
                timeLimit: Reliability.timeLimit)
        }
        for child in children { child.write("go\n") }
        let exits = try await onThread { children.map { $0.wait() } }
        deleter.stop()
        let elapsed = ContinuousClock.now - started
        for exit in exits { #expect(exit.status == 0, "\(exit.error)") }
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
        let list = object?["list"] as? [String] ?? []
        Reliability.report(
            "lock-file deletion: 4 processes × \(count) appends, lock file deleted \(deleter.deletions) "
                + "times (every 100 ms): kept \(list.count) of \(4 * count), \(Set(list).count) distinct, time=\(elapsed)"
        )
        #expect(list.count == 4 * count && Set(list).count == 4 * count)
        #expect(deleter.deletions > 0)
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
        let deleter = LockFileDeleter(path + ".lock", everyMicroseconds: 3_000)
        defer { deleter.stop() }
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
        deleter.stop()
        deferred.kill()
        for exit in exits { #expect(exit.status == 0, "\(exit.error)") }
        let object = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(filePath: path))) as? [String: Any]
        let list = object?["list"] as? [String] ?? []
        Reliability.report(
            "lock-file deletion beside a deferred writer: 2 processes × \(count) appends, lock file deleted "
                + "\(deleter.deletions) times (every 3 ms): kept \(list.count) of \(2 * count), "
                + "\(Set(list).count) distinct, deferred writer reached n=\(object?["n"] ?? "none")")
        #expect(list.count == 2 * count && Set(list).count == 2 * count)
        #expect(deleter.deletions > 0)
    }
}

/// Deletes a lock file at a fixed pace on a thread of its own until stopped (the fault; nothing waits on it).
private final class LockFileDeleter: Sendable {
    private let running = Atomic(true)
    private let count = Atomic(0)

    init(_ path: String, everyMicroseconds pause: UInt32) {
        Thread { [self] in
            while running.load(ordering: .relaxed) {
                if unlink(path) == 0 { count.add(1, ordering: .relaxed) }
                usleep(pause)
            }
        }.start()
    }

    /// How many times the file was deleted so far.
    var deletions: Int { count.load(ordering: .relaxed) }

    func stop() { running.store(false, ordering: .relaxed) }
}
