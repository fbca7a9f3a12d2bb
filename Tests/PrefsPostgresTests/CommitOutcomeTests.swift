import Foundation
import PostgresTestServer
import Prefs
import PrefsPostgres
import PrefsTestSupport
import TestThreads
import Testing

/// The connection cut while `COMMIT` runs: the store reads the outcome back from the row and tells the caller.
@Suite("PostgresStore commit outcomes", .serialized, .ownThreads)
struct CommitOutcomeTests {
    @Test(arguments: [true, false])
    func anUpdateWhoseCommitWentUnansweredReportsWhatHappened(commits: Bool) async throws {
        // Each step must come before the lock timeout below runs out: with every step on a thread of its own, no other test
        // holds the test up between them.
        try await onOwnThreads { try await Self.updateWithUnansweredCommit(commits: commits) }
    }

    private static func updateWithUnansweredCommit(commits: Bool) async throws {
        let database = try ProxiedDatabase()
        defer { database.destroy() }
        // Room for the steps below on a busy machine (the COMMIT waits at the gate under this lock timeout): the
        // gate is opened, or the transaction ended, long before any of these.
        let limits = PostgresStore.Limits(
            lockTimeout: .seconds(400), statementTimeout: .seconds(600), writeDeadline: .seconds(500),
            networkTimeout: .seconds(300), heartbeat: .seconds(300))
        let store = try PostgresStore(connection: database.connection, namespace: "com.example.app", limits: limits)
        defer { store.close() }
        try store.setValue(.int(1), forKey: "count")
        // From now on a commit that wrote a row first waits for a gate (an advisory lock) this test holds.
        try database.sql(
            """
            CREATE FUNCTION gate() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN PERFORM pg_advisory_xact_lock(4242); RETURN NULL; END $$;
            CREATE CONSTRAINT TRIGGER gate AFTER INSERT OR UPDATE ON prefs_values
                DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION gate();
            """)
        let gate = try Session(database.server.connectionString(database: database.name))
        try gate.execute("SELECT pg_advisory_lock(4242)")

        let outcome = Locked<(value: PrefValue?, error: PostgresStoreError?)?>(nil)
        Thread {
            do {
                let updated = try store.updateValue(forKey: "count") { current in
                    guard case .int(let number)? = current else { return current }
                    return .int(number + 1)
                }
                outcome.withLock { $0 = (updated, nil) }
            } catch {
                outcome.withLock {
                    $0 = (nil, error as? PostgresStoreError ?? .serverError(sqlState: "", message: "\(error)"))
                }
            }
        }.start()
        func waitingForLocks(_ query: String) throws -> [[String?]] {
            try database.sql(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' "
                    + "AND query LIKE '\(query)'")
        }
        try await eventually("the COMMIT to wait at the gate", within: .seconds(300)) {
            try waitingForLocks("COMMIT").count == 1 || outcome.withLock { $0 } != nil
        }
        if let early = outcome.withLock({ $0 }) {
            Issue.record("updateValue ended before its COMMIT reached the gate: \(early)")
            return
        }
        let committing = try #require(try waitingForLocks("COMMIT").first?.first ?? nil)
        database.proxy.cut()
        // The store connects again and waits for the row's lock, which the unfinished transaction still holds.
        try await eventually("the store to wait for the row's lock", within: .seconds(300)) {
            (try? waitingForLocks("%prefs_values%"))?.count == 1 || outcome.withLock { $0 } != nil
        }
        if let early = outcome.withLock({ $0 }) {
            // An answer before the gate opens is right only if the transaction has ended all the same: its backend
            // was ended by something outside this test (the server log says what). It must then be the truth.
            var backend: [[String?]]? = nil
            try await eventually("the server to answer (it may be recovering)", within: .seconds(120)) {
                backend = try? database.sql("SELECT pid FROM pg_stat_activity WHERE pid = \(committing)")
                return backend != nil
            }
            let log = (try? String(contentsOfFile: database.server.logFile, encoding: .utf8)) ?? ""
            if backend?.isEmpty == true {
                print("CommitOutcomeTests: the committing backend ended by itself; server log:\n\(log.suffix(3_000))")
                guard case .connectionLost? = early.error else {
                    Issue.record("the transaction ended without committing, but updateValue said \(early)")
                    return
                }
                #expect(try database.sql("SELECT value::text FROM prefs_values WHERE key = 'count'") == [["1"]])
                #expect(try store.value(forKey: "count") == .int(1))
                return
            }
            Issue.record("updateValue ended before the transaction did: \(early)\nserver log:\n\(log.suffix(3_000))")
            return
        }
        if commits {
            try gate.execute("SELECT pg_advisory_unlock(4242)")
        } else {
            try database.sql("SELECT pg_terminate_backend(\(committing))")
        }
        try await eventually("updateValue to return or throw", within: .seconds(300)) { outcome.withLock { $0 } != nil }
        let (value, error) = try #require(outcome.withLock { $0 })
        let row = try database.sql("SELECT value::text FROM prefs_values WHERE key = 'count'")
        if commits {
            #expect(error == nil && value == .int(2), "\(String(describing: error))")
            #expect(row == [["2"]])
            #expect(try store.value(forKey: "count") == .int(2))
        } else {
            guard case .connectionLost? = error else {
                Issue.record("expected connectionLost, got \(String(describing: error)), \(String(describing: value))")
                return
            }
            #expect(row == [["1"]])
            #expect(try store.value(forKey: "count") == .int(1))
        }
    }
}
