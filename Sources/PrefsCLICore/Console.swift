import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where a command reads and writes: the real terminal and streams, or buffers in unit tests.
package struct Console: Sendable {
    /// Writes text to standard output, unbuffered, so a pipe sees each line as soon as it is printed.
    var writeOutput: @Sendable (String) -> Void
    /// Writes text to standard error.
    var writeError: @Sendable (String) -> Void
    /// Reads standard input to its end.
    var readInput: @Sendable () -> Data
    /// Whether standard input is a terminal (a secret value is then asked for without echo).
    var inputIsTerminal: Bool
    /// Asks for a secret on the controlling terminal without echo; throws a usage failure when there is none.
    var readSecret: @Sendable (_ prompt: String) throws -> String
    /// The process environment, for `--passphrase-env`.
    var environment: [String: String]

    func print(_ line: String) { writeOutput(line + "\n") }
    func printError(_ line: String) { writeError(line + "\n") }

    /// The real standard streams and terminal.
    package static var standard: Console {
        Console(
            writeOutput: { FileHandle.standardOutput.write(Data($0.utf8)) },
            writeError: { FileHandle.standardError.write(Data($0.utf8)) },
            readInput: { FileHandle.standardInput.readDataToEndOfFile() },
            inputIsTerminal: isatty(STDIN_FILENO) == 1,
            readSecret: { prompt in try Terminal.readSecret(prompt: prompt) },
            environment: ProcessInfo.processInfo.environment)
    }
}

/// Reading a line from the controlling terminal with echo turned off, restoring the terminal even on Ctrl-C.
enum Terminal {
    // Only touched by the main flow while the terminal is silenced, and by the signal handler that restores it.
    nonisolated(unsafe) private static var silencedDescriptor: Int32 = -1
    nonisolated(unsafe) private static var originalSettings = termios()

    static func readSecret(prompt: String) throws -> String {
        let descriptor = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY)
        guard descriptor >= 0 else {
            throw Failure.usage(
                "no terminal to ask for it on; use --key-file PATH or --passphrase-env NAME (and pipe a secret value on stdin)"
            )
        }
        defer { close(descriptor) }
        var original = termios()
        guard tcgetattr(descriptor, &original) == 0 else {
            throw Failure.usage("cannot turn off echo on the terminal; use --key-file PATH or --passphrase-env NAME")
        }
        var silent = original
        silent.c_lflag &= ~tcflag_t(ECHO)
        originalSettings = original
        silencedDescriptor = descriptor
        let previousInterrupt = signal(SIGINT) { _ in
            if Terminal.silencedDescriptor >= 0 {
                tcsetattr(Terminal.silencedDescriptor, TCSANOW, &Terminal.originalSettings)
            }
            _exit(130)
        }
        tcsetattr(descriptor, TCSAFLUSH, &silent)
        defer {
            tcsetattr(descriptor, TCSAFLUSH, &original)
            silencedDescriptor = -1
            signal(SIGINT, previousInterrupt)
            _ = "\n".withCString { write(descriptor, $0, 1) }
        }
        _ = prompt.withCString { write(descriptor, $0, strlen($0)) }
        var bytes: [UInt8] = []
        defer { for index in bytes.indices { bytes[index] = 0 } }
        var byte: UInt8 = 0
        while true {
            let count = read(descriptor, &byte, 1)
            if count < 0, errno == EINTR { continue }
            if count <= 0 || byte == UInt8(ascii: "\n") { break }
            bytes.append(byte)
        }
        if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Makes SIGINT and SIGTERM end the process with status 0, for commands that run until interrupted.
    static func exitCleanlyOnInterrupt() {
        signal(SIGINT) { _ in _exit(0) }
        signal(SIGTERM) { _ in _exit(0) }
    }
}
