import Foundation
import PostgresTestServer
import Prefs
import PrefsPostgres
import PrefsTestSupport
import TestThreads
import Testing

/// Faults the test proxy injects at a named step, so each test runs the same way every time: a connection lost
/// as a transaction begins, and the answer to `COMMIT` lost while the server then refuses new sessions.
@Suite("PostgresStore faults at named steps", .ownThreads)
struct NamedFaultTests {
    /// A connection holds no session state (it sets up nothing), so a connection lost as a transaction begins, just
    /// before its `BEGIN` and local settings reach the server, lost nothing but that transaction: the caller hears
    /// `connectionLost`, never `outcomeUnknown`, nothing was written, and the next transaction goes through.
    @Test func aConnectionLostAsATransactionBeginsWritesNothingAndSaysSo() async throws {
        let database = try ProxiedDatabase()
        defer { database.destroy() }
        let proxy = database.proxy
        let store = try PostgresStore(
            connection: database.connection, namespace: "com.example.app",
            limits: PostgresStore.Limits(writeDeadline: .seconds(30)))
        defer { store.close() }
        try store.setValue(.int(1), forKey: "k")

        proxy.cutConnection(whenClientSends: "BEGIN; SET LOCAL")
        #expect {
            try store.updateValue(forKey: "k") { _ in .int(2) }
        } throws: { error in
            guard case .connectionLost? = error as? PostgresStoreError else { return false }
            return true
        }
        #expect(proxy.cutsByFaults >= 1, "\(proxy.statistics)")
        #expect(try database.sql("SELECT value::text FROM prefs_values WHERE key = 'k'") == [["1"]])
        #expect(try store.value(forKey: "k") == .int(1))

        proxy.clearFaults()
        try store.updateValue(forKey: "k") { _ in .int(2) }
        #expect(try database.sql("SELECT value::text FROM prefs_values WHERE key = 'k'") == [["2"]])
    }

    /// The answer to `COMMIT` is lost and, while the store finds out what happened, the server refuses every new
    /// session with an error the store has no special case for ("too many clients"). Finding out goes on through
    /// those refusals (it once ended at the first unfamiliar error, leaving the outcome unknown) and returns the
    /// committed value once a session is accepted again.
    @Test func findingOutWhetherACommitLandedGoesOnThroughRefusedSessions() async throws {
        let database = try ProxiedDatabase()
        defer { database.destroy() }
        let proxy = database.proxy
        // Room for the steps below on a busy machine: the refusals end long before the write's deadline.
        let store = try PostgresStore(
            connection: database.connection, namespace: "com.example.app",
            limits: PostgresStore.Limits(writeDeadline: .seconds(300)))
        defer { store.close() }
        try store.setValue(.int(1), forKey: "count")

        proxy.cutConnection(afterForwarding: "COMMIT", thenRefuseSessionsWith: "sorry, too many clients already")
        let outcome = Locked<Result<PrefValue?, any Error>?>(nil)
        Thread {
            let result = Result {
                try store.updateValue(forKey: "count") { current in
                    guard case .int(let number)? = current else { return current }
                    return .int(number + 1)
                }
            }
            outcome.withLock { $0 = result }
        }.start()
        try await eventually("finding out to meet two refused sessions", within: .seconds(300)) {
            store.settlingFailureCount >= 2 || outcome.withLock { $0 } != nil
        }
        if let early = outcome.withLock({ $0 }) {
            Issue.record("updateValue ended while every session was refused: \(early); \(proxy.statistics)")
            return
        }
        #expect(proxy.sessionsRefused >= 1, "\(proxy.statistics)")

        proxy.clearFaults()
        try await eventually("updateValue to return or throw", within: .seconds(300)) { outcome.withLock { $0 } != nil }
        let result = try #require(outcome.withLock { $0 })
        #expect(try result.get() == .int(2))
        #expect(try database.sql("SELECT value::text FROM prefs_values WHERE key = 'count'") == [["2"]])
        #expect(try store.value(forKey: "count") == .int(2))
    }
}
