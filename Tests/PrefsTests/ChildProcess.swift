import Foundation
import PrefsTestSupport
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Runs the `PrefsTestHelper` executable as a real child process.
struct ChildProcess {
    /// The helper binary, built next to the test bundle.
    static let helperURL = builtExecutable(named: "PrefsTestHelper")

    struct Result {
        let status: Int32
        let output: String
        let error: String
        var lines: [String] { output.split(separator: "\n").map(String.init) }
    }

    /// Runs the helper to completion, with `environment` added to this process's environment.
    static func run(_ arguments: [String], environment: [String: String] = [:]) throws -> Result {
        try run(arguments, replacingEnvironment: ProcessInfo.processInfo.environment.merging(environment) { $1 })
    }

    /// Runs the helper to completion with exactly `environment`.
    static func run(_ arguments: [String], replacingEnvironment environment: [String: String]) throws -> Result {
        let child = try start(arguments, replacingEnvironment: environment)
        let output = child.output.fileHandleForReading.readDataToEndOfFile()
        let error = child.errors.fileHandleForReading.readDataToEndOfFile()
        child.process.waitUntilExit()
        return Result(
            status: child.process.terminationStatus, output: String(decoding: output, as: UTF8.self),
            error: String(decoding: error, as: UTF8.self))
    }

    let process: Process
    let output: Pipe
    let errors: Pipe

    /// Starts the helper and returns at once; read its output with `lines()`.
    static func start(_ arguments: [String], environment: [String: String] = [:]) throws -> ChildProcess {
        try start(arguments, replacingEnvironment: ProcessInfo.processInfo.environment.merging(environment) { $1 })
    }

    static func start(_ arguments: [String], replacingEnvironment environment: [String: String]) throws -> ChildProcess
    {
        let process = Process()
        process.executableURL = helperURL
        process.arguments = arguments
        process.environment = environment
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        return ChildProcess(process: process, output: output, errors: errors)
    }

    /// The child's standard output, line by line, until it closes.
    func lines() -> AsyncStream<String> {
        let (stream, continuation) = AsyncStream.makeStream(of: String.self)
        let handle = output.fileHandleForReading
        let thread = Thread {
            var buffer = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                buffer.append(chunk)
                while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    continuation.yield(String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self))
                    buffer = Data(buffer[(newline + 1)...])
                }
            }
            continuation.finish()
        }
        thread.start()
        return stream
    }

    func kill() {
        _ = Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}
