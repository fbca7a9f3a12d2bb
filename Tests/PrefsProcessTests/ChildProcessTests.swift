import Foundation
import PrefsTestSupport
import TestThreads
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The launcher every process test uses (PrefsTestSupport): what it captures, what it feeds, and that a child
/// which hangs is killed at its time limit instead of stopping the suite.
@Suite(.ownThreads) struct ChildProcessTests {
    private static let shell = URL(filePath: "/bin/sh")

    @Test func capturesStandardOutputAndStandardErrorApartWithTheExitStatus() throws {
        let exit = try ChildProcess.run(Self.shell, ["-c", "echo out; echo err >&2; printf last; exit 3"])
        #expect(exit.status == 3 && exit.signal == nil && !exit.timedOut && !exit.succeeded)
        #expect(exit.output == "out\nlast" && exit.lines == ["out", "last"])
        #expect(exit.error == "err\n")
    }

    @Test func feedsStandardInputAndSetsTheEnvironment() throws {
        let echoed = try ChildProcess.run(URL(filePath: "/bin/cat"), input: .text("a\nb\n"))
        #expect(echoed.succeeded && echoed.lines == ["a", "b"])
        let environment = try ChildProcess.run(
            URL(filePath: "/usr/bin/env"), environment: ["ONLY": "this"], inheritingEnvironment: false)
        #expect(environment.output == "ONLY=this\n")
    }

    @Test func readsLinesWhileTheChildRunsAndReportsTheSignalThatEndedIt() throws {
        let child = try ChildProcess(
            Self.shell, ["-c", "echo ready; read line; echo \"got $line\"; exec sleep 60"], input: .pipe)
        #expect(child.readLine() == "ready")
        child.write("go\n")
        #expect(child.readLine() == "got go")
        child.kill()
        let exit = child.wait()
        #expect(exit.signal == SIGKILL && !exit.timedOut)
    }

    @Test func aChildStillRunningAtItsTimeLimitIsKilled() throws {
        // Killed, not ended by itself: `sleep` that ran its 60 s would exit with status 0.
        let exit = try ChildProcess.run(URL(filePath: "/bin/sleep"), ["60"], timeLimit: .milliseconds(200))
        #expect(exit.timedOut && exit.signal == SIGKILL)
    }
}
