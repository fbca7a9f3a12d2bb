import Foundation
import Prefs
import PrefsTestSupport
import Synchronization
import TestThreads
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Several writers of one file at once, each the way the file engine promises to survive: Prefs processes appending
/// to one suite beside a deferred writer, and writers stopped at random moments beside writers of other files of
/// the folder. (Beside a writer that takes no lock the last whole-file write wins, as between two Foundation
/// processes; `FoundationWriterTests` checks what holds there.)
@Suite(.enabled(if: Reliability.enabled), .ownThreads)
struct SharedFileStressTests {
    /// The values of a suite file, as Foundation's own reader sees them.
    private static func suiteValues(_ path: String) -> [String: Any] {
        let data = (try? Data(contentsOf: URL(filePath: path))) ?? Data()
        return (try? PropertyListSerialization.propertyList(from: data, format: nil) as? [String: Any]) ?? [:]
    }

    /// Two and three Prefs processes appending to one array of a suite while a deferred writer counts up another key
    /// of it: every acknowledged append survives, run after run, and the deferred writer's flushed value is there.
    @Test(arguments: [2, 3])
    func prefsProcessesAndADeferredWriterKeepEveryAcknowledgedAppend(processes: Int) async throws {
        let runs = Reliability.scaled(3)
        let each = 100
        var kept: [Int] = []
        for _ in 0..<runs {
            let directory = try TempDir()
            defer { directory.cleanup() }
            let spec = "plist:" + directory.path + ":shared"
            let plist = directory.path("shared.plist")
            let deferred = try ChildProcess.start(
                ["deferred-count-on", spec, "n", "5", "1000000"], timeLimit: Reliability.timeLimit)
            defer { deferred.kill() }
            let appenders = try (0..<processes).map { index in
                try ChildProcess.start(
                    ["append-and-stay", spec, "tags", String(each), "p\(index)"], input: .pipe,
                    timeLimit: Reliability.timeLimit)
            }
            defer { for appender in appenders { appender.kill() } }
            let appended = try await onThread { appenders.map { $0.readLine() } }
            #expect(appended == Array(repeating: "appended", count: processes))
            for appender in appenders { appender.closeInput() }
            _ = try await onThread { appenders.map { $0.wait() } }
            let tags = Self.suiteValues(plist)["tags"] as? [String] ?? []
            kept.append(tags.count)
            #expect(tags.count == processes * each && Set(tags).count == tags.count)
        }
        Reliability.report(
            "Prefs processes and a deferred writer: \(runs) runs of \(processes) processes × \(each) appends: kept "
                + "\(kept.map(String.init).joined(separator: ", ")) of \(processes * each)")
    }

    /// Whether process `pid` is stopped.
    private static func isStopped(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let end = stat.lastIndex(of: ")")
        else { return false }
        return stat[stat.index(after: end)...].trimmingCharacters(in: .whitespaces).hasPrefix("T")
    }

    /// A writer stopped at random moments (inside its commit now and then): writes of another file of the folder
    /// never wait for it.
    @Test func aWriterStoppedAtRandomMomentsNeverHoldsUpAnotherFile() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let stops = Reliability.scaled(300)
        let writer = try ChildProcess.start(
            ["count-up", "json:" + directory.path("busy.json"), "n"], timeLimit: Reliability.timeLimit)
        defer { writer.kill() }
        #expect(writer.readLine() == "1")
        let other = try StoreSpec.open("plist:" + directory.path + ":other.app")
        var random = SplitMix64(seed: Reliability.seed)
        var refused = 0
        let started = ContinuousClock.now
        try PrefsConfig.withLockTimeout(.milliseconds(500)) { () throws in
            for round in 0..<stops {
                usleep(useconds_t(random.next() % 3_000))  // a random moment of the loop, not a wait for anything
                writer.signal(SIGSTOP)
                try eventually("the writer to stop", within: .seconds(60)) { Self.isStopped(writer.processID) }
                do { try other.setValue(.int(Int64(round)), forKey: "n") } catch { refused += 1 }
                writer.signal(SIGCONT)
            }
        }
        Reliability.report(
            "stopped writer: \(stops) stops of a writer of one file, writes of another file refused \(refused), "
                + "time=\(ContinuousClock.now - started)")
        #expect(refused == 0)
    }
}
