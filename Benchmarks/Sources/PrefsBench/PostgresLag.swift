// How late other instances' changes reach a PostgresStore while it is busy with a write of its own, and while a
// transaction elsewhere holds the server's horizon back: the lag from another instance's `set` to this instance's
// `values` stream, against the promise (listening: 50 ms; polling: the interval + 50 ms), and what a read of the
// change feed costs then.
import Foundation
import PostgresTestServer
import Prefs
import PrefsPostgres

/// `postgres_lag_own_slow_write_listen`, `postgres_lag_own_slow_write_poll`,
/// `postgres_lag_stalled_horizon`.
func postgresLagFigures(quick: Bool, includes: (String) -> Bool) throws -> [DeferredFigure] {
    var figures: [DeferredFigure] = []
    let slow = ["postgres_lag_own_slow_write_listen", "postgres_lag_own_slow_write_poll"]
    if slow.contains(where: includes) {
        guard PostgresServer.binariesInstalled, Pooler.installed else {
            print("skipped the lag figures: PostgreSQL server binaries or pgbouncer are not installed")
            return []
        }
        let server = try PostgresServer.shared()
        if includes(slow[0]) {
            log("running \(slow[0])")
            let database = try server.createDatabase()
            figures.append(
                try slowWriteFigure(
                    name: slow[0], connection: server.connectionString(database: database), server: server,
                    database: database, source: .automatic, spacing: 50, limit: 50, pooled: false, quick: quick))
        }
        if includes(slow[1]) {
            log("running \(slow[1])")
            let database = try server.createDatabase()
            let pooler = try Pooler.start(for: server, mode: .transaction)
            defer { pooler.destroy() }
            figures.append(
                try slowWriteFigure(
                    name: slow[1], connection: pooler.connectionString(database: database), server: server,
                    database: database, source: .poll(every: .milliseconds(200)), spacing: 200, limit: 250,
                    pooled: true, quick: quick))
        }
    }
    if includes("postgres_lag_stalled_horizon") {
        guard PostgresServer.binariesInstalled else {
            print("skipped postgres_lag_stalled_horizon: PostgreSQL server binaries are not installed")
            return figures
        }
        log("running postgres_lag_stalled_horizon")
        figures.append(try stalledHorizonFigure(quick: quick))
    }
    return figures
}

/// Arrival times of each value of `key` in `store`'s `values` stream, recorded on a task of its own.
private final class Arrivals: @unchecked Sendable {
    private let lock = NSLock()
    private var times: [Int: [UInt64]] = [:]
    private var task: Task<Void, Never>?

    init(_ stores: [PostgresStore], key: String) {
        let streams = stores.map { StoredValue(key: key, default: -1, store: $0).values }
        task = Task.detached { [self] in
            await withTaskGroup(of: Void.self) { group in
                for stream in streams {
                    group.addTask {
                        for await value in stream { self.record(value) }
                    }
                }
            }
        }
    }

    private func record(_ value: Int) {
        let now = monotonicNanoseconds()
        lock.withLock { times[value, default: []].append(now) }
    }

    func of(_ value: Int) -> [UInt64] { lock.withLock { times[value] ?? [] } }

    func stop() { task?.cancel() }
}

