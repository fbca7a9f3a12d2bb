import PrefsTestSupport
import Testing

/// Runs the helper as a child that must finish within `seconds`; a child still running then is killed and the test
/// fails, so a hang is a failure and not a stuck suite.
func runChild(_ arguments: [String], within seconds: Int = 20) throws -> ChildProcess.Exit {
    let exit = try ChildProcess.run(arguments, timeLimit: .seconds(seconds))
    if exit.timedOut { Issue.record("\(arguments) still running after \(seconds) s: killed") }
    return exit
}
