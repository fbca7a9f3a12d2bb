import CLibPQ
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `try Pooler.start(for: server, mode: .transaction)` is a throwaway PgBouncer in front of a test server: it listens
/// on a unix socket in a folder of its own, trusts every user, and keeps at most `poolSize` server connections per
/// database and user.
///
/// PgBouncer refuses to run as root, so as root it runs as the `postgres` user through `runuser`, as the server
/// does. Call ``destroy()`` when done; the server is left as it is.
public final class Pooler: Sendable {
    /// PgBouncer's `pool_mode`.
    public enum Mode: String, Sendable, CaseIterable, CustomStringConvertible {
        case session, transaction
        public var description: String { rawValue }
    }

    public let server: PostgresServer
    /// The mode it started in (``reload(mode:)`` changes it).
    public let mode: Mode
    public let poolSize: Int
    /// The folder holding the configuration, the log and the socket.
    public let root: String
    private let port = 6432
    private var configuration: String { root + "/pgbouncer.ini" }
    private var pidFile: String { root + "/pgbouncer.pid" }
    public var logFile: String { root + "/pgbouncer.log" }

    /// Whether PgBouncer is installed (scripts/install-deps.sh installs it).
    public static var installed: Bool { FileManager.default.isExecutableFile(atPath: binary) }
    static let binary = "/usr/sbin/pgbouncer"

    /// Starts PgBouncer in `mode` in front of `server`, with `poolSize` server connections per database and user.
    public static func start(for server: PostgresServer, mode: Mode, poolSize: Int = 10) throws -> Pooler {
        guard installed else {
            throw PostgresServerError("pgbouncer is not installed at \(binary) (scripts/install-deps.sh installs it)")
        }
        let root = server.root + "/pgbouncer-\(mode)-" + UUID().uuidString.prefix(8).lowercased()
        let pooler = Pooler(server: server, mode: mode, poolSize: poolSize, root: root)
        try pooler.configure()
        try pooler.restart()
        return pooler
    }

    private init(server: PostgresServer, mode: Mode, poolSize: Int, root: String) {
        self.server = server
        self.mode = mode
        self.poolSize = poolSize
        self.root = root
    }

    /// `postgresql:///DB?host=POOLERDIR&port=6432&user=USER`: a database of `server`, through the pooler.
    public func connectionString(database: String, user: String = "postgres") -> String {
        "postgresql:///\(database)?host=\(root)&port=\(port)&user=\(user)"
    }

    private func configure(mode: Mode? = nil) throws {
        if mode == nil {
            guard mkdir(root, 0o700) == 0 else {
                throw PostgresServerError("cannot create \(root): \(String(cString: strerror(errno)))")
            }
            try server.giveToServerUser(root)
        }
        let serverPort = server.tcpPort ?? 5432
        let settings = """
            [databases]
            * = host=\(server.socketDirectory) port=\(serverPort)

            [pgbouncer]
            listen_addr =
            listen_port = \(port)
            unix_socket_dir = \(root)
            auth_type = trust
            auth_file = \(root)/users.txt
            pool_mode = \(mode ?? self.mode)
            default_pool_size = \(poolSize)
            min_pool_size = 0
            reserve_pool_size = 0
            max_client_conn = 5000
            logfile = \(logFile)
            pidfile = \(pidFile)
            admin_users = postgres
            server_login_retry = 1
            query_wait_timeout = 60
            """
        for (name, text) in [("pgbouncer.ini", settings), ("users.txt", "\"postgres\" \"\"\n")] {
            try Data(text.utf8).write(to: URL(filePath: root + "/" + name))
            try server.giveToServerUser(root + "/" + name)
        }
    }

    /// Starts PgBouncer (again, after ``stop()``) and waits until it accepts a connection.
    public func restart() throws {
        try server.run(Self.binary, ["-d", configuration])
        let deadline = ContinuousClock.now + .seconds(30)
        while true {
            let connection = PQconnectdb(connectionString(database: "postgres"))
            defer { PQfinish(connection) }
            if PQstatus(connection) == CONNECTION_OK { return }
            guard ContinuousClock.now < deadline else {
                let log = (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? ""
                throw PostgresServerError(
                    "pgbouncer did not accept a connection within 30 s: "
                        + String(cString: PQerrorMessage(connection)) + "\nlog:\n" + log.suffix(2_000))
            }
            usleep(20_000)  // a hang guard's poll: nothing here can signal readiness
        }
    }

    /// Rewrites the configuration with `mode` and sends PgBouncer `SIGHUP`, as an administrator reloading it does:
    /// clients stay connected. Returns once the admin console shows the new mode.
    public func reload(mode: Mode) throws {
        try configure(mode: mode)
        guard let text = try? String(contentsOfFile: pidFile, encoding: .utf8),
            let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)), kill(pid, SIGHUP) == 0
        else { throw PostgresServerError("cannot send SIGHUP to pgbouncer: \(String(cString: strerror(errno)))") }
        let admin = try Session(connectionString(database: "pgbouncer"))
        let deadline = ContinuousClock.now + .seconds(30)
        while try admin.execute("SHOW CONFIG").first(where: { $0.first == "pool_mode" })?[1] != mode.rawValue {
            guard ContinuousClock.now < deadline else { throw PostgresServerError("pgbouncer did not reload") }
            usleep(20_000)  // a hang guard's poll: the reload has no other sign
        }
    }

    /// Stops PgBouncer at once (SIGTERM, its immediate shutdown: every client and server connection is closed) and
    /// waits until it is gone.
    public func stop() throws {
        guard let text = try? String(contentsOfFile: pidFile, encoding: .utf8),
            let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines))
        else { return }
        guard kill(pid, SIGTERM) == 0 else { return }
        let deadline = ContinuousClock.now + .seconds(30)
        // A daemon's parent is the machine's init, which may leave it a zombie: that counts as gone.
        while kill(pid, 0) == 0, !Self.isZombie(pid) {
            guard ContinuousClock.now < deadline else { throw PostgresServerError("pgbouncer \(pid) did not stop") }
            usleep(10_000)  // a hang guard's poll for another process's exit
        }
        try? FileManager.default.removeItem(atPath: pidFile)
    }

    private static func isZombie(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return false }
        return stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("Z")
    }

    /// Stops PgBouncer and removes its folder.
    public func destroy() {
        try? stop()
        try? FileManager.default.removeItem(atPath: root)
    }

    /// The server connections open to `database` from anyone but the caller of this count, read from
    /// `pg_stat_activity` directly on the server.
    public func serverConnections(database: String) throws -> Int {
        let rows = try server.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = '\(database)' AND pid <> pg_backend_pid() "
                + "AND backend_type = 'client backend'", database: database)
        return Int(rows.first?[0] ?? "") ?? -1
    }
}
