import Foundation
import PostgresTestServer
import Prefs
import PrefsPostgres
import PrefsTestSupport
import Synchronization
import TestThreads
import Testing

/// A database of its own behind a PgBouncer of its own in `mode` (pool of 20: in session pooling each store holds two
/// server connections, its change feed's and its writer's), on the shared test server.
struct PooledDatabase {
    let database: Database
    let pooler: Pooler

    init(_ mode: Pooler.Mode) throws {
        database = try Database()
        pooler = try Pooler.start(for: database.server, mode: mode, poolSize: 20)
    }

    /// The database through the pooler; `name` makes the connection string, and so the store's connection, its own.
    func connection(_ name: String = "prefs") -> String {
        pooler.connectionString(database: database.name) + "&application_name=\(name)"
    }

    @discardableResult
    func sql(_ text: String) throws -> [[String?]] { try database.sql(text) }

    func destroy() { pooler.destroy() }
}

/// Every operation of the store through a real PgBouncer, in session and in transaction pooling: nothing outlives a
/// transaction on the server's side, changes reach other instances without `LISTEN`, and a store that cannot hear
/// its notifications says so once (or, told to listen, throws).
@Suite("PostgresStore through PgBouncer", .ownThreads, .serialized)
struct PoolerTests {
    init() { Reports.install() }

    /// The reports that say notifications are not heard.
    private static var deafnessReports: Int {
        Reports.everything().filter { String(describing: $0.error).contains("does not carry LISTEN") }.count
    }

    @Test(arguments: Pooler.Mode.allCases)
    func everyOperationWorksThroughThePooler(_ mode: Pooler.Mode) async throws {
        let pooled = try PooledDatabase(mode)
        defer { pooled.destroy() }
        let reportsBefore = Self.deafnessReports
        let automatic = try PostgresStore(
            connection: pooled.connection("a"), namespace: "com.example.app",
            changeSource: .automatic(pollingEvery: .milliseconds(50)))
        defer { automatic.close() }
        let polling = try PostgresStore(
            connection: pooled.connection("b"), namespace: "com.example.app",
            changeSource: .poll(every: .milliseconds(50)))
        defer { polling.close() }
        // Session pooling carries LISTEN; transaction pooling does not, and the automatic store says so, once.
        #expect(automatic.changesArePolled == (mode == .transaction))
        #expect(Self.deafnessReports - reportsBefore == (mode == .transaction ? 1 : 0))

        try automatic.setValue(.string("dark"), forKey: "theme")
        try await eventually("the polling store to see the set") {
            try polling.value(forKey: "theme") == .string("dark")
        }
        try polling.updateValue(forKey: "count") { _ in .int(1) }
        try await eventually("the automatic store to see the update") {
            try automatic.value(forKey: "count") == .int(1)
        }
        try polling.replaceAll(["theme": .string("light"), "size": .int(3)])
        try await eventually("the automatic store to see replaceAll") {
            try automatic.allValues() == ["theme": .string("light"), "size": .int(3)]
        }
        try automatic.setValue(nil, forKey: "size")
        try await eventually("the removal to reach the polling store") { try polling.value(forKey: "size") == nil }
        // SQL's own writes and deletions reach both, through the table's change stamp and its log of removals.
        try pooled.sql("INSERT INTO prefs_values (namespace, key, value) VALUES ('com.example.app', 'sql', '1')")
        try await eventually("SQL's insert to reach both") {
            try automatic.value(forKey: "sql") == .int(1) && polling.value(forKey: "sql") == .int(1)
        }
        try pooled.sql("DELETE FROM prefs_values WHERE key = 'theme'")
        try await eventually("SQL's delete to reach both") {
            try automatic.value(forKey: "theme") == nil && polling.value(forKey: "theme") == nil
        }

        // Writes at once from four threads, each store on a client connection of its own (the issue's 65 of 200 once
        // failed with 42P05, a prepared statement left on a server connection another client had used).
        let failures = Locked<[String]>([])
        let writers = try (0..<4).map { index in
            try PostgresStore(
                connection: pooled.connection("w\(index)"), namespace: "com.example.app",
                changeSource: .poll(every: .seconds(1)))
        }
        let finished = Locked(0)
        for (index, writer) in writers.enumerated() {
            Thread {
                for round in 0..<25 {
                    do {
                        try writer.setValue(.int(Int64(round)), forKey: "w\(index)-\(round)")
                        try writer.updateValue(forKey: "shared") { value in
                            guard case .int(let count)? = value else { return .int(1) }
                            return .int(count + 1)
                        }
                    } catch {
                        failures.withLock { $0.append("\(error)") }
                    }
                }
                finished.withLock { $0 += 1 }
            }.start()
        }
        try await eventually("the writers to finish", within: .seconds(120)) { finished.withLock { $0 } == 4 }
        for writer in writers { writer.close() }
        #expect(failures.withLock { $0 } == [])
        #expect(try pooled.sql("SELECT value::text FROM prefs_values WHERE key = 'shared'") == [["100"]])

        // Nothing the stores did outlives a transaction: bare sessions through the pooler, on whichever server
        // connections it hands out, find the server's defaults and no prepared statement.
        for _ in 0..<12 {
            let session = try Session(pooled.connection("bare"))
            let found = try session.execute(
                "SELECT current_setting('lock_timeout'), current_setting('statement_timeout'), "
                    + "current_setting('search_path'), coalesce(current_setting('prefs.notify_inline', true), ''), "
                    + "(SELECT count(*) FROM pg_prepared_statements), (SELECT count(*) FROM pg_listening_channels())")
            #expect(found == [["0", "0", "\"$user\", public", "", "0", "0"]], "\(found)")
        }
        // A restart of the pooler cuts every connection: the automatic store reconnects, checks again, and reports
        // nothing more.
        let reconnections = automatic.reconnectionCount  // before the stop: a quick reconnection is not missed
        try pooled.pooler.stop()
        try pooled.pooler.restart()
        try await eventually("the automatic store to reconnect") { automatic.reconnectionCount > reconnections }
        try polling.setValue(.int(9), forKey: "after")
        try await eventually("a change after the restart to arrive") { try automatic.value(forKey: "after") == .int(9) }
        #expect(Self.deafnessReports - reportsBefore == (mode == .transaction ? 1 : 0))
    }

