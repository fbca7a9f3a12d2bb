import CLibPQ
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// What a connection string holds that must never be shown: the string itself and its password.
struct ConnectionSecrets: Sendable {
    let connectionString: String
    let password: String?

    /// Parses `connectionString` with libpq without connecting.
    init(_ connectionString: String) throws(PostgresStoreError) {
        self.connectionString = connectionString
        var message: UnsafeMutablePointer<CChar>? = nil
        guard let options = PQconninfoParse(connectionString, &message) else {
            let reason = message.map { String(cString: $0) } ?? "libpq could not parse it"
            if let message { PQfreemem(message) }
            throw .invalidConnectionString(reason: Self.withoutQuotes(reason))
        }
        defer { PQconninfoFree(options) }
        var password: String? = nil
        var option = options
        while let keyword = option.pointee.keyword {
            if String(cString: keyword) == "password", let value = option.pointee.val {
                password = String(cString: value)
            }
            option += 1
        }
        self.password = password
    }

    /// libpq quotes the part of the string it could not parse; that part may be a password.
    private static func withoutQuotes(_ text: String) -> String {
        var result = ""
        var quoted = false
        for character in text.trimmingCharacters(in: .whitespacesAndNewlines) {
            if character == "\"" {
                if !quoted { result += "\"…\"" }
                quoted.toggle()
            } else if !quoted {
                result.append(character)
            }
        }
        return result
    }

    /// `message` with the connection string and password masked, and libpq's "connection to server … failed:"
    /// prefixes (which repeat the host or socket path) dropped; several lines become one.
    func sanitize(_ message: String) -> String {
        var lines: [String] = []
        for rawLine in message.split(whereSeparator: \.isNewline) {
            var line = Substring(rawLine)
            if line.hasPrefix("connection to server"), let failed = line.range(of: "failed: ") {
                line = line[failed.upperBound...]
            }
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if !trimmed.isEmpty { lines.append(trimmed) }
        }
        var text = lines.joined(separator: "; ")
        for secret in [connectionString, password ?? ""] where secret.count >= 1 {
            text = text.replacingOccurrences(of: secret, with: "***")
        }
        return text.isEmpty ? "no reason given" : text
    }
}

/// One libpq connection. Not thread-safe: its owner serialises every use.
final class Connection: @unchecked Sendable {
    let handle: OpaquePointer
    let secrets: ConnectionSecrets
    /// Statements that set the session up, run again after every reconnection.
    private let setup: [String]

    /// Connects, waiting at most `connect_timeout` (10 s unless the connection string says otherwise), then runs
    /// `setup`.
    init(secrets: ConnectionSecrets, applicationName: String, setup: [String] = []) throws(PostgresStoreError) {
        self.secrets = secrets
        self.setup = setup
        // Keywords are applied in order and `dbname` expands to the whole connection string, so the string's own
        // settings override the two defaults before it.
        let keywords = ["connect_timeout", "application_name", "dbname"]
        let values = ["10", applicationName, secrets.connectionString]
        let connection: OpaquePointer? = withCStrings(keywords) { keywordPointers in
            withCStrings(values) { valuePointers in
                PQconnectdbParams(keywordPointers, valuePointers, 1)
            }
        }
        guard let connection else { throw .unreachable(reason: "libpq could not allocate a connection") }
        guard PQstatus(connection) == CONNECTION_OK else {
            let error = Self.classify(connection, secrets: secrets)
            PQfinish(connection)
            throw error
        }
        handle = connection
        PQsetNoticeProcessor(handle, { _, _ in }, nil)
        for statement in setup { try execute(statement) }
    }

    deinit { PQfinish(handle) }

    /// Why a connection attempt failed, as a typed error.
    private static func classify(_ connection: OpaquePointer, secrets: ConnectionSecrets) -> PostgresStoreError {
        let raw = String(cString: PQerrorMessage(connection))
        let reason = secrets.sanitize(raw)
        let lowered = raw.lowercased()
        if PQconnectionNeedsPassword(connection) != 0 || lowered.contains("authentication failed")
            || lowered.contains("no password supplied") || lowered.contains("password")
        {
            return .authenticationFailed(reason: reason)
        }
        if raw.contains("FATAL:") { return .connectionRefused(reason: reason) }
        return .unreachable(reason: reason)
    }

