import Foundation
import PrefsTestSupport
import TestThreads
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A child process writes 1, 2, 3, … through a store deferring writes by 50 ms, about one a millisecond, flushing
/// now and then, and is killed with SIGKILL at a random moment, over and over. After every kill a fresh process must
/// open the store (never torn) and find a value that was written, no older than the last flushed one, the changes in
/// the order they were made, and lose only
/// changes of the last window: the changes it lost were acknowledged at most a window (plus the time a commit takes)
/// before the kill.
@Suite(.enabled(if: Reliability.enabled), .ownThreads)
struct DeferredCrashTests {
    static let windowMilliseconds = 50
    /// What a commit may add to the window: the fsyncs of one durable write on a busy disk.
    static let commitAllowanceMilliseconds = 500

    struct Tally: CustomStringConvertible {
        var kills = 0
        var acknowledged = 0
        var corrupt = 0
        var impossible = 0
        /// Rounds whose next start, or the final value, was the one change set but not yet acknowledged.
        var inFlightLanded = 0
        var lostFlushed = 0
        var regressed = 0
        var outOfOrder = 0
        var lostChanges = 0
        var killsLosingChanges = 0
        /// For each kill that lost changes: how long before the kill the oldest lost change was acknowledged.
        var lostAges: [Double] = []
        var mostTemporaryFiles = 0

        var maxLostAge: Double { lostAges.max() ?? 0 }
        var description: String {
            let sorted = lostAges.sorted()
            let p50 = sorted.isEmpty ? 0 : sorted[sorted.count / 2]
            return "kills=\(kills) acknowledged=\(acknowledged) corrupt=\(corrupt) impossible=\(impossible) "
                + "in-flight-landed=\(inFlightLanded) "
                + "lost-flushed=\(lostFlushed) regressed=\(regressed) out-of-order=\(outOfOrder) lost-changes=\(lostChanges) "
                + "kills-losing-changes=\(killsLosingChanges) lost-age-ms-median=\(String(format: "%.1f", p50)) "
                + "lost-age-ms-max=\(String(format: "%.1f", maxLostAge)) max-leftover-tmp=\(mostTemporaryFiles)"
        }
    }

    static func monotonicNanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }

    @Test(arguments: ["SuiteFileStore", "FileStore", "EncryptedFileStore"])
    func killedDeferredWritersLoseAtMostTheLastWindow(store name: String) async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let spec = try #require(directory.specs.first { $0.name == name }).spec
        let kills = Reliability.scaled(30)
        let seed = Reliability.seed &+ UInt64(name.utf8.count) &+ 7
        let setup = try ChildProcess.run(["write-fixtures", spec], timeLimit: Reliability.timeLimit)
        try #require(setup.succeeded, "\(setup.description)")

        let tally = try await onThread { () throws -> Tally in
            var random = SplitMix64(seed: seed)
            var tally = Tally()
            var lastAcknowledged = 0
            var lastFlushed = 0
            var lastStart = 0
            var acknowledgedAt: [Int: UInt64] = [:]
            var killedAt: UInt64 = 0
            for round in 0..<kills {
                let child = try ChildProcess.start(
                    ["deferred-count-on", spec, "n", String(Self.windowMilliseconds), "500"],
                    timeLimit: Reliability.timeLimit)
                let first = child.readLine()?.split(separator: " ") ?? []
                guard first.count == 3, first[0] == "start", let start = Int(first[1]), let after = Int(first[2])
                else {
                    child.kill()
                    Issue.record("round \(round): the store did not open after a kill: \(child.wait().description)")
                    tally.corrupt += 1
                    return tally
                }
                // Each value goes to KEY, then to KEY-after: a file holding a later change without an earlier one
                // would show KEY-after ahead of KEY, or behind it by more than the one change in between.
                if after != start && after != start - 1 { tally.outOfOrder += 1 }
                if round > 0 {
                    // The change set last may have been committed by the window's timer before the writer printed
                    // it (it prints once both sets returned): one past the last acknowledged value has landed in
                    // flight; anything further was never set.
                    if start == lastAcknowledged + 1 { tally.inFlightLanded += 1 }
                    if start > lastAcknowledged + 1 { tally.impossible += 1 }
                    if start < lastFlushed { tally.lostFlushed += lastFlushed - start }
                    if start < lastStart { tally.regressed += 1 }
                    if start < lastAcknowledged {
                        tally.lostChanges += lastAcknowledged - start
                        tally.killsLosingChanges += 1
                        if let oldestLost = acknowledgedAt[start + 1] {
                            tally.lostAges.append(Double(Int64(killedAt) - Int64(oldestLost)) / 1_000_000)
                        }
                    }
                }
                lastStart = start
                lastAcknowledged = start
                acknowledgedAt = [:]
                func take(_ line: String) {
                    let fields = line.split(separator: " ")
                    if fields.first == "flushed", let value = Int(fields[1]) {
                        lastFlushed = value
                    } else if fields.count == 2, let value = Int(fields[0]), let time = UInt64(fields[1]) {
                        acknowledgedAt[value] = time
                        lastAcknowledged = value
                    }
                }
                // Fault injection: kill after a random number of acknowledged writes plus a random instant.
                let target = Int.random(in: 0...1_000, using: &random)
                var seen = 0
                while seen < target, let line = child.readLine() {
                    take(line)
                    seen += 1
                }
                usleep(UInt32.random(in: 0...100_000, using: &random))
                killedAt = Self.monotonicNanoseconds()
                child.kill()
                for line in child.remainingLines() { take(line) }
                let exit = child.wait()
                if exit.signal == nil {
                    Issue.record("round \(round): the writer ended before the kill: \(exit.description)")
                }
                tally.kills += 1
                tally.acknowledged += lastAcknowledged - start
                tally.mostTemporaryFiles = max(tally.mostTemporaryFiles, directory.temporaryFiles().count)
            }
            // The final state, read by a fresh process.
            let final = try ChildProcess.run(["get-int", spec, "n"], timeLimit: Reliability.timeLimit)
            guard let value = final.lines.first.flatMap({ Int($0) }) else {
                tally.corrupt += 1
                return tally
            }
            if value == lastAcknowledged + 1 { tally.inFlightLanded += 1 }
            if value > lastAcknowledged + 1 { tally.impossible += 1 }
            if value < lastFlushed { tally.lostFlushed += lastFlushed - value }
            if value < lastAcknowledged, let oldestLost = acknowledgedAt[value + 1] {
                tally.lostChanges += lastAcknowledged - value
                tally.killsLosingChanges += 1
                tally.lostAges.append(Double(Int64(killedAt) - Int64(oldestLost)) / 1_000_000)
            }
            return tally
        }
        let fixtures = try ChildProcess.run(["verify-fixtures", spec], timeLimit: Reliability.timeLimit)
        Reliability.report("deferred-crash \(name) window-ms=\(Self.windowMilliseconds) seed=\(seed) \(tally)")
        #expect(tally.kills == kills)
        #expect(tally.corrupt == 0)
        #expect(tally.impossible == 0)
        #expect(tally.lostFlushed == 0)
        #expect(tally.regressed == 0)
        #expect(tally.outOfOrder == 0)
        #expect(tally.maxLostAge <= Double(Self.windowMilliseconds + Self.commitAllowanceMilliseconds))
        #expect(tally.mostTemporaryFiles <= 1)
        #expect(fixtures.lines == ["ok"], "other keys after \(kills) kills: \(fixtures)")
    }
}
