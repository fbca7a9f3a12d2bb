import Foundation
import Prefs
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
    /// Writes bytes to standard output as they are (a binary property list, a JSON document).
    var writeData: @Sendable (Data) -> Void
    /// Writes text to standard error.
    var writeError: @Sendable (String) -> Void
    /// Reads standard input to its end, or throws a usage failure once it holds more than `limit` bytes (so
    /// `/dev/zero` on standard input ends with an error instead of exhausting memory).
    var readInput: @Sendable (_ limit: Int) throws -> Data
    /// Whether standard input is a terminal (a secret value is then asked for without echo).
    var inputIsTerminal: Bool
    /// Asks for a secret on the controlling terminal without echo; throws a usage failure when there is none.
    var readSecret: @Sendable (_ prompt: String) throws -> String
    /// The process environment, for `--passphrase-env`.
    var environment: [String: String]

    func print(_ line: String) { writeOutput(line + "\n") }
    /// Prints a message on standard error with its control characters escaped (a key or a file name in it may hold
    /// any), keeping its line breaks.
    func printError(_ line: String) { writeError(ValueText.visible(line, keepingLineBreaks: true) + "\n") }

    /// The real standard streams and terminal.
    package static var standard: Console {
        Console(
            writeOutput: { FileHandle.standardOutput.write(Data($0.utf8)) },
            writeData: { FileHandle.standardOutput.write($0) },
            writeError: { FileHandle.standardError.write(Data($0.utf8)) },
            readInput: { limit in try BoundedInput.read(STDIN_FILENO, limit: limit, source: "standard input") },
            inputIsTerminal: isatty(STDIN_FILENO) == 1,
            readSecret: { prompt in try Terminal.readSecret(prompt: prompt) },
            environment: ProcessInfo.processInfo.environment)
    }
}

/// Reading a stream to its end without ever holding more than a limit: standard input, or a file named on the
/// command line, which may be `/dev/zero`, a FIFO or a device.
enum BoundedInput {
    /// The most `prefs import` reads, from a file or standard input: 64 MiB, the largest file the library opens.
    static let importLimit = 64 << 20
    /// The most `prefs secure set` reads from standard input: 1 MiB.
    static let secretLimit = 1 << 20

    /// `limit` as people write it: `64 MiB`, `1 MiB`.
    static func describe(_ limit: Int) -> String {
        limit >= 1 << 20 ? "\(limit >> 20) MiB" : "\(limit) bytes"
    }

    /// Reads `descriptor` to its end; throws a usage failure naming `source` once more than `limit` bytes arrived,
    /// and a not-found failure when reading fails (a directory, an I/O error).
    static func read(_ descriptor: Int32, limit: Int, source: String) throws -> Data {
        var data = Data()
        let chunk = 64 << 10
        var buffer = [UInt8](repeating: 0, count: chunk)
        while true {
            let count = buffer.withUnsafeMutableBytes { bytes in
                #if canImport(Glibc)
                    Glibc.read(descriptor, bytes.baseAddress, chunk)
                #elseif canImport(Darwin)
                    Darwin.read(descriptor, bytes.baseAddress, chunk)
                #endif
            }
            if count < 0 {
                if errno == EINTR { continue }
                let code = errno
                throw Failure.notFound("cannot read \(source): \(String(cString: strerror(code)))")
            }
            if count == 0 { return data }
            guard data.count + count <= limit else {
                throw Failure.usage(
                    "\(source) holds more than \(describe(limit)), the most this command reads; nothing was changed")
            }
            data.append(contentsOf: buffer[..<count])
        }
    }

    /// Reads the file at `path` to its end, as ``read(_:limit:source:)`` does.
    static func read(path: String, limit: Int) throws -> Data {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            let code = errno
            throw Failure.notFound("cannot read \(path): \(String(cString: strerror(code))); check the path")
        }
        defer { close(descriptor) }
        return try read(descriptor, limit: limit, source: path)
    }
}

