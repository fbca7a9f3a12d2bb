import Foundation
import PostgresTestServer
import Prefs
import PrefsPostgres
import PrefsTestSupport
import TestThreads
import Testing

/// Tests that stop and restart a server of their own, so the other tests' shared server keeps running.
@Suite("PostgresStore while the server is away", .ownThreads)
struct ServerAwayTests {
    @Test func aServerRestartInTheMiddleOfAWriteLoopLosesNoAcknowledgedWrite() async throws {
        let server = try PostgresServer.start()
        defer { try? server.destroy() }
        let database = try Database(on: server)
        let store = try database.store()
        let counter = StoredValue(key: "counter", default: 0, store: store)
        let seen = Collector(counter.values)
        let writer = try Helper.start(["count-up", "com.example.app", "counter"], connection: database.connection)
        defer { writer.kill() }
        func acknowledged() -> Int { writer.outputLines.compactMap { Int($0) }.max() ?? 0 }

        try await eventually("50 acknowledged writes") { acknowledged() >= 50 }
        try await eventually("this process to see the writer's changes") { counter.wrappedValue > 0 }
        try server.stop()
        try await eventually("the writer to see typed errors while the server is away") {
            writer.outputLines.contains { $0.hasPrefix("error ") }
        }
        // Meanwhile this process's reads serve the last known value and its writes fail with a typed error.
        #expect(counter.wrappedValue > 0)
        #expect {
            try store.setValue(.int(-1), forKey: "other")
        } throws: { error in
            guard case .connectionLost? = error as? PostgresStoreError else { return false }
            return true
        }
        let beforeRestart = acknowledged()
        try server.restart()
        try await eventually("50 more acknowledged writes after the restart") { acknowledged() >= beforeRestart + 50 }
        writer.kill()
        // Every line it printed before it was killed, read to the end of its output (not only until it ended).
        _ = writer.wait()

        let lastAcknowledged = acknowledged()
        let rows = try database.sql("SELECT value::text FROM prefs_values WHERE key = 'counter'")
        let stored = try #require(rows.first?.first.flatMap { $0 }.flatMap { Int($0) })
        // The killed writer may have had one more write committed but not yet acknowledged.
        #expect(stored == lastAcknowledged || stored == lastAcknowledged + 1)
        let errors = writer.outputLines.filter { $0.hasPrefix("error ") }
        #expect(!errors.isEmpty)
        // A write in flight when the server stopped may have committed: it is reported as unknown, never as lost.
        #expect(errors.allSatisfy { $0 == "error connectionLost" || $0 == "error outcomeUnknown" }, "\(Set(errors))")
        try await eventually("the watcher to catch up") { seen.values.last == stored }
        #expect(store.reconnectionCount >= 1)
        #expect(try database.store().value(forKey: "counter") == .int(Int64(stored)))
        // Writes work again on the same store.
        try store.setValue(.int(1), forKey: "other")
    }

    @Test func keysChangedWhileAwayAreAnnouncedOnceAfterReconnecting() async throws {
        let server = try PostgresServer.start()
        defer { try? server.destroy() }
        let database = try Database(on: server)
        let store = try database.store()
        try store.replaceAll(["a": .int(1), "b": .int(1), "c": .int(1)])
        let announced = Collector(store.changedKeys())

        // The server comes back where this store cannot reach it; another instance changes a, b and d there.
        try server.stop()
        try changeWhileUnreachable(database) { other in
            try other.setValue(.int(2), forKey: "a")
            try other.removeValue(forKey: "b")
            try other.setValue(.int(4), forKey: "d")
            try other.setValue(.int(1), forKey: "c")
            #expect(try store.allValues() == ["a": .int(1), "b": .int(1), "c": .int(1)])
        }
        try server.restart()
        try await eventually("the store to re-read the namespace") {
            try store.allValues() == ["a": .int(2), "c": .int(1), "d": .int(4)]
        }
        try await eventually("the announcements") { announced.values.count >= 3 }
        #expect(announced.values.sorted() == ["a", "b", "d"])
    }
}

