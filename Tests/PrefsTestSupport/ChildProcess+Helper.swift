public import Foundation

extension ChildProcess {
    /// `ChildProcess.helperURL` is the `PrefsTestHelper` executable, built next to the test bundle: the child of
    /// the cross-process, crash and launch tests.
    public static let helperURL = builtExecutable(named: "PrefsTestHelper")

    /// `try ChildProcess.start(["watch", spec, "n"])` starts `PrefsTestHelper` with these arguments and returns at
    /// once; the other arguments are the initialiser's.
    public static func start(
        _ arguments: [String], environment: [String: String] = [:], inheritingEnvironment: Bool = true,
        input: Input = .none, timeLimit: Duration = .seconds(600)
    ) throws -> ChildProcess {
        try ChildProcess(
            helperURL, arguments, environment: environment, inheritingEnvironment: inheritingEnvironment,
            input: input, timeLimit: timeLimit)
    }

    /// `try ChildProcess.run(["get-int", spec, "n"])` runs `PrefsTestHelper` with these arguments to completion.
    public static func run(
        _ arguments: [String], environment: [String: String] = [:], inheritingEnvironment: Bool = true,
        timeLimit: Duration = .seconds(600)
    ) throws -> Exit {
        try start(
            arguments, environment: environment, inheritingEnvironment: inheritingEnvironment, timeLimit: timeLimit
        )
        .wait()
    }
}
