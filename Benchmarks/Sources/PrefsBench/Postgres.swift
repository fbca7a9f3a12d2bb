// The PostgresStore scenarios: a cached read, a committed write against the bare libpq upsert a user would write,
// and the latency from one process's commit to another process's `for await`. They start a throwaway server
// (initdb + pg_ctl on a unix socket, like the tests); without server binaries they are skipped with the reason.
import CLibPQ
import Foundation
import PostgresTestServer
import Prefs
import PrefsPostgres
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A scenario that cannot run on this machine, with the reason; printed, not a failure.
struct BenchSkip: Error, CustomStringConvertible {
    let description: String
}

/// A database of its own on this run's server.
func benchDatabase() throws -> String {
    guard PostgresServer.binariesInstalled else {
        throw BenchSkip(description: "PostgreSQL server binaries are not installed (scripts/install-deps.sh does)")
    }
    let server = try PostgresServer.shared()
    return server.connectionString(database: try server.createDatabase())
}

func postgresScenarios() -> [Scenario] {
    [
        Scenario(
            name: "postgres_read_vs_mutex", target: 2, ours: "cached StoredValue<Int> read, PostgresStore",
            baseline: "Mutex<Int> read"
        ) { budget in
            let store = try PostgresStore(connection: try benchDatabase(), namespace: "bench")
            defer { store.close() }
            try store.replaceAll(integerKeys(10).merging(["answer": .int(42)]) { $1 })
            return try await compareCachedReadWithMutex(StoredValue(key: "answer", default: 0, store: store), budget)
        },
        Scenario(
            name: "postgres_write_vs_libpq_upsert", target: 1.3, ours: "set on a PostgresStore (committed)",
            baseline: "bare libpq INSERT … ON CONFLICT, same kind of connection"
        ) { budget in
            let connection = try benchDatabase()
            let store = try PostgresStore(connection: connection, namespace: "bench")
            defer { store.close() }
            try store.replaceAll(integerKeys(100))
            let counter = StoredValue(key: "counter", default: 0, store: store)
            let bare = try BareUpsert(connection: connection)
            var next = 0
            return try await compare(
                ours: { count in
                    for _ in 0..<count {
                        next += 1
                        counter.set(next)
                    }
                },
                baseline: { count in
                    for _ in 0..<count {
                        next += 1
                        try bare.upsert(key: "counter", json: String(next))
                    }
                }, budget: budget, limit: 5_000)
        },
    ]
}

/// What a user would write by hand: one parameterised upsert of a JSON value into a two-column table, on its own
/// libpq connection over the same unix socket.
final class BareUpsert {
    private let connection: OpaquePointer

    init(connection text: String) throws {
        guard let connection = PQconnectdb(text), PQstatus(connection) == CONNECTION_OK else {
            throw BenchError.failed("the baseline could not connect")
        }
        self.connection = connection
        try execute("CREATE TABLE IF NOT EXISTS bench_plain (key text PRIMARY KEY, value jsonb NOT NULL)", [])
    }

    deinit { PQfinish(connection) }

    func upsert(key: String, json: String) throws {
        try execute(
            "INSERT INTO bench_plain (key, value) VALUES ($1, $2::jsonb) "
                + "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", [key, json])
    }

    private func execute(_ sql: String, _ parameters: [String]) throws {
        let copies = parameters.map { strdup($0) }
        defer { for copy in copies { free(copy) } }
        let pointers = copies.map { UnsafePointer($0) }
        let result = pointers.withUnsafeBufferPointer { buffer in
            PQexecParams(connection, sql, Int32(parameters.count), nil, buffer.baseAddress, nil, nil, 0)
        }
        defer { PQclear(result) }
        guard PQresultStatus(result) == PGRES_COMMAND_OK else {
            throw BenchError.failed("the baseline upsert failed: \(String(cString: PQerrorMessage(connection)))")
        }
    }
}

// MARK: Latency

/// The environment variable that hands the latency writer its connection string (never the command line).
let postgresLatencyVariable = "PREFS_BENCH_POSTGRES"

/// This process sets 1…count on a PostgresStore and times each until its own stream yields it; then a child
/// process (this executable with `--postgres-latency-writer`) sets them on another PostgresStore of the same
/// namespace and this process times the path from its commit to our `for await`.
func postgresLatency(count: Int) async throws -> [LatencySummary] {
    let connection = try benchDatabase()
    let store = try PostgresStore(connection: connection, namespace: "latency")
    defer { store.close() }
    var summaries = [
        await inProcessLatency("PostgresStore, this process: set → stream", store: store, count: count)
    ]

    let value = StoredValue(key: "remote", default: 0, store: store)
    var iterator = value.values.makeAsyncIterator()
    _ = await iterator.next()
    let (stamps, received) = try await driveLatencyWriter(
        arguments: ["--postgres-latency-writer", String(count)], environment: [postgresLatencyVariable: connection],
        count: count, &iterator)
    summaries += [
        LatencySummary(
            name: "PostgresStore, other process: before set → stream",
            samples: zip(stamps, received).map { Double($1 - $0[0]) }),
        LatencySummary(
            name: "PostgresStore, other process: after commit → stream",
            samples: zip(stamps, received).map { Double(Int64($1) - Int64($0[1])) }),
    ]
    return summaries
}

