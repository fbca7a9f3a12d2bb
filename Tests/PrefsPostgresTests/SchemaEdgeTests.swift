import Foundation
import PostgresTestServer
import Prefs
import PrefsPostgres
import PrefsTestSupport
import TestThreads
import Testing

/// Keys, versions and schemas at their edges, and a listener that cannot reconnect.
@Suite("PostgresStore edges", .ownThreads)
struct SchemaEdgeTests {
    @Test func sqlWritesOfALongControlCharacterKeyWork() async throws {
        let database = try Database()
        let store = try database.store()
        let watcher = try database.store()
        let key = String(repeating: "\u{1}", count: 1_400)
        try store.setValue(.int(1), forKey: key)
        try await eventually("the watcher to see the long key") { try watcher.value(forKey: key) == .int(1) }
        // The trigger's hint falls back to the namespace alone instead of failing the statement.
        try database.sql("UPDATE prefs_values SET value = '2' WHERE namespace = 'com.example.app'")
        try await eventually("the SQL update to arrive") { try watcher.value(forKey: key) == .int(2) }
        try database.sql("DELETE FROM prefs_values WHERE namespace = 'com.example.app'")
        try await eventually("the SQL delete to arrive") { try watcher.allValues().isEmpty }
        try await eventually("the SQL delete to reach the writing store too") { try store.allValues().isEmpty }
    }

