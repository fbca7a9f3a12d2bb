import Foundation
import PostgresTestServer
import Prefs
import PrefsPostgres
import PrefsTestSupport
import PrefsTesting
import TestThreads
import Testing

@Suite("PostgresStore against a real server", .ownThreads)
struct PostgresStoreTests {
    static let samples: [String: PrefValue] = [
        "bool": .bool(true),
        "int": .int(-42),
        "int64Max": .int(.max),
        "uint64Max": .unsignedInt(.max),
        "float": .float(0.1),
        "bigFloat": .float(1e16),
        "double": .double(0.1),
        "wholeDouble": .double(3.0),
        "bigDouble": .double(1e16),
        "hugeDouble": .double(-1.7976931348623157e308),
        "tinyDouble": .double(.leastNonzeroMagnitude),
        "string": .string("dark ☀︎ \"quoted\" \\ tab\t"),
        "emptyString": .string(""),
        "data": .data(Data([0xCA, 0xFE, 0x00, 0xFF])),
        "date": .date(Date(timeIntervalSinceReferenceDate: 786_123_456.789)),
        "array": .array([.string("swift"), .int(1), .double(2.5), .array([])]),
        "dictionary": .dictionary(["darkMode": .bool(true), "nested": .dictionary(["size": .int(12)])]),
        "dollarDictionary": .dictionary(["$float": .string("not a tag")]),
    ]

    /// The store contract, each rule on a store of its own namespace. Batches are the default ones (each write is
    /// its own transaction), and a closed store keeps serving the values it last knew and refuses writes with an error
    /// of its own (``PostgresStoreError/closed``).
    @Test func keepsTheStoreContract() async throws {
        let database = try Database()
        let report = try await KeyValueStoreConformance.verify(
            unsupported: [.transactionalBatches, .closedReads, .storeClosedError], close: { $0.close() },
            makeStore: { try database.store("conformance.\(UUID().uuidString)") })
        #expect(report.brokenRules.isEmpty)
    }

    @Test func everyValueTypeRoundTripsThroughTheTable() async throws {
        let database = try Database()
        let writer = try database.store()
        for (key, value) in Self.samples { try writer.setValue(value, forKey: key) }
        #expect(try writer.allValues() == Self.samples)

        let reader = try database.store()
        for (key, value) in Self.samples {
            let read = try reader.value(forKey: key)
            #expect(read == value, "\(key)")
            // The same kind, not just an equal value: a double must not come back as an int.
            #expect(read?.typeName == value.typeName, "\(key)")
        }
        // SQL users read plain JSON.
        let rows = try database.sql("SELECT value->>'darkMode' FROM prefs_values WHERE key = 'dictionary'")
        #expect(rows == [["true"]])
        writer.close()
        reader.close()
    }

    @Test func negativeZeroComesBackWithItsSign() async throws {
        let database = try Database()
        let writer = try database.store()
        try writer.setValue(.double(-0.0), forKey: "double")
        try writer.setValue(.float(-0.0), forKey: "float")
        try writer.setValue(.array([.double(-0.0), .double(0.0)]), forKey: "array")
        writer.close()
        // A fresh instance reads the table: -0.0 == 0.0, so the sign is checked on its own.
        let reader = try database.store()
        guard case .double(let double)? = try reader.value(forKey: "double"),
            case .float(let float)? = try reader.value(forKey: "float"),
            case .array(let array)? = try reader.value(forKey: "array"), array.count == 2,
            case .double(let first) = array[0], case .double(let second) = array[1]
        else {
            Issue.record("wrong kinds read back: \(try reader.allValues())")
            return
        }
        #expect(double == 0 && double.sign == .minus)
        #expect(float == 0 && float.sign == .minus)
        #expect(first.sign == .minus && second.sign == .plus)
        reader.close()
    }

