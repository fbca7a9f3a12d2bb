// `prefs-bench --latency`: how long a change takes to reach a `values` subscriber, in this process and from
// another process. Not a ratio against a baseline: these are the absolute delays an app sees.
import Foundation
import Prefs

#if canImport(Glibc)
    import Glibc
#endif

// `monotonicNanoseconds()` (Harness.swift) reads CLOCK_MONOTONIC, which is system-wide on Linux, so stamps from
// two processes compare.

struct LatencySummary {
    let name: String
    let samples: [Double]

    var line: String {
        let sorted = samples.sorted()
        func at(_ fraction: Double) -> Double { sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))] }
        return pad(name, 52) + "median \(formatDuration(at(0.5)))  p90 \(formatDuration(at(0.9)))  "
            + "max \(formatDuration(sorted.last ?? 0))  (\(samples.count) changes)"
    }
}

/// Sets 1…count on `value` and times each until its stream yields it.
func inProcessLatency(_ name: String, store: any KeyValueStore, count: Int) async -> LatencySummary {
    let value = StoredValue(key: "latency", default: 0, store: store)
    var iterator = value.values.makeAsyncIterator()
    _ = await iterator.next()
    var samples: [Double] = []
    for index in 1...count {
        let start = monotonicNanoseconds()
        value.set(index)
        while let seen = await iterator.next(), seen != index {}
        samples.append(Double(monotonicNanoseconds() - start))
    }
    return LatencySummary(name: name, samples: samples)
}

/// A child process (this executable with `--latency-writer`) sets 1…count in a FileStore, one change at a time:
/// it prints the monotonic time before and after each `set`, then waits for this process to acknowledge having
/// seen the value on its stream.
func crossProcessLatency(folders: Folders, count: Int) async throws -> [LatencySummary] {
    let url = folders.data.appending(path: "latency.json")
    let store = try FileStore(url: url)
    let value = StoredValue(key: "latency", default: 0, store: store)
    var iterator = value.values.makeAsyncIterator()
    _ = await iterator.next()

    let (stamps, received) = try await driveLatencyWriter(
        arguments: ["--latency-writer", url.path, String(count)], environment: [:], count: count, &iterator)
    return [
        LatencySummary(
            name: "other process: before its set → our stream",
            samples: zip(stamps, received).map { Double($1 - $0[0]) }),
        LatencySummary(
            name: "other process: after its set returned → our stream",
            samples: zip(stamps, received).map { Double(Int64($1) - Int64($0[1])) }),
    ]
}

/// Runs this executable again as a writer child (`arguments`) that sets 1, 2, … `count`, one value per line it
/// reads, and prints "before after" stamps of each `set`; returns those stamps and when `iterator` (a stream of
/// the written key, its current value already taken) saw each value.
func driveLatencyWriter(
    arguments: [String], environment: [String: String], count: Int, _ iterator: inout AsyncStream<Int>.Iterator
) async throws -> (stamps: [[UInt64]], received: [UInt64]) {
    let child = Process()
    child.executableURL = URL(filePath: try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
    child.arguments = arguments
    child.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    let toChild = Pipe()
    let fromChild = Pipe()
    child.standardInput = toChild
    child.standardOutput = fromChild
    try child.run()

    var received: [UInt64] = []
    for index in 1...count {
        while let seen = await iterator.next(), seen != index {}
        received.append(monotonicNanoseconds())
        toChild.fileHandleForWriting.write(Data("\(index)\n".utf8))
    }
    try toChild.fileHandleForWriting.close()
    let output = String(decoding: fromChild.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    child.waitUntilExit()
    let stamps = output.split(separator: "\n").map { $0.split(separator: " ").compactMap { UInt64($0) } }
    guard stamps.count == count, stamps.allSatisfy({ $0.count == 2 }) else {
        throw BenchError.failed("the latency writer \(arguments[0]) printed \(stamps.count) of \(count) lines")
    }
    return (stamps, received)
}

/// The child side of `crossProcessLatency`.
func runLatencyWriter(path: String, count: Int) throws {
    let store = try FileStore(url: URL(filePath: path))
    let key = PrefKey("latency", default: 0)
    try writeLatencyStamps(count: count) { try store.set($0, for: key) }
}

func runLatency(quick: Bool) async throws {
    let folders = try Folders.fromEnvironment()
    try FileManager.default.createDirectory(at: folders.data, withIntermediateDirectories: true)
    let count = quick ? 50 : 300
    var summaries = [
        await inProcessLatency("this process, InMemoryStore: set → stream", store: InMemoryStore(), count: count * 10),
        await inProcessLatency(
            "this process, FileStore: durable set → stream",
            store: try FileStore(url: folders.data.appending(path: "in-process.json")), count: count),
    ]
    summaries += try await crossProcessLatency(folders: folders, count: count)
    do {
        summaries += try await postgresLatency(count: count)
    } catch let skip as BenchSkip {
        print("skipped the PostgreSQL latency: \(skip)")
    }
    print("Latency from a change to a `values` subscriber:")
    for summary in summaries { print("  " + summary.line) }
}
