public import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `let child = try ChildProcess(url, ["--flag"])` runs an executable as a child process of the test;
/// `try ChildProcess.run(url, ["--flag"])` runs one to completion.
///
/// Standard output and standard error are read as they arrive, so neither pipe can fill up and block the child, and
/// kept whole for ``wait()``; ``readLine()`` and ``lines()`` hand out standard output line by line meanwhile. A child
/// still running at its time limit is killed with `SIGKILL` and its ``Exit/timedOut`` is true: no wait lasts
/// forever, so a hang fails a test instead of stopping the suite.
public final class ChildProcess: @unchecked Sendable {
    /// What the child reads on standard input.
    public enum Input: Sendable {
        /// Nothing: `/dev/null`.
        case none
        /// This text, then the end of its input.
        case text(String)
        /// The file at this path.
        case file(String)
        /// A pipe left open: ``write(_:)`` to it, ``closeInput()`` to end it.
        case pipe
    }

    /// `let exit = child.wait()`: how the child ended and everything it printed.
    public struct Exit: Sendable, CustomStringConvertible {
        /// The exit status; when a signal ended the child, that signal's number (``signal`` says which it was).
        public let status: Int32
        /// The signal that ended the child; nil when it exited.
        public let signal: Int32?
        /// Whether the child was killed because it was still running at its time limit.
        public let timedOut: Bool
        /// Everything the child wrote to standard output (and standard error, when they were merged).
        public let output: String
        /// Everything the child wrote to standard error.
        public let error: String

        /// `exit.lines`: standard output split into lines.
        public var lines: [String] { output.split(separator: "\n").map(String.init) }
        /// `exit.succeeded`: the child exited with status 0.
        public var succeeded: Bool { signal == nil && status == 0 }

        public var description: String {
            let ending = signal.map { "killed by signal \($0)" } ?? "exit \(status)"
            return ending + (timedOut ? " at the time limit" : "") + "\nstdout: \(output)\nstderr: \(error)"
        }
    }

    /// `try ChildProcess.run(url, ["--flag"])` runs `executable` to completion; the arguments are the initialiser's.
    public static func run(
        _ executable: URL, _ arguments: [String] = [], environment: [String: String] = [:],
        inheritingEnvironment: Bool = true, input: Input = .none, mergingErrors: Bool = false,
        timeLimit: Duration = .seconds(600)
    ) throws -> Exit {
        try ChildProcess(
            executable, arguments, environment: environment, inheritingEnvironment: inheritingEnvironment,
            input: input, mergingErrors: mergingErrors, timeLimit: timeLimit
        ).wait()
    }

    /// One line the child printed, in the order the lines arrived.
    private struct Line {
        let isError: Bool
        let text: String
    }

    private let process = Process()
    private let input: Pipe?
    private let deadline: Date
    /// Guards everything below and is signalled whenever any of it changes.
    private let state = NSCondition()
    private var received: [Line] = []
    private var printed: [Bool: Data] = [false: Data(), true: Data()]
    private var openPipes = 0
    private var exited = false
    /// Whether ``releaseFoundationsHold()`` has run.
    private var released = false
    private var killedAtDeadline = false
    private var nextLine = 0