    @Test func typedKeysAndWrappersWorkOnTheStore() async throws {
        let database = try Database()
        let store = try database.store()
        let theme = StoredValue(key: "theme", default: "light", store: store)
        theme.set("dark")
        #expect(try store.value(for: PrefKey("theme", default: "light")) == "dark")
        try store.removeValue(forKey: "theme")
        #expect(theme.wrappedValue == "light")
        #expect(try database.store().value(forKey: "theme") == nil)
        #expect(try database.sql("SELECT value IS NULL FROM prefs_values WHERE key = 'theme'") == [["t"]])
        store.close()
    }

    @Test func namespacesAreSeparate() async throws {
        let database = try Database()
        let first = try database.store("first")
        let second = try database.store("second")
        try first.setValue(.int(1), forKey: "shared")
        #expect(try second.value(forKey: "shared") == nil)
        try second.setValue(.int(2), forKey: "shared")
        try await eventually("both stores to hold their own values") {
            try first.value(forKey: "shared") == .int(1) && second.value(forKey: "shared") == .int(2)
        }
        #expect(try database.store("first").allValues() == ["shared": .int(1)])
    }

    @Test func anotherInstanceSeesChangesThroughValuesAndObservation() async throws {
        let database = try Database()
        let writer = try database.store()
        let reader = try database.store()
        let level = StoredValue(key: "level", default: 0, store: reader)
        let seen = Collector(level.values)
        try await eventually("the current value") { seen.values == [0] }
        for value in 1...5 { try writer.set(value, for: PrefKey("level", default: 0)) }
        try await eventually("the last change") { seen.values.last == 5 }
        // `values` yields the value current when it runs, so changes that land together may be coalesced, never
        // reordered.
        #expect(seen.values == seen.values.sorted())
        #expect(Set(seen.values).count == seen.values.count)
        try writer.removeValue(forKey: "level")
        try await eventually("the removal") { seen.values.last == 0 }
        #expect(level.wrappedValue == 0)
    }

    @Test func twoProcessesSeeEachOthersChanges() async throws {
        let database = try Database()
        let child = try Helper.start(["watch", "com.example.app", "counter"], connection: database.connection)
        defer { child.kill() }
        try await eventually("the child to start watching") { child.outputLines.contains("0") }
        let store = try database.store()
        try store.set(7, for: PrefKey("counter", default: 0))
        try await eventually("the child to see 7") { child.outputLines.last == "7" }

        let counter = StoredValue(key: "counter", default: 0, store: store)
        let seen = Collector(counter.values)
        let setter = try Helper.start(["set-int", "com.example.app", "counter", "99"], connection: database.connection)
        let set = try await setter.ended()
        #expect(set.succeeded, "\(set)")
        try await eventually("this process to see the child's 99") { seen.values.last == 99 }
        try await eventually("the watching child to see it too") { child.outputLines.last == "99" }
    }

    @Test func fourProcessesAppendingKeepEveryUpdate() async throws {
        let database = try Database()
        _ = try database.store()  // creates the schema once, so the children race only on the appends
        let children = try (0..<4).map { index in
            try Helper.start(
                ["append", "com.example.app", "tags", "250", "p\(index)"], connection: database.connection,
                timeLimit: .seconds(240))
        }
        for child in children {
            let ended = try await child.ended()
            #expect(ended.succeeded, "\(ended)")
        }
        let tags = try database.store().value(for: PrefKey("tags", default: [String]()))
        #expect(tags.count == 1_000)
        #expect(Set(tags).count == 1_000)
    }

    @Test func largeValuesAreReReadByOtherInstances() async throws {
        let database = try Database()
        let writer = try database.store()
        let reader = try database.store()
        let large = PrefValue.string(String(repeating: "x", count: 20_000))
        try writer.setValue(large, forKey: "large")
        try await eventually("the reader to re-read the large value") { try reader.value(forKey: "large") == large }
    }

