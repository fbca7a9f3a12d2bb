import Foundation
import PrefsTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Sizes and switches of the reliability suite, from the environment.
enum Reliability {
    static let environment = ProcessInfo.processInfo.environment
    /// `PREFS_SOAK=1` runs every loop ten times longer.
    static let soak = environment["PREFS_SOAK"] == "1"
    /// The suite runs only when asked for (`make reliability`, `make soak`), so `make test` stays quick.
    static let enabled = soak || environment["PREFS_RELIABILITY"] == "1"
    static func scaled(_ count: Int) -> Int { soak ? count * 10 : count }

    /// The seed of this run's random choices: `PREFS_SEED`, or a fresh one that the summaries print.
    static let seed: UInt64 = environment["PREFS_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...999_999)

    /// Prints one figure line; `make reliability` collects these into the summary.
    static func report(_ line: String) {
        print("RELIABILITY \(line)")
    }
}

/// The shared temporary folder of the test targets (PrefsTestSupport).
typealias TempDir = PrefsTestSupport.TempDir

extension TempDir {
    /// The specs of one store of each file-backed kind inside this folder.
    var specs: [(name: String, spec: String, file: String)] {
        [
            ("UserDefaultsStore", "plist:\(path):suite", path("suite.plist")),
            ("FileStore", "json:\(path("store.json"))", path("store.json")),
            ("EncryptedFileStore", "vault:\(path("secrets.vault")):\(path("secrets.key"))", path("secrets.vault")),
        ]
    }

    /// Names of leftover temporary files of the atomic writes.
    func temporaryFiles() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).filter { $0.contains(".tmp-") }
    }
}

/// Runs blocking work (child processes, pipes) on its own thread so the test runner's pool stays free.
func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread {
            continuation.resume(with: Result { try body() })
        }
        thread.stackSize = 8 << 20
        thread.start()
    }
}

/// The `PrefsTestHelper` executable run as a child process, read line by line.
final class Child {
    static let helperPath: String = {
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? ""
        var directory = URL(filePath: exe).deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: directory.appending(path: "PrefsTestHelper").path),
            directory.path != "/"
        {
            directory = directory.deletingLastPathComponent()
        }
        return directory.appending(path: "PrefsTestHelper").path(percentEncoded: false)
    }()

    struct Exit {
        let status: Int32
        let signalled: Bool
        let errors: String
        var succeeded: Bool { !signalled && status == 0 }
        var description: String { signalled ? "killed by signal \(status): \(errors)" : "exit \(status): \(errors)" }
    }

    let process = Process()
    private let output = Pipe()
    private let errors = Pipe()
    private var buffer: [UInt8] = []

    init(_ arguments: [String]) throws {
        process.executableURL = URL(filePath: Self.helperPath)
        process.arguments = arguments
        process.standardOutput = output
        process.standardError = errors
        try process.run()
    }

    /// The next line of standard output, or nil at its end. Blocks.
    func readLine() -> String? {
        let fd = output.fileHandleForReading.fileDescriptor
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, 4096) }
            if count < 0, errno == EINTR { continue }
            if count <= 0 { return nil }
            buffer += chunk[..<count]
        }
    }

    /// Every remaining line of standard output. Blocks until the child closes it.
    func remainingLines() -> [String] {
        var lines: [String] = []
        while let line = readLine() { lines.append(line) }
        return lines
    }

    func kill() { _ = Glibc.kill(process.processIdentifier, SIGKILL) }

    /// Waits for the child to end; reads standard error after standard output has closed.
    func wait() -> Exit {
        _ = remainingLines()
        let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return Exit(
            status: process.terminationStatus, signalled: process.terminationReason == .uncaughtSignal,
            errors: text.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Runs the helper to completion, returning its output lines and how it ended.
    static func run(_ arguments: [String]) throws -> (lines: [String], exit: Exit) {
        let child = try Child(arguments)
        let lines = child.remainingLines()
        return (lines, child.wait())
    }
}