    /// `try ChildProcess(url, ["--flag"], environment: ["KEY": "value"])` starts `executable` and returns at once.
    ///
    /// `environment` is added to this process's environment, or is the whole of it with `inheritingEnvironment`
    /// false. `mergingErrors` sends standard error into standard output. After `timeLimit` the child is killed.
    public init(
        _ executable: URL, _ arguments: [String] = [], environment: [String: String] = [:],
        inheritingEnvironment: Bool = true, input: Input = .none, mergingErrors: Bool = false,
        timeLimit: Duration = .seconds(600)
    ) throws {
        process.executableURL = executable
        process.arguments = arguments
        process.environment =
            inheritingEnvironment ? ProcessInfo.processInfo.environment.merging(environment) { $1 } : environment
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = mergingErrors ? output : errors
        var file: FileHandle?
        switch input {
        case .none:
            self.input = nil
            process.standardInput = FileHandle.nullDevice
        case .file(let path):
            self.input = nil
            file = try FileHandle(forReadingFrom: URL(filePath: path))
            process.standardInput = file
        case .text, .pipe:
            self.input = Pipe()
            process.standardInput = self.input
        }
        let seconds = Double(timeLimit.components.seconds) + Double(timeLimit.components.attoseconds) / 1e18
        deadline = Date.now + seconds
        process.terminationHandler = { [weak self] _ in
            guard let self else { return }
            changing {
                exited = true
                releaseFoundationsHold()
            }
        }
        // Counted before any reader starts: a reader that meets the end of a quick child's output at once must
        // find its pipe counted (setting the count after starting one lost that end, and wait() then waited for
        // the time limit).
        openPipes = mergingErrors ? 1 : 2
        try process.run()
        try? file?.close()
        read(output, isError: false)
        if !mergingErrors { read(errors, isError: true) }
        // Weakly: while the child runs with its output open, the threads reading it keep this object alive.
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [weak self] in self?.expire() }
        if case .text(let text) = input {
            write(text)
            closeInput()
        }
    }

    /// `child.write("go\n")` writes to the child's standard input (``Input/pipe``).
    public func write(_ text: String) {
        input?.fileHandleForWriting.write(Data(text.utf8))
    }

    /// `child.closeInput()` ends the child's standard input.
    public func closeInput() {
        try? input?.fileHandleForWriting.close()
    }

    /// `child.readLine()` is the next line of standard output, waiting for it; nil once the output has ended.
    public func readLine() -> String? {
        while let line = line(at: changing { nextLine }) {
            changing { nextLine += 1 }
            if !line.isError { return line.text }
        }
        return nil
    }

    /// `child.remainingLines()` is every line of standard output ``readLine()`` has not returned yet, waiting for
    /// the output to end.
    public func remainingLines() -> [String] {
        var lines: [String] = []
        while let line = readLine() { lines.append(line) }
        return lines
    }

    /// `for await line in child.lines()`: standard output line by line, from its first line until it ends.
    public func lines() -> AsyncStream<String> {
        stream { $0.isError ? nil : $0.text }
    }

    /// `for await (isError, line) in child.linesWithErrors()`: standard output and standard error line by line,
    /// as they arrive, until both end.
    public func linesWithErrors() -> AsyncStream<(isError: Bool, line: String)> {
        stream { ($0.isError, $0.text) }
    }

    /// `child.outputLines`: the lines of standard output received so far, without waiting for more and without
    /// taking them from ``readLine()``.
    public var outputLines: [String] {
        state.lock()
        defer { state.unlock() }
        return received.compactMap { $0.isError ? nil : $0.text }
    }

    /// `child.isRunning`: the child has not ended yet.
    public var isRunning: Bool { changing { !hasEnded } }

    /// `child.processID`: the child's process id.
    public var processID: Int32 { process.processIdentifier }

    /// `child.signal(SIGTERM)` sends a signal to the child while it runs.
    public func signal(_ number: Int32) {
        // Under the lock, so that the process identifier cannot have been reused by the time the signal is sent.
        changing {
            if !hasEnded { _ = sendSignal(number, to: process.processIdentifier) }
        }
    }

    /// `child.kill()` ends the child with `SIGKILL` and returns once it has ended; ``wait()`` reports the signal.
    public func kill() {
        signal(SIGKILL)
        state.lock()
        defer { state.unlock() }
        while !hasEnded, waitABit() {}
        releaseFoundationsHold()
    }

    /// `let exit = child.wait()` waits until the child has ended and closed its output (at the latest a few
    /// seconds after its time limit), then says how it ended and what it printed.
    public func wait() -> Exit {
        state.lock()
        defer { state.unlock() }
        while !(hasEnded && openPipes == 0), waitABit() {}
        releaseFoundationsHold()
        let ended = hasEnded
        let status = ended ? process.terminationStatus : -1
        return Exit(
            status: status, signal: ended && process.terminationReason == .uncaughtSignal ? status : nil,
            timedOut: killedAtDeadline, output: String(decoding: printed[false] ?? Data(), as: UTF8.self),
            error: String(decoding: printed[true] ?? Data(), as: UTF8.self))
    }

    /// Whether the child has ended; call holding `state`. Foundation's `isRunning` too, not only the termination
    /// handler: the handler can be held up behind busy Dispatch worker threads (tests blocked in `wait()` on all of
    /// them, under ThreadSanitizer), while `isRunning` is set by Foundation's own thread that reaps the child.
    private var hasEnded: Bool { exited || !process.isRunning }

    /// Breaks the cycle Foundation's `Process.run()` leaves between the process and its run loop source (each
    /// retains the other); only `waitUntilExit()` breaks it, and it returns at once for an ended child. Call holding
    /// `state`, so it runs once.
    private func releaseFoundationsHold() {
        guard !released, !process.isRunning else { return }
        released = true
        process.waitUntilExit()
    }

    /// Waits on `state` (held) for a change, at most 50 ms; false once the time limit and a few seconds more
    /// have passed.
    private func waitABit() -> Bool {
        let end = deadline + 5
        guard Date.now < end else { return false }
        _ = state.wait(until: min(end, Date.now + 0.05))
        return true
    }

    /// Kills the child if it is still running at its time limit.
    private func expire() {
        let running = changing {
            killedAtDeadline = !hasEnded
            return killedAtDeadline
        }
        if running { signal(SIGKILL) }
    }

    /// Runs `body` under the lock, then wakes every waiter.
    private func changing<T>(_ body: () -> T) -> T {
        state.lock()
        defer {
            state.broadcast()
            state.unlock()
        }
        return body()
    }

    /// The line at `index` in the order of arrival, waiting for it; nil once both pipes have ended (or a few
    /// seconds after the time limit).
    private func line(at index: Int) -> Line? {
        state.lock()
        defer { state.unlock() }
        while index >= received.count, openPipes > 0, state.wait(until: deadline + 5) {}
        return index < received.count ? received[index] : nil
    }

    /// Reads `pipe` to its end on a thread of its own, keeping the bytes and splitting them into lines.
    private func read(_ pipe: Pipe, isError: Bool) {
        let handle = pipe.fileHandleForReading
        Thread { [self] in
            var partial = Data()
            while true {
                let chunk = handle.availableData
                partial.append(chunk)
                var lines: [Line] = []
                while let newline = partial.firstIndex(of: UInt8(ascii: "\n")) {
                    lines.append(Line(isError: isError, text: String(decoding: partial[..<newline], as: UTF8.self)))
                    partial = Data(partial[(newline + 1)...])
                }
                if chunk.isEmpty, !partial.isEmpty {
                    lines.append(Line(isError: isError, text: String(decoding: partial, as: UTF8.self)))
                }
                changing {
                    printed[isError, default: Data()].append(chunk)
                    received += lines
                    if chunk.isEmpty { openPipes -= 1 }
                }
                if chunk.isEmpty { break }
            }
            try? handle.close()
        }.start()
    }

    /// A stream of the lines `pick` keeps, fed by a thread of its own from the first line on.
    private func stream<Element: Sendable>(_ pick: @escaping @Sendable (Line) -> Element?) -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream.makeStream(of: Element.self)
        Thread { [self] in
            var index = 0
            while let line = line(at: index) {
                index += 1
                if let element = pick(line) { continuation.yield(element) }
            }
            continuation.finish()
        }.start()
        return stream
    }
}

/// The C library's `kill`, which `ChildProcess.kill()` hides inside the class.
private func sendSignal(_ number: Int32, to process: Int32) -> Int32 { kill(process, number) }
