import Foundation
import PrefsTestSupport
import TestThreads
import Testing

/// Seeded mutations of valid store files (truncations, bit flips, oversized lengths, garbage headers, wrong
/// versions, absurd nesting, random bytes), each opened by the store in a child process so a crash is a failure
/// and not the end of the test run. The child checks that every case opens or throws a typed error and that a
/// failed open leaves the file byte-for-byte as it was.
@Suite(.enabled(if: Reliability.enabled), .ownThreads)
struct HostileFileTests {
    @Test(arguments: [("SuiteFileStore", "plist"), ("FileStore", "json"), ("EncryptedFileStore", "vault")])
    func mutatedFilesAreRefusedWithTypedErrors(store name: String, kind: String) async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        // A suite that does not read is refused once it has stayed unchanged for 50 ms (until then it may be a
        // Foundation rewrite in progress), so each refused property list costs 50 ms of real time: 1 000 of them
        // take about a minute, 10 000 of the others a few seconds.
        let cases = Reliability.scaled(kind == "plist" ? 1_000 : 10_000)
        let seed = Reliability.seed &+ UInt64(kind.utf8.count)
        let arguments = ["fuzz-open", kind, directory.path, String(seed), String(cases)]
        let started = ContinuousClock.now
        let exit = try await onThread { try ChildProcess.run(arguments, timeLimit: Reliability.timeLimit) }
        let lines = exit.lines
        let elapsed = ContinuousClock.now - started
        let crashes = exit.signal == nil ? 0 : 1
        Reliability.report(
            "fuzz \(name) seed=\(seed) \(lines.last ?? "no summary") crashes=\(crashes) time=\(elapsed)")
        #expect(exit.succeeded, "replay with PREFS_SEED: \(exit.description)")
        let summary = try #require(lines.last?.split(separator: " ").map(String.init))
        #expect(summary.count == 6 && summary[0] == "cases" && summary[1] == String(cases))
        // The mutations must mostly be refused (a fuzzer that only produces valid files tests nothing), and some
        // must still open (mutations inside string values).
        let refused = Int(summary.last ?? "") ?? 0
        #expect(refused > cases / 2)
    }
}
