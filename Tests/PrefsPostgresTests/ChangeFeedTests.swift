import Foundation
import PostgresTestServer
import Prefs
import PrefsPostgres
import PrefsTestSupport
import TestThreads
import Testing

/// The change feed on a real server: exact whatever lands between an instance's own write and its next read, never
/// held up by the instance's own write, never silent when it cannot be read, and costing what changed.
@Suite("PostgresStore's change feed", .ownThreads)
struct ChangeFeedTests {
    init() { Reports.install() }

    /// How an instance reaches the server and learns of changes.
    enum Path: String, CaseIterable, CustomStringConvertible {
        /// Direct, `.automatic`: it listens.
        case listening
        /// Direct, polling every 200 ms.
        case polling
        /// Through PgBouncer in transaction pooling, polling every 200 ms.
        case pooled
        var description: String { rawValue }

        var source: PostgresStore.ChangeSource {
            self == .listening ? .automatic : .poll(every: .milliseconds(200))
        }
    }

    /// A database reached as `path` says: `connection(name)` gives each store a connection (and so a `Server`) of its
    /// own; `sql` runs directly on the server.
    struct Place {
        let database: Database
        let pooler: Pooler?

        init(_ path: ChangeFeedTests.Path) throws {
            database = try Database()
            pooler = path == .pooled ? try Pooler.start(for: database.server, mode: .transaction) : nil
        }

        func connection(_ name: String) -> String {
            (pooler?.connectionString(database: database.name) ?? database.connection)
                + "&fallback_application_name=\(name)&application_name=\(name)"
        }

        /// Another instance, on a connection of its own, that writes and hardly reads.
        func otherInstance() throws -> PostgresStore {
            try PostgresStore(
                connection: connection("other"), namespace: "com.example.app",
                changeSource: .poll(every: .seconds(60)))
        }

        func destroy() { pooler?.destroy() }
    }

    // MARK: Exact after every interleaving

    /// The case of the issue: an instance writes `k = 2` and `k2 = 3` while its read of the feed is on its way (held
    /// by the proxy after the instance sent it, before the server took its snapshot); meanwhile SQL deletes `k` and
    /// deletes and re-inserts `k2 = 9`, at version 1. The instance ends with the table: no `k`, and `k2 = 9`.
    @Test(arguments: [Path.polling, .listening])
    func whatLandsBetweenAnOwnWriteAndTheNextReadIsFollowed(_ path: Path) async throws {
        let database = try ProxiedDatabase()
        defer { database.destroy() }
        let store = try PostgresStore(
            connection: database.connection, namespace: "com.example.app",
            changeSource: path == .listening ? .automatic : .poll(every: .seconds(1)))
        defer { store.close() }
        try store.setValue(.int(1), forKey: "k")
        try store.setValue(.int(1), forKey: "k2")
        database.proxy.holdMessage(containing: "prefs_values_feed")
        // Listening, a change made elsewhere sends the read; polling, the next poll does.
        if path == .listening {
            try database.sql("INSERT INTO prefs_values (namespace, key, value) VALUES ('com.example.app', 'o', '1')")
        }
        try await eventually("the instance's read of the feed to be on its way") { database.proxy.messagesHeld == 1 }
        try store.setValue(.int(2), forKey: "k")
        try store.setValue(.int(3), forKey: "k2")
        #expect(try store.value(forKey: "k") == .int(2))
        try database.sql(
            """
            BEGIN; DELETE FROM prefs_values WHERE key = 'k';
            DELETE FROM prefs_values WHERE key = 'k2';
            INSERT INTO prefs_values (namespace, key, value) VALUES ('com.example.app', 'k2', '9'); COMMIT
            """)
        database.proxy.releaseHeld()
        let table = try PostgresStore(
            connection: database.connection + "&application_name=reader", namespace: "com.example.app"
        ).allValues()
        #expect(table["k"] == nil && table["k2"] == .int(9))
        try await eventually("the instance to hold what the table holds", within: .seconds(30)) {
            try store.allValues() == table
        }
    }

