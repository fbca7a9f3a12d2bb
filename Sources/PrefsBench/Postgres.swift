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
    for index in 1...count {
        let before = monotonicNanoseconds()
        try store.set(index, for: key)
        let after = monotonicNanoseconds()
        FileHandle.standardOutput.write(Data("\(before) \(after)\n".utf8))
        guard readLine() != nil else { break }
    }
    store.close()
}
