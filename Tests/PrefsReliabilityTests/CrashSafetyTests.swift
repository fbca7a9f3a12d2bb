import Foundation
import PrefsTestSupport
import TestThreads
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A child process writes 1, 2, 3, … and is killed with SIGKILL at a random moment, over and over. After every
/// kill a fresh process must open the store and find the last acknowledged value or the one being written.
@Suite(.enabled(if: Reliability.enabled), .ownThreads)
struct CrashSafetyTests {
    struct Tally: CustomStringConvertible {
        var kills = 0
        var acknowledged = 0
        var corrupt = 0
        var lost = 0
        var impossible = 0
        var inFlightLanded = 0
        var mostTemporaryFiles = 0
        var description: String {
            "kills=\(kills) acknowledged=\(acknowledged) corrupt=\(corrupt) lost=\(lost) impossible=\(impossible) "
                + "in-flight-landed=\(inFlightLanded) max-leftover-tmp=\(mostTemporaryFiles)"
        }
    }

    @Test(arguments: ["SuiteFileStore", "FileStore", "EncryptedFileStore"])
    func killedWritersLoseNothing(store name: String) async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let spec = try #require(directory.specs.first { $0.name == name }).spec
        let kills = Reliability.scaled(200)
        let seed = Reliability.seed &+ UInt64(name.utf8.count)
        let setup = try ChildProcess.run(["write-fixtures", spec], timeLimit: Reliability.timeLimit)
        try #require(setup.succeeded, "\(setup.description)")

        let tally = try await onThread { () throws -> Tally in
            var random = SplitMix64(seed: seed)
            var tally = Tally()
            var lastAcknowledged: Int?
            for round in 0..<kills {
                let child = try ChildProcess.start(["count-on", spec, "n"], timeLimit: Reliability.timeLimit)
                // The new child's first line is what a fresh process reads after the previous kill.
                guard let first = child.readLine(), first.hasPrefix("start "), let start = Int(first.dropFirst(6))
                else {
                    child.kill()
                    let exit = child.wait()
                    Issue.record("round \(round): the store did not open after a kill: \(exit.description)")
                    tally.corrupt += 1
                    return tally
                }
                if let last = lastAcknowledged {
                    if start < last { tally.lost += last - start }
                    if start > last + 1 { tally.impossible += 1 }
                    if start == last + 1 { tally.inFlightLanded += 1 }
                }
                var last = start
                // Fault injection: kill after a random number of acknowledged writes plus a random instant, or
                // at a random instant after start (which may fall before the first write completes).
                if random.next() % 2 == 0 {
                    let target = Int.random(in: 0...24, using: &random)
                    var seen = 0
                    while seen < target, let line = child.readLine(), let value = Int(line) {
                        last = value
                        seen += 1
                    }
                    usleep(UInt32.random(in: 0...3_000, using: &random))
                } else {
                    usleep(UInt32.random(in: 0...40_000, using: &random))
                }
                child.kill()
                for line in child.remainingLines() { last = Int(line) ?? last }
                let exit = child.wait()
                if exit.signal == nil {
                    Issue.record("round \(round): the writer ended before the kill: \(exit.description)")
                }
                tally.kills += 1
                tally.acknowledged += last - start
                lastAcknowledged = last
                tally.mostTemporaryFiles = max(tally.mostTemporaryFiles, directory.temporaryFiles().count)
            }
            // The final state, read by a fresh process.
            let final = try ChildProcess.run(["get-int", spec, "n"], timeLimit: Reliability.timeLimit)
            if let value = final.lines.first.flatMap({ Int($0) }), let last = lastAcknowledged {
                if value < last { tally.lost += last - value }
                if value > last + 1 { tally.impossible += 1 }
            } else {
                tally.corrupt += 1
            }
            return tally
        }
        let fixtures = try ChildProcess.run(["verify-fixtures", spec], timeLimit: Reliability.timeLimit)
        Reliability.report("crash \(name) seed=\(seed) \(tally)")
        #expect(tally.kills == kills)
        #expect(tally.corrupt == 0)
        #expect(tally.lost == 0)
        #expect(tally.impossible == 0)
        // A kill mid-write can leave one temporary file; the next writer's first write sweeps it.
        #expect(tally.mostTemporaryFiles <= 1)
        #expect(fixtures.lines == ["ok"], "other keys after \(kills) kills: \(fixtures)")
    }
}
