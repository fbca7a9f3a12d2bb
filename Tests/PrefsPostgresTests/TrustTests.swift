import Foundation
import PostgresTestServer
import Prefs
import PrefsPostgres
import PrefsTestSupport
import Synchronization
import TestThreads
import Testing

extension Database {
    /// A new login role with a password and no rights on any table; returns a session of it on this database.
    func roleWithoutTableRights() throws -> (name: String, session: Session) {
        let name = "intruder_" + UUID().uuidString.lowercased().prefix(8)
        try sql("CREATE ROLE \(name) LOGIN PASSWORD 'intruder-pw'")
        let session = try Session(
            server.connectionString(database: self.name, user: name, password: "intruder-pw"))
        return (name, session)
    }

    /// Writes a marker row with SQL and waits until `stores` all see it: every notification sent before it has
    /// then been handled (PostgreSQL delivers them in commit order).
    func settle(_ stores: [PostgresStore], _ marker: Int) async throws {
        try sql(
            "INSERT INTO prefs_values (namespace, key, value) VALUES ('com.example.app', 'marker', '\(marker)') "
                + "ON CONFLICT (namespace, key) DO UPDATE SET value = EXCLUDED.value")
        try await eventually("the marker \(marker)") {
            try stores.allSatisfy { try $0.value(forKey: "marker") == .int(Int64(marker)) }
        }
    }
}

/// A role that can connect but has no rights on the table can neither change nor read what instances see.
@Suite("PostgresStore trusts only the table", .ownThreads)
struct TrustTests {
    @Test func forgedNotificationsChangeNothingInstancesSee() async throws {
        let database = try Database()
        let first = try database.store()
        let second = try database.store()
        try first.setValue(.bool(true), forKey: "newCheckout")
        let (_, intruder) = try database.roleWithoutTableRights()
        #expect(throws: SessionError.self) { try intruder.execute("SELECT * FROM prefs_values") }

        let forged = [
            #"{"namespace": "com.example.app", "key": "newCheckout", "version": 9223372036854775807, "value": false}"#,
            #"{"namespace": "com.example.app", "key": "ghost", "version": 1, "value": true}"#,
            #"{"namespace": "com.example.app", "key": "newCheckout", "removed": true, "version": 9223372036854775807}"#,
            #"{"reload": true}"#, #"{"reset": true}"#, "not json", "{}",
        ]
        for payload in forged {
            try intruder.execute("NOTIFY prefs_values, '\(payload.replacingOccurrences(of: "'", with: "''"))'")
        }
        try await database.settle([first, second], 1)
        for store in [first, second] {
            #expect(try store.value(forKey: "newCheckout") == .bool(true))
            #expect(try store.value(forKey: "ghost") == nil)
        }
        // Real changes, and each instance's own acknowledged sets, still apply afterwards.
        try first.setValue(.bool(false), forKey: "newCheckout")
        #expect(try first.value(forKey: "newCheckout") == .bool(false))
        try await eventually("the other instance to see the real change") {
            try second.value(forKey: "newCheckout") == .bool(false)
        }
        try second.setValue(.int(7), forKey: "level")
        #expect(try second.value(forKey: "level") == .int(7))
        try await eventually("the first instance to see it") { try first.value(forKey: "level") == .int(7) }
        first.close()
        second.close()
    }

    @Test func listeningWithoutTableRightsReadsNoValue() async throws {
        let database = try Database()
        let store = try database.store()
        let (_, intruder) = try database.roleWithoutTableRights()
        try intruder.execute("LISTEN prefs_values")
        let secret = "https://hooks.example.com/T0KEN-\(UUID().uuidString)"
        try store.setValue(.string(secret), forKey: "webhook")
        try store.setValue(.int(424_242), forKey: "limit")
        try database.sql("UPDATE prefs_values SET value = '\"by-sql-\(secret)\"' WHERE key = 'webhook'")
        let heard = intruder.notifications(atLeast: 3, within: 15)
        #expect(heard.count >= 3)
        for payload in heard {
            #expect(
                !payload.contains("T0KEN") && !payload.contains("424242") && !payload.contains("version"), "\(payload)")
        }
        // What a payload does carry: the namespace and the key.
        #expect(heard.contains(#"{"namespace": "com.example.app", "key": "webhook"}"#), "\(heard)")
        store.close()
    }
}
