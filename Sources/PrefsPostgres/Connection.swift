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

    /// `message` with the connection string and password masked, and libpq's "connection to server on socket
    /// \"/run/postgresql/.s.PGSQL.5432\" failed: …" shortened to "server on socket \"…\": …", keeping the socket
    /// path or host it tried, which says where the server was looked for; several lines become one.
    func sanitize(_ message: String) -> String {
        var lines: [String] = []
        for rawLine in message.split(whereSeparator: \.isNewline) {
            var line = String(rawLine)
            if line.hasPrefix("connection to server"), let failed = line.range(of: " failed: ") {
                line =
                    line[line.index(line.startIndex, offsetBy: "connection to ".count)..<failed.lowerBound] + ": "
                    + line[failed.upperBound...]
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
///
/// Every round trip is bounded by a deadline the client enforces itself (`poll(2)` on the socket), so a network
/// path that swallows packets without closing the socket cannot hold a caller longer than that deadline.
final class Connection: @unchecked Sendable {
    let handle: OpaquePointer
    let secrets: ConnectionSecrets
    let limits: PostgresStore.Limits
    /// Set when a round trip ran past its deadline: the connection's protocol state is unknown, so it is never used
    /// again.
    private var abandoned = false
    /// The text parameters of the statement being sent, each followed by a NUL, and where each starts (-1: NULL).
    /// Kept from one statement to the next, so sending one allocates nothing for them.
    private var parameterBytes: [UInt8] = []
    private var parameterStarts: [Int] = []
    private var parameterPointers: [UnsafePointer<CChar>?] = []
    /// Whether the connection talks to the server process it connected to: no pooler stands between them, which
    /// could hand its statements to other server connections or change mode under it.
    private(set) var direct = false
    /// The names of the statements prepared on this connection (only a direct one).
    private var prepared: Set<String> = []

    /// Connects, waiting at most `limits.connectTimeout`, and asks the server which process serves it (one round
    /// trip): the one it connected to means a direct connection. Nothing is set on the session: every statement
    /// carries what it needs, or runs in a transaction that sets it locally (``Schema/begin(_:)``), so a pooler in
    /// transaction mode can hand each transaction to any server connection; only a direct connection prepares
    /// statements by name (``execute(_:_:preparedAs:deadline:)``), which then live as long as it does.
    init(secrets: ConnectionSecrets, limits: PostgresStore.Limits, applicationName: String) throws(PostgresStoreError) {
        self.secrets = secrets
        self.limits = limits
        // Keywords are applied in order and `dbname` expands to the whole connection string, so the string's own
        // settings override the defaults before it.
        let network = limits.networkTimeout.wholeMilliseconds
        let keywords = [
            "connect_timeout", "keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count",
            "tcp_user_timeout", "application_name", "dbname",
        ]
        let values = [
            String(max(2, (limits.connectTimeout.wholeMilliseconds + 999) / 1_000)), "1",
            String(max(1, network / 3_000)), String(max(1, network / 6_000)), "3", String(network),
            applicationName, secrets.connectionString,
        ]
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
        let serving = try? execute(
            script: "SELECT pg_catalog.pg_backend_pid()", deadline: ContinuousClock.now + limits.connectTimeout)
        direct = serving?.first?[0].flatMap { Int32($0) } == PQbackendPID(handle)
    }

    deinit { PQfinish(handle) }

    /// Why a connection attempt failed, as a typed error.
    private static func classify(_ connection: OpaquePointer, secrets: ConnectionSecrets) -> PostgresStoreError {
        let raw = String(cString: PQerrorMessage(connection))
        return .connecting(
            failedWith: raw, reason: secrets.sanitize(raw), needsPassword: PQconnectionNeedsPassword(connection) != 0)
    }

    var isBroken: Bool { abandoned || PQstatus(handle) != CONNECTION_OK }

    /// The connection's last error message, sanitised.
    var lastError: String { secrets.sanitize(String(cString: PQerrorMessage(handle))) }

    var socket: Int32 { PQsocket(handle) }

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

    /// Runs one statement with text parameters (`$1`, `$2`, …) and returns its rows as text (nil for NULL). With
    /// `name`, on a direct connection, the statement is prepared under that name the first time (one round trip more,
    /// once), so the server parses and plans it once per connection; otherwise it is sent unnamed every time. Only the
    /// statements a store sends all the time are named: a write's and the change feed's.
    ///
    /// - Throws: `.connectionLost` when the statement could not be sent (it did not run), `.outcomeUnknown` when
    ///   the connection was lost or `deadline` passed after it was sent (it may have run), `.timedOut` for the
    ///   server's `statement_timeout` or `lock_timeout` (it did not run), `.serverError` for anything else.
    @discardableResult
    func execute(
        _ sql: String, _ parameters: [String?] = [], preparedAs name: String? = nil, deadline: ContinuousClock.Instant
    ) throws(PostgresStoreError) -> [[String?]] {
        guard !isBroken else { throw .connectionLost(reason: lastError) }
        let named = direct ? name : nil
        if let named, !prepared.contains(named) {
            guard PQsendPrepare(handle, named, sql, Int32(parameters.count), nil) != 0 else {
                throw .connectionLost(reason: lastError)
            }
            try results(sql, deadline: deadline)
            prepared.insert(named)
        }
        let sent = withParameters(parameters) { pointers in
            if let named { return PQsendQueryPrepared(handle, named, Int32(parameters.count), pointers, nil, nil, 0) }
            return PQsendQueryParams(handle, sql, Int32(parameters.count), nil, pointers, nil, nil, 0)
        }
        guard sent != 0 else { throw .connectionLost(reason: lastError) }
        return try results(sql, deadline: deadline)
    }

    /// Runs `script`, several statements without parameters separated by semicolons, in one round trip (the simple
    /// query protocol); returns the rows of the last one. Throws as ``execute(_:_:preparedAs:deadline:)`` does.
    @discardableResult
    func execute(script: String, deadline: ContinuousClock.Instant) throws(PostgresStoreError) -> [[String?]] {
        guard !isBroken else { throw .connectionLost(reason: lastError) }
        guard PQsendQuery(handle, script) != 0 else { throw .connectionLost(reason: lastError) }
        return try results(script, deadline: deadline)
    }

    /// Waits until `deadline` for a notification on `channel` (which this connection listens to); true once one
    /// came. Other notifications that arrive meanwhile are dropped: the caller reads the table afterwards.
    func hears(channel: String, until deadline: ContinuousClock.Instant) -> Bool {
        while !isBroken {
            while let notification = PQnotifies(handle) {
                defer { PQfreemem(notification) }
                if String(cString: notification.pointee.relname) == channel { return true }
            }
            let remaining = (deadline - ContinuousClock.now).wholeMilliseconds
            guard remaining > 0 else { return false }
            var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            if poll(&descriptor, 1, Int32(min(remaining, 1_000))) > 0 {
                guard PQconsumeInput(handle) != 0 else { return false }
            }
        }
        return false
    }

    /// Runs `body` with `parameters` as C strings (nil for NULL), written one after another into buffers this
    /// connection keeps; a buffer grown past 64 KiB by a large value is let go afterwards.
    private func withParameters<R>(
        _ parameters: [String?], _ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> R
    ) -> R {
        parameterBytes.removeAll(keepingCapacity: true)
        parameterStarts.removeAll(keepingCapacity: true)
        for parameter in parameters {
            guard let parameter else {
                parameterStarts.append(-1)
                continue
            }
            parameterStarts.append(parameterBytes.count)
            parameterBytes.append(contentsOf: parameter.utf8)
            parameterBytes.append(0)
        }
        defer { if parameterBytes.capacity > 1 << 16 { parameterBytes = [] } }
        return parameterBytes.withUnsafeBufferPointer { bytes in
            parameterPointers.removeAll(keepingCapacity: true)
            for start in parameterStarts {
                parameterPointers.append(
                    start < 0 ? nil : UnsafeRawPointer(bytes.baseAddress! + start).assumingMemoryBound(to: CChar.self))
            }
            return parameterPointers.withUnsafeBufferPointer { body($0.baseAddress) }
        }
    }

    /// Waits for the results of the statement just sent and returns the rows of the last one.
    @discardableResult
    private func results(_ sql: String, deadline: ContinuousClock.Instant) throws(PostgresStoreError) -> [[String?]] {
        try awaitResult(sql, deadline: deadline)
        var rows: [[String?]] = []
        var failure: PostgresStoreError? = nil
        while let result = PQgetResult(handle) {
            defer { PQclear(result) }
            switch PQresultStatus(result) {
            case PGRES_COMMAND_OK, PGRES_TUPLES_OK:
                rows = Self.rows(of: result)
            default:
                if failure == nil { failure = self.failure(result) }
            }
            // Reading the next result may wait again (several statements in one string).
            if PQisBusy(handle) != 0 { try awaitResult(sql, deadline: deadline) }
        }
        if let failure { throw failure }
        if isBroken { throw .outcomeUnknown(reason: lastError) }
        return rows
    }

    /// Flushes the query and waits, at most until `deadline`, until its result can be read without blocking.
    private func awaitResult(_ sql: String, deadline: ContinuousClock.Instant) throws(PostgresStoreError) {
        while true {
            let flushed = PQflush(handle)
            if flushed < 0 { throw .outcomeUnknown(reason: lastError) }
            if flushed == 0, PQisBusy(handle) == 0 { return }
            let remaining = (deadline - ContinuousClock.now).wholeMilliseconds
            guard remaining > 0 else {
                abandoned = true
                throw .outcomeUnknown(
                    reason: "no answer from the server within the deadline (the network path may be cut)")
            }
            let events = Int16(POLLIN) | (flushed == 1 ? Int16(POLLOUT) : 0)
            var descriptor = pollfd(fd: socket, events: events, revents: 0)
            let ready = poll(&descriptor, 1, Int32(min(remaining, 1_000)))
            if ready < 0, errno != EINTR { throw .outcomeUnknown(reason: String(cString: strerror(errno))) }
            if ready > 0, descriptor.revents & Int16(POLLIN | POLLERR | POLLHUP) != 0 {
                guard PQconsumeInput(handle) != 0 else { throw .outcomeUnknown(reason: lastError) }
            }
        }
    }

    private static func rows(of result: OpaquePointer) -> [[String?]] {
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
    }

    /// The typed error for a failed statement: a lost connection, a bound reached, or the server's SQLSTATE.
    private func failure(_ result: OpaquePointer) -> PostgresStoreError {
        guard let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))) else {
            if isBroken { return .outcomeUnknown(reason: lastError) }
            return .serverError(sqlState: "", message: secrets.sanitize(String(cString: PQerrorMessage(handle))))
        }
        let message = PQresultErrorField(result, Int32(UInt8(ascii: "M"))).map { String(cString: $0) } ?? ""
        let code = String(cString: state)
        // 57014: statement_timeout; 55P03: lock_timeout. The statement was cancelled, so nothing of it is kept.
        if code == "57014" || code == "55P03" { return .timedOut(reason: secrets.sanitize(message)) }
        // Class 08 (connection exception) and 57P (the server shutting down): whether it ran is unknown.
        if code.hasPrefix("08") || code.hasPrefix("57P") { return .outcomeUnknown(reason: secrets.sanitize(message)) }
        return .serverError(sqlState: code, message: secrets.sanitize(message))
    }

    /// The notifications received so far, oldest first: each one's channel and sending server process (its payload
    /// is never read).
    func takeNotifications() -> [Notification] {
        var notifications: [Notification] = []
        while let notification = PQnotifies(handle) {
            notifications.append(
                Notification(
                    channel: String(cString: notification.pointee.relname), sender: notification.pointee.be_pid))
            PQfreemem(notification)
        }
        return notifications
    }

    /// The process id the server gave this connection when it connected (a pooler's own, through a pooler).
    var backendPID: Int32 { PQbackendPID(handle) }

    /// Reads what the server sent; false when the connection is gone.
    func consumeInput() -> Bool { PQconsumeInput(handle) != 0 && !isBroken }
}

/// A notification a connection received: its channel and the server process that sent it.
struct Notification: Sendable, Equatable {
    let channel: String
    let sender: Int32
}

extension Duration {
    /// The duration in whole milliseconds (negative durations give negative values).
    var wholeMilliseconds: Int {
        let (seconds, attoseconds) = components
        return Int(seconds) * 1_000 + Int(attoseconds / 1_000_000_000_000_000)
    }
}

private func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    let copies = strings.map { strdup($0) }
    defer { for copy in copies { free(copy) } }
    let pointers = copies.map { UnsafePointer($0) } + [nil]
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}