    var isBroken: Bool { PQstatus(handle) != CONNECTION_OK }

    /// The connection's last error message, sanitised.
    var lastError: String { secrets.sanitize(String(cString: PQerrorMessage(handle))) }

    var socket: Int32 { PQsocket(handle) }

    /// Reconnects with the same settings; false when the server is still away.
    func reset() -> Bool {
        PQreset(handle)
        guard !isBroken else { return false }
        for statement in setup {
            guard (try? execute(statement)) != nil else { return false }
        }
        return true
    }

    /// Notices a connection the server closed while it sat idle (restart, failover, terminated backend), without
    /// sending anything: the socket reads as end-of-file.
    ///
    /// A terminated backend first sends its error message, then closes: both are read here.
    func noticeIdleClose() {
        for _ in 0..<4 {
            guard !isBroken else { return }
            var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 0) > 0 else { return }
            guard PQconsumeInput(handle) != 0 else { return }
        }
    }

    /// Runs one statement with text parameters (`$1`, `$2`, …) and returns its rows as text (nil for NULL).
    @discardableResult
    func execute(_ sql: String, _ parameters: [String?] = []) throws(PostgresStoreError) -> [[String?]] {
        let result: OpaquePointer? = withOptionalCStrings(parameters) { pointers in
            PQexecParams(handle, sql, Int32(parameters.count), nil, pointers, nil, nil, 0)
        }
        defer { PQclear(result) }
        guard let result else { throw failure(nil) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK:
            let rowCount = PQntuples(result)
            let columnCount = PQnfields(result)
            var rows: [[String?]] = []
            rows.reserveCapacity(Int(rowCount))
            for row in 0..<rowCount {
                var columns: [String?] = []
                columns.reserveCapacity(Int(columnCount))
                for column in 0..<columnCount {
                    if PQgetisnull(result, row, column) != 0 {
                        columns.append(nil)
                    } else {
                        columns.append(String(cString: PQgetvalue(result, row, column)))
                    }
                }
                rows.append(columns)
            }
            return rows
        default:
            throw failure(result)
        }
    }

    /// The typed error for a failed statement: a lost connection, or the server's SQLSTATE and message.
    private func failure(_ result: OpaquePointer?) -> PostgresStoreError {
        if isBroken {
            return .connectionLost(reason: secrets.sanitize(String(cString: PQerrorMessage(handle))))
        }
        guard let result, let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))) else {
            return .serverError(sqlState: "", message: secrets.sanitize(String(cString: PQerrorMessage(handle))))
        }
        let message = PQresultErrorField(result, Int32(UInt8(ascii: "M"))).map { String(cString: $0) } ?? ""
        let code = String(cString: state)
        // Class 08 (connection exception) and 57P (the server shutting down or starting up): the server is away.
        if code.hasPrefix("08") || code.hasPrefix("57P") {
            return .connectionLost(reason: secrets.sanitize(message))
        }
        return .serverError(sqlState: code, message: secrets.sanitize(message))
    }

    /// The notifications received so far, as (channel, payload) pairs.
    func takeNotifications() -> [String] {
        var payloads: [String] = []
        while let notification = PQnotifies(handle) {
            payloads.append(String(cString: notification.pointee.extra))
            PQfreemem(notification)
        }
        return payloads
    }

    /// Reads what the server sent; false when the connection is gone.
    func consumeInput() -> Bool { PQconsumeInput(handle) != 0 && !isBroken }
}

private func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    let copies = strings.map { strdup($0) }
    defer { for copy in copies { free(copy) } }
    let pointers = copies.map { UnsafePointer($0) } + [nil]
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}

private func withOptionalCStrings<R>(_ strings: [String?], _ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> R)
    -> R
{
    let copies = strings.map { $0.map { strdup($0) } ?? nil }
    defer { for copy in copies { free(copy) } }
    let pointers = copies.map { $0.map { UnsafePointer($0) } }
    return pointers.withUnsafeBufferPointer { body($0.baseAddress) }
}