/// The child side of `postgresLatency`.
func runPostgresLatencyWriter(count: Int) throws {
    guard let connection = ProcessInfo.processInfo.environment[postgresLatencyVariable] else {
        throw BenchError.failed("\(postgresLatencyVariable) is not set")
    }
    let store = try PostgresStore(connection: connection, namespace: "latency")
    let key = PrefKey("remote", default: 0)
    try writeLatencyStamps(count: count) { try store.set($0, for: key) }
    store.close()
}

// MARK: Fan-out

/// One commit reaching the `values` streams of `watchers` other processes (this executable with
/// `--postgres-fanout-watcher`), each with its own PostgresStore on the same namespace: for every commit and every
/// watcher, the time from the call of `set` to that watcher's `for await`. Also counts the server connections the
/// watchers and the writer hold while idle.
func postgresFanOut(watchers count: Int, commits: Int) async throws -> String {
    let connection = try benchDatabase()
    let database = String(connection.dropFirst("postgresql:///".count).prefix { $0 != "?" })
    let store = try PostgresStore(connection: connection, namespace: "fanout")
    defer { store.close() }
    let watchers = try (0..<count).map { _ in
        try FanOutWatcher(environment: [postgresLatencyVariable: connection])
    }
    defer { for watcher in watchers { watcher.stop() } }
    try waitUntil("the watchers to be ready") { watchers.allSatisfy { $0.ready } }
    let connections =
        try PostgresServer.shared().execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = '\(database)' AND pid <> pg_backend_pid()"
        ).first?.first.flatMap { $0 }.flatMap { Int($0) } ?? -1
    let key = PrefKey("fan", default: 0)
    var samples: [Double] = []
    for index in 1...commits {
        // From the call of `set`: a watcher may see the commit before `set` has returned to the writer.
        let started = monotonicNanoseconds()
        try store.set(index, for: key)
        try waitUntil("every watcher to see \(index)") { watchers.allSatisfy { $0.arrival(of: index) != nil } }
        samples += watchers.compactMap { $0.arrival(of: index) }.map { Double(Int64($0) - Int64(started)) }
    }
    let sorted = samples.sorted()
    func at(_ fraction: Double) -> Double { sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))] }
    return pad("PostgresStore fan-out, commit → \(count) other processes", 52)
        + "p50 \(formatDuration(at(0.5)))  p99 \(formatDuration(at(0.99)))  (\(commits) commits, "
        + "\(connections) server connections for \(count + 1) processes)"
}

/// Polls `condition` every 200 µs; fails after 60 s.
private func waitUntil(_ what: String, _ condition: () -> Bool) throws {
    let deadline = monotonicNanoseconds() + 60_000_000_000
    while !condition() {
        guard monotonicNanoseconds() < deadline else { throw BenchError.failed("timed out waiting for \(what)") }
        usleep(200)
    }
}

/// A fan-out watcher child and what it printed: `ready`, then `VALUE NANOSECONDS` per value its stream yielded.
private final class FanOutWatcher: @unchecked Sendable {
    private let process = Process()
    private let lock = NSLock()
    private var isReady = false
    private var arrivals: [Int: UInt64] = [:]

    init(environment: [String: String]) throws {
        process.executableURL = URL(
            filePath: try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
        process.arguments = ["--postgres-fanout-watcher"]
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        Thread { [self] in
            var buffer = Data()
            while case let chunk = output.fileHandleForReading.availableData, !chunk.isEmpty {
                buffer.append(chunk)
                while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    record(String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self))
                    buffer = Data(buffer[(newline + 1)...])
                }
            }
        }.start()
    }

    private func record(_ line: String) {
        lock.lock()
        defer { lock.unlock() }
        if line == "ready" { isReady = true }
        let fields = line.split(separator: " ")
        if fields.count == 2, let value = Int(fields[0]), let time = UInt64(fields[1]) { arrivals[value] = time }
    }

    var ready: Bool {
        lock.lock()
        defer { lock.unlock() }
        return isReady
    }

    func arrival(of value: Int) -> UInt64? {
        lock.lock()
        defer { lock.unlock() }
        return arrivals[value]
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
    }
}

/// The child side of `postgresFanOut`: prints `ready`, then each value of `fan` its stream yields with the time.
func runPostgresFanOutWatcher() async throws {
    guard let connection = ProcessInfo.processInfo.environment[postgresLatencyVariable] else {
        throw BenchError.failed("\(postgresLatencyVariable) is not set")
    }
    let store = try PostgresStore(connection: connection, namespace: "fanout")
    let value = StoredValue(key: "fan", default: 0, store: store)
    var iterator = value.values.makeAsyncIterator()
    _ = await iterator.next()
    FileHandle.standardOutput.write(Data("ready\n".utf8))
    while let seen = await iterator.next() {
        FileHandle.standardOutput.write(Data("\(seen) \(monotonicNanoseconds())\n".utf8))
    }
}