    /// docs/PostgresStore.md: a write's hint is `{"namespace": "…", "key": "…"}`, naming the key exactly whatever
    /// characters it holds, or only the namespace when that would not fit in a notification.
    @Test func aWritesHintNamesAnyKeyExactlyOrOnlyTheNamespaceWhenTooLong() throws {
        let database = try Database()
        let store = try database.store()
        let listener = try Session(database.connection)
        try listener.execute("LISTEN prefs_values")
        let keys = [
            "plain", "quote \" backslash \\ tab \t newline \n bell \u{7} sun ☀︎ slash /",
            String(repeating: "\u{1}", count: 1_400),
        ]
        for key in keys { try store.setValue(.int(1), forKey: key) }
        let heard = listener.notifications(atLeast: keys.count, within: 15)
        try #require(heard.count == keys.count, "\(heard)")
        for (payload, key) in zip(heard, keys).prefix(2) {
            #expect(
                try PrefValue(jsonText: payload)
                    == .dictionary(["namespace": .string("com.example.app"), "key": .string(key)]), "\(payload)")
        }
        #expect(heard[0] == #"{"namespace": "com.example.app", "key": "plain"}"#)
        #expect(heard[2] == #"{"namespace": "com.example.app"}"#)
    }

    @Test func aKeyAtTheLargestVersionStaysWritable() async throws {
        let database = try Database()
        let store = try database.store()
        let watcher = try database.store()
        try store.setValue(.int(1), forKey: "k")
        try database.sql("UPDATE prefs_values SET version = 9223372036854775807 WHERE key = 'k'")
        try await eventually("the watcher to read the row") { try watcher.value(forKey: "k") == .int(1) }
        try store.setValue(.int(2), forKey: "k")
        #expect(try store.value(forKey: "k") == .int(2))
        try await eventually("the watcher to see the write") { try watcher.value(forKey: "k") == .int(2) }
        #expect(try store.updateValue(forKey: "k") { _ in .int(3) } == .int(3))
        try database.sql("UPDATE prefs_values SET value = '4' WHERE key = 'k'")
        try await eventually("an SQL update to arrive") { try watcher.value(forKey: "k") == .int(4) }
    }

    @Test func droppedTablesAreCreatedAgainAndAHalfDroppedSchemaIsNamed() async throws {
        let database = try Database()
        try database.store().setValue(.int(1), forKey: "k")
        // The functions and their triggers' leftovers do not stop the schema from being created again.
        try database.sql("DROP TABLE prefs_values; DROP TABLE prefs_schema")
        let again = try database.store()
        try again.setValue(.int(2), forKey: "k")
        #expect(try database.sql("SELECT value::text FROM prefs_values") == [["2"]])
        again.close()

        try database.sql("DROP TABLE prefs_values")
        #expect {
            _ = try database.store()
        } throws: { error in
            guard case .damagedSchema(let reason)? = error as? PostgresStoreError else { return false }
            return reason.contains("prefs_values does not")
        }
        #expect(try database.sql("SELECT to_regclass('prefs_values') IS NULL") == [["t"]])
    }

    @Test func aVersion2SchemaIsUpgradedInPlaceKeepingItsRows() async throws {
        let database = try Database()
        let first = try database.store()
        try first.setValue(.string("kept"), forKey: "k")
        first.close()
        try database.sql("ALTER TABLE prefs_values DROP COLUMN writer; UPDATE prefs_schema SET version = 2")
        let upgraded = try database.store()
        #expect(try upgraded.value(forKey: "k") == .string("kept"))
        #expect(try upgraded.updateValue(forKey: "k") { _ in .string("new") } == .string("new"))
        #expect(try database.sql("SELECT version FROM prefs_schema") == [["5"]])
        #expect(try database.sql("SELECT value::text, writer IS NOT NULL FROM prefs_values") == [["\"new\"", "t"]])
        upgraded.close()
    }

    /// Version 4 adds the change feed to a version 3 table: its rows are kept and read, and a change made afterwards
    /// by SQL reaches an instance that only polls.
    @Test func aVersion3SchemaGainsTheChangeFeedKeepingItsRows() async throws {
        let database = try Database()
        let first = try database.store()
        try first.setValue(.string("kept"), forKey: "k")
        first.close()
        try database.sql(
            """
            DROP TABLE prefs_removals; DROP INDEX prefs_values_changes; ALTER TABLE prefs_values DROP COLUMN changed CASCADE;
            UPDATE prefs_schema SET version = 3
            """)
        let upgraded = try PostgresStore(
            connection: database.connection, namespace: "com.example.app", changeSource: .poll(every: .milliseconds(20))
        )
        #expect(try upgraded.value(forKey: "k") == .string("kept"))
        #expect(try database.sql("SELECT version FROM prefs_schema") == [["5"]])
        try database.sql("UPDATE prefs_values SET value = '\"by SQL\"' WHERE key = 'k'")
        try await eventually("the poll to read the change") { try upgraded.value(forKey: "k") == .string("by SQL") }
        upgraded.close()
    }

    /// Version 5 reads the feed from a snapshot and prunes its log of deletions: a version 4 database (its log holding
    /// a deletion already) is upgraded in place, keeps its rows, and SQL's deletions still reach an instance.
    @Test func aVersion4SchemaGainsTheSnapshotFeedKeepingItsRows() async throws {
        let database = try Database()
        let first = try database.store()
        try first.replaceAll(["k": .string("kept"), "gone": .int(1)])
        first.close()
        try database.sql("DELETE FROM prefs_values WHERE key = 'gone'")
        try database.sql(
            """
            DROP TRIGGER prefs_removals_prune ON prefs_values; DROP FUNCTION prefs_removals_prune();
            DROP FUNCTION prefs_values_feed(text, bigint, xid8, xid8[]); DROP INDEX prefs_removals_logged;
            ALTER TABLE prefs_removals DROP COLUMN logged, DROP COLUMN horizon; UPDATE prefs_schema SET version = 4
            """)
        let upgraded = try PostgresStore(
            connection: database.connection, namespace: "com.example.app", changeSource: .poll(every: .milliseconds(20))
        )
        defer { upgraded.close() }
        #expect(try upgraded.allValues() == ["k": .string("kept")])
        #expect(try database.sql("SELECT version FROM prefs_schema") == [["5"]])
        #expect(try database.sql("SELECT key, horizon FROM prefs_removals") == [["gone", "0"]])
        try upgraded.setValue(.int(2), forKey: "other")
        try database.sql("DELETE FROM prefs_values WHERE key = 'k'")
        try await eventually("the poll to read the deletion") { try upgraded.allValues() == ["other": .int(2)] }
    }

    @Test func aListenerThatCannotReconnectReportsTheRealCause() async throws {
        let server = try PostgresServer.shared()
        let role = "app_" + UUID().uuidString.lowercased().prefix(8)
        try server.execute("CREATE ROLE \(role) LOGIN PASSWORD 'first-pw'")
        let name = try server.createDatabase(owner: role)
        let store = try PostgresStore(
            connection: server.connectionString(database: name, user: role, password: "first-pw"),
            namespace: "com.example.app")
        try store.setValue(.int(1), forKey: "k")
        try server.execute("ALTER ROLE \(role) PASSWORD 'second-pw'")
        try server.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '\(role)'")
        try await eventually("the listener to report why it cannot reconnect") {
            if case .authenticationFailed? = store.listenerFailure { return true }
            return false
        }
        // The write connection was terminated too; once its server process is gone, the write finds it closed.
        try await eventually("the role's sessions to end") {
            try server.execute("SELECT count(*) FROM pg_stat_activity WHERE usename = '\(role)'") == [["0"]]
        }
        #expect {
            try store.setValue(.int(2), forKey: "k")
        } throws: { error in
            guard case .authenticationFailed? = error as? PostgresStoreError else { return false }
            return true
        }
        #expect(try store.value(forKey: "k") == .int(1))
        store.close()
    }
}
