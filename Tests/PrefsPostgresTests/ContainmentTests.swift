import Foundation
import PostgresTestServer
import Prefs
import PrefsPostgres
import PrefsTestSupport
import TestThreads
import Testing

extension Database {
    /// A new login role with `rights` on `prefs_values` (the table must exist); returns a session of it.
    func roleWithTableRights(_ rights: String) throws -> Session {
        let name = "writer_" + UUID().uuidString.lowercased().prefix(8)
        try sql("CREATE ROLE \(name) LOGIN PASSWORD 'writer-pw'; GRANT \(rights) ON prefs_values TO \(name)")
        return try Session(server.connectionString(database: self.name, user: name, password: "writer-pw"))
    }
}

/// What a role with rights on the table can still do to the instances: no row makes them hold more than the size
/// limit, and no `search_path` sends them to another table.
@Suite("PostgresStore contains what a writer can do", .ownThreads)
struct ContainmentTests {
    static let small = PostgresStore.Limits(largestValue: 1_024)

    @Test func aValueBeyondTheLimitIsRefusedAndNothingIsWritten() throws {
        let database = try Database()
        let store = try PostgresStore(connection: database.connection, namespace: "com.example.app", limits: Self.small)
        try store.setValue(.string("small"), forKey: "big")
        // 1 022 characters and their quotes are exactly the limit.
        try store.setValue(.string(String(repeating: "a", count: 1_022)), forKey: "edge")
        let huge = PrefValue.string(String(repeating: "x", count: 2_000))
        let refused: (any Error) -> Bool = { error in
            guard case .tooLarge(let path, let size, let limit)? = error as? PrefsError else { return false }
            return path.contains("prefs_values") && path.contains(#""com.example.app""#) && path.contains(#""big""#)
                && size == 2_002 && limit == 1_024
        }
        #expect(performing: { try store.setValue(huge, forKey: "big") }, throws: refused)
        #expect(performing: { try store.updateValue(forKey: "big") { _ in huge } }, throws: refused)
        #expect(performing: { try store.replaceAll(["big": huge]) }, throws: refused)
        #expect(try store.value(forKey: "big") == .string("small"))
        #expect(
            try database.sql("SELECT key, value::text FROM prefs_values ORDER BY key")
                == [["big", #""small""#], ["edge", "\"" + String(repeating: "a", count: 1_022) + "\""]])
        store.close()
    }

    @Test func aRowBeyondTheLimitIsSkippedByEveryInstanceAndReportedOnce() async throws {
        let database = try Database()
        let first = try PostgresStore(connection: database.connection, namespace: "com.example.app", limits: Self.small)
        let second = try PostgresStore(
            connection: database.connection, namespace: "com.example.app", limits: Self.small)
        try first.setValue(.string("small"), forKey: "big")
        try first.setValue(.int(1), forKey: "good")
        let writer = try database.roleWithTableRights("SELECT, INSERT, UPDATE")
        let child = try Helper.start(
            ["listen-report", "com.example.app", "1"], connection: database.connection,
            environment: ["PREFS_PG_LARGEST_VALUE": "1024"])
        try await eventually("the child to listen") { child.outputLines.contains("ready") }

        // 3 000 bytes as jsonb writes it back: `[0, 0, …]`.
        let json = "'[" + Array(repeating: "0", count: 1_000).joined(separator: ",") + "]'"
        try writer.execute("UPDATE prefs_values SET value = \(json) WHERE key = 'big'")
        try writer.execute(
            "INSERT INTO prefs_values (namespace, key, value) VALUES ('com.example.app', 'huge', \(json))")
        // Hints make every instance read the same rows again: still one report each.
        for _ in 0..<3 {
            try writer.execute(#"NOTIFY prefs_values, '{"namespace": "com.example.app"}'"#)
        }
        try writer.execute("UPDATE prefs_values SET value = '2' WHERE key = 'good'")
        try writer.execute("INSERT INTO prefs_values (namespace, key, value) VALUES ('com.example.app', 'marker', '1')")

        let ended = try await child.ended()
        #expect(ended.succeeded, "\(ended)")
        for key in ["big", "huge"] {
            let reports = ended.lines.filter { $0.hasPrefix("report \(key): ") }
            #expect(reports.count == 1, "\(ended)")
            #expect(reports.first?.contains("3000 bytes, more than the 1024") == true, "\(reports)")
        }
        #expect(ended.lines.last == #"values {"big": "small", "good": 2, "marker": 1}"#)
        try await eventually("both instances to see the marker") {
            try [first, second].allSatisfy { try $0.value(forKey: "marker") == .int(1) }
        }
        for store in [first, second] {
            #expect(try store.allValues() == ["big": .string("small"), "good": .int(2), "marker": .int(1)])
        }
        // An update refuses to start from a row it cannot hold, and leaves it alone.
        #expect {
            try first.updateValue(forKey: "huge") { _ in .int(1) }
        } throws: { error in
            guard case .decodingFailed(let key, _)? = error as? PrefsError else { return false }
            return key == "huge"
        }
        // A new instance with the default limit reads the row.
        let roomy = try database.store()
        #expect(try roomy.value(forKey: "huge")?.arrayCount == 1_000)
        for store in [first, second, roomy] { store.close() }
    }

    /// A value a write accepts under the size limit is read by every instance with the same limits: the write
    /// measures the text the server keeps and every read measures (`jsonb` prints a number in full: `1e-20` is 22
    /// characters there), so no value is accepted that the next instance skips.
    @Test func aValueAcceptedUnderTheLimitIsReadByEveryInstance() throws {
        let database = try Database()
        let limits = PostgresStore.Limits(largestValue: 4_096)
        let writer = try PostgresStore(connection: database.connection, namespace: "com.example.app", limits: limits)
        var accepted: [String: PrefValue] = [:]
        var refused = 0
        for exponent in [-5, -20, -100, -300, 16, 300] {
            let number = Double("1e\(exponent)")!
            let kinds: [PrefValue] = [
                .double(number), .float(Float(number)), .date(Date(timeIntervalSinceReferenceDate: number)),
            ]
            for (kind, element) in kinds.enumerated() {
                for count in [1, 20, 150, 600] {
                    let key = "e\(exponent)-\(kind)-\(count)"
                    let value = PrefValue.array(Array(repeating: element, count: count))
                    do {
                        try writer.setValue(value, forKey: key)
                        accepted[key] = value
                    } catch PrefsError.tooLarge {
                        refused += 1
                    }
                }
            }
        }
        #expect(refused > 0 && accepted.count > 20)
        let reader = try PostgresStore(connection: database.connection, namespace: "com.example.app", limits: limits)
        for (key, value) in accepted {
            #expect(try reader.value(forKey: key) == value, "\(key)")
        }
        let largest = try database.sql("SELECT max(octet_length(value::text)) FROM prefs_values")
        #expect(Int(largest[0][0] ?? "") ?? .max <= 4_096)
        for store in [writer, reader] { store.close() }
    }

    @Test func aSearchPathCannotRedirectTheStore() async throws {
        let database = try Database()
        let real = try database.store()
        try real.setValue(.bool(true), forKey: "flag")
        // Another role's schema holding a table of the same shape, with its own value, readable and writable by all.
        let owner = "shadow_" + UUID().uuidString.lowercased().prefix(8)
        try database.sql(
            """
            CREATE ROLE \(owner); CREATE SCHEMA shadow AUTHORIZATION \(owner);
            CREATE TABLE shadow.prefs_values (LIKE public.prefs_values INCLUDING ALL);
            CREATE TABLE shadow.prefs_schema (version integer NOT NULL); INSERT INTO shadow.prefs_schema VALUES (3);
            INSERT INTO shadow.prefs_values (namespace, key, value) VALUES ('com.example.app', 'flag', 'false');
            ALTER TABLE shadow.prefs_values OWNER TO \(owner); ALTER TABLE shadow.prefs_schema OWNER TO \(owner);
            GRANT USAGE ON SCHEMA shadow TO PUBLIC; GRANT ALL ON shadow.prefs_values, shadow.prefs_schema TO PUBLIC;
            """)
        let redirected = database.connection + "&options=-csearch_path%3Dshadow%2Cpublic"
        let store = try PostgresStore(connection: redirected, namespace: "com.example.app")
        #expect(try store.value(forKey: "flag") == .bool(true))
        try store.setValue(.int(7), forKey: "level")
        try store.updateValue(forKey: "count") { _ in .int(1) }
        try store.replaceAll(["flag": .bool(false), "level": .int(8)])
        #expect(
            try database.sql("SELECT key, value::text FROM public.prefs_values ORDER BY key")
                == [["count", nil], ["flag", "false"], ["level", "8"]])
        #expect(try database.sql("SELECT key, value::text FROM shadow.prefs_values") == [["flag", "false"]])
        #expect(try database.sql("SELECT count(*) FROM shadow.prefs_values") == [["1"]])
        try await eventually("the other instance to see the writes") { try real.value(forKey: "level") == .int(8) }
        store.close()
        real.close()
    }

    @Test func aStoreKeepsItsTablesInTheSchemaItIsGiven() throws {
        let database = try Database()
        try database.sql(##"CREATE SCHEMA "Team ""Prefs""""##)
        let store = try PostgresStore(
            connection: database.connection, namespace: "com.example.app", schema: #"Team "Prefs""#)
        #expect(store.schema == #"Team "Prefs""#)
        try store.setValue(.int(1), forKey: "k")
        #expect(try database.sql(#"SELECT value::text FROM "Team ""Prefs""".prefs_values"#) == [["1"]])
        #expect(try database.sql("SELECT to_regclass('public.prefs_values') IS NULL") == [["t"]])
        store.close()
        for name in ["", "a\u{0}b", String(repeating: "s", count: 64)] {
            #expect {
                _ = try PostgresStore(connection: database.connection, namespace: "n", schema: name)
            } throws: { error in
                guard case .invalidSchema(let named, _)? = error as? PostgresStoreError else { return false }
                return named == name
            }
        }
    }
}

extension PrefValue {
    fileprivate var arrayCount: Int? {
        if case .array(let items) = self { return items.count }
        return nil
    }
}