/// One instance (on a connection of its own, reading changes from `source`) runs a write that takes 2.5 s (a
/// transform that takes that long, then a `set` that waits that long for a row lock another session holds), while
/// another instance commits changes one after another, each after a random part of `spacing` milliseconds; the lag
/// runs from the other instance's call of `set` to the first's `values` stream. On a direct connection, also counts the
/// server connections the busy instance holds (at most two: the change feed's and the blocked write's); through a
/// pooler in transaction mode server connections are shared, and not counted.
private func slowWriteFigure(
    name: String, connection: String, server: PostgresServer, database: String, source: PostgresStore.ChangeSource,
    spacing: Int, limit: Int, pooled: Bool, quick: Bool
) throws -> DeferredFigure {
    let separator = connection.contains("?") ? "&" : "?"
    let instance = try PostgresStore(
        connection: connection + separator + "application_name=prefs-lag-instance", namespace: "lag",
        limits: PostgresStore.Limits(lockTimeout: .seconds(10)), changeSource: source)
    defer { instance.close() }
    let other = try PostgresStore(
        connection: connection + separator + "application_name=prefs-lag-other", namespace: "lag",
        changeSource: .poll(every: .seconds(3_600)))
    defer { other.close() }
    try instance.setValue(.int(0), forKey: "locked")
    let arrivals = Arrivals([instance], key: "lag")
    defer { arrivals.stop() }
    let session = try Session(server.connectionString(database: database))
    var lags: [Double] = []
    var connections = 0
    var value = 0
    let rounds = quick ? 1 : 4
    for _ in 0..<rounds {
        for blocker in ["transform", "row lock"] {
            let started = DispatchSemaphore(value: 0)
            let done = DispatchSemaphore(value: 0)
            if blocker == "transform" {
                Thread {
                    _ = try? instance.updateValue(forKey: "slow") { _ in
                        started.signal()
                        Thread.sleep(forTimeInterval: 2.5)  // the slow transform being measured
                        return .int(1)
                    }
                    done.signal()
                }.start()
                started.wait()
            } else {
                try session.execute("BEGIN")
                try session.execute("SELECT * FROM prefs_values WHERE key = 'locked' FOR UPDATE")
                let locked = PrefValue.int(Int64(value))
                Thread {
                    _ = try? instance.setValue(locked, forKey: "locked")
                    done.signal()
                }.start()
                try waitUntil("the set to wait for the row lock") {
                    (try? session.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                            + "AND wait_event_type = 'Lock'"))?.first?.first == "1"
                }
            }
            let end = monotonicNanoseconds() + 2_400_000_000
            while monotonicNanoseconds() < end {
                usleep(UInt32.random(in: 0..<UInt32(spacing * 1_000)))
                value += 1
                let start = monotonicNanoseconds()
                try other.setValue(.int(Int64(value)), forKey: "lag")
                try waitUntil("the instance to see \(value)") { !arrivals.of(value).isEmpty }
                lags.append(Double(arrivals.of(value)[0] - start))
                if !pooled {
                    let held = try session.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'prefs-lag-instance'")
                    connections = max(connections, Int(held.first?.first.flatMap { $0 } ?? "") ?? 0)
                }
            }
            if blocker == "row lock" { try session.execute("ROLLBACK") }
            done.wait()
        }
    }
    let (p50, p99) = (percentile(lags, 0.5), percentile(lags, 0.99))
    let met = p99 <= Double(limit) * 1e6 && connections <= 2
    let kind = pooled ? "polling every 200 ms through PgBouncer in transaction pooling" : "listening, direct"
    let held = pooled ? "" : "; \(connections) server connections held (≤ 2)"
    return DeferredFigure(
        name: name,
        line: "\(lags.count) changes while the instance (\(kind)) holds a 2.5 s transform or waits 2.5 s on a row "
            + "lock: p50 \(formatDuration(p50)), p99 \(formatDuration(p99))\(held) "
            + "(p99 ≤ \(limit) ms \(met ? "met" : "MISSED"))",
        met: met,
        json: "\"changes\":\(lags.count),\"p50_ns\":\(jsonNumber(p50)),\"p99_ns\":\(jsonNumber(p99)),"
            + "\"limit_ns\":\(jsonNumber(Double(limit) * 1e6)),\"connections\":\(connections)")
}