    // MARK: Never held up by the instance's own write

    /// While the instance runs a transform that does not end until the test says so, another instance's change
    /// reaches it: the change arrives while the write is still in progress.
    @Test(arguments: Path.allCases)
    func aChangeArrivesWhileTheInstanceRunsATransform(_ path: Path) async throws {
        let place = try Place(path)
        defer { place.destroy() }
        let instance = try PostgresStore(
            connection: place.connection("instance"), namespace: "com.example.app", changeSource: path.source)
        defer { instance.close() }
        let other = try place.otherInstance()
        defer { other.close() }
        try instance.setValue(.int(0), forKey: "counter")
        let running = Locked(false)
        let finished = Locked(false)
        let release = DispatchSemaphore(value: 0)
        Thread {
            _ = try? instance.updateValue(forKey: "counter") { _ in
                running.withLock { $0 = true }
                _ = release.wait(timeout: .now() + 120)  // a hang guard: the test releases it
                return .int(1)
            }
            finished.withLock { $0 = true }
        }.start()
        try await eventually("the transform to run") { running.withLock { $0 } }
        try other.setValue(.int(5), forKey: "elsewhere")
        try await eventually("the other instance's change to arrive", within: .seconds(60)) {
            try instance.value(forKey: "elsewhere") == .int(5)
        }
        #expect(!finished.withLock { $0 }, "the change waited for the transform")
        // The feed's connection and the one the transform holds: one more than idle reading alone needs.
        #expect(instance.openConnections == 2)
        release.signal()
        try await eventually("the update to finish") { finished.withLock { $0 } }
        #expect(try instance.value(forKey: "counter") == .int(1))
    }

    /// While the instance's `set` waits for a row lock another session holds, another instance's change reaches it.
    @Test(arguments: Path.allCases)
    func aChangeArrivesWhileTheInstancesSetWaitsForARowLock(_ path: Path) async throws {
        let place = try Place(path)
        defer { place.destroy() }
        let limits = PostgresStore.Limits(lockTimeout: .seconds(120), writeDeadline: .seconds(120))
        let instance = try PostgresStore(
            connection: place.connection("instance"), namespace: "com.example.app", limits: limits,
            changeSource: path.source)
        defer { instance.close() }
        let other = try place.otherInstance()
        defer { other.close() }
        try instance.setValue(.int(1), forKey: "locked")
        let holder = try Session(place.database.connection)
        try holder.execute("BEGIN")
        try holder.execute("SELECT * FROM prefs_values WHERE key = 'locked' FOR UPDATE")
        let finished = Locked(false)
        Thread {
            _ = try? instance.setValue(.int(2), forKey: "locked")
            finished.withLock { $0 = true }
        }.start()
        try await eventually("the set to wait for the row lock") {
            try place.database.sql(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    + "AND wait_event_type = 'Lock'") == [["1"]]
        }
        try other.setValue(.int(5), forKey: "elsewhere")
        try await eventually("the other instance's change to arrive", within: .seconds(60)) {
            try instance.value(forKey: "elsewhere") == .int(5)
        }
        #expect(!finished.withLock { $0 }, "the change waited for the set")
        #expect(instance.openConnections == 2)
        try holder.execute("ROLLBACK")
        try await eventually("the set to finish") { finished.withLock { $0 } }
        #expect(try instance.value(forKey: "locked") == .int(2))
    }

