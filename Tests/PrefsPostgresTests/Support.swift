import Foundation
import PostgresTestServer
import Prefs
import PrefsPostgres
import PrefsTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A fresh database on the shared test server (one per test, so tests run in parallel).
struct Database {
    let server: PostgresServer
    let name: String

    init(on server: PostgresServer? = nil) throws {
        self.server = try server ?? PostgresServer.shared()
        name = try self.server.createDatabase()
    }

    var connection: String { server.connectionString(database: name) }

    func store(_ namespace: String = "com.example.app") throws -> PostgresStore {
        try PostgresStore(connection: connection, namespace: namespace)
    }

    @discardableResult
    func sql(_ text: String) throws -> [[String?]] { try server.execute(text, database: name) }
}

/// A server of its own, on 127.0.0.1 behind a ``Proxy`` that can stop forwarding or cut connections, with a fresh
/// database; ``connection`` goes through the proxy. Call ``destroy()`` at the end.
struct ProxiedDatabase {
    let server: PostgresServer
    let proxy: Proxy
    let name: String

    init() throws {
        server = try PostgresServer.start(tcp: true)
        do {
            proxy = try Proxy(to: try #require(server.tcpPort))
            name = try server.createDatabase()
        } catch {
            try? server.destroy()
            throw error
        }
    }

    var connection: String { "postgresql://127.0.0.1:\(proxy.port)/\(name)?user=postgres" }

    @discardableResult
    func sql(_ text: String) throws -> [[String?]] { try server.execute(text, database: name) }

    func destroy() {
        proxy.stop()
        try? server.destroy()
    }
}

/// Restarts `database`'s server where no store of this process can reach it (another socket folder), lets `body`
/// change things there through a store of its own, then stops the server again.
func changeWhileUnreachable(_ database: Database, _ body: (PostgresStore) throws -> Void) throws {
    let elsewhere = database.server.root + "/elsewhere"
    try database.server.restart(socketDirectory: elsewhere)
    let other = try PostgresStore(
        connection: "postgresql:///\(database.name)?host=\(elsewhere)&user=postgres", namespace: "com.example.app")
    try body(other)
    other.close()
    try database.server.stop()
}

/// Collects what a `values` stream yields, on a task of its own.
final class Collector<Value: Sendable>: Sendable {
    private let seen = Locked<[Value]>([])
    private let task = Locked<Task<Void, Never>?>(nil)

    init(_ stream: AsyncStream<Value>) {
        // The task holds the list, not the collector: holding the collector kept both alive for good (LeakSanitizer
        // found the cycle), so `deinit` never cancelled the task.
        let seen = self.seen
        let started = Task {
            for await value in stream { seen.withLock { $0.append(value) } }
        }
        task.withLock { $0 = started }
    }

    var values: [Value] { seen.withLock { $0 } }
    func cancel() { task.withLock { $0?.cancel() } }
    deinit { cancel() }
}

extension ChildProcess {
    /// `let ended = try await child.ended()` waits until the child has ended without holding one of Swift Testing's
    /// shared threads meanwhile, then says how it ended and what it printed.
    func ended(within seconds: Double = 300) async throws -> Exit {
        try await eventually("the child to end", within: .seconds(seconds)) { !isRunning }
        return wait()
    }
}

/// The `PrefsPostgresTestHelper` executable, started as a child process on the given database.
enum Helper {
    static let url = builtExecutable(named: "PrefsPostgresTestHelper")

    /// `let child = try Helper.start(["watch", "com.example.app", "counter"], connection: database.connection)`;
    /// `environment` adds variables of its own. The time limit is long: under ThreadSanitizer a test can wait
    /// minutes for one of Swift Testing's shared threads while its child runs.
    static func start(
        _ arguments: [String], connection: String, environment: [String: String] = [:],
        timeLimit: Duration = .seconds(1_800)
    ) throws -> ChildProcess {
        try ChildProcess(
            url, arguments, environment: environment.merging(["PREFS_PG_CONNECTION": connection]) { $1 },
            timeLimit: timeLimit)
    }
}
