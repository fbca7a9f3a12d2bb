// The fleet figures: 200 PostgresStore instances, each on a client connection of its own, in four processes
// (`--postgres-fleet-member`), through a throwaway PgBouncer in transaction pooling with a server pool of 10, reading
// changes with `.poll(every: 500 ms)`: the lag from a commit to every instance's `values`, the server connections the
// fleet holds, and the transactions per second the idle fleet costs the server, beside a fleet of the same size
// that listens on direct connections.
import Foundation
import PostgresTestServer
import Prefs
import PrefsPostgres

/// The fleet's shape: four processes of 50 instances, polling every 500 ms; `--quick` keeps the shape and times
/// fewer commits.
private let fleetProcesses = 4
private let fleetPerProcess = 50
private let fleetPoll = 500
private let fleetPoolSize = 10
/// The environment variable that hands a fleet member its shape: `COUNT FIRST SOURCE` (SOURCE `listen` or a poll
/// interval in milliseconds).
let postgresFleetVariable = "PREFS_BENCH_FLEET"

func postgresFleetFigures(quick: Bool, includes: (String) -> Bool) throws -> [DeferredFigure] {
    let instances = fleetProcesses * fleetPerProcess
    let names = [
        "postgres_fleet_lag_poll_\(instances)", "postgres_fleet_server_connections_\(instances)",
        "postgres_idle_fleet_queries_per_second_\(instances)",
    ]
    guard names.contains(where: includes) else { return [] }
    guard PostgresServer.binariesInstalled, Pooler.installed else {
        print("skipped the fleet figures: PostgreSQL server binaries or pgbouncer are not installed")
        return []
    }
    log("running the fleet figures (\(instances) instances through PgBouncer in transaction pooling)")
    let server = try PostgresServer.start()
    defer { try? server.destroy() }
    let database = try server.createDatabase()
    let pooler = try Pooler.start(for: server, mode: .transaction, poolSize: fleetPoolSize)
    defer { pooler.destroy() }
    let pooled = pooler.connectionString(database: database)

    let most = MostConnections(pooler: pooler, database: database)
    let members = try startFleet(connection: pooled, source: String(fleetPoll))
    defer { for member in members { member.stop() } }
    let idle = try idleTransactionsPerSecond(server: server, database: database, seconds: quick ? 3 : 5)
    let writer = try PostgresStore(
        connection: pooled + "&fallback_application_name=prefs-fleet-writer", namespace: "fleet",
        changeSource: .poll(every: .seconds(3_600)))
    defer { writer.close() }
    let commits = quick ? 10 : 40
    var lags: [Double] = []
    for value in 1...commits {
        // A pause of a random part of the interval, so commits fall anywhere in the instances' poll cycles.
        usleep(UInt32.random(in: 0..<UInt32(fleetPoll * 1_000)))
        let started = monotonicNanoseconds()
        try writer.setValue(.int(Int64(value)), forKey: "fleet")
        try waitUntil("every instance to see \(value)") {
            members.allSatisfy { $0.arrivals(of: value).count == fleetPerProcess }
        }
        lags += members.flatMap { $0.arrivals(of: value) }.map { Double(Int64($0) - Int64(started)) }
    }
    let connections = most.stop()
    for member in members { member.stop() }

    // The same fleet listening on direct connections, for its idle cost: only its heartbeat reads.
    let listening = try startFleet(connection: server.connectionString(database: database), source: "listen")
    defer { for member in listening { member.stop() } }
    // Instances opened together read on the same heartbeat: the window spans two of them (one with --quick).
    let listenIdle = try idleTransactionsPerSecond(server: server, database: database, seconds: quick ? 10 : 20)

    let (p50, p99) = (percentile(lags, 0.5), percentile(lags, 0.99))
    let lagLimit = Double(fleetPoll + 50) * 1e6
    var figures: [DeferredFigure] = []
    figures.append(
        DeferredFigure(
            name: names[0],
            line: "\(instances) instances × \(commits) commits, poll every \(fleetPoll) ms through PgBouncer "
                + "(transaction, pool \(fleetPoolSize)): p50 \(formatDuration(p50)), p99 \(formatDuration(p99)) "
                + "(≤ \(fleetPoll + 50) ms \(p99 <= lagLimit ? "met" : "MISSED"))",
            met: p99 <= lagLimit,
            json: "\"instances\":\(instances),\"commits\":\(commits),\"poll_ms\":\(fleetPoll),"
                + "\"p50_ns\":\(jsonNumber(p50)),\"p99_ns\":\(jsonNumber(p99)),\"limit_ns\":\(jsonNumber(lagLimit))"))
    figures.append(
        DeferredFigure(
            name: names[1],
            line: "\(instances) instances through PgBouncer (transaction, pool \(fleetPoolSize)): at most "
                + "\(connections) server connections (≤ \(fleetPoolSize + 2) "
                + "\(connections <= fleetPoolSize + 2 ? "met" : "MISSED"))",
            met: connections <= fleetPoolSize + 2,
            json: "\"instances\":\(instances),\"connections\":\(connections),\"limit\":\(fleetPoolSize + 2)"))
    figures.append(
        DeferredFigure(
            name: names[2],
            line: "\(instances) idle instances: \(String(format: "%.0f", idle)) transactions/s polling every "
                + "\(fleetPoll) ms through PgBouncer; \(String(format: "%.1f", listenIdle)) listening on "
                + "\(instances) direct connections (their heartbeat, one read of the feed every 10 s each)",
            met: true,
            json: "\"instances\":\(instances),\"poll_ms\":\(fleetPoll),\"per_second\":\(jsonNumber(idle)),"
                + "\"listen_per_second\":\(jsonNumber(listenIdle))"))
    return figures.filter { includes($0.name) }
}