    @Test func writesMadeWithSQLReachTheStore() async throws {
        let database = try Database()
        let store = try database.store()
        try store.setValue(.int(1), forKey: "flag")
        let seen = Collector(store.changedKeys())
        try database.sql("UPDATE prefs_values SET value = '2' WHERE key = 'flag'")
        try await eventually("an SQL update") { try store.value(forKey: "flag") == .int(2) }
        try database.sql(
            "INSERT INTO prefs_values (namespace, key, value) VALUES ('com.example.app', 'fresh', '\"yes\"')")
        try await eventually("an SQL insert") { try store.value(forKey: "fresh") == .string("yes") }
        try database.sql("DELETE FROM prefs_values WHERE key = 'flag'")
        try await eventually("an SQL delete") { try store.value(forKey: "flag") == nil }
        try await eventually("one announcement per change") { seen.values == ["flag", "fresh", "flag"] }
        // Versions grow with every update made by SQL, so every instance orders them.
        #expect(try database.sql("SELECT version FROM prefs_values WHERE key = 'fresh'") == [["1"]])
    }

    @Test func updateValueSeesTheCommittedValueAndWritesNothingWhenTheTransformThrows() async throws {
        let database = try Database()
        let first = try database.store()
        let second = try database.store()
        try first.setValue(.int(10), forKey: "count")
        // Even before the notification arrives, the update starts from the committed row.
        let updated = try second.updateValue(forKey: "count") { old in
            guard case .int(let value)? = old else { return .int(-1) }
            return .int(value + 1)
        }
        #expect(updated == .int(11))
        struct Refused: Error {}
        #expect(throws: Refused.self) { try first.updateValue(forKey: "count") { _ in throw Refused() } }
        try await eventually("both to hold 11") {
            try first.value(forKey: "count") == .int(11) && second.value(forKey: "count") == .int(11)
        }
        #expect(try database.sql("SELECT value::text FROM prefs_values WHERE key = 'count'") == [["11"]])
        // A transform may write other keys of the same store: they commit with the update.
        try first.updateValue(forKey: "count") { old in
            try first.setValue(.string("inside"), forKey: "note")
            return old
        }
        #expect(try first.value(forKey: "note") == .string("inside"))
        #expect(try database.store().value(forKey: "note") == .string("inside"))
    }

    @Test func replaceAllReplacesTheNamespace() async throws {
        let database = try Database()
        let store = try database.store()
        try store.replaceAll(["a": .int(1), "b": .int(2)])
        try store.replaceAll(["b": .int(3), "c": .int(4)])
        #expect(try store.allValues() == ["b": .int(3), "c": .int(4)])
        #expect(try database.store().allValues() == ["b": .int(3), "c": .int(4)])
    }

