import Foundation
import PostgresTestServer
import Prefs
import PrefsPostgres
import PrefsTestSupport
import Synchronization
import TestThreads
import Testing

/// A fleet past the server's connections: 200 instances, each on a client connection of its own, in four processes,
/// through PgBouncer in transaction pooling with a server pool of 10.
///
/// Not in the sanitizer builds (scripts/tsan.sh, scripts/asan.sh export `PREFS_SANITIZER_SCOPE`): the paths it runs
/// are the ones `PoolerTests` runs there, and 200 sanitized instances would cost CI minutes for no other finding.
@Suite(
    "PostgresStore fleet through PgBouncer", .ownThreads,
    .enabled(if: Pooler.installed && ProcessInfo.processInfo.environment["PREFS_SANITIZER_SCOPE"] == nil))
struct FleetTests {
    static let processes = 4
    static let perProcess = 50
    static let changes = 100
    static let pollInterval = 200

    /// Each of 100 changes, made by random instances, reaches every instance exactly once, through a restart of the
    /// pooler (after a third of them) and of PostgreSQL (after two thirds), while the server holds at most 12
    /// connections. Prints the lag from a change's `set` to each instance's announcement (p50, p99); prefs-bench's
    /// `postgres_fleet_*` and `postgres_idle_fleet_*` figures measure the fleet's lag and idle cost.
    @Test func everyChangeReachesEveryInstanceOnceThroughRestartsOnTwelveConnections() async throws {
        let server = try PostgresServer.start()
        defer { try? server.destroy() }
        let name = try server.createDatabase()
        let pooler = try Pooler.start(for: server, mode: .transaction, poolSize: 10)
        defer { pooler.destroy() }
        let connection = pooler.connectionString(database: name)
        let instances = Self.processes * Self.perProcess

        // The most server connections seen, sampled every 20 ms on a thread of its own for the whole test.
        let most = Locked(0)
        let sampling = Locked(true)
        let sampler = Thread {
            while sampling.withLock({ $0 }) {
                if let count = try? pooler.serverConnections(database: name) {
                    most.withLock { $0 = max($0, count) }
                }
                usleep(20_000)  // a sampling period, not a wait for anything
            }
        }
        sampler.start()
        defer { sampling.withLock { $0 = false } }

        let children = try (0..<Self.processes).map { index in
            try ChildProcess(
                Helper.url,
                [
                    "fleet", "com.example.fleet", String(Self.perProcess), String(index * Self.perProcess),
                    String(Self.pollInterval),
                ], environment: ["PREFS_PG_CONNECTION": connection], input: .pipe, timeLimit: .seconds(600))
        }
        defer { for child in children { child.kill() } }
        // Every line the children print, gathered on tasks of their own.
        let seen = Locked<[String: [Int: Int]]>([:])  // key → instance → announcements of the key's own value
        let arrivals = Locked<[String: [UInt64]]>([:])  // key → when each instance announced it
        let started = Locked<[String: UInt64]>([:])  // key → when its set began
        let ready = Locked(0)
        let problems = Locked<[String]>([])
        let markers = Locked<Set<String>>([])  // the instances that announced the last change, the marker
        for lines in children.map({ $0.linesWithErrors() }) {
            Task {
                for await (isError, line) in lines {
                    let words = line.split(separator: " ").map(String.init)
                    if isError {
                        // The stores report the restarts they live through ("Prefs: read failed: …").
                        if !line.hasPrefix("Prefs: ") { problems.withLock { $0.append(line) } }
                    } else if words == ["ready"] {
                        ready.withLock { $0 += 1 }
                    } else if words.count == 5, words[0] == "seen", words[2] == "marker" {
                        _ = markers.withLock { $0.insert(words[1]) }
                    } else if words.count == 5, words[0] == "seen", let instance = Int(words[1]),
                        let nanos = UInt64(words[4])
                    {
                        // A change's key is c-N and its value N; the writer's own announcement counts too.
                        guard words[2].hasPrefix("c-"), words[3] == String(words[2].dropFirst(2)) else {
                            problems.withLock { $0.append("unexpected: \(line)") }
                            continue
                        }
                        seen.withLock { $0[words[2], default: [:]][instance, default: 0] += 1 }
                        arrivals.withLock { $0[words[2], default: []].append(nanos) }
                    } else if words.count == 3, words[0] == "set", let nanos = UInt64(words[2]) {
                        started.withLock { $0[words[1]] = nanos }
                    } else {
                        problems.withLock { $0.append("unexpected: \(line)") }
                    }
                }
            }
        }
        try await eventually("the fleet to open", within: .seconds(120)) {
            ready.withLock { $0 } == Self.processes
        }

        var random = SystemRandomNumberGenerator()
        for change in 1...Self.changes {
            if change == Self.changes / 3 + 1 {
                try pooler.stop()
                try pooler.restart()
            }
            if change == 2 * Self.changes / 3 + 1 {
                try server.stop()
                try server.restart()
            }
            let instance = Int.random(in: 0..<instances, using: &random)
            children[instance / Self.perProcess].write("set \(instance) c-\(change) \(change)\n")
            // Changes overlap: the next one is sent before this one has reached everyone.
            try await Task.sleep(for: .milliseconds(30))
        }
        let everywhere = { @Sendable in
            seen.withLock { seen in seen.count == Self.changes && seen.values.allSatisfy { $0.count == instances } }
        }
        do {
            try await eventually("every change to reach every instance", within: .seconds(90)) { everywhere() }
        } catch {
            let missing = seen.withLock { seen in
                (1...Self.changes).compactMap { change -> String? in
                    let count = seen["c-\(change)"]?.count ?? 0
                    return count == instances ? nil : "c-\(change): \(count)"
                }
            }
            Issue.record(
                "changes that did not reach every instance: \(missing.prefix(5)); \(problems.withLock { $0.prefix(20) }); sets: \(started.withLock { $0.count })"
            )
            throw error
        }
        // One more change, the marker, from one instance: each instance announces in the order it reads, so once every
        // instance has announced the marker, anything it would repeat of the changes before has been printed.
        children[0].write("set 0 marker 1\n")
        try await eventually("the marker to reach every instance", within: .seconds(90)) {
            markers.withLock { $0.count } == instances
        }
        for child in children { child.write("quit\n") }
        for child in children { _ = try await child.ended(within: 60) }
        sampling.withLock { $0 = false }

        #expect(problems.withLock { $0 } == [])
        let repeated = seen.withLock { seen in
            seen.flatMap { key, counts in counts.filter { $0.value != 1 }.map { "\(key)@\($0.key)×\($0.value)" } }
        }
        #expect(repeated == [], "announced more than once")
        #expect(most.withLock { $0 } <= 12, "server connections: \(most.withLock { $0 })")

        // Lag from each set's start to each instance's announcement, for the changes before the first restart.
        let lags = started.withLock { started in
            arrivals.withLock { arrivals in
                (1...(Self.changes / 3)).flatMap { change -> [Double] in
                    let key = "c-\(change)"
                    guard let start = started[key] else { return [] }
                    return (arrivals[key] ?? []).map { Double(Int64($0) - Int64(start)) / 1e6 }
                }.sorted()
            }
        }
        let p50 = lags.isEmpty ? -1 : lags[lags.count / 2]
        let p99 = lags.isEmpty ? -1 : lags[min(lags.count - 1, lags.count * 99 / 100)]
        print(
            "fleet of \(instances) through PgBouncer (transaction, pool 10), poll every \(Self.pollInterval) ms: "
                + "lag p50 \(Int(p50)) ms, p99 \(Int(p99)) ms; most server connections \(most.withLock { $0 })")
    }
}
