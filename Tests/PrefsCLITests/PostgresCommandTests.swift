import Foundation
import PostgresTestServer
import PrefsTestSupport
import TestThreads
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `prefs … --postgres-env VAR` against a real PostgreSQL server (started once per test process).
@Suite(.ownThreads) struct PostgresCommandTests {
    /// A fresh database and the environment that names it in `PG`.
    struct Target {
        let server: PostgresServer
        let database: String
        let sandbox: Sandbox

        init() throws {
            server = try PostgresServer.shared()
            database = try server.createDatabase()
            sandbox = try Sandbox()
        }

        @discardableResult
        func prefs(_ arguments: String..., stdin: String? = nil) throws -> PrefsResult {
            try sandbox.prefs(
                arguments + ["--postgres-env", "PG"], stdin: stdin,
                environment: ["PG": server.connectionString(database: database)])
        }

        func sql(_ text: String) throws -> [[String?]] { try server.execute(text, database: database) }
    }

    /// The tool holds no session state either: through PgBouncer in transaction pooling every command works, says
    /// nothing on standard error (it does not check whether it could listen), and leaves every server setting as it
    /// was.
    @Test func theToolWorksThroughPgBouncerInTransactionPooling() throws {
        let target = try Target()
        defer { target.sandbox.cleanup() }
        let pooler = try Pooler.start(for: target.server, mode: .transaction)
        defer { pooler.destroy() }
        func prefs(_ arguments: String...) throws -> PrefsResult {
            try target.sandbox.prefs(
                arguments + ["--postgres-env", "PG"],
                environment: ["PG": pooler.connectionString(database: target.database)])
        }
        for result in [
            try prefs("write", "com.example.app", "theme", "dark"),
            try prefs("write", "com.example.app", "count", "5", "--type", "int"),
        ] {
            result.expectSuccess()
            #expect(result.error == "", "\(result)")
        }
        #expect(try prefs("read", "com.example.app", "theme").output == "dark\n")
        #expect(try prefs("domains").output == "com.example.app\n")
        try prefs("delete", "com.example.app", "theme").expectSuccess()
        #expect(try target.sql("SELECT key FROM prefs_values WHERE value IS NOT NULL") == [["count"]])
        let session = try Session(pooler.connectionString(database: target.database))
        #expect(
            try session.execute(
                "SELECT current_setting('lock_timeout'), (SELECT count(*) FROM pg_prepared_statements), "
                    + "coalesce(current_setting('prefs.notify_inline', true), '')") == [["0", "0", ""]])
    }

    @Test func readWriteDeleteExportAndImportANamespace() throws {
        let target = try Target()
        defer { target.sandbox.cleanup() }
        try target.prefs("write", "com.example.app", "theme", "dark").expectSuccess()
        try target.prefs("write", "com.example.app", "count", "5", "--type", "int").expectSuccess()
        #expect(try target.prefs("read", "com.example.app", "theme").output == "dark\n")
        #expect(
            try target.prefs("read", "com.example.app", "--types").output == "count  int     5\ntheme  string  dark\n")
        // Written through the CLI, stored as JSON in the table.
        #expect(
            try target.sql("SELECT key, value::text FROM prefs_values WHERE value IS NOT NULL ORDER BY key")
                == [["count", "5"], ["theme", "\"dark\""]])
        // Another namespace is another domain.
        #expect(try target.prefs("read", "other").status == 1)

        let exported = try target.prefs("export", "com.example.app")
        #expect(exported.output == "{\n  \"count\": 5,\n  \"theme\": \"dark\"\n}\n")
        let imported = try target.prefs("import", "com.example.app", "-", stdin: #"{"flag": true, "count": 6}"#)
        #expect(imported.status == 0, "\(imported)")
        #expect(
            try target.prefs("read", "com.example.app", "--json").output == "{\n  \"count\": 6,\n  \"flag\": true\n}\n")

        try target.prefs("delete", "com.example.app", "count").expectSuccess()
        let missing = try target.prefs("read", "com.example.app", "count")
        #expect(missing.status == 1 && missing.isOneLineFailure, "\(missing)")
        try target.prefs("delete", "com.example.app").expectSuccess()
        #expect(try target.prefs("read", "com.example.app").status == 1)
    }

    /// Two `prefs watch` processes on one namespace both print every change another process makes.
    @Test func twoWatchersSeeEveryChange() async throws {
        let target = try Target()
        defer { target.sandbox.cleanup() }
        let environment = target.sandbox.environment.merging([
            "PG": target.server.connectionString(database: target.database)
        ]) { $1 }
        let watchers = try (0..<2).map { _ in
            try PrefsProcess.start(["watch", "com.example.app", "--postgres-env", "PG"], environment: environment)
        }
        defer { for watcher in watchers { watcher.signal(SIGKILL) } }
        let streams = watchers.map { $0.linesWithErrors() }
        let ready = ReadyCount()
        let expected = ["theme = dark (string)", "count = 5 (int)", "theme removed"]
        let printed = try await withTimeout {
            try await withThrowingTaskGroup(of: [String].self) { group in
                for lines in streams {
                    group.addTask {
                        var seen: [String] = []
                        for await (isError, line) in lines {
                            if isError {
                                if line.hasPrefix("prefs: watching") { ready.increment() }
                                continue
                            }
                            seen.append(line)
                            if seen.count == expected.count { break }
                        }
                        return seen
                    }
                }
                // Write once both watchers have said they are watching.
                while ready.value < watchers.count { try await Task.sleep(for: .milliseconds(10)) }
                for arguments in [
                    ["write", "com.example.app", "theme", "dark"],
                    ["write", "com.example.app", "count", "5", "--type", "int"],
                    ["delete", "com.example.app", "theme"],
                ] {
                    let result = try target.sandbox.prefs(
                        arguments + ["--postgres-env", "PG"], environment: environment)
                    guard result.status == 0 else { throw CommandFailed(result: result.description) }
                }
                var all: [[String]] = []
                for try await seen in group { all.append(seen) }
                return all
            }
        }
        #expect(printed == [expected, expected])
    }

    @Test func aMissingVariableOrWrongPasswordFailsInOneLineWithoutTheSecret() throws {
        let target = try Target()
        defer { target.sandbox.cleanup() }
        let unset = try target.sandbox.prefs(["read", "app", "--postgres-env", "PREFS_NO_SUCH_VARIABLE"])
        #expect(unset.status == 2 && unset.isOneLineFailure, "\(unset)")

        let user = "cli_" + UUID().uuidString.prefix(8).lowercased()
        _ = try target.sql("CREATE ROLE \(user) LOGIN PASSWORD 'right-one'")
        let wrong = target.server.connectionString(database: target.database, user: user, password: "wr0ng-pass")
        let refused = try target.sandbox.prefs(
            ["read", "app", "--postgres-env", "PG"], environment: ["PG": wrong])
        #expect(refused.status == 3 && refused.isOneLineFailure, "\(refused)")
        #expect(refused.error.contains("authentication failed"))
        #expect(!refused.error.contains("wr0ng-pass"))
        #expect(!refused.error.contains(wrong))
    }
}

/// How many watchers said they are watching (behind an `NSLock`, which ThreadSanitizer sees).
private final class ReadyCount: @unchecked Sendable {
    private let lock = NSLock()
    private var ready = 0

    func increment() {
        lock.lock()
        ready += 1
        lock.unlock()
    }

    var value: Int {
        lock.lock()
        defer { lock.unlock() }
        return ready
    }
}
