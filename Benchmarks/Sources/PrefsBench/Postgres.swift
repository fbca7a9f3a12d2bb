// The PostgresStore scenarios: a cached read, a committed write against the bare libpq upsert a user would write,
// one commit's fan-out to N other processes against a bare NOTIFY reaching N that LISTEN, and (`--latency`) the
// latency from one process's commit to another process's `for await`. They start a throwaway server (initdb +
// pg_ctl on a unix socket, like the tests); without server binaries they are skipped with the reason.
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

/// The target of `postgres_fanout_N_vs_libpq_listen`: p50 and p99 of the store's fan-out over bare `NOTIFY` →
/// `LISTEN`.
let postgresFanOutTarget = 3.0

/// `postgres_fanout_N_vs_libpq_listen`, N = 1, 10 and 50 (1 and 10 with `--quick`): one commit in this process
/// reaching the `values` streams of N other processes (`--postgres-fanout-watcher`, each with its own PostgresStore on
/// the namespace), timed from the call of `set` to each one's `for await`, against a bare libpq `NOTIFY` reaching N
/// processes that `LISTEN` (`--postgres-listen-watcher`), timed from the call of `PQexec`; and the server connections
/// the store's fleet (this process and the N others) holds idle and, counted every millisecond, while it writes.
/// Both fleets run at once and the two sides take turns commit by commit (the first alternating), so both see the
/// same load; the connections are counted over 20 more commits after the timed ones. At least 1 000 arrivals per
/// side (100 commits at N = 10 and 50, 1 000 at N = 1), so that p99 is not one sample. Target: p50 and p99 ≤ 3× the
/// baseline's, and at most N + 2 connections (each watcher's change feed, the writer's feed and its write
/// connection).
func postgresFanOutFigures(quick: Bool, includes: (String) -> Bool) throws -> [DeferredFigure] {
    var figures: [DeferredFigure] = []
    for count in quick ? [1, 10] : [1, 10, 50] {
        let name = "postgres_fanout_\(count)_vs_libpq_listen"
        guard includes(name) else { continue }
        log("running \(name)")
        let connection: String
        do { connection = try benchDatabase() } catch let skip as BenchSkip {
            print("skipped \(name): \(skip)")
            continue
        }
        let commits = quick ? 20 : max(100, 1_000 / count)
        let run = try fanOut(connection: connection, instances: count, commits: commits)
        let (ours, bare) = (run.ours, run.baseline)
        let (p50, p99) = (percentile(ours, 0.5), percentile(ours, 0.99))
        let (bareP50, bareP99) = (percentile(bare, 0.5), percentile(bare, 0.99))
        let connections = max(run.idle, run.writing)
        let met =
            p50 / bareP50 <= postgresFanOutTarget && p99 / bareP99 <= postgresFanOutTarget && connections <= count + 2
        figures.append(
            DeferredFigure(
                name: name,
                line:
                    "\(count) × \(commits) arrivals: p50 \(formatDuration(p50)) (\(String(format: "%.2f", p50 / bareP50))×), "
                    + "p99 \(formatDuration(p99)) (\(String(format: "%.2f", p99 / bareP99))×) against NOTIFY → LISTEN "
                    + "p50 \(formatDuration(bareP50)), p99 \(formatDuration(bareP99)); connections \(run.idle) idle, "
                    + "\(run.writing) writing (p50 and p99 ≤ 3×, ≤ \(count + 2) connections \(met ? "met" : "MISSED"))",
                met: met,
                json: "\"instances\":\(count),\"commits\":\(commits),\"connections\":\(connections),"
                    + "\"connections_idle\":\(run.idle),\"connections_writing\":\(run.writing),"
                    + "\"connections_limit\":\(count + 2),"
                    + "\"p50_ns\":\(jsonNumber(p50)),\"p99_ns\":\(jsonNumber(p99)),"
                    + "\"baseline_p50_ns\":\(jsonNumber(bareP50)),\"baseline_p99_ns\":\(jsonNumber(bareP99)),"
                    + "\"p50_ratio\":\(jsonNumber(p50 / bareP50)),\"p99_ratio\":\(jsonNumber(p99 / bareP99)),"
                    + "\"target\":\(jsonNumber(postgresFanOutTarget))"))
    }
    return figures
}

/// The value at `fraction` of the sorted samples.
func percentile(_ samples: [Double], _ fraction: Double) -> Double {
    let sorted = samples.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]
}

/// Both sides of one fan-out figure: `instances` store watchers and as many bare listeners, started together;
/// `commits` sets and as many `NOTIFY`s, taking turns; the arrival times of each side, and the connections of the
/// store's fleet idle and (counted every millisecond over 20 more sets) writing.
private func fanOut(connection: String, instances count: Int, commits: Int) throws
    -> (ours: [Double], baseline: [Double], idle: Int, writing: Int)
{
    let store = try PostgresStore(connection: connection, namespace: "fanout")
    defer { store.close() }
    let notifier = try Session(connection)
    let environment = [postgresLatencyVariable: connection]
    let watchers = try (0..<count).map { _ in
        try FanOutWatcher(arguments: ["--postgres-fanout-watcher"], environment: environment)
    }
    defer { for watcher in watchers { watcher.stop() } }
    let listeners = try (0..<count).map { _ in
        try FanOutWatcher(arguments: ["--postgres-listen-watcher"], environment: environment)
    }
    defer { for listener in listeners { listener.stop() } }
    try waitUntil("the watchers and listeners to be ready") { (watchers + listeners).allSatisfy { $0.ready } }
    let counter = try ConnectionCounter(connection: connection)
    let idle = try counter.count()
    let key = PrefKey("fan", default: 0)
    var (ours, baseline): ([Double], [Double]) = ([], [])
    for index in 1...commits {
        let storeFirst = index % 2 == 1
        for side in storeFirst ? [true, false] : [false, true] {
            if side {
                ours += try timeArrivals(of: index, at: watchers) { try store.set(index, for: key) }
            } else {
                baseline += try timeArrivals(of: index, at: listeners) {
                    try notifier.execute("NOTIFY \(fanOutChannel), '\(index)'")
                }
            }
        }
    }
    // Counting every millisecond loads the server and both cores, so the connections are counted over 20 commits of
    // their own after the timed ones.
    let ((), writing) = try counter.most {
        for index in (commits + 1)...(commits + 20) {
            _ = try timeArrivals(of: index, at: watchers) { try store.set(index, for: key) }
        }
    }
    return (ours, baseline, idle, writing)
}

