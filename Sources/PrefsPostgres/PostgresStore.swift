import Foundation
public import Prefs
import Synchronization

/// `try PostgresStore(connection: "postgresql:///app?host=/run/postgresql", namespace: "com.example.app")` keeps
/// preferences in a PostgreSQL table, shared live by every instance of an app that points at the same database.
///
/// Use it when several processes or machines (server instances, one user's desktops) need one set of preferences
/// and feature flags. It is a ``KeyValueStore``, so `@StoredValue(key:store:)`, `values` and Observation work as
/// with the file stores. Keep secrets in an ``EncryptedFileStore``.
///
/// - Reads are served from an in-memory copy of the namespace, loaded when the store opens.
/// - ``setValue(_:forKey:)`` returns once the server has committed the change.
/// - ``updateValue(forKey:_:)`` reads, transforms and writes in one transaction holding the row's lock, so
///   instances never lose each other's updates. The transform runs inside that transaction: keep it short.
/// - Changes made by any instance (or by SQL on the table) reach every other one through `LISTEN`/`NOTIFY` and are
///   announced once per changed key on ``changes``.
/// - When the server goes away, writes throw ``PostgresStoreError/connectionLost(reason:)`` and reads keep serving
///   the last known values; the store reconnects by itself, re-reads the namespace and announces every key that
///   changed meanwhile.
///
/// The schema (created when missing) is described in docs/PostgresStore.md.
public final class PostgresStore: KeyValueStore {
    /// `store.namespace` names this store's keys in the table: other namespaces in the same table are invisible.
    public let namespace: String
    private let snapshot: Snapshot
    private let writer: Writer
    private let listener: Listener

    /// `store.changes` announces every change, including those made by other instances.
    public var changes: ChangeFeed { snapshot.changes }

    /// `try PostgresStore(connection: "postgresql:///app?host=/run/postgresql", namespace: "com.example.app")`
    /// connects, creates the schema if the database has none, and loads the namespace.
    ///
    /// - Parameters:
    ///   - connection: A libpq connection string (`host=/run/postgresql dbname=app`) or URI
    ///     (`postgresql://user@host/app`). Unless it says otherwise, connecting gives up after 10 seconds.
    ///   - namespace: The name under which this app's keys are stored; any text without NUL.
    /// - Throws: ``PostgresStoreError``: `.unreachable`, `.authenticationFailed`, `.connectionRefused`,
    ///   `.unsupportedSchemaVersion` (the table is left untouched), `.invalidConnectionString`, `.invalidNamespace`.
    ///   Rows whose value is not Prefs JSON do not stop the store: each is reported to ``PrefsConfig/errorHandler``
    ///   and left as it is.
    public init(connection: String, namespace: String) throws {
        if namespace.isEmpty { throw PostgresStoreError.invalidNamespace(namespace, reason: "it cannot be empty") }
        if namespace.utf8.contains(0) {
            throw PostgresStoreError.invalidNamespace(namespace, reason: "it cannot contain NUL")
        }
        self.namespace = namespace
        let secrets = try ConnectionSecrets(connection)
        let queries = try Connection(secrets: secrets, applicationName: "prefs", setup: [Schema.notifyInline])
        try Schema.prepare(on: queries)
        let listening = try Connection(secrets: secrets, applicationName: Listener.applicationName)
        try listening.execute("LISTEN " + Schema.channel)
        snapshot = Snapshot(namespace: namespace)
        _ = snapshot.replaceAll(try snapshot.load(from: listening))
        writer = Writer(connection: queries)
        listener = try Listener(snapshot: snapshot, secrets: secrets, connection: listening)
        listener.start()
    }

    deinit { listener.stop(wait: false) }

    /// `store.close()` disconnects: the listener thread has stopped when it returns, and later writes throw
    /// ``PostgresStoreError/closed``. Reads keep serving the last known values. Releasing the store does the same
    /// without waiting.
    public func close() {
        listener.stop(wait: true)
        writer.close()
    }

    /// The number of times the listener reconnected, for tests.
    package var reconnectionCount: Int { listener.reconnections.load(ordering: .relaxed) }

    /// `try store.value(forKey: "theme")` returns the value, served from memory.
    public func value(forKey key: String) throws -> PrefValue? { snapshot.value(forKey: key) }

    /// `try store.allValues()` returns every key and value of the namespace, served from memory.
    public func allValues() throws -> [String: PrefValue] { snapshot.allValues() }

    /// `try store.setValue(.bool(true), forKey: "flag")` stores a value (nil removes it) and returns once the
    /// server has committed it.
    ///
    /// - Throws: ``PostgresStoreError/connectionLost(reason:)`` while the server is away (nothing was written),
    ///   ``PrefsError/encodingFailed(key:reason:)`` for a value `jsonb` cannot hold (a non-finite number, or a
    ///   string containing NUL).
    public func setValue(_ value: PrefValue?, forKey key: String) throws {
        try validateKey(key)
        let text = try encode(value, key: key)
        let applied = try writer.run { connection in
            try write(text, value: value, key: key, on: connection)
        }
        snapshot.publish(snapshot.apply(applied))
    }

