import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

#if canImport(Glibc)
    import Glibc
#endif

/// The lock file deleted under processes that hold it, in child processes.
@Suite(.ownThreads) struct LockFileProcessTests {
    /// Three processes each open the lock file, which is deleted after each of them has: each holds a different
    /// lock file (the first two deleted). Their appends must still exclude each other: after `flock` each sees that
    /// its descriptor is no longer the lock file at the path and opens the current one. (The continuous version,
    /// the lock file deleted every 100 ms under load, is in the reliability suite.)
    @Test func processesHoldingADeletedLockFileStillExcludeEachOther() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let path = directory.file("store.json").path(percentEncoded: false)
        let count = 60
        var children: [ChildProcess] = []
        defer { for child in children { child.kill() } }
        for index in 0..<3 {
            let child = try ChildProcess.start(
                ["append-on-go", "json:\(path)", "list", String(count), "p\(index)"], input: .pipe,
                timeLimit: .seconds(60))
            children.append(child)
            #expect(child.readLine() == "ready")
            #expect(unlink(path + ".lock") == 0)
        }
        for child in children { child.write("go\n") }
        for child in children {
            let exit = child.wait()
            #expect(exit.status == 0 && exit.lines == ["ready", "done"], "\(exit)")
        }
        let list = try FileStore(url: URL(filePath: path)).value(forKey: "list")
        guard case .array(let elements)? = list else {
            Issue.record("no list: \(String(describing: list))")
            return
        }
        #expect(elements.count == 3 * count)
        #expect(Set(elements).count == 3 * count)
    }

    /// A lock held by a process that has stopped (here `flock(1)`, as a process under Ctrl-Z or a debugger would):
    /// a write gives up after `PrefsConfig.lockTimeout` with `lockTimedOut`, naming the holder and writing nothing;
    /// reads do not wait; a deferred store's `flush()` gives up too; once the holder lets go, writes succeed.
    @Test(arguments: [Backend.file, .userDefaults, .vault])
    func aWriteGivesUpOnALockHeldElsewhereAfterItsLimit(_ backend: Backend) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try #require(try backend.open(in: directory) as? FileBackedStore)
        try store.setValue(.int(1), forKey: "k")
        // A suite's lock is `<suite>.lock`, beside Foundation's `<suite>.plist`; other files' is `<file>.lock`.
        let lockURL =
            backend == .userDefaults
            ? store.url.deletingPathExtension().appendingPathExtension("lock")
            : store.url.appendingPathExtension("lock")
        let lockPath = lockURL.path(percentEncoded: false)
        let holder = try ChildProcess(
            URL(filePath: "/usr/bin/flock"), ["-x", lockPath, "sh", "-c", "echo held; exec cat"], input: .pipe,
            timeLimit: .seconds(120))
        defer { holder.kill() }
        #expect(holder.readLine() == "held")
        let deferred = store.deferringWrites(window: .seconds(60))
        try PrefsConfig.withLockTimeout(.milliseconds(300)) { () throws in
            #expect(throws: PrefsError.self) { try store.setValue(.int(2), forKey: "k") }
            do {
                try store.setValue(.int(2), forKey: "k")
            } catch let PrefsError.lockTimedOut(path, holderID, waited) {
                #expect(path == lockPath)
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
}
