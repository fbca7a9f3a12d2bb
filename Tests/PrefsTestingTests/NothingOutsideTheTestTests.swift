import Foundation
import PrefsTestSupport
import TestThreads
import Testing

/// Runs ``IsolationProbe`` (every documented form under `.isolatedPreferences`, in parallel) in a child copy of this
/// test binary, twice, with a read-only `HOME`, empty XDG folders and a private temporary folder, and checks that
/// both runs pass and that nothing appeared in any of those folders.
@Suite(.ownThreads) struct NothingOutsideTheTestTests {
    @Test func isolatedTestsCreateNothingInHomeOrTheXDGFolders() throws {
        let root = try TempDir("prefs-isolation")
        defer {
            try? FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: root.path("home"))
            root.cleanup()
        }
        let folders = ["home", "config", "data", "state", "tmp"]
        try root.createFolders(folders)
        try FileManager.default.setAttributes([.posixPermissions: 0o500], ofItemAtPath: root.path("home"))
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = root.path("home")
        environment["XDG_CONFIG_HOME"] = root.path("config")
        environment["XDG_DATA_HOME"] = root.path("data")
        environment["XDG_STATE_HOME"] = root.path("state")
        environment["TMPDIR"] = root.path("tmp")
        environment["PREFS_ISOLATION_PROBE"] = "1"

        for run in 1...2 {
            let result = try runThisTestBinary(
                ["--testing-library", "swift-testing", "--parallel", "--filter", "IsolationProbe"],
                environment: environment)
            #expect(result.status == 0, "run \(run) failed:\n\(result.output)")
            #expect(
                result.output.contains("with 6 test cases passed") && result.output.contains("run with 2 tests"),
                "run \(run) ran every case of the probe:\n\(result.output)")
            for name in folders {
                let left = FileManager.default.subpaths(atPath: root.path(name)) ?? []
                #expect(left.isEmpty, "run \(run) left \(left) in \(name)")
            }
        }
    }
}

/// Runs the running test binary itself with `arguments`, to completion; standard error is merged into the output.
func runThisTestBinary(_ arguments: [String], environment: [String: String]) throws -> (status: Int32, output: String) {
    let binary = URL(filePath: try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
    let exit = try ChildProcess.run(
        binary, arguments, environment: environment, inheritingEnvironment: false, mergingErrors: true)
    return (exit.status, exit.output)
}
