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
}
