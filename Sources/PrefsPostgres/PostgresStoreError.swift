/// `catch let error as PostgresStoreError { … }` catches what a ``PostgresStore`` throws besides ``PrefsError``.
///
/// No case ever carries the connection string or a password: messages from libpq and the server are shortened to
/// their reason, and anything in them that came from the connection string's password is replaced by `***`.
public enum PostgresStoreError: Error, Sendable, Equatable {
    /// `.invalidConnectionString(reason:)`: the connection string is not a libpq key/value string or URI.
    case invalidConnectionString(reason: String)
    /// `.invalidNamespace(_:reason:)`: a namespace that cannot name preferences: empty or containing NUL.
    case invalidNamespace(String, reason: String)
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
        case .unreachable(let reason): "cannot reach the PostgreSQL server: \(reason)"
        case .authenticationFailed(let reason): "PostgreSQL authentication failed: \(reason)"
        case .connectionRefused(let reason): "the PostgreSQL server refused the connection: \(reason)"
        case .connectionLost(let reason): "lost the connection to the PostgreSQL server: \(reason); nothing was written"
        case .unsupportedSchemaVersion(let found, let supported):
            "the prefs_values table has schema version \(found.map(String.init) ?? "unknown"), this Prefs "
                + "supports version \(supported); nothing was changed"
        case .serverError(let state, let message): "PostgreSQL error \(state): \(message)"
        case .closed: "the PostgresStore was closed"
        }
    }
}
