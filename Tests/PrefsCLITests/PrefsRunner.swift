import Foundation
import PrefsTestSupport
import Synchronization

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
        let input = try FileHandle(forReadingFrom: URL(filePath: path))
        defer { try? input.close() }
        return try PrefsProcess.run(arguments, input: input, environment: environment)
    }
}

/// What a finished `prefs` process left: its exit status, standard output and standard error.
struct PrefsResult: CustomStringConvertible {
    let status: Int32
    let output: String
    let error: String

    var description: String { "status \(status)\nstdout: \(output)\nstderr: \(error)" }

    /// Exactly one line of standard error and nothing on standard output: how every failure reports.
    var isOneLineFailure: Bool {
        status != 0 && output.isEmpty && error.hasPrefix("prefs") && error.hasSuffix("\n")
            && error.dropLast().split(separator: "\n", omittingEmptySubsequences: false).count == 1
    }
}

/// The real `prefs` binary run as a child process.
struct PrefsProcess {
    /// The `prefs` binary, built next to the test bundle (the test target depends on it).
    static let binary = builtExecutable(named: "prefs")

    let process: Process
    let output: Pipe
    let errors: Pipe

    static func start(
        _ arguments: [String], stdin: String? = nil, input file: FileHandle? = nil, environment: [String: String]
    ) throws -> PrefsProcess {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        let input = Pipe()
        process.standardInput = file ?? (stdin == nil ? FileHandle.nullDevice : input)
        try process.run()
        if let stdin {
            input.fileHandleForWriting.write(Data(stdin.utf8))
            try input.fileHandleForWriting.close()
        }
        return PrefsProcess(process: process, output: output, errors: errors)
    }

    static func run(
        _ arguments: [String], stdin: String? = nil, input: FileHandle? = nil, environment: [String: String]
    ) throws -> PrefsResult {
        let child = try start(arguments, stdin: stdin, input: input, environment: environment)
        // Read standard error on another thread so that neither pipe can fill up and block the child.
        let errorData = ErrorCollector(child.errors.fileHandleForReading)
        let output = child.output.fileHandleForReading.readDataToEndOfFile()
        child.process.waitUntilExit()
        return PrefsResult(
            status: child.process.terminationStatus, output: String(decoding: output, as: UTF8.self),
            error: String(decoding: errorData.wait(), as: UTF8.self))
    }

    /// Standard output and standard error, line by line as `(isError, line)`, until the child closes both.
    func lines() -> AsyncStream<(isError: Bool, line: String)> {
        let (stream, continuation) = AsyncStream.makeStream(of: (isError: Bool, line: String).self)
        let open = Mutex(2)
        for (isError, pipe) in [(false, output), (true, errors)] {
            let handle = pipe.fileHandleForReading
            Thread {
                var buffer = Data()
                while true {
                    let chunk = handle.availableData
                    if chunk.isEmpty { break }
                    buffer.append(chunk)
                    while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                        let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                        continuation.yield((isError, line))
                        buffer = Data(buffer[(newline + 1)...])
                    }
                }
                if open.withLock({ count in
                    count -= 1
                    return count == 0
                }) {
                    continuation.finish()
                }
            }.start()
        }
        return stream
    }

    func signal(_ number: Int32) { _ = kill(process.processIdentifier, number) }
}

/// Reads a pipe to its end on a thread of its own.
private final class ErrorCollector: @unchecked Sendable {
    private var data = Data()
    private let done = DispatchSemaphore(value: 0)

    init(_ handle: FileHandle) {
        Thread { [self] in
            data = handle.readDataToEndOfFile()
            done.signal()
        }.start()
    }

    func wait() -> Data {
        done.wait()
        return data
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