    /// A notification of the instance's own write costs no read of the feed (it knows what it wrote); one of another
    /// instance's write costs one.
    @Test func aNotificationOfAnOwnWriteCostsNoRead() async throws {
        let database = try Database()
        // No heartbeat read during the test: every read counted is one a notification asked for.
        let limits = PostgresStore.Limits(heartbeat: .seconds(3_600))
        let instance = try PostgresStore(connection: database.connection, namespace: "com.example.app", limits: limits)
        defer { instance.close() }
        let other = try PostgresStore(
            connection: database.connection + "&application_name=other", namespace: "com.example.app", limits: limits)
        defer { other.close() }
        try instance.setValue(.int(0), forKey: "first")  // the writer's connection now exists
        try other.setValue(.int(1), forKey: "marker")
        try await eventually("the marker") { try instance.value(forKey: "marker") == .int(1) }
        let reads = instance.feedReadCount
        for value in 1...20 { try instance.setValue(.int(Int64(value)), forKey: "own") }
        // The other instance's write comes after the own ones: once it has arrived, so have their hints.
        try other.setValue(.int(2), forKey: "marker")
        try await eventually("the second marker") { try instance.value(forKey: "marker") == .int(2) }
        #expect(instance.feedReadCount == reads + 1)
    }

    // MARK: Never deaf or late without saying so

    /// A role that loses `SELECT` on `prefs_removals` while its instance runs: every read of the feed fails, the
    /// failure is reported once (however often the read is retried) and is the store's `changeFeedFailure`; once the
    /// grant is back, the change made meanwhile arrives and the failure clears.
    @Test func aRevokedGrantIsReportedOnceRetriedAndRecovered() async throws {
        let database = try Database()
        try database.store().close()  // the tables, created by their owner
        let role = "app_" + UUID().uuidString.lowercased().prefix(8)
        try database.sql("CREATE ROLE \(role) LOGIN PASSWORD 'app-pw'")
        try database.sql("GRANT SELECT, INSERT, UPDATE ON prefs_values TO \(role)")
        try database.sql("GRANT SELECT ON prefs_removals, prefs_schema TO \(role)")
        let instance = try PostgresStore(
            connection: database.server.connectionString(database: database.name, user: role, password: "app-pw"),
            namespace: "com.example.app")
        defer { instance.close() }
        let other = try database.store()
        defer { other.close() }
        #expect(instance.changeFeedFailure == nil)
        let reports = {
            Reports.everything().filter {
                let text = String(describing: $0.error)
                return text.contains("reading the change feed") && text.contains("permission denied")
            }.count
        }
        try database.sql("REVOKE SELECT ON prefs_removals FROM \(role)")
        try other.setValue(.int(1), forKey: "k")
        try await eventually("the failure to show") { instance.changeFeedFailure != nil }
        guard case .serverError(let code, let message)? = instance.changeFeedFailure else {
            Issue.record("expected a server error, got \(String(describing: instance.changeFeedFailure))")
            return
        }
        #expect(code == "42501" && message.contains("prefs_removals"), "\(message)")
        let failures = instance.feedFailureCount
        try await eventually("the read to be retried") { instance.feedFailureCount >= failures + 3 }
        #expect(reports() == 1)
        #expect(try instance.value(forKey: "k") == nil)
        try database.sql("GRANT SELECT ON prefs_removals, prefs_schema TO \(role)")
        try await eventually("the change made meanwhile to arrive") { try instance.value(forKey: "k") == .int(1) }
        try await eventually("the failure to clear") { instance.changeFeedFailure == nil }
        // The role the docs' table names for an instance needs nothing more: it writes, and its writes arrive.
        try instance.setValue(.int(2), forKey: "mine")
        try await eventually("the instance's write to arrive") { try other.value(forKey: "mine") == .int(2) }
    }

    // MARK: Cost bounded by what changed

