import CLibPQ
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `try PostgresServer.shared()` is a throwaway PostgreSQL server for tests and prefs-bench: `initdb` in a fresh
/// temporary folder, then `pg_ctl start` listening on a unix socket in that folder only (no TCP).
///
/// PostgreSQL refuses to run as root, so as root every server command runs as the `postgres` user through
/// `runuser`, in a folder owned by that user. `pg_hba.conf` trusts the `postgres` user and asks every other user
/// for a SCRAM password. The shared server is stopped and its folder removed when the process exits.
public final class PostgresServer: Sendable {
    /// The temporary folder holding `data/`, `socket/` and `server.log`.
    public let root: String
    public var dataDirectory: String { root + "/data" }
    public var socketDirectory: String { root + "/socket" }
    public var logFile: String { root + "/server.log" }
    private let binaries: String

    private static let sharedServer = Result { () throws -> PostgresServer in
        let server = try PostgresServer.start()
        atexit { try? PostgresServer.sharedServerIfStarted?.destroy() }
        return server
    }
    private static var sharedServerIfStarted: PostgresServer? { try? sharedServer.get() }

    /// The server of this process, started on first use and stopped at exit.
    public static func shared() throws -> PostgresServer { try sharedServer.get() }

    /// Starts a server of its own (for tests that stop and restart it); call ``destroy()`` when done.
    ///
    /// With `tcp`, it also listens on a free port of 127.0.0.1 (``tcpPort``), where the `postgres` user is trusted.
    public static func start(tcp: Bool = false) throws -> PostgresServer {
        let binaries = try findBinaries()
        var template = Array("/tmp/prefs-pg.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw PostgresServerError("cannot create a temporary folder") }
        let root = String(cString: made)
        let server = PostgresServer(root: root, binaries: binaries, tcpPort: tcp ? try freePort() : nil)
        do {
            try server.initialize()
            try server.startServer()
        } catch {
            try? server.destroy()
            throw error
        }
        return server
    }

    /// The 127.0.0.1 port the server listens on, when started with `tcp`.
    public let tcpPort: Int?

    private init(root: String, binaries: String, tcpPort: Int?) {
        self.root = root
        self.binaries = binaries
        self.tcpPort = tcpPort
    }

    /// `postgresql:///DB?host=SOCKETDIR&user=USER` (and `&password=…`).
    public func connectionString(database: String, user: String = "postgres", password: String? = nil) -> String {
        var text = "postgresql:///\(database)?host=\(socketDirectory)&user=\(user)"
        if let tcpPort { text += "&port=\(tcpPort)" }
        if let password { text += "&password=" + password }
        return text
    }

    /// Creates a database with a unique name (tests each get their own, so they run in parallel) and returns it.
    public func createDatabase(owner: String = "postgres") throws -> String {
        let name = "prefs_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        try execute("CREATE DATABASE \(name) OWNER \(owner)")
        return name
    }

    /// Runs SQL as the `postgres` user and returns the rows of its last statement as text.
    @discardableResult
    public func execute(_ sql: String, database: String = "postgres") throws -> [[String?]] {
        guard let connection = PQconnectdb(connectionString(database: database)) else {
            throw PostgresServerError("cannot allocate a connection")
        }
        defer { PQfinish(connection) }
        guard PQstatus(connection) == CONNECTION_OK else {
            throw PostgresServerError("cannot connect: " + String(cString: PQerrorMessage(connection)))
        }
        guard let result = PQexec(connection, sql) else { throw PostgresServerError("no result for \(sql)") }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else {
            throw PostgresServerError("\(sql): " + String(cString: PQresultErrorMessage(result)))
        }
        return (0..<PQntuples(result)).map { row in
            (0..<PQnfields(result)).map { column in
                PQgetisnull(result, row, column) != 0 ? nil : String(cString: PQgetvalue(result, row, column))
            }
        }
    }

    /// Stops the server (`pg_ctl stop -m fast`: clients are disconnected, committed data is kept).
    public func stop() throws {
        try run("pg_ctl", ["-D", dataDirectory, "-m", "fast", "-w", "stop"])
    }

    /// Kills the server (`pg_ctl stop -m immediate`: no shutdown, like a crash; committed data is kept).
    public func crash() throws {
        try run("pg_ctl", ["-D", dataDirectory, "-m", "immediate", "-w", "stop"])
    }

    /// Starts the stopped server again, on `socketDirectory` unless another folder is given.
    public func restart(socketDirectory folder: String? = nil) throws {
        try startServer(socketDirectory: folder)
    }

    /// Stops the server if it runs and removes its folder.
    public func destroy() throws {
        if FileManager.default.fileExists(atPath: dataDirectory + "/postmaster.pid") {
            try? run("pg_ctl", ["-D", dataDirectory, "-m", "immediate", "-w", "stop"])
        }
        try FileManager.default.removeItem(atPath: root)
    }

    // MARK: Starting

    private func initialize() throws {
        try makeFolder(root)
        try makeFolder(socketDirectory)
        try run(
            "initdb",
            [
                "-D", dataDirectory, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync",
                "--no-instructions",
            ])
        let rules = "local all postgres trust\nlocal all all scram-sha-256\nhost all postgres 127.0.0.1/32 trust\n"
        try Data(rules.utf8).write(to: URL(filePath: dataDirectory + "/pg_hba.conf"))
        try giveToServerUser(dataDirectory + "/pg_hba.conf")
    }

    private func startServer(socketDirectory folder: String? = nil) throws {
        let sockets = folder ?? socketDirectory
        if folder != nil { try makeFolder(sockets) }
        // Without fsync a test server does not wait for the disk, which dozens of them share while the suite runs
        // (a backend starting behind another server's CREATE DATABASE can take longer than a short connect timeout). Every
        // commit is still written to the kernel before it is acknowledged, so a killed server keeps it.
        var options = "-k \(sockets) -c listen_addresses='' -c max_connections=300 -c fsync=off"
        if let tcpPort {
            options =
                "-k \(sockets) -c listen_addresses='127.0.0.1' -p \(tcpPort) -c max_connections=300 -c fsync=off"
        }
        do {
            try run("pg_ctl", ["-D", dataDirectory, "-l", logFile, "-o", options, "-w", "-t", "60", "start"])
        } catch {
            let log = (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? ""
            throw PostgresServerError("\(error)\nserver log:\n\(log.suffix(2_000))")
        }
    }

    private func makeFolder(_ path: String) throws {
        if !FileManager.default.fileExists(atPath: path) {
            guard mkdir(path, 0o700) == 0 else {
                throw PostgresServerError("cannot create \(path): \(String(cString: strerror(errno)))")
            }
        }
        try giveToServerUser(path)
    }

    /// As root, hands a path to the `postgres` user, which the server runs as.
    func giveToServerUser(_ path: String) throws {
        guard geteuid() == 0 else { return }
        guard let user = getpwnam("postgres") else {
            throw PostgresServerError(
                "running as root but there is no postgres user to run the server as; install the postgresql "
                    + "package (scripts/install-deps.sh does)")
        }
        guard chown(path, user.pointee.pw_uid, user.pointee.pw_gid) == 0 else {
            throw PostgresServerError("cannot chown \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// Runs a server binary, or the tool at a full path (as `postgres` when root), and fails with its output when it
    /// fails.
    ///
    /// It is spawned with `posix_spawn`, not Foundation's `Process`: `pg_ctl start` leaves the server running in
    /// the background, and `Process` hands its child a socket that the server would inherit and keep open, so
    /// `waitUntilExit()` would never return. Here the child gets only standard input, output and error.
    func run(_ tool: String, _ arguments: [String]) throws {
        // A tool named by its full path (pgbouncer) is not one of the server's binaries.
        let path = tool.hasPrefix("/") ? tool : binaries + "/" + tool
        let command: [String]
        if geteuid() == 0 {
            command = ["/usr/sbin/runuser", "-u", "postgres", "--", path] + arguments
        } else {
            command = [path] + arguments
        }
        let outputPath = root + "/\(URL(filePath: tool).lastPathComponent).out"
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        _ = addCloseFrom(&actions, 3)
        _ = addChdir(&actions, root)
        let argv = command.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var child: pid_t = 0
        // The child starts with no signal blocked: a test process's threads block many, a spawned child inherits
        // that mask, and a daemon left with it (pgbouncer) would never see the signal that stops it.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var unblocked = sigset_t()
        sigemptyset(&unblocked)
        posix_spawnattr_setsigmask(&attributes, &unblocked)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK))
        let spawned = posix_spawn(&child, command[0], &actions, &attributes, argv, environ)
        guard spawned == 0 else {
            throw PostgresServerError("cannot run \(command[0]): \(String(cString: strerror(spawned)))")
        }
        var status: Int32 = 0
        while waitpid(child, &status, 0) < 0 {
            guard errno == EINTR else { throw PostgresServerError("waitpid: \(String(cString: strerror(errno)))") }
        }
        guard status == 0 else {
            let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
            throw PostgresServerError("\(tool) \(arguments.joined(separator: " ")) failed (\(status)): \(text)")
        }
    }

    /// The folder of `initdb` and `pg_ctl`: `$PREFS_POSTGRES_BIN`, else the newest /usr/lib/postgresql/N/bin.
    private static func findBinaries() throws -> String {
        var candidates: [String] = []
        if let configured = ProcessInfo.processInfo.environment["PREFS_POSTGRES_BIN"] { candidates.append(configured) }
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        for version in versions.compactMap({ Int($0) }).sorted(by: >) {
            candidates.append("/usr/lib/postgresql/\(version)/bin")
        }
        candidates += ["/usr/local/bin", "/usr/bin"]
        for folder in candidates
        where FileManager.default.isExecutableFile(atPath: folder + "/initdb")
            && FileManager.default.isExecutableFile(atPath: folder + "/pg_ctl")
        {
            return folder
        }
        throw PostgresServerError(
            "PostgreSQL server binaries (initdb, pg_ctl) not found in \(candidates.joined(separator: ", ")); "
                + "install the postgresql package (scripts/install-deps.sh does) or set PREFS_POSTGRES_BIN")
    }

    /// A port of 127.0.0.1 that nothing listens on right now.
    static func freePort() throws -> Int {
        let probe = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(probe) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                bind(probe, generic, length) == 0 && getsockname(probe, generic, &length) == 0
            }
        }
        guard bound else { throw PostgresServerError("cannot find a free port: \(String(cString: strerror(errno)))") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Whether server binaries are installed, for callers that may skip (prefs-bench) rather than fail.
    public static var binariesInstalled: Bool { (try? findBinaries()) != nil }
}

// glibc 2.34+ has these, but its header declares them only with _GNU_SOURCE, which Swift's Glibc module lacks.
@_silgen_name("posix_spawn_file_actions_addclosefrom_np")
private func addCloseFrom(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ from: Int32) -> Int32

@_silgen_name("posix_spawn_file_actions_addchdir_np")
private func addChdir(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ path: UnsafePointer<CChar>)
    -> Int32

/// Why the test server could not start or run a command.
public struct PostgresServerError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
