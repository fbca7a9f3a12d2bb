import Foundation
import PrefsTestSupport
import TestThreads
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

struct CommandFailed: Error {
    let result: String
}

@Suite(.ownThreads) struct WatchCommandTests {
    /// `prefs watch` prints the changes other processes make, only for the keys it watches, in order, and exits
    /// with status 0 on SIGTERM. Each step waits for the watcher's line before the next write.
    @Test func watchSeesWritesFromOtherProcesses() async throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try sandbox.prefs("write", "app", "theme", "light")
        let watcher = try PrefsProcess.start(["watch", "app", "theme", "count"], environment: sandbox.environment)
        defer { watcher.signal(SIGKILL) }
        let lines = watcher.linesWithErrors()
        let steps: [([String], String)] = [
            (["write", "app", "theme", "dark"], "theme = dark (string)"),
            (["write", "app", "other", "ignored"], ""),  // not watched: must not print anything
            (["write", "app", "count", "5", "--type", "int"], "count = 5 (int)"),
            (["write", "app", "note", "a\nb"], ""),
            (["delete", "app", "theme"], "theme removed"),
        ]
        let printed = try await withTimeout {
            var ready = false
            var expected = [String]()
            var seen = [String]()
            var pending = steps[...]
            func advance() throws {
                // Runs writes until one whose line must be awaited.
                while let (arguments, line) = pending.popFirst() {
                    let result = try sandbox.prefs(arguments)
                    guard result.status == 0 else { throw CommandFailed(result: result.description) }
                    if !line.isEmpty {
                        expected.append(line)
                        return
                    }
                }
            }
            for await (isError, line) in lines {
                if isError {
                    if line.hasPrefix("prefs: watching"), !ready {
                        ready = true
                        try advance()
                    }
                    continue
                }
                seen.append(line)
                if seen.count == 3 { break }
                try advance()
            }
            return (seen, expected)
        }
        #expect(printed.0 == ["theme = dark (string)", "count = 5 (int)", "theme removed"])
        #expect(printed.0 == printed.1)

        watcher.signal(SIGTERM)
        let exit = watcher.wait()
        #expect(exit.signal == nil)
        #expect(exit.status == 0)
    }

    /// What CLI.md says `watch` prints when another process writes one key quickly (601, 602, 603): lines in the
    /// order of the key's changes, never the same line twice in a row, the last one the key's final value; a
    /// change may be left out when the next one lands before this process reads the file.
    @Test func quickWritesFromAnotherProcessPrintInOrderEndingAtTheLastValue() async throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try sandbox.prefs("write", "app", "count", "600", "--type", "int")
        let watcher = try PrefsProcess.start(["watch", "app", "count", "done"], environment: sandbox.environment)
        defer { watcher.signal(SIGKILL) }
        let lines = watcher.linesWithErrors()
        let seen = try await withTimeout {
            var seen = [String]()
            for await (isError, line) in lines {
                if isError {
                    guard line.hasPrefix("prefs: watching") else { continue }
                    for value in 601...603 {
                        let written = try sandbox.prefs("write", "app", "count", String(value))
                        guard written.status == 0 else { throw CommandFailed(result: written.description) }
                    }
                    _ = try sandbox.prefs("write", "app", "done", "yes")
                    continue
                }
                seen.append(line)
                if line.hasPrefix("done = ") { break }
            }
            return seen
        }
        #expect(seen.last == "done = yes (string)", "\(seen)")
        let counts = seen.dropLast().map { line in
            ["count = 601 (int)", "count = 602 (int)", "count = 603 (int)"].firstIndex(of: line) ?? -1
        }
        #expect(!counts.contains(-1), "each line is a value written: \(seen)")
        #expect(zip(counts, counts.dropFirst()).allSatisfy { $0 < $1 }, "in order, none twice: \(seen)")
        #expect(counts.last == 2, "the last line is the last value: \(seen)")
    }

    @Test func watchingEveryKeyPrintsEachChange() async throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try sandbox.prefs("write", "app", "a", "1")
        let watcher = try PrefsProcess.start(["watch", "app"], environment: sandbox.environment)
        defer { watcher.signal(SIGKILL) }
        let lines = watcher.linesWithErrors()
        let seen = try await withTimeout {
            var seen = [String]()
            for await (isError, line) in lines {
                if isError {
                    #expect(line.contains("watching every key"))
                    _ = try sandbox.prefs("write", "app", "flag", "yes", "--type", "bool")
                    continue
                }
                seen.append(line)
                if seen.count == 1 { _ = try sandbox.prefs("delete", "app", "a") }
                if seen.count == 2 { break }
            }
            return seen
        }
        #expect(seen == ["flag = true (bool)", "a removed"])
        watcher.signal(SIGINT)
        let ended = watcher.wait()
        #expect(ended.status == 0, "\(ended)")
    }
}