    /// PgBouncer switched from session to transaction pooling by a `SIGHUP` while the store listens (its client stays
    /// connected, the `LISTEN` no longer reaches it): the store's re-check at its next heartbeat finds that its own
    /// `NOTIFY` does not come back, reports that once and polls, so the next change arrives within the interval.
    @Test func aPoolerReloadedIntoTransactionModeIsNoticedReportedOnceAndPolled() async throws {
        let pooled = try PooledDatabase(.session)
        defer { pooled.destroy() }
        let reportsBefore = Self.deafnessReports
        let store = try PostgresStore(
            connection: pooled.connection("a"), namespace: "com.example.app",
            limits: PostgresStore.Limits(heartbeat: .seconds(1)),
            changeSource: .automatic(pollingEvery: .milliseconds(200)))
        defer { store.close() }
        let other = try PostgresStore(
            connection: pooled.connection("b"), namespace: "com.example.app",
            changeSource: .poll(every: .seconds(60)))
        defer { other.close() }
        #expect(!store.changesArePolled)
        try other.setValue(.int(1), forKey: "k")
        try await eventually("the notification to bring the change") { try store.value(forKey: "k") == .int(1) }
        try pooled.pooler.reload(mode: .transaction)
        try await eventually("the store to notice it no longer hears", within: .seconds(60)) {
            store.changesArePolled && Self.deafnessReports - reportsBefore == 1
        }
        try other.setValue(.int(2), forKey: "k")
        try await eventually("the poll to bring the next change") { try store.value(forKey: "k") == .int(2) }
        #expect(Self.deafnessReports - reportsBefore == 1)
    }

    @Test(arguments: Pooler.Mode.allCases)
    func aStoreToldToListenOpensOnlyWhereItHears(_ mode: Pooler.Mode) async throws {
        let pooled = try PooledDatabase(mode)
        defer { pooled.destroy() }
        do {
            let store = try PostgresStore(
                connection: pooled.connection(), namespace: "com.example.app", changeSource: .listen)
            #expect(mode == .session, "a .listen store opened through transaction pooling")
            #expect(!store.changesArePolled)
            let other = try PostgresStore(
                connection: pooled.connection("writer"), namespace: "com.example.app",
                changeSource: .poll(every: .seconds(60)))
            try other.setValue(.int(1), forKey: "k")
            try await eventually("the notification to bring the change") { try store.value(forKey: "k") == .int(1) }
            other.close()
            store.close()
        } catch let error as PostgresStoreError {
            #expect(mode == .transaction, "\(error)")
            guard case .connectionRefused(let reason) = error else {
                Issue.record("expected connectionRefused, got \(error)")
                return
            }
            #expect(reason.contains("transaction mode") && reason.contains(".poll(every:)"), "\(reason)")
        }
    }
}