/// Reading a line from the controlling terminal with echo turned off, restoring the terminal if the process is
/// interrupted, terminated, hung up on or quit while it waits (then the signal is raised again, as
/// `readpassphrase(3)` does, so the process still ends the way the signal says).
enum Terminal {
    /// The signals that end the process while echo is off; each restores the terminal first.
    static let restoredSignals: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]

    // Only touched by the main flow while the terminal is silenced, and by the signal handler that restores it.
    nonisolated(unsafe) private static var silencedDescriptor: Int32 = -1
    /// The settings to put back from a signal handler: in memory allocated once for it, since a signal handler must
    /// not run a lazy global's initialiser (and AddressSanitizer reported a write past a `static var termios`).
    nonisolated(unsafe) private static let originalSettings: UnsafeMutablePointer<termios> = {
        let settings = UnsafeMutablePointer<termios>.allocate(capacity: 1)
        settings.initialize(to: termios())
        return settings
    }()

    /// Restores the terminal, puts back the default action and raises the signal again.
    private static let restoreAndReraise: @convention(c) (Int32) -> Void = { signal in
        if Terminal.silencedDescriptor >= 0 {
            tcsetattr(Terminal.silencedDescriptor, TCSAFLUSH, Terminal.originalSettings)
        }
        var action = Terminal.handlerAction(SIG_DFL)
        sigaction(signal, &action, nil)
        raise(signal)
    }

    /// A `sigaction` whose handler is `handler`: the field is named differently by each C library.
    private static func handlerAction(_ handler: (@convention(c) (Int32) -> Void)?) -> sigaction {
        var action = sigaction()
        #if canImport(Glibc)
            action.__sigaction_handler.sa_handler = handler
        #elseif canImport(Darwin)
            action.__sigaction_u.__sa_handler = handler
        #endif
        return action
    }

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
        originalSettings.pointee = original
        silencedDescriptor = descriptor
        var previous = Array(repeating: sigaction(), count: restoredSignals.count)
        for (index, signal) in restoredSignals.enumerated() {
            var action = handlerAction(restoreAndReraise)
            sigemptyset(&action.sa_mask)
            for other in restoredSignals { sigaddset(&action.sa_mask, other) }
            sigaction(signal, &action, &previous[index])
        }
        tcsetattr(descriptor, TCSAFLUSH, &silent)
        defer {
            tcsetattr(descriptor, TCSAFLUSH, &original)
            silencedDescriptor = -1
            for (index, signal) in restoredSignals.enumerated() { sigaction(signal, &previous[index], nil) }
            _ = "\n".withCString { write(descriptor, $0, 1) }
        }
        _ = prompt.withCString { write(descriptor, $0, strlen($0)) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256)  // grows rarely, so few stale copies of the secret are left in freed memory
        defer { bytes.withUnsafeMutableBytes { wipe($0) } }
        var byte: UInt8 = 0
        while true {
            let count = read(descriptor, &byte, 1)
            if count < 0, errno == EINTR { continue }
            if count <= 0 || byte == UInt8(ascii: "\n") { break }
            bytes.append(byte)
        }
        byte = 0
        if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Overwrites `buffer` with zeros using `explicit_bzero` (glibc) or `memset_s` (Darwin), which the compiler may
    /// not remove.
    static func wipe(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        #if canImport(Glibc)
            explicit_bzero(base, buffer.count)
        #elseif canImport(Darwin)
            _ = memset_s(base, buffer.count, 0, buffer.count)
        #endif
    }

    /// Makes the process not dumpable while it handles secrets: no core file and, on Linux, other processes of the
    /// same user cannot attach a debugger or read its memory through `/proc`. Best effort.
    static func protectSecrets() {
        var none = rlimit(rlim_cur: 0, rlim_max: 0)
        #if canImport(Glibc)
            _ = setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &none)
        #elseif canImport(Darwin)
            _ = setrlimit(RLIMIT_CORE, &none)
        #endif
        Prctl.call(Prctl.setDumpable, 0)
    }

    /// Makes SIGINT and SIGTERM end the process with status 0, for commands that run until interrupted.
    static func exitCleanlyOnInterrupt() {
        signal(SIGINT) { _ in _exit(0) }
        signal(SIGTERM) { _ in _exit(0) }
    }
}

/// `prctl(2)`, which Swift cannot import because it is variadic: looked up once and called with its arguments
/// spelled out as unsigned longs, which is how the kernel reads them.
package enum Prctl {
    private typealias Function = @convention(c) (Int32, UInt, UInt, UInt, UInt) -> Int32

    /// `PR_GET_DUMPABLE` and `PR_SET_DUMPABLE` from `<linux/prctl.h>`, which Glibc does not export to Swift.
    package static let getDumpable: Int32 = 3
    package static let setDumpable: Int32 = 4

    private static let function: Function? = {
        #if os(Linux)
            // RTLD_DEFAULT, which is 0 in glibc.
            guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "prctl") else { return nil }
            return unsafeBitCast(symbol, to: Function.self)
        #else
            return nil
        #endif
    }()

    /// `prctl(option, argument)`; -1 when prctl is unavailable (it exists on Linux only).
    @discardableResult
    package static func call(_ option: Int32, _ argument: UInt) -> Int32 {
        function?(option, argument, 0, 0, 0) ?? -1
    }
}

/// How `prefs` prints what the library reports instead of throwing (a damaged system-wide file, say): one
/// `prefs: warning:` line per cause, however often it recurs, naming the file rather than an empty key.
package enum Warnings {
    private final class Seen: Sendable {
        let texts = Mutex<Set<String>>([])
    }

    /// `Warnings.install(console: .standard)` makes the library's reports go to `console`'s standard error. Only the
    /// real tool calls it: the handler is global to the process.
    package static func install(console: Console) {
        PrefsConfig.errorHandler = handler(console: console)
    }

    /// A report handler that prints each distinct warning once on `console`.
    static func handler(console: Console) -> @Sendable (PrefsReport) -> Void {
        let seen = Seen()
        return { report in
            let text = line(for: report)
            guard seen.texts.withLock({ $0.insert(text).inserted }) else { return }
            console.printError(text)
        }
    }

    /// `prefs: warning: …`: the report's error, with the operation and key only when a key was involved.
    static func line(for report: PrefsReport) -> String {
        let library = String(describing: report.error)
        let error = Failure.userText(of: report.error) ?? library
        return "prefs: warning: "
            + (report.key.isEmpty ? error : report.description.replacingOccurrences(of: library, with: error))
    }
}
