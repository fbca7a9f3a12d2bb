import Foundation

extension PostgresStore {
    /// `try PostgresStore.namespaces(connection: "postgresql:///app")` lists the namespaces of a database that hold
    /// at least one key, sorted: what `prefs domains --postgres-env VAR` prints.
    ///
    /// It reads with a connection of its own, closed before it returns, and creates nothing: a database without
    /// Prefs' tables has no namespaces.
    ///
    /// - Parameters:
    ///   - connection: A libpq connection string or URI, as for ``init(connection:namespace:schema:limits:cache:changeSource:)``.
    ///   - schema: The PostgreSQL schema that holds the tables. Default `public`.
    ///   - limits: How long to wait for the server.
    /// - Returns: The namespaces, sorted.
    /// - Throws: ``PostgresStoreError``, as an open does when the server cannot be reached or refuses the connection.
    public static func namespaces(
        connection: String, schema: String = "public", limits: Limits = Limits()
    ) throws -> [String] {
        let schema = try Schema(schema)
        let connection = try Connection(
            secrets: ConnectionSecrets(connection), limits: limits, applicationName: Server.applicationName)
        let deadline = ContinuousClock.now + limits.writeDeadline
        let exists = try connection.execute(
            "SELECT EXISTS (SELECT FROM pg_tables WHERE schemaname = $1 AND tablename = 'prefs_values')",
            [schema.name], deadline: deadline)
        guard exists.first?[0] == "t" else { return [] }
        let rows = try connection.execute(
            "SELECT DISTINCT namespace FROM \(schema.prefix)prefs_values WHERE value IS NOT NULL", deadline: deadline)
        return rows.compactMap { $0[0] }.sorted()
    }
}