/// The channel of the baseline's `NOTIFY` and `LISTEN`.
private let fanOutChannel = "prefs_bench_fan"

/// Sends `value` with `send` and waits until every watcher has seen it; returns, for every watcher, the time from the
/// call of `send` to the watcher's arrival stamp (a watcher may see a value before `send` returns).
private func timeArrivals(of value: Int, at watchers: [FanOutWatcher], _ send: () throws -> Void) throws -> [Double] {
    let started = monotonicNanoseconds()
    try send()
    try waitUntil("every watcher to see \(value)") { watchers.allSatisfy { $0.arrival(of: value) != nil } }
    return watchers.compactMap { $0.arrival(of: value) }.map { Double(Int64($0) - Int64(started)) }
}

/// Counts the server connections of the store's fleet (`application_name` `prefs`, the store's) in the bench's
/// database, from a session of its own.
private final class ConnectionCounter: @unchecked Sendable {
    private let session: Session

    init(connection: String) throws { session = try Session(connection) }

    func count() throws -> Int {
        let rows = try session.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'prefs'")
        guard let count = rows.first?.first?.flatMap({ Int($0) }) else {
            throw BenchError.failed("pg_stat_activity gave no count")
        }
        return count
    }

    /// Runs `body` while a thread counts every millisecond; returns what `body` returned and the most counted.
    func most<T>(while body: () throws -> T) throws -> (T, Int) {
        let stop = Atomic<Bool>(false)
        let most = Mutex<Result<Int, any Error>>(.success(0))
        let ended = DispatchSemaphore(value: 0)
        Thread { [self] in
            repeat {
                let counted = Result { try count() }
                most.withLock { most in
                    if case .success(let previous) = most { most = counted.map { max($0, previous) } }
                }
                usleep(1_000)
            } while !stop.load(ordering: .acquiring)
            ended.signal()
        }.start()
        let result = Result { try body() }
        stop.store(true, ordering: .releasing)
        ended.wait()
        return (try result.get(), try most.withLock { try $0.get() })
    }
}

/// Polls `condition` every 200 µs; fails after 60 s.
func waitUntil(_ what: String, _ condition: () -> Bool) throws {
    let deadline = monotonicNanoseconds() + 60_000_000_000
    while !condition() {
        guard monotonicNanoseconds() < deadline else { throw BenchError.failed("timed out waiting for \(what)") }
        usleep(200)
    }
}

/// A fan-out watcher child (this executable with `arguments`) and what it printed: `ready`, then
/// `VALUE NANOSECONDS` for each value it received.
final class FanOutWatcher: @unchecked Sendable {
    private let process = Process()
    private let lock = NSLock()
    private var isReady = false
    private var arrivals: [Int: [UInt64]] = [:]

    init(arguments: [String], environment: [String: String]) throws {
        process.executableURL = URL(
            filePath: try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
        process.arguments = arguments
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
        if fields.count == 2, let value = Int(fields[0]), let time = UInt64(fields[1]) {
            arrivals[value, default: []].append(time)
        }
    }

    var ready: Bool {
        lock.lock()
        defer { lock.unlock() }
        return isReady
    }

    func arrival(of value: Int) -> UInt64? { arrivals(of: value).first }

    /// Every arrival of `value` (a child watching with several stores prints one per store).
    func arrivals(of value: Int) -> [UInt64] {
        lock.lock()
        defer { lock.unlock() }
        return arrivals[value] ?? []
    }

    /// Kills the child: it may have been started from a thread that blocks `SIGTERM`, and it inherits that mask.
    func stop() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

/// The child side of the store's fan-out: prints `ready`, then each value of `fan` its stream yields with the time.
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

/// The child side of the baseline's fan-out: a bare libpq session that `LISTEN`s, prints `ready`, then each
/// notification's payload with the time it was read.
func runPostgresListenWatcher() throws {
    guard let text = ProcessInfo.processInfo.environment[postgresLatencyVariable] else {
        throw BenchError.failed("\(postgresLatencyVariable) is not set")
    }
    guard let connection = PQconnectdb(text), PQstatus(connection) == CONNECTION_OK else {
        throw BenchError.failed("the listener could not connect")
    }
    defer { PQfinish(connection) }
    let result = PQexec(connection, "LISTEN \(fanOutChannel)")
    defer { PQclear(result) }
    guard PQresultStatus(result) == PGRES_COMMAND_OK else { throw BenchError.failed("LISTEN failed") }
    FileHandle.standardOutput.write(Data("ready\n".utf8))
    while true {
        var descriptor = pollfd(fd: PQsocket(connection), events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, -1) >= 0 || errno == EINTR else { throw BenchError.failed("poll failed") }
        guard PQconsumeInput(connection) != 0 else { throw BenchError.failed("the listener lost its connection") }
        while let notification = PQnotifies(connection) {
            let now = monotonicNanoseconds()
            FileHandle.standardOutput.write(Data("\(String(cString: notification.pointee.extra)) \(now)\n".utf8))
            PQfreemem(notification)
        }
    }
}
