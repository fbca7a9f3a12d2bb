import CLibPQ
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `try Session(server.connectionString(database: name, user: "intruder", password: "pw"))` is one libpq session
/// of its own, for tests that need another role or a session that holds a lock, listens or sends notifications.
/// Not thread-safe: one thread uses it at a time.
public final class Session: @unchecked Sendable {
    private let connection: OpaquePointer

    public init(_ connectionString: String) throws {
        guard let connection = PQconnectdb(connectionString) else {
            throw PostgresServerError("cannot allocate a connection")
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = String(cString: PQerrorMessage(connection))
            PQfinish(connection)
            throw PostgresServerError("cannot connect: " + message)
        }
        self.connection = connection
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
    }

    deinit { PQfinish(connection) }

    /// Runs SQL and returns the rows of its last statement as text; a refused statement throws with the server's
    /// SQLSTATE in ``SessionError/sqlState``.
    @discardableResult
    public func execute(_ sql: String) throws -> [[String?]] {
        guard let result = PQexec(connection, sql) else { throw PostgresServerError("no result for \(sql)") }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else {
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) } ?? ""
            throw SessionError(sqlState: state, message: String(cString: PQresultErrorMessage(result)))
        }
        return (0..<PQntuples(result)).map { row in
            (0..<PQnfields(result)).map { column in
                PQgetisnull(result, row, column) != 0 ? nil : String(cString: PQgetvalue(result, row, column))
            }
        }
    }

    /// Waits until at least `count` notifications have arrived (or `seconds` have passed) and returns the payloads
    /// received so far.
    public func notifications(atLeast count: Int, within seconds: Double) -> [String] {
        var payloads: [String] = []
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            _ = PQconsumeInput(connection)
            while let notification = PQnotifies(connection) {
                payloads.append(String(cString: notification.pointee.extra))
                PQfreemem(notification)
            }
            let remaining = deadline.timeIntervalSinceNow
            if payloads.count >= count || remaining <= 0 { return payloads }
            var descriptor = pollfd(fd: PQsocket(connection), events: Int16(POLLIN), revents: 0)
            _ = poll(&descriptor, 1, Int32(remaining * 1_000) + 1)
        }
    }
}

/// A statement a ``Session`` ran was refused.
public struct SessionError: Error, CustomStringConvertible {
    public let sqlState: String
    public let message: String
    public var description: String { "\(sqlState): \(message)" }
}
