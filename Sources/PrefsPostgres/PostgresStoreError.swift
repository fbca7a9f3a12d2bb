/// `catch let error as PostgresStoreError { … }` catches what a ``PostgresStore`` throws besides ``Prefs/PrefsError``.
///
/// No case ever carries the connection string or a password: messages from libpq and the server are shortened to
/// their reason, and anything in them that came from the connection string's password is replaced by `***`.
public enum PostgresStoreError: Error, Sendable, Equatable {
    /// `.invalidConnectionString(reason:)`: the connection string is not a libpq key/value string or URI.
    case invalidConnectionString(reason: String)
    /// `.invalidNamespace(_:reason:)`: a namespace that cannot name preferences: empty or containing NUL.
    case invalidNamespace(String, reason: String)
    /// `.invalidSchema(_:reason:)`: a schema name PostgreSQL cannot hold exactly: empty, containing NUL, or longer
    /// than 63 bytes.
    case invalidSchema(String, reason: String)
    /// `.unreachable(reason:)`: no server answered at the address (not running, wrong socket folder or host).
    case unreachable(reason: String)
    /// `.authenticationFailed(reason:)`: the server refused the user name or password.
    case authenticationFailed(reason: String)
    /// `.connectionRefused(reason:)`: the server answered but refused the connection for another reason, such as
    /// a database that does not exist or too many connections.
    case connectionRefused(reason: String)
    /// `.connectionLost(reason:)`: a write while the server is away (restarting, failing over, stopped). Nothing
    /// was written; reads keep serving the last known values and the store reconnects by itself.
    case connectionLost(reason: String)
    /// `.timedOut(reason:)`: a write reached one of the store's ``PostgresStore/Limits`` before the server ran it
    /// (a row locked by another session past `lockTimeout`, a statement past `statementTimeout`, a connection not
    /// made within `connectTimeout`). Nothing was written.
    case timedOut(reason: String)
    /// `.outcomeUnknown(reason:)`: the connection was lost, or the write's deadline passed, after the write was
    /// sent, and the store could not find out afterwards (within `writeDeadline`) whether it committed. Read the
    /// value again before retrying a change that must not be applied twice.
    case outcomeUnknown(reason: String)
    /// `.damagedSchema(reason:)`: the database holds part of the Prefs schema (one of the two tables is missing).
    /// Nothing was changed.
    case damagedSchema(reason: String)
    /// `.unsupportedSchemaVersion(found:supported:)`: the database holds a `prefs_values` table this version of
    /// Prefs does not know (`found` is nil when its `prefs_schema` version row is missing). Nothing was changed.
    case unsupportedSchemaVersion(found: Int?, supported: Int)
    /// `.serverError(sqlState:message:)`: the server refused a statement, with its SQLSTATE code and message.
    case serverError(sqlState: String, message: String)
    /// `.closed`: the store was closed with ``PostgresStore/close()``.
    case closed
}

extension PostgresStoreError: CustomStringConvertible {
    /// `print(error)` prints a one-line message that says what went wrong.
    public var description: String {
        switch self {
        case .invalidConnectionString(let reason): "invalid PostgreSQL connection string: \(reason)"
        case .invalidNamespace(let namespace, let reason):
            "invalid namespace \(String(reflecting: namespace)): \(reason)"
        case .invalidSchema(let schema, let reason): "invalid schema \(String(reflecting: schema)): \(reason)"
        case .unreachable(let reason): "cannot reach the PostgreSQL server: \(reason)"
        case .authenticationFailed(let reason): "PostgreSQL authentication failed: \(reason)"
        case .connectionRefused(let reason): "the PostgreSQL server refused the connection: \(reason)"
        case .connectionLost(let reason): "lost the connection to the PostgreSQL server: \(reason); nothing was written"
        case .timedOut(let reason): "PostgreSQL did not answer in time: \(reason); nothing was written"
        case .outcomeUnknown(let reason):
            "lost the connection to the PostgreSQL server after sending a write: \(reason); whether it committed "
                + "is unknown"
        case .damagedSchema(let reason):
            "the Prefs schema in this database is incomplete: \(reason); nothing was changed"
        case .unsupportedSchemaVersion(let found, let supported):
            "the prefs_values table has schema version \(found.map(String.init) ?? "unknown"), this Prefs "
                + "supports version \(supported); nothing was changed"
        case .serverError(let state, let message): "PostgreSQL error \(state): \(message)"
        case .closed: "the PostgresStore was closed"
        }
    }
}

extension PostgresStoreError {
    /// Whether the error says the server is away for now (not that it refused this client or its schema).
    var meansAway: Bool {
        switch self {
        case .unreachable, .connectionLost, .timedOut, .outcomeUnknown: true
        default: false
        }
    }
}

extension PostgresStoreError {
    /// `.connecting(failedWith: message, reason: shortened, needsPassword: false)`: the typed error for a connection
    /// attempt that failed with libpq's `message`, carrying `reason` (the message with secrets removed).
    ///
    /// A server that is starting, stopping or recovering, or that ended the new session because it is shutting down
    /// or restarting after a crash ("terminating connection …"), is away for now (`unreachable`, which a write
    /// treats as the server being away and retries), not refusing this client.
    package static func connecting(failedWith message: String, reason: String, needsPassword: Bool)
        -> PostgresStoreError
    {
        let lowered = message.lowercased()
        if needsPassword || lowered.contains("authentication failed") || lowered.contains("no password supplied")
            || lowered.contains("password")
        {
            return .authenticationFailed(reason: reason)
        }
        if lowered.contains("timeout expired") { return .timedOut(reason: "connecting: " + reason) }
        let away = ["the database system is", "terminating connection", "server closed the connection"]
        if away.contains(where: lowered.contains) { return .unreachable(reason: reason) }
        if message.contains("FATAL:") { return .connectionRefused(reason: reason) }
        return .unreachable(reason: reason)
    }
}
