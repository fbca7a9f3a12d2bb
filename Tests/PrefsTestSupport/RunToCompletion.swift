public import Foundation

/// `try runToCompletion(url, ["--flag"])` runs `executable` as a child process and waits for it to exit.
///
/// Standard error is merged into the output, so a failure's message is in what the test prints. With `environment`
/// nil the child inherits this process's environment.
public func runToCompletion(
    _ executable: URL, _ arguments: [String] = [], environment: [String: String]? = nil
) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    if let environment { process.environment = environment }
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    try process.run()
    let output = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: output, as: UTF8.self))
}