    /// `try store.updateValue(forKey: "count") { … }` runs read-transform-write in one transaction holding the
    /// row's lock (`SELECT … FOR UPDATE`), so concurrent updates from any instance are applied one after another.
    ///
    /// The transform receives the value committed in the table, which may be newer than the one in memory.
    ///
    /// - Throws: What the transform throws (nothing is written), ``PostgresStoreError/connectionLost(reason:)``,
    ///   ``PrefsError/decodingFailed(key:reason:)`` when the row's value is not Prefs JSON (it is left alone).
    @discardableResult
    public func updateValue(forKey key: String, _ transform: (PrefValue?) throws -> PrefValue?) throws -> PrefValue? {
        try validateKey(key)
        let (result, applied) = try writer.transaction { connection in
            try connection.execute(Schema.placeholder, [namespace, key])
            let row = try connection.execute(Schema.selectKeyForUpdate, [namespace, key]).first
            let current = try row?[0].map { text in
                do { return try PrefValue(jsonText: text) } catch {
                    throw PrefsError.decodingFailed(
                        key: key, reason: "the row in prefs_values is not Prefs JSON; left unchanged")
                }
            }
            let updated = try transform(current)
            guard updated != current else { return current }
            let pending = try write(try encode(updated, key: key), value: updated, key: key, on: connection)
            writer.defer(pending)
            return updated
        }
        snapshot.publish(snapshot.apply(applied))
        return result
    }

    /// `try store.replaceAll(values)` replaces the namespace's whole content in one transaction: keys not in
    /// `values` are removed.
    public func replaceAll(_ values: [String: PrefValue]) throws {
        for key in values.keys { try validateKey(key) }
        var texts: [String: String] = [:]
        for (key, value) in values { texts[key] = try encode(value, key: key) }
        let (_, applied) = try writer.transaction { connection in
            let existing = try connection.execute(Schema.lockNamespace, [namespace]).compactMap { $0[0] }
            var pending: [(key: String, entry: Entry)] = []
            for key in existing where values[key] == nil {
                pending += try write(nil, value: nil, key: key, on: connection)
            }
            for (key, value) in values.sorted(by: { $0.key < $1.key }) {
                pending += try write(texts[key], value: value, key: key, on: connection)
            }
            writer.defer(pending)
        }
        snapshot.publish(snapshot.apply(applied))
    }

    /// One upsert (or removal) on `connection`; returns the entry to apply once committed.
    private func write(_ text: String?, value: PrefValue?, key: String, on connection: Connection) throws
        -> [(key: String, entry: Entry)]
    {
        let rows: [[String?]]
        do {
            let payload = Schema.payloadPrefix(namespace: namespace, key: key, valueText: text)
            rows = try connection.execute(text == nil ? Schema.remove : Schema.upsert, [namespace, key, text, payload])
        } catch {
            // 22P05: text jsonb cannot hold (NUL); 22P02: JSON it does not accept.
            guard case .serverError(let state, let message) = error, state == "22P05" || state == "22P02" else {
                throw error
            }
            throw PrefsError.encodingFailed(key: key, reason: "PostgreSQL's jsonb refused it: \(message)")
        }
        guard let version = rows.first?[0].flatMap({ Int64($0) }) else { return [] }
        return [(key, Entry(value: value, version: version))]
    }

    private func encode(_ value: PrefValue?, key: String) throws -> String? {
        guard let value else { return nil }
        do {
            return try value.databaseJSONText()
        } catch PrefsError.encodingFailed(_, let reason) {
            throw PrefsError.encodingFailed(key: key, reason: reason)
        }
    }
}

/// The connection for writes, behind a recursive lock so that a transform may write to the same store: such a
/// write joins the transaction, and its change is applied in memory once the transaction commits.
final class Writer: @unchecked Sendable {
    private let lock = NSRecursiveLock()
    // Guarded by `lock`.
    private var connection: Connection?
    private var depth = 0
    private var pending: [(key: String, entry: Entry)] = []

    init(connection: Connection) { self.connection = connection }

    func close() {
        lock.lock()
        defer { lock.unlock() }
        connection = nil
    }

    /// Runs `body` on a healthy connection (reconnecting first if the server closed it). Outside a transaction
    /// returns the entries to apply; inside one they are kept until the outermost transaction commits.
    func run(_ body: (Connection) throws -> [(key: String, entry: Entry)]) throws -> [(key: String, entry: Entry)] {
        lock.lock()
        defer { lock.unlock() }
        let connection = try healthyConnection()
        let entries: [(key: String, entry: Entry)]
        do {
            entries = try body(connection)
        } catch {
            // The server may close an idle connection just as it is used. Writing the same value again is
            // harmless, so a lost single write is retried once on a new connection.
            guard depth == 0, case .connectionLost? = error as? PostgresStoreError, connection.reset() else {
                throw error
            }
            entries = try body(connection)
        }
        if depth > 0 {
            pending += entries
            return []
        }
        return entries
    }

    /// Keeps entries written inside the current transaction until it commits.
    func `defer`(_ entries: [(key: String, entry: Entry)]) {
        lock.lock()
        defer { lock.unlock() }
        pending += entries
    }

    /// Runs `body` in a transaction (or inside the current one, when called from a transform) and returns its
    /// result with the entries to apply once committed.
    func transaction<T>(_ body: (Connection) throws -> T) throws -> (T, [(key: String, entry: Entry)]) {
        lock.lock()
        defer { lock.unlock() }
        let connection = try healthyConnection()
        if depth > 0 { return (try body(connection), []) }
        do {
            try connection.execute("BEGIN")
        } catch {
            // Nothing has happened yet: begin again on a new connection if the old one was found closed.
            guard case .connectionLost = error, connection.reset() else { throw error }
            try connection.execute("BEGIN")
        }
        depth = 1
        defer {
            depth = 0
            pending = []
        }
        do {
            let result = try body(connection)
            try connection.execute("COMMIT")
            return (result, pending)
        } catch {
            if !connection.isBroken { _ = try? connection.execute("ROLLBACK") }
            throw error
        }
    }

    private func healthyConnection() throws -> Connection {
        guard let connection else { throw PostgresStoreError.closed }
        if depth > 0 { return connection }
        connection.noticeIdleClose()
        if connection.isBroken, !connection.reset() {
            throw PostgresStoreError.connectionLost(
                reason: connection.lastError)
        }
        return connection
    }
}