    @Test func textWithNULIsAnEncodingErrorAndNothingIsWritten() async throws {
        let database = try Database()
        let store = try database.store()
        try store.setValue(.string("kept"), forKey: "text")
        #expect {
            try store.setValue(.string("a\u{0}b"), forKey: "text")
        } throws: { error in
            guard case .encodingFailed(let key, _)? = error as? PrefsError else { return false }
            return key == "text"
        }
        #expect(try store.value(forKey: "text") == .string("kept"))
        #expect(try database.store().value(forKey: "text") == .string("kept"))
        // Non-finite numbers are tagged in the JSON form, so they are stored rather than refused.
        try store.setValue(.double(-.infinity), forKey: "number")
        #expect(try database.store().value(forKey: "number") == .double(-.infinity))
    }

    @Test func wrongPasswordIsATypedErrorThatShowsNoSecret() async throws {
        let database = try Database()
        let user = "user_" + UUID().uuidString.prefix(8).lowercased()
        try database.sql("CREATE ROLE \(user) LOGIN PASSWORD 'right-horse-battery'")
        let wrong = database.server.connectionString(database: database.name, user: user, password: "s3cret-wrong")
        do {
            _ = try PostgresStore(connection: wrong, namespace: "app")
            Issue.record("connected with a wrong password")
        } catch let error as PostgresStoreError {
            guard case .authenticationFailed = error else {
                Issue.record("expected authenticationFailed, got \(error)")
                return
            }
            let text = "\(error) \(String(reflecting: error)) \(error.localizedDescription)"
            #expect(!text.contains("s3cret-wrong"))
            #expect(!text.contains(wrong))
            // The socket libpq tried is no secret: it says where the server was looked for.
            #expect(text.contains(database.server.socketDirectory))
        }
        let missing = database.server.connectionString(database: database.name, user: user)
        #expect {
            _ = try PostgresStore(connection: missing, namespace: "app")
        } throws: { error in
            guard case .authenticationFailed? = error as? PostgresStoreError else { return false }
            return true
        }
        // The right password works.
        try database.sql("GRANT CREATE ON SCHEMA public TO \(user)")
        let right = database.server.connectionString(
            database: database.name, user: user, password: "right-horse-battery")
        try PostgresStore(connection: right, namespace: "app").setValue(.bool(true), forKey: "ok")
    }

    @Test func unreachableServerAndBadInputAreTypedErrors() async throws {
        let server = try PostgresServer.shared()
        let nowhere = "postgresql:///app?host=/nonexistent/prefs-socket&user=postgres&password=hunter2"
        #expect {
            _ = try PostgresStore(connection: nowhere, namespace: "app")
        } throws: { error in
            // The socket libpq tried says where the server was looked for; the password is never shown.
            guard case .unreachable(let reason)? = error as? PostgresStoreError else { return false }
            return !reason.contains("hunter2")
                && reason.hasPrefix(#"server on socket "/nonexistent/prefs-socket/.s.PGSQL.5432": "#)
        }
        #expect {
            _ = try PostgresStore(connection: server.connectionString(database: "no_such_db"), namespace: "app")
        } throws: { error in
            guard case .connectionRefused? = error as? PostgresStoreError else { return false }
            return true
        }
        #expect {
            _ = try PostgresStore(connection: "host=/tmp password=hunter2 bogus", namespace: "app")
        } throws: { error in
            guard case .invalidConnectionString(let reason)? = error as? PostgresStoreError else { return false }
            return !reason.contains("hunter2") && !reason.contains("bogus")
        }
        let database = try Database()
        #expect(throws: PostgresStoreError.invalidNamespace("", reason: "it cannot be empty")) {
            _ = try PostgresStore(connection: database.connection, namespace: "")
        }
        #expect(throws: PrefsError.self) { try database.store().setValue(.int(1), forKey: "") }
    }

    @Test func unknownSchemaVersionIsATypedErrorAndChangesNothing() async throws {
        let database = try Database()
        try database.store().setValue(.int(1), forKey: "kept")
        try database.sql("UPDATE prefs_schema SET version = 99")
        #expect(throws: PostgresStoreError.unsupportedSchemaVersion(found: 99, supported: 5)) {
            _ = try database.store()
        }
        #expect(try database.sql("SELECT version FROM prefs_schema") == [["99"]])
        #expect(try database.sql("SELECT value::text FROM prefs_values") == [["1"]])

        let foreign = try Database()
        try foreign.sql("CREATE TABLE prefs_values (id integer)")
        #expect(throws: PostgresStoreError.unsupportedSchemaVersion(found: nil, supported: 5)) {
            _ = try foreign.store()
        }
        #expect(try foreign.sql("SELECT to_regclass('prefs_schema') IS NULL") == [["t"]])
    }

    @Test func aRowOfTheWrongShapeIsReportedAndLeftAlone() async throws {
        let database = try Database()
        let store = try database.store()
        try store.setValue(.int(1), forKey: "good")
        try store.setValue(.int(2), forKey: "bad")
        try database.sql(#"UPDATE prefs_values SET value = '{"$float": "x"}' WHERE key = 'bad'"#)
        // A running instance keeps its last good value and still sees later changes.
        try database.sql("UPDATE prefs_values SET value = '3' WHERE key = 'good'")
        try await eventually("the good key") { try store.value(forKey: "good") == .int(3) }
        #expect(try store.value(forKey: "bad") == .int(2))
        #expect {
            try store.updateValue(forKey: "bad") { _ in .int(5) }
        } throws: { error in
            guard case .decodingFailed(let key, _)? = error as? PrefsError else { return false }
            return key == "bad"
        }
        // A new instance (in a child process, with its own error handler) reports the row once and opens.
        let ended = try await Helper.start(["open-report", "com.example.app"], connection: database.connection).ended()
        #expect(ended.succeeded, "\(ended)")
        #expect(ended.lines.filter { $0.hasPrefix("report bad: cannot decode value for \"bad\"") }.count == 1)
        #expect(ended.lines.last == #"values {"good": 3}"#)
        #expect(try database.sql("SELECT value::text FROM prefs_values WHERE key = 'bad'") == [[#"{"$float": "x"}"#]])
    }

    /// A connection the server dropped while idle (restart, failover, an administrator) is noticed and replaced
    /// before the next write, so that write succeeds; the listener reconnects and still delivers changes.
    @Test func aDroppedIdleConnectionIsReplacedBeforeTheNextWrite() async throws {
        let database = try Database()
        let store = try database.store()
        let other = try database.store("other")
        try store.setValue(.int(1), forKey: "value")
        // Both stores share two connections to the server: the change feed's and the one writes borrow. A connection
        // that set the database up may still be leaving it (a backend's exit is not instant, least of all under
        // AddressSanitizer): waited out.
        var pids: [String] = []
        try await eventually("two connections besides the test's own") {
            pids = try database.sql(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).compactMap { $0[0] }
            return pids.count == 2
        }
        try database.sql("SELECT pg_terminate_backend(pid) FROM unnest(ARRAY[\(pids.joined(separator: ", "))]) AS pid")
        // Wait until the server has really closed them, so the next write meets a dead connection.
        try await eventually("the connections to close") {
            try database.sql(
                "SELECT count(*) FROM pg_stat_activity WHERE pid IN (\(pids.joined(separator: ", ")))") == [["0"]]
        }
        try store.setValue(.int(2), forKey: "value")
        try other.setValue(.int(3), forKey: "value")
        try await eventually("the other namespace's store to reconnect and still see its writes") {
            store.reconnectionCount >= 1 && other.reconnectionCount >= 1
        }
        try database.sql("UPDATE prefs_values SET value = '4' WHERE namespace = 'com.example.app'")
        try await eventually("the reconnected listener to deliver a change") {
            try store.value(forKey: "value") == .int(4)
        }
    }

    @Test func closeStopsTheListenerAndLaterWritesThrow() async throws {
        let database = try Database()
        let store = try database.store()
        try store.setValue(.int(1), forKey: "kept")
        store.close()
        #expect(throws: PostgresStoreError.closed) { try store.setValue(.int(2), forKey: "kept") }
        #expect(try store.value(forKey: "kept") == .int(1))
        // Both connections end (the server notices a closed client within moments).
        try await eventually("the store's connections to end") {
            try database.sql(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    + "AND application_name IN ('prefs', 'prefs-listen')") == [["0"]]
        }
    }

    /// "The store creates the schema on first use (under an advisory lock, so instances starting together do not
    /// race)": eight stores open at once on a fresh database, each on its own connections.
    @Test func instancesOpeningAFreshDatabaseTogetherAllSucceed() throws {
        let database = try Database()
        let connection = database.connection
        let failures = Locked<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { index in
            do {
                let store = try PostgresStore(connection: connection, namespace: "com.example.app")
                try store.setValue(.int(Int64(index)), forKey: "opened-\(index)")
            } catch {
                failures.withLock { $0.append("\(index): \(error)") }
            }
        }
        #expect(failures.withLock { $0 } == [])
        #expect(try database.sql("SELECT version FROM prefs_schema") == [["5"]])
        #expect(try database.store().allValues().count == 8)
    }

    /// The same across processes, where no lock inside the library serialises the opens.
    @Test func processesOpeningAFreshDatabaseTogetherAllSucceed() async throws {
        let database = try Database()
        let children = try (0..<4).map { _ in
            try Helper.start(["open-report", "com.example.app"], connection: database.connection)
        }
        for child in children {
            let ended = try await child.ended()
            #expect(ended.succeeded, "\(ended)")
        }
        #expect(try database.sql("SELECT version FROM prefs_schema") == [["5"]])
    }
}