/// A store with a cache file, opened while the server is away.
@Suite("PostgresStore starting while the server is away", .ownThreads)
struct OfflineStartTests {
    @Test func aStoreWithACacheFileStartsFromItAndCatchesUpWhenTheServerReturns() async throws {
        let folder = FileManager.default.temporaryDirectory.appending(path: "prefs-pg-cache-" + UUID().uuidString)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let cache = folder.appending(path: "cache.json")
        let server = try PostgresServer.start()
        defer { try? server.destroy() }
        let database = try Database(on: server)
        let first = try PostgresStore(connection: database.connection, namespace: "com.example.app", cache: cache)
        try first.replaceAll(["a": .int(1), "b": .int(1)])
        first.close()
        try server.stop()
        // Without a cache file, or with one not written yet, an open still throws.
        #expect(throws: PostgresStoreError.self) { try database.store() }
        #expect(throws: PostgresStoreError.self) {
            try PostgresStore(
                connection: database.connection, namespace: "com.example.app",
                cache: folder.appending(path: "never-written.json"))
        }

        let store = try PostgresStore(connection: database.connection, namespace: "com.example.app", cache: cache)
        #expect(try store.allValues() == ["a": .int(1), "b": .int(1)])
        #expect {
            try store.setValue(.int(9), forKey: "a")
        } throws: { error in
            guard case .connectionLost? = error as? PostgresStoreError else { return false }
            return true
        }
        let announced = Collector(store.changedKeys())
        // The server comes back where this store cannot reach it; another instance changes a and removes b there.
        try changeWhileUnreachable(database) { other in
            try other.setValue(.int(2), forKey: "a")
            try other.removeValue(forKey: "b")
        }
        try server.restart()

        try await eventually("the store to catch up") { try store.allValues() == ["a": .int(2)] }
        try await eventually("the announcements") { announced.values.count >= 2 }
        #expect(announced.values.sorted() == ["a", "b"])
        try store.setValue(.int(3), forKey: "a")
        store.close()
        // The file holds the last values the store saw.
        #expect(try FileStore(url: cache).allValues() == ["a": .int(3)])
    }
}

/// The server killed (`pg_ctl stop -m immediate`) and started again while a writer runs: every write that was in
/// flight is settled once the server is back, and what the writer was told matches the table.
@Suite("PostgresStore across server crashes", .ownThreads)
struct CrashTests {
    @Test func crashesLoseNoAcknowledgedWriteAndEveryOutcomeIsKnown() async throws {
        let server = try PostgresServer.start()
        defer { try? server.destroy() }
        let database = try Database(on: server)
        try database.store().close()
        // A deadline the server's return always beats, even on a machine so loaded that a crash and restart take
        // longer than the default 10 s: then every outcome can be settled.
        let writer = try Helper.start(
            ["distinct-keys", "com.example.app"], connection: database.connection,
            environment: ["PREFS_PG_WRITE_DEADLINE": "120"])
        defer { writer.kill() }
        func count(_ prefix: String) -> Int { writer.outputLines.filter { $0.hasPrefix(prefix) }.count }
        var outages: [Duration] = []
        for round in 1...3 {
            let acknowledged = count("ack ")
            try await eventually("30 more acknowledged writes in round \(round)") { count("ack ") >= acknowledged + 30 }
            let crashed = ContinuousClock.now
            try server.crash()
            try server.restart()
            outages.append(ContinuousClock.now - crashed)
        }
        try await eventually("writes to work again") { count("ack ") >= 100 }
        writer.kill()

        let stored = Set(
            try database.sql("SELECT key FROM prefs_values WHERE value IS NOT NULL").compactMap { $0[0] })
        func numbers(_ prefix: String) -> [String] {
            writer.outputLines.filter { $0.hasPrefix(prefix) }.map { "w-" + $0.split(separator: " ")[1] }
        }
        let lost = numbers("ack ").filter { !stored.contains($0) }
        let falselyNotWritten = numbers("not ").filter { stored.contains($0) }
        #expect(lost == [], "acknowledged writes lost")
        #expect(falselyNotWritten == [], "reported as not written but committed")
        // The server came back within the writes' deadline, so no outcome was left unknown.
        #expect(
            numbers("unknown ") == [],
            "\(writer.outputLines.filter { $0.hasPrefix("unknown ") }); the server was away for \(outages)")
    }
}

