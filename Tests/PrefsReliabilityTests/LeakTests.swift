import Foundation
import PrefsTestSupport
import TestThreads
import Testing

/// Opening and closing stores, subscribing and cancelling, in a loop in a child process: its resident memory
/// must stay flat.
@Suite(.enabled(if: Reliability.enabled), .ownThreads)
struct LeakTests {
    @Test(arguments: ["SuiteFileStore", "FileStore", "EncryptedFileStore"])
    func openCloseSubscribeCancelStaysFlat(store name: String) async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let spec = try #require(directory.specs.first { $0.name == name }).spec
        let rounds = Reliability.scaled(2_000)
        let exit = try await onThread {
            try ChildProcess.run(["leak-loop", spec, String(rounds)], timeLimit: Reliability.timeLimit)
        }
        try #require(exit.succeeded, "\(exit.description)")
        let fields = try #require(exit.lines.last?.split(separator: " ").compactMap { Int($0) })
        try #require(fields.count == 2)
        let growth = fields[1] - fields[0]
        Reliability.report(
            "leak \(name) rounds=\(rounds) rss-before=\(fields[0])KiB rss-after=\(fields[1])KiB growth=\(growth)KiB "
                + "per-round=\(String(format: "%.1f", Double(growth * 1024) / Double(rounds)))B")
        // A leak of one small object per round would show; allocator noise stays well under this.
        #expect(growth < 1_024 + rounds / 10, "resident memory grew \(growth) KiB over \(rounds) rounds")
    }
}