/// Starts the fleet's member processes and waits until every instance has opened.
private func startFleet(connection: String, source: String) throws -> [FanOutWatcher] {
    let members = try (0..<fleetProcesses).map { index in
        try FanOutWatcher(
            arguments: ["--postgres-fleet-member"],
            environment: [
                postgresLatencyVariable: connection,
                postgresFleetVariable: "\(fleetPerProcess) \(index * fleetPerProcess) \(source)",
            ])
    }
    try waitUntil("the fleet to open") { members.allSatisfy(\.ready) }
    return members
}

/// Transactions ended in `database` per second over `seconds` (a read of the feed is one), from `pg_stat_database`.
private func idleTransactionsPerSecond(server: PostgresServer, database: String, seconds: Int) throws -> Double {
    let query = "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = '\(database)'"
    // A backend publishes its counters when a transaction ends at least a second after it last did, or 10 s after it
    // went idle: 11 s first, so what the fleet did while it opened is counted before the window.
    Thread.sleep(forTimeInterval: 11)
    let before = Double(try server.execute(query, database: database).first?[0] ?? "") ?? 0
    let start = monotonicNanoseconds()
    Thread.sleep(forTimeInterval: Double(seconds))
    let after = Double(try server.execute(query, database: database).first?[0] ?? "") ?? 0
    // The two counting queries are transactions too, each on a connection of its own.
    return (after - before - 1) / (Double(monotonicNanoseconds() - start) / 1e9)
}

/// The most server connections of the pooler's database, counted every 10 ms on a thread of its own until `stop()`.
private final class MostConnections: @unchecked Sendable {
    private let lock = NSLock()
    private var most = 0
    private var running = true
    private let ended = DispatchSemaphore(value: 0)

    init(pooler: Pooler, database: String) {
        Thread { [self] in
            while lock.withLock({ running }) {
                if let count = try? pooler.serverConnections(database: database) {
                    lock.withLock { most = max(most, count) }
                }
                usleep(10_000)
            }
            ended.signal()
        }.start()
    }

    func stop() -> Int {
        lock.withLock { running = false }
        ended.wait()
        return lock.withLock { most }
    }
}

/// The child side: opens COUNT stores (instances FIRST…), each on a client connection of its own, prints `ready`,
/// then `VALUE NANOSECONDS` each time one of them sees a new value of `fleet`.
func runPostgresFleetMember() async throws {
    let environment = ProcessInfo.processInfo.environment
    guard let connection = environment[postgresLatencyVariable],
        let shape = environment[postgresFleetVariable]?.split(separator: " "), shape.count == 3,
        let count = Int(shape[0]), let first = Int(shape[1])
    else { throw BenchError.failed("\(postgresLatencyVariable) or \(postgresFleetVariable) is not set") }
    let source: PostgresStore.ChangeSource =
        shape[2] == "listen" ? .listen : .poll(every: .milliseconds(Int(shape[2]) ?? fleetPoll))
    let separator = connection.contains("?") ? "&" : "?"
    var stores: [PostgresStore] = []
    for instance in first..<(first + count) {
        stores.append(
            try PostgresStore(
                connection: connection + separator + "fallback_application_name=prefs-fleet-\(instance)",
                namespace: "fleet",
                changeSource: source))
    }
    await withTaskGroup(of: Void.self) { group in
        for store in stores {
            var iterator = StoredValue(key: "fleet", default: 0, store: store).values.makeAsyncIterator()
            _ = await iterator.next()
            group.addTask {
                while let seen = await iterator.next() {
                    FileHandle.standardOutput.write(Data("\(seen) \(monotonicNanoseconds())\n".utf8))
                }
            }
        }
        FileHandle.standardOutput.write(Data("ready\n".utf8))
    }
}