    /// With a transaction holding its id open, a read of the feed brings the rows changed since the read before it,
    /// not every row written since that transaction began.
    @Test func aLongTransactionDoesNotMakeReadsBringWhatTheyBroughtBefore() async throws {
        let database = try Database()
        let instance = try PostgresStore(
            connection: database.connection, namespace: "com.example.app",
            changeSource: .poll(every: .milliseconds(50)))
        defer { instance.close() }
        let other = try database.store()
        defer { other.close() }
        let holder = try Session(database.connection)
        try holder.execute("BEGIN")
        try holder.execute("SELECT pg_current_xact_id()")
        for index in 0..<100 { try other.setValue(.int(Int64(index)), forKey: "k\(index)") }
        try await eventually("the hundred writes to arrive") { try instance.value(forKey: "k99") == .int(99) }
        // Counted from a read that began after they arrived: every row a read brought is counted once it ends.
        let settled = instance.feedReadCount
        try await eventually("two more reads") { instance.feedReadCount >= settled + 2 }
        let (reads, rows) = (instance.feedReadCount, instance.feedRowsRead)
        try database.sql("DELETE FROM prefs_values WHERE key IN ('k1', 'k2', 'k3', 'k4', 'k5')")
        try other.setValue(.int(1), forKey: "one")
        try await eventually("the changes to arrive") {
            try instance.value(forKey: "one") == .int(1) && instance.value(forKey: "k5") == nil
        }
        try await eventually("five more reads") { instance.feedReadCount >= reads + 5 }
        // Six rows changed; each is read once (a key deleted is one row of the removal log).
        #expect(
            instance.feedRowsRead - rows == 6,
            "\(instance.feedRowsRead - rows) rows in \(instance.feedReadCount - reads) reads")
        try holder.execute("ROLLBACK")
    }

    /// `prefs_removals` keeps a deletion for an hour after every transaction below its horizon had ended; the next
    /// deletion prunes what is older.
    @Test func theLogOfDeletionsIsPrunedAfterAnHour() async throws {
        let database = try Database()
        let store = try database.store()
        defer { store.close() }
        try store.replaceAll(["a": .int(1), "b": .int(1)])
        try database.sql(
            """
            INSERT INTO prefs_removals (namespace, key, changed, logged, horizon) VALUES
                ('com.example.app', 'old', '10', clock_timestamp() - interval '3 hours', '5'),
                ('com.example.app', 'sample', '2000', clock_timestamp() - interval '2 hours', '1000'),
                ('com.example.app', 'young', '20', clock_timestamp() - interval '10 minutes', '5')
            """)
        try database.sql("DELETE FROM prefs_values WHERE key = 'a'")
        // 'old' is older than an hour and below the horizon of a row logged more than an hour ago: pruned. 'sample'
        // is the horizon's own row (its transaction was in progress then), 'young' is younger than an hour, and the
        // deletion just made is new: kept.
        #expect(
            try database.sql("SELECT key FROM prefs_removals ORDER BY key") == [["a"], ["sample"], ["young"]])
    }

    // MARK: Keys the index cannot hold

    /// A namespace and key of more than 2 678 bytes together are refused before anything is sent, by every write;
    /// one at the limit is written and read back by another instance.
    @Test func aKeyTooLongForTheIndexIsRefusedBeforeTheRoundTrip() async throws {
        let database = try Database()
        let store = try database.store()
        defer { store.close() }
        let watcher = try database.store()
        defer { watcher.close() }
        let letters = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        var random = SystemRandomNumberGenerator()
        // Random letters, which PostgreSQL cannot compress: the entry takes all its bytes.
        let fits = String(
            (0..<(2_678 - "com.example.app".utf8.count)).map { _ in letters.randomElement(using: &random)! })
        try store.setValue(.int(1), forKey: fits)
        try await eventually("the watcher to read the longest key") { try watcher.value(forKey: fits) == .int(1) }
        let tooLong = fits + "x"
        let refused: (any Error) -> Bool = { error in
            guard case .tooLarge(let path, let size, let limit)? = error as? PrefsError else { return false }
            return size == 2_679 && limit == 2_678 && path.contains("index entry")
                && String(describing: error).contains("2678 bytes")
        }
        #expect { try store.setValue(.int(2), forKey: tooLong) } throws: { refused($0) }
        #expect { try store.updateValue(forKey: tooLong) { _ in .int(2) } } throws: { refused($0) }
        #expect { try store.replaceAll([tooLong: .int(2)]) } throws: { refused($0) }
        #expect(try database.sql("SELECT count(*) FROM prefs_values") == [["1"]])
    }
}