/// The listener keeps reconnecting whatever wakes it meanwhile.
@Suite("PostgresStore listener reconnecting", .ownThreads)
struct ListenerReconnectTests {
    /// A wake while the listener waited between attempts (a writer handing back a broken connection does it) made
    /// it stop reconnecting for good: the store heard nothing more and never caught up.
    @Test func aWakeBetweenReconnectAttemptsDoesNotStopReconnecting() async throws {
        let server = try PostgresServer.start()
        defer { try? server.destroy() }
        let database = try Database(on: server)
        let store = try PostgresStore(
            connection: database.connection, namespace: "com.example.app",
            limits: PostgresStore.Limits(heartbeat: .seconds(1)))
        defer { store.close() }
        try store.setValue(.int(1), forKey: "k")
        try server.stop()
        try await eventually("the listener to wait between reconnect attempts") {
            store.listenerActivity == "backingOff"
        }
        store.wakeListener()
        try server.restart()
        try await eventually("the listener to reconnect") { store.reconnectionCount >= 1 }
        // Connected again, it hears changes made elsewhere.
        try database.sql("UPDATE prefs_values SET value = '2' WHERE key = 'k'")
        try await eventually("the store to see the change made with SQL") { try store.value(forKey: "k") == .int(2) }
    }
}

/// How a failed connection attempt is typed decides whether a write waits for the server or gives up: a server that
/// is starting, stopping or restarting is away (retried), one that refuses this client is not.
@Suite("PostgresStore connection failures", .ownThreads)
struct ConnectionFailureTests {
    private static let prefix = #"connection to server on socket "/tmp/pg/.s.PGSQL.5432" failed: "#

    @Test(arguments: [
        // What a PostgreSQL 15 server killed with `pg_ctl stop -m immediate` while a session started sent (psql,
        // `options='-c post_auth_delay=3'`): a warning, then the closed socket.
        "server closed the connection unexpectedly\n\tThis probably means the server terminated abnormally\n",
        "FATAL:  the database system is starting up\n",
        "FATAL:  the database system is shutting down\n",
        "FATAL:  the database system is not yet accepting connections\nDETAIL:  Consistent recovery state has not been yet reached.\n",
        "FATAL:  terminating connection due to immediate shutdown command\n",
        "FATAL:  terminating connection because of crash of another server process\n",
        "No such file or directory\n\tIs the server running locally and accepting connections on that socket?\n",
    ])
    func aServerThatIsAwayForNowIsUnreachable(_ message: String) {
        let error = PostgresStoreError.connecting(
            failedWith: Self.prefix + message, reason: message, needsPassword: false)
        #expect(error == .unreachable(reason: message))
    }

    @Test func aServerThatRefusesThisClientSaysWhy() {
        func typed(_ message: String, needsPassword: Bool = false) -> PostgresStoreError {
            .connecting(failedWith: Self.prefix + message, reason: message, needsPassword: needsPassword)
        }
        let missing = "FATAL:  database \"nope\" does not exist\n"
        #expect(typed(missing) == .connectionRefused(reason: missing))
        let full = "FATAL:  sorry, too many clients already\n"
        #expect(typed(full) == .connectionRefused(reason: full))
        let password = "FATAL:  password authentication failed for user \"app\"\n"
        #expect(typed(password) == .authenticationFailed(reason: password))
        #expect(
            typed("fe_sendauth: no password supplied\n", needsPassword: true)
                == .authenticationFailed(
                    reason: "fe_sendauth: no password supplied\n"))
        #expect(typed("timeout expired\n") == .timedOut(reason: "connecting: timeout expired\n"))
    }
}