/// Ten instances poll every 200 ms while a transaction elsewhere holds its id open (60 s; 10 s with `--quick`), beside
/// a load: every 0.5 s, 160 sets and an SQL `DELETE` of 50 of those rows. One more instance sets a marker every
/// 0.5 s, after a random part of it; the lag runs from its `set` to each instance's `values` stream. The index
/// entries the feed's reads visit are counted by the server (`pg_stat_user_indexes.idx_tup_read` of the feed's two
/// indexes, which nothing else scans: the `DELETE`s are sent with index scans off) and the reads by
/// `pg_stat_user_functions` (`track_functions`), both published by each backend at least once a second.
private func stalledHorizonFigure(quick: Bool) throws -> DeferredFigure {
    let server = try PostgresServer.shared()
    let database = try server.createDatabase()
    try server.execute("ALTER DATABASE \(database) SET track_functions = 'pl'")
    let connection = server.connectionString(database: database)
    let load = try PostgresStore(
        connection: connection + "&application_name=prefs-horizon-load", namespace: "horizon",
        changeSource: .poll(every: .seconds(3_600)))
    defer { load.close() }
    let instances = try (0..<10).map { index in
        try PostgresStore(
            connection: connection + "&application_name=prefs-horizon-\(index)", namespace: "horizon",
            changeSource: .poll(every: .milliseconds(200)))
    }
    defer { for instance in instances { instance.close() } }
    let arrivals = Arrivals(instances, key: "marker")
    defer { arrivals.stop() }
    let deleter = try Session(connection)
    for setting in ["enable_indexscan", "enable_bitmapscan", "enable_indexonlyscan"] {
        try deleter.execute("SET \(setting) = off")
    }
    let holder = try Session(connection)
    try holder.execute("BEGIN")
    try holder.execute("SELECT pg_current_xact_id()")
    let statistics = try Session(connection)
    func counters() throws -> (rows: Double, reads: Double) {
        let rows = try statistics.execute(
            "SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes "
                + "WHERE indexrelname IN ('prefs_values_changes', 'prefs_removals_changes')")
        let reads = try statistics.execute(
            "SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions WHERE funcname = 'prefs_values_feed'")
        return (
            Double(rows.first?.first.flatMap { $0 } ?? "") ?? 0, Double(reads.first?.first.flatMap { $0 } ?? "") ?? 0
        )
    }
    let keys = (0..<160).map { "k\($0)" }
    var lags: [Double] = []
    var changed = 0
    let seconds = quick ? 10 : 60
    let rounds = seconds * 2
    // The first ten seconds are the horizon's first: counted from after them, once every backend has published.
    var before: (rows: Double, reads: Double)? = nil
    for round in 1...rounds {
        let roundStart = monotonicNanoseconds()
        if round == 21 || (quick && round == 5) { before = try counters() }
        for key in keys { try load.setValue(.int(Int64(round)), forKey: key) }
        let deleted = keys.shuffled().prefix(50).map { "'\($0)'" }.joined(separator: ", ")
        try deleter.execute("DELETE FROM prefs_values WHERE namespace = 'horizon' AND key IN (\(deleted))")
        if before != nil { changed += 160 + 50 + 1 }
        usleep(UInt32.random(in: 0..<100_000))
        let start = monotonicNanoseconds()
        try load.setValue(.int(Int64(round)), forKey: "marker")
        try waitUntil("every instance to see marker \(round)") { arrivals.of(round).count == instances.count }
        lags += arrivals.of(round).map { Double($0 - start) }
        let elapsed = monotonicNanoseconds() - roundStart
        if elapsed < 500_000_000 { usleep(UInt32((500_000_000 - elapsed) / 1_000)) }
    }
    // Every backend publishes its counts within a second of its last transaction.
    Thread.sleep(forTimeInterval: 1.5)
    let after = try counters()
    try holder.execute("ROLLBACK")
    let start = before ?? (0, 0)
    let polls = max(1, after.reads - start.reads)
    let rowsPerPoll = (after.rows - start.rows) / polls
    // Each instance reads every change once, spread over its polls.
    let changedPerPoll = Double(changed) * Double(instances.count) / polls
    let factor = rowsPerPoll / max(1, changedPerPoll)
    let (p50, p99) = (percentile(lags, 0.5), percentile(lags, 0.99))
    let met = p99 <= 250e6 && factor <= 2
    return DeferredFigure(
        name: "postgres_lag_stalled_horizon",
        line: "10 instances polling every 200 ms, a transaction open \(seconds) s, 160 sets and 50 SQL deletions "
            + "every 0.5 s: lag p50 \(formatDuration(p50)), p99 \(formatDuration(p99)); "
            + "\(String(format: "%.1f", rowsPerPoll)) index entries read per poll for "
            + "\(String(format: "%.1f", changedPerPoll)) rows changed (\(String(format: "%.2f", factor))×) "
            + "(p99 ≤ 250 ms, ≤ 2× \(met ? "met" : "MISSED"))",
        met: met,
        json: "\"seconds\":\(seconds),\"p50_ns\":\(jsonNumber(p50)),\"p99_ns\":\(jsonNumber(p99)),"
            + "\"limit_ns\":250000000,\"rows_read_per_poll\":\(jsonNumber(rowsPerPoll)),"
            + "\"rows_changed_per_poll\":\(jsonNumber(changedPerPoll)),\"factor\":\(jsonNumber(factor))")
}
