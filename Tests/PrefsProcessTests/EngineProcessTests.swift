import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

#if canImport(Glibc)
    import Glibc
#endif

/// The file engine with real processes: a lock held by a stopped process, a writer stopped inside its commit, and
/// Prefs processes beside Foundation's `UserDefaults` writing the same suite.
@Suite(.ownThreads) struct EngineProcessTests {
    /// A lock held by a process that has stopped (here `flock(1)` on the store's file, as a process under Ctrl-Z or
    /// a debugger would): a write gives up after `PrefsConfig.lockTimeout` with `lockTimedOut`, naming the holder
    /// and writing nothing; reads do not wait; a deferred store's `flush()` gives up too; once the holder lets go,
    /// writes succeed.
    @Test(arguments: [Backend.file, .userDefaults, .vault])
    func aWriteGivesUpOnALockHeldElsewhereAfterItsLimit(_ backend: Backend) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try #require(try backend.open(in: directory) as? FileBackedStore)
        try store.setValue(.int(1), forKey: "k")
        let path = store.url.path(percentEncoded: false)
        let holder = try ChildProcess(
            URL(filePath: "/usr/bin/flock"), ["-x", path, "sh", "-c", "echo held; exec cat"], input: .pipe,
            timeLimit: .seconds(120))
        defer { holder.kill() }
        #expect(holder.readLine() == "held")
        let deferred = store.deferringWrites(window: .seconds(60)) as! FileBackedStore
        try PrefsConfig.withLockTimeout(.milliseconds(300)) { () throws in
            do {
                try store.setValue(.int(2), forKey: "k")
                Issue.record("a write went through a lock held elsewhere")
            } catch let PrefsError.lockTimedOut(lockedPath, holderID, waited) {
                #expect(lockedPath == path)
                #expect(holderID == holder.processID)
                #expect(waited >= .milliseconds(300))
            } catch {
                Issue.record("expected lockTimedOut, got \(error)")
            }
            #expect(try store.value(forKey: "k") == .int(1), "reads wait for nothing")
            try? deferred.setValue(.int(3), forKey: "d")
            #expect(throws: PrefsError.self) { try deferred.flush() }
        }
        holder.closeInput()
        #expect(holder.wait().succeeded)
        try store.setValue(.int(4), forKey: "k")
        try deferred.flush()
        deferred.close()
        store.close()
        let reopened = try backend.open(in: directory)
        #expect(try reopened.value(forKey: "k") == .int(4))
        #expect(try reopened.value(forKey: "d") == .int(3))
    }

    /// Whether process `pid` is stopped (state `T` in `/proc/PID/stat`).
    private static func isStopped(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let end = stat.lastIndex(of: ")")
        else { return false }
        return stat[stat.index(after: end)...].trimmingCharacters(in: .whitespaces).hasPrefix("T")
    }

    /// A writer stopped inside its commit (SIGSTOP: Ctrl-Z, a debugger, a cgroup freezer), holding its file's lock
    /// between writing its temporary file and renaming it: writes of every other file in the folder (another app's
    /// suite, another file store) go on, and only writes of its own file wait, until the lock timeout names it.
    /// (When every file of the folder was committed under a lock of the folder, a writer stopped there made every
    /// app's writes fail after 5 s.)
    @Test func aWriterStoppedInItsCommitHoldsUpOnlyItsOwnFile() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let stoppedSpec = "json:" + directory.path("stopped.json")
        try StoreSpec.open(stoppedSpec).setValue(.int(1), forKey: "k")
        let child = try ChildProcess.start(["stop-in-commit", stoppedSpec, "k", "2"], timeLimit: .seconds(120))
        defer { child.kill() }
        #expect(child.readLine() == "stopping")
        try eventually("the writer to stop inside its commit", within: .seconds(60)) { Self.isStopped(child.processID) }

        try PrefsConfig.withLockTimeout(.seconds(2)) { () throws in
            let suite = try SuiteFileStore(suiteName: "other.app", directory: directory.url)
            try suite.setValue(.string("saved"), forKey: "theme")
            let other = try FileStore(url: directory.file("other.json"))
            try other.setValue(.int(7), forKey: "n")
            #expect(
                try SuiteFileStore(suiteName: "other.app", directory: directory.url).value(forKey: "theme")
                    == .string("saved"))

            let sameFile = try StoreSpec.open(stoppedSpec)
            #expect(try sameFile.value(forKey: "k") == .int(1), "reads never wait")
            do {
                try sameFile.setValue(.int(3), forKey: "k")
                Issue.record("a write of the stopped writer's file went through its lock")
            } catch let PrefsError.lockTimedOut(_, holder, _) {
                #expect(holder == child.processID)
            }
        }
        child.signal(SIGCONT)
        let ended = child.wait()
        #expect(ended.succeeded && ended.lines == ["stopping", "done"], "\(ended)")
        #expect(try StoreSpec.open(stoppedSpec).value(forKey: "k") == .int(2))
    }

    /// The same, at random moments of a writer's loop: a write of another file of the folder never waits for it.
    /// Before, 14 of 300 such stops landed inside a commit that held the folder's lock.
    @Test func aWriterStoppedAtRandomMomentsNeverHoldsUpAnotherFile() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let writer = try ChildProcess.start(
            ["count-up", "json:" + directory.path("busy.json"), "n"], timeLimit: .seconds(300))
        defer { writer.kill() }
        #expect(writer.readLine() == "1")
        let other = try FileStore(url: directory.file("other.json"))
        var random = SplitMix64(seed: 42)
        var refused = 0
        try PrefsConfig.withLockTimeout(.milliseconds(500)) { () throws in
            for round in 0..<100 {
                usleep(useconds_t(random.next() % 3_000))  // a random moment of the loop, not a wait for anything
                writer.signal(SIGSTOP)
                try eventually("the writer to stop", within: .seconds(60)) { Self.isStopped(writer.processID) }
                do { try other.setValue(.int(Int64(round)), forKey: "n") } catch { refused += 1 }
                writer.signal(SIGCONT)
            }
        }
        #expect(refused == 0, "\(refused) of 100 writes of another file failed while the writer was stopped")
        #expect(try other.value(forKey: "n") == .int(99))
    }
}
