import Foundation
import Prefs
import PrefsPostgres
import PrefsTestSupport
import Testing

/// Promises of docs/PostgresStore.md that no other suite checked; docs/PROMISES.md lists every promise.
struct PostgresPromiseTests {
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
        #expect(try database.sql("SELECT version FROM prefs_schema") == [["3"]])
        #expect(try database.store().allValues().count == 8)
    }
}

/// The same promise across processes, where no lock inside the library serialises the opens.
struct PostgresCrossProcessOpenTests {
    @Test func processesOpeningAFreshDatabaseTogetherAllSucceed() async throws {
        let database = try Database()
        let children = try (0..<4).map { _ in
            try Helper.start(["open-report", "com.example.app"], connection: database.connection)
        }
        for child in children {
            let ended = try await child.ended()
            #expect(ended.succeeded, "\(ended)")
        }
        #expect(try database.sql("SELECT version FROM prefs_schema") == [["3"]])
    }
}
