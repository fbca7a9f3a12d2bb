import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

/// Wrappers in a child process whose writes fail.
@Suite(.ownThreads)
struct StoredValueProcessTests {
    /// TOUR, GettingStarted: "Writes through a wrapper never throw; a failure keeps the old value and is reported."
    /// The disk is full in a child process (RLIMIT_FSIZE), so the write fails with EFBIG.
    @Test(arguments: Backend.persistent)
    func aWrapperWriteThatFailsKeepsTheOldValueAndReportsIt(_ backend: Backend) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let result = try ChildProcess.run(["promise-wrapper-write-fails", backend.spec(in: directory)])
        #expect(result.status == 0, "\(result.error)")
        #expect(result.lines == ["wrapper=kept", "fresh=kept", "report: write note"])
        let reopened = try backend.open(in: directory)
        #expect(try reopened.value(forKey: "note") == .string("kept"))
    }
}
