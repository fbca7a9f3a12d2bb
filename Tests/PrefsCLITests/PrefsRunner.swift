import Foundation
import PrefsTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A temporary home for one test: its own preferences, data and state folders, given to `prefs` through
/// `XDG_CONFIG_HOME`, `XDG_DATA_HOME` and `XDG_STATE_HOME` (where vaults keep their rollback records).
struct Sandbox {
    let folder: TempDir
    var root: URL { folder.url }
    var config: URL { root.appending(path: "config") }
    var data: URL { root.appending(path: "data") }
    var state: URL { root.appending(path: "state") }

    init() throws { folder = try TempDir("prefs-cli") }

    func cleanup() { folder.cleanup() }

    func file(_ name: String) -> URL { folder.file(name) }
    func plist(_ domain: String) -> URL { config.appending(path: domain + ".plist") }
    func path(_ name: String) -> String { file(name).path(percentEncoded: false) }

    var environment: [String: String] {
        [
            "XDG_CONFIG_HOME": config.path(percentEncoded: false), "XDG_DATA_HOME": data.path(percentEncoded: false),
            "XDG_STATE_HOME": state.path(percentEncoded: false),
        ]
    }

    /// Runs `prefs` to completion with this sandbox's folders.
    @discardableResult
    func prefs(_ arguments: String..., stdin: String? = nil, environment extra: [String: String] = [:]) throws
        -> PrefsResult
    {
        try PrefsProcess.run(arguments, stdin: stdin, environment: environment.merging(extra) { $1 })
    }

    @discardableResult
    func prefs(_ arguments: [String], stdin: String? = nil, environment extra: [String: String] = [:]) throws
        -> PrefsResult
    {
        try PrefsProcess.run(arguments, stdin: stdin, environment: environment.merging(extra) { $1 })
    }

    /// Runs `prefs` with standard input read from the file at `path` (raw bytes, `/dev/zero`, …).
    @discardableResult
    func prefs(_ arguments: [String], stdinFrom path: String) throws -> PrefsResult {
        try PrefsProcess.run(arguments, inputPath: path, environment: environment)
    }
}

/// What a finished `prefs` process left: its exit status, standard output and standard error.
struct PrefsResult: CustomStringConvertible {
    let status: Int32
    let output: String
    let error: String

    init(_ exit: ChildProcess.Exit) {
        (status, output, error) = (exit.status, exit.output, exit.error)
    }

    var description: String { "status \(status)\nstdout: \(output)\nstderr: \(error)" }

    /// Records an issue that shows the status and both outputs unless `prefs` exited with 0.
    func expectSuccess(sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(status == 0, "\(self)", sourceLocation: sourceLocation)
    }

    /// Exactly one line of standard error and nothing on standard output: how every failure reports.
    var isOneLineFailure: Bool {
        status != 0 && output.isEmpty && error.hasPrefix("prefs") && error.hasSuffix("\n")
            && error.dropLast().split(separator: "\n", omittingEmptySubsequences: false).count == 1
    }
}

/// The real `prefs` binary run as a child process.
enum PrefsProcess {
    /// The `prefs` binary, built next to the test bundle (the test target depends on it).
    static let binary = builtExecutable(named: "prefs")

    /// Starts `prefs` with `environment` added to this process's; standard input is `stdin`, the file at
    /// `inputPath`, or nothing.
    static func start(
        _ arguments: [String], stdin: String? = nil, inputPath: String? = nil, environment: [String: String]
    ) throws -> ChildProcess {
        let input = inputPath.map { ChildProcess.Input.file($0) } ?? stdin.map { .text($0) } ?? .none
        return try ChildProcess(binary, arguments, environment: environment, input: input)
    }

    static func run(
        _ arguments: [String], stdin: String? = nil, inputPath: String? = nil, environment: [String: String]
    ) throws -> PrefsResult {
        PrefsResult(try start(arguments, stdin: stdin, inputPath: inputPath, environment: environment).wait())
    }
}

struct TimedOut: Error {}

/// Runs `body`, failing after `seconds`: a guard against hanging, never a synchronisation.
func withTimeout<T: Sendable>(_ seconds: Double = 30, _ body: @escaping @Sendable () async throws -> T) async throws
    -> T
{
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            return nil
        }
        defer { group.cancelAll() }
        guard let result = try await group.next(), let value = result else { throw TimedOut() }
        return value
    }
}

/// Whether this process has a controlling terminal (then `prefs` children could prompt on it).
let hasControllingTerminal: Bool = {
    let descriptor = open("/dev/tty", O_RDWR | O_NOCTTY)
    if descriptor >= 0 { close(descriptor) }
    return descriptor >= 0
}()
