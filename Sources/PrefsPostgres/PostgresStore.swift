public import Foundation
public import Prefs
import Synchronization

/// `try PostgresStore(connection: "postgresql:///app?host=/run/postgresql", namespace: "com.example.app")` keeps
/// preferences in a PostgreSQL table, shared live by every instance of an app that points at the same database.
///
/// Use it when several processes or machines (server instances, one user's desktops) need one set of preferences
/// and feature flags. It is a ``Prefs/KeyValueStore``, so `@StoredValue(key:store:)`, `values` and Observation work as
/// with the file stores. Keep secrets in an ``Prefs/EncryptedFileStore``.
///
/// - Reads are served from an in-memory copy of the namespace, loaded when the store opens.
/// - ``setValue(_:forKey:)`` returns once the server has committed the change.
/// - ``updateValue(forKey:_:)`` reads, transforms and writes in one transaction holding the row's lock, so
///   instances never lose each other's updates. The transform runs inside that transaction: keep it short.
/// - Changes made by any instance (or by SQL on the table) reach every other one, and are announced once per changed
///   key on ``changes``: each instance reads what changed since it last looked with one indexed query, run when a
///   `NOTIFY` says something changed, or every few moments where notifications cannot be heard (a pooler in
///   transaction mode). ``ChangeSource`` chooses; by default the store checks at start whether it hears its own
///   `NOTIFY`, and polls when it does not.
/// - Notifications only say that something changed; values and versions are learned by reading rows, under the
///   table's grants, so a role without rights on the table can neither change nor read what instances see.
/// - Through a pooler nothing outlives a transaction on the server's side (no prepared statement, no session
///   setting), so every operation works through PgBouncer in transaction pooling; a direct connection prepares its
///   statements once.
/// - Every wait is bounded by ``Limits``: a write throws a typed error within `writeDeadline` (15 s by default).
/// - When the server goes away, writes throw ``PostgresStoreError/connectionLost(reason:)`` and reads keep serving
///   the last known values; the store reconnects by itself, re-reads the namespace and announces every key that
///   changed meanwhile.
/// - With a `cache` file, a store can start while the server is away, from the last values it saw.
/// - All stores of a process on the same connection string share two server connections while idle: one reads the
///   change feed (and listens), the other carries writes, so no write (a long transform, a row lock) holds up
///   learning what other instances changed. A read of the feed that fails is reported once, retried, and named by
///   ``changeFeedFailure`` meanwhile.
///
/// The schema (created when missing) is described in docs/PostgresStore.md.
public final class PostgresStore: KeyValueStore, OwnImplementation {
    /// `PostgresStore.Limits(lockTimeout: .seconds(1))` bounds how long a store waits for the server.
    ///
    /// Every field has a default; a write never waits longer than `writeDeadline` in all.
    public struct Limits: Sendable, Equatable, CustomStringConvertible {
        /// `limits.connectTimeout`: how long a connection attempt may take (libpq's `connect_timeout`, rounded up
        /// to whole seconds, at least 2). Default 4 s.
        public var connectTimeout: Duration
        /// `limits.lockTimeout`: how long a statement waits for a row lock another session holds (the server's
        /// `lock_timeout`). Default 4 s.
        public var lockTimeout: Duration
        /// `limits.statementTimeout`: how long the server lets one statement run (`statement_timeout`).
        /// Default 8 s.
        public var statementTimeout: Duration
        /// `limits.writeDeadline`: the longest a write waits for an answer, enforced by the client itself, so a
        /// network path that swallows packets cannot hold it longer. Default 10 s; with a reconnection first, a
        /// write returns or throws within `connectTimeout + writeDeadline` (14 s by default).
        public var writeDeadline: Duration
        /// `limits.networkTimeout`: how long unacknowledged data may sit on a dead connection before the kernel
        /// gives up (`tcp_user_timeout`, with TCP keepalives probing a third of it). Default 10 s.
        public var networkTimeout: Duration
        /// `limits.heartbeat`: how long the listening connection may stay silent before it is asked for an
        /// answer (`SELECT 1` within `networkTimeout`). Default 10 s.
        public var heartbeat: Duration
        /// `limits.largestValue`: the most bytes a value's JSON text may have. A larger value is refused before it is
        /// sent (``Prefs/PrefsError/tooLarge(path:size:limit:)``, nothing written), and a larger row written by SQL is
        /// skipped without being received (reported once). Default 64 MiB, the limit of every file a store opens.
        public var largestValue: Int

        /// `PostgresStore.Limits()` has the defaults above; pass any of them to change it.
        public init(
            connectTimeout: Duration = .seconds(4), lockTimeout: Duration = .seconds(4),
            statementTimeout: Duration = .seconds(8), writeDeadline: Duration = .seconds(10),
            networkTimeout: Duration = .seconds(10), heartbeat: Duration = .seconds(10),
            largestValue: Int = 64 << 20
        ) {
            self.largestValue = largestValue
            self.connectTimeout = connectTimeout
            self.lockTimeout = lockTimeout
            self.statementTimeout = statementTimeout
            self.writeDeadline = writeDeadline
            self.networkTimeout = networkTimeout
            self.heartbeat = heartbeat
        }

        /// `print(limits)` lists every bound in milliseconds, then the largest value in bytes.
        public var description: String {
            ([connectTimeout, lockTimeout, statementTimeout, writeDeadline, networkTimeout, heartbeat]
                .map { String($0.wholeMilliseconds) } + [String(largestValue)]).joined(separator: "/")
        }
    }

    /// `PostgresStore(connection: …, namespace: …, changeSource: .poll(every: .milliseconds(500)))` chooses how an
    /// instance learns what other instances (or SQL) changed.
    ///
    /// Every source reads the same change feed: one indexed query of the rows written since the last read, which
    /// finds nothing (and costs one index look-up) when nothing changed. They differ in what runs it.
    ///
    /// - ``automatic``: the default. At start and after every reconnection the store sends a `NOTIFY` on a channel
    ///   of its own from a second connection and waits up to 2 seconds to hear it. Heard, it behaves as
    ///   ``listen``; not heard (a pooler in transaction mode, which does not carry `LISTEN`), it reports that once to
    ///   ``Prefs/PrefsConfig/errorHandler``, naming the likely cause, and polls every `interval`. Listening through a
    ///   pooler, which can change mode under a live connection, it checks again every ``Limits/heartbeat`` and, not
    ///   heard, reports and polls the same way.
    /// - ``listen``: reads the feed when a `NOTIFY` arrives (and every ``Limits/heartbeat`` besides), so an idle
    ///   instance costs the server one read per heartbeat. Needs a session of its own: direct, or a pooler in session
    ///   mode. An open that cannot hear its own `NOTIFY` throws ``PostgresStoreError/connectionRefused(reason:)``; a
    ///   pooler that changes mode later is noticed as with ``automatic``, and the store then polls every second.
    /// - ``poll(every:)``: reads the feed every `interval` and never listens, through any pooler.
    public struct ChangeSource: Sendable, Equatable, CustomStringConvertible {
        enum Kind: String, Sendable { case automatic, listen, poll }
        let kind: Kind
        /// `source.interval`: how often the feed is read when the store polls (not used by ``listen``).
        public let interval: Duration

        /// `.automatic`: listens where its own `NOTIFY` comes back, else polls every second (see the type).
        public static let automatic = ChangeSource(kind: .automatic, interval: .seconds(1))
        /// `.automatic(pollingEvery: .milliseconds(250))`: as ``automatic``, polling every `interval` where
        /// notifications are not heard.
        public static func automatic(pollingEvery interval: Duration) -> ChangeSource {
            ChangeSource(kind: .automatic, interval: max(interval, .milliseconds(1)))
        }
        /// `.listen`: reads the feed when notified; an open that cannot hear notifications throws.
        public static let listen = ChangeSource(kind: .listen, interval: .seconds(1))
        /// `.poll(every: .milliseconds(500))`: reads the feed every `interval` (at least 1 ms) and never listens.
        public static func poll(every interval: Duration) -> ChangeSource {
            ChangeSource(kind: .poll, interval: max(interval, .milliseconds(1)))
        }

        /// `PostgresStore.ChangeSource.probeBound`: how long a store waits to hear its own `NOTIFY` (2 s).
        package static let probeBound = Duration.seconds(2)

        /// `print(source)` prints `automatic(1000 ms)`, `listen` or `poll(500 ms)`.
        public var description: String {
            kind == .listen ? "listen" : "\(kind.rawValue)(\(interval.wholeMilliseconds) ms)"
        }
    }

    /// `store.namespace` names this store's keys in the table: other namespaces in the same table are invisible.
    public let namespace: String
    /// `store.schema` names the PostgreSQL schema that holds the tables; every statement names it.
    public var schema: String { snapshot.schema.name }
    private let snapshot: Snapshot
    let server: Server
    /// The hints this store's writes send.
    private let hints: Hints

    /// `store.hub` is Prefs' side of the store: the announcements of every change, including those made by other
    /// instances, its registered defaults and layers.
    public let hub: StoreHub

    /// `if let failure = store.changeFeedFailure { … }` tells why this store cannot learn of other instances'
    /// changes right now: the server cannot be reached, or it refuses the read of the change feed (a grant revoked,
    /// say). Nil while the feed is read as the store's ``ChangeSource`` says.
    ///
    /// Reads keep serving the last values the store learned meanwhile, and the store retries by itself (waiting up to
    /// a second between attempts); the same failure is also reported once to ``Prefs/PrefsConfig/errorHandler``.
    public var changeFeedFailure: PostgresStoreError? { server.failure }

    /// `try PostgresStore(connection: "postgresql:///app?host=/run/postgresql", namespace: "com.example.app")`
    /// connects, creates the schema if the database has none, and loads the namespace.
    ///
    /// - Parameters:
    ///   - connection: A libpq connection string (`host=/run/postgresql dbname=app`) or URI
    ///     (`postgresql://user@host/app`). Its own `connect_timeout` or keepalive settings override `limits`.
    ///   - namespace: The name under which this app's keys are stored; any text without NUL.
    ///   - schema: The PostgreSQL schema that holds (or will hold) the tables; every statement names it, so a
    ///     role's `search_path` cannot send the store elsewhere. Default `public`.
    ///   - limits: How long the store waits for the server (``Limits``); the defaults suit most apps.
    ///   - cache: A local file (a ``Prefs/FileStore``) where the store keeps the last values it saw, rewritten after
    ///     every change. When the server is away at open, the store starts from it: reads are served from it,
    ///     writes throw ``PostgresStoreError/connectionLost(reason:)``, and once the server answers the store
    ///     re-reads the namespace and announces what changed. Without it (the default), or before the file
    ///     exists, an open throws then.
    ///   - changeSource: How this instance learns what others changed (``ChangeSource``): ``ChangeSource/automatic``
    ///     (the default) listens where its own `NOTIFY` is heard and polls where it is not.
    /// - Throws: ``PostgresStoreError``: `.unreachable`, `.authenticationFailed`, `.connectionRefused`, `.timedOut`,
    ///   `.unsupportedSchemaVersion` or `.damagedSchema` (the tables are left untouched),
    ///   `.invalidConnectionString`, `.invalidNamespace`, `.invalidSchema`. Rows whose value is not Prefs JSON do not stop the store:
    ///   each is reported to ``Prefs/PrefsConfig/errorHandler`` and left as it is. ``Prefs/PrefsError`` when `cache` cannot
    ///   be read.
    public init(
        connection: String, namespace: String, schema: String = "public", limits: Limits = Limits(), cache: URL? = nil,
        changeSource: ChangeSource = .automatic
    ) throws {
        if namespace.isEmpty { throw PostgresStoreError.invalidNamespace(namespace, reason: "it cannot be empty") }
        if namespace.utf8.contains(0) {
            throw PostgresStoreError.invalidNamespace(namespace, reason: "it cannot contain NUL")
        }
        self.namespace = namespace
        hints = Hints(namespace: namespace)
        let secrets = try ConnectionSecrets(connection)
        let snapshot = Snapshot(
            namespace: namespace, schema: try Schema(schema), largestValue: limits.largestValue,
            cache: try cache.map { try FileStore(url: $0) })
        self.snapshot = snapshot
        hub = StoreHub(feed: snapshot.changes)
        let server = try Server.attach(
            snapshot, secrets: secrets, limits: limits, source: changeSource, mayStartAway: cache != nil)
        self.server = server
        hub.bind(self)
        do {
            try server.load(snapshot)
            snapshot.saveCache()
        } catch let error as PostgresStoreError
            where error.meansAway && cache.map({ FileManager.default.fileExists(atPath: $0.path) }) == true
        {
            // The listener re-reads the namespace once it is connected; until then the cache file serves reads.
            do { try snapshot.seed(from: snapshot.cache!) } catch {
                server.detach(snapshot, wait: false)
                throw error
            }
        } catch {
            server.detach(snapshot, wait: false)
            throw error
        }
    }

    deinit { server.detach(snapshot, wait: false) }

    /// `store.close()` disconnects: once it returns this store receives no more changes, and later writes throw
    /// ``PostgresStoreError/closed``. Reads keep serving the last known values. Releasing the store does the same.
    public func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        server.detach(snapshot, wait: true)
    }
    private let closed = Atomic<Bool>(false)
    /// How many attempts to settle an unanswered write have failed so far (tests wait on it; see +Testing).
    let settlingFailures = Atomic<Int>(0)

    /// `try store.read("theme")` is the namespace's value of the key, served from memory.
    public func read(_ key: String) throws -> PrefValue? { snapshot.value(forKey: key) }

    /// `try store.readAll()` is every key and value of the namespace, served from memory.
    public func readAll() throws -> [String: PrefValue] { snapshot.allValues() }

    /// A `set` (``Prefs/KeyValueStore/setValue(_:forKey:)``) returns once the server has committed it.
    ///
    /// A write whose connection was lost after it was sent is sent again on a new connection (a set is
    /// idempotent) until the server answers or `writeDeadline` has passed, so the caller learns that it committed.
    ///
    /// - Throws: ``PostgresStoreError/connectionLost(reason:)`` while the server is away and
    ///   ``PostgresStoreError/timedOut(reason:)`` when a bound was reached (nothing was written in either case),
    ///   ``PostgresStoreError/outcomeUnknown(reason:)`` when it may or may not have committed,
    ///   ``Prefs/PrefsError/encodingFailed(key:reason:)`` for a value `jsonb` cannot hold (a non-finite number, or a
    ///   string containing NUL).
    package func ownSet(_ value: PrefValue?, forKey key: String) throws {
        try checkKey(key)
        try checkOpen()
        let text = try encode(value, key: key)
        if let transaction = Transaction.current, transaction.snapshot === snapshot {
            try transaction.readings.append(write(text, value: value, key: key, in: transaction))
            return
        }
        let deadline = ContinuousClock.now + server.limits.writeDeadline
        let written: Written
        do {
            written = try server.withConnection { connection in
                try write(text, value: value, key: key, on: connection, deadline: deadline)
            }
        } catch PostgresStoreError.outcomeUnknown(let reason) {
            // Sent but unanswered: the same value sent again settles it (its upsert waits for the row lock the
            // first one may still hold).
            written = try retrying(until: deadline, unknownBecause: reason) {
                try server.withConnection { connection in
                    try write(text, value: value, key: key, on: connection, deadline: deadline)
                }
            }
        }
        applyWritten([written])
    }

    /// An update (``Prefs/KeyValueStore/updateValue(forKey:_:)``) runs read-transform-write in one transaction
    /// holding the row's lock (`SELECT … FOR UPDATE`), so concurrent updates from any instance are applied one after another.
    ///
    /// The transform receives the value committed in the table, which may be newer than the one in memory. It runs
    /// at most once: the store never retries it. When the answer to `COMMIT` is lost, the store reads the row's
    /// writer id on a new connection once the row's lock is free, so the call returns if it committed and throws
    /// `connectionLost` if it did not.
    ///
    /// - Throws: What the transform throws (nothing is written), ``PostgresStoreError/connectionLost(reason:)`` or
    ///   ``PostgresStoreError/timedOut(reason:)`` (nothing was written), ``PostgresStoreError/outcomeUnknown(reason:)``
    ///   when the connection was lost while committing and the outcome could not be read back within
    ///   `writeDeadline`, ``Prefs/PrefsError/decodingFailed(key:reason:)`` when the row's value is not Prefs JSON (it is
    ///   left alone).
    package func ownUpdate(forKey key: String, _ transform: (PrefValue?) throws -> PrefValue?) throws -> PrefValue? {
        try checkKey(key)
        return try transaction { transaction in
            let connection = transaction.connection
            let schema = snapshot.schema
            try connection.execute(schema.placeholder, [namespace, key], deadline: transaction.deadline)
            let row = try connection.execute(
                schema.selectKeyForUpdate, [namespace, String(snapshot.largestValue), key],
                deadline: transaction.deadline
            ).first
            if let size = row?[2].flatMap({ Int($0) }), size > snapshot.largestValue {
                throw PrefsError.decodingFailed(
                    key: key,
                    reason: "the row in prefs_values holds \(size) bytes, more than the \(snapshot.largestValue) a "
                        + "value may have; left unchanged")
            }
            let current = try row?[0].map { text in
                do { return try PrefValue(jsonText: text) } catch {
                    throw PrefsError.decodingFailed(
                        key: key, reason: "the row in prefs_values is not Prefs JSON; left unchanged")
                }
            }
            let updated = try transform(current)
            guard updated != current else { return current }
            try transaction.readings.append(write(encode(updated, key: key), value: updated, key: key, in: transaction))
            return updated
        }
    }

    /// `try store.write(["theme": .string("dark"), "zoom": nil])` sets and removes several keys in one
    /// transaction, returning once the server has committed it.
    public func write(_ changes: [String: PrefValue?]) throws {
        for key in changes.keys { try checkKey(key) }
        var texts: [String: String?] = [:]
        for (key, value) in changes { texts[key] = .some(try encode(value, key: key)) }
        try transaction { transaction in
            for (key, value) in changes.sorted(by: { $0.key < $1.key }) {
                transaction.readings.append(try write(texts[key] ?? nil, value: value, key: key, in: transaction))
            }
        }
    }

    package func ownRemoveValues(forKeys keys: [String]) throws {
        try write(Dictionary(keys.map { ($0, nil) }) { first, _ in first })
    }

    /// A batch holds the store's update lock for `body`: each write inside it is committed as it is made, and one
    /// that threw does not undo the others.
    package func ownBatch<T>(_ body: () throws -> T) throws -> T { try hub.feed.withUpdateLock(body) }

    /// Registered defaults and layers are kept by Prefs beside the namespace's values.
    package var resolvesLayers: Bool { false }

    /// A `replaceAll` replaces the namespace's whole content in one transaction: keys not in `values` are removed.
    package func ownReplaceAll(_ values: [String: PrefValue]) throws {
        for key in values.keys { try checkKey(key) }
        var texts: [String: String] = [:]
        for (key, value) in values { texts[key] = try encode(value, key: key) }
        try transaction { transaction in
            let existing = try transaction.connection.execute(
                snapshot.schema.lockNamespace, [namespace], deadline: transaction.deadline
            ).compactMap { $0[0] }
            for key in existing where values[key] == nil {
                transaction.readings.append(try write(nil, value: nil, key: key, in: transaction))
            }
            for (key, value) in values.sorted(by: { $0.key < $1.key }) {
                transaction.readings.append(try write(texts[key], value: value, key: key, in: transaction))
            }
        }
    }

    // MARK: Writing

    /// A transaction in progress on this thread; writes to the same store from inside a transform join it.
    private final class Transaction: @unchecked Sendable {
        let snapshot: Snapshot
        let connection: Connection
        let deadline: ContinuousClock.Instant
        /// Written in the `writer` column of every row it writes: finding it there later proves it committed.
        let writer = UUID()
        /// What its writes read back, merged once it commits.
        var readings: [Written] = []

        init(snapshot: Snapshot, connection: Connection, deadline: ContinuousClock.Instant) {
            self.snapshot = snapshot
            self.connection = connection
            self.deadline = deadline
        }

        @TaskLocal static var current: Transaction?
    }

    /// Runs `body` in a transaction on a connection of its own (or inside the current one, from a transform) and
    /// merges what it wrote once it has committed.
    private func transaction<T>(_ body: (Transaction) throws -> T) throws -> T {
        try checkOpen()
        if let current = Transaction.current, current.snapshot === snapshot { return try body(current) }
        let deadline = ContinuousClock.now + server.limits.writeDeadline
        // Set once the transaction is ready to commit: what it returns, what it wrote and its writer id.
        var committing: (result: T, readings: [Written], writer: UUID)? = nil
        do {
            try server.withConnection { connection in
                let transaction = Transaction(snapshot: snapshot, connection: connection, deadline: deadline)
                do {
                    try connection.execute(script: Schema.begin(server.limits), deadline: deadline)
                    let result = try Transaction.$current.withValue(transaction) { try body(transaction) }
                    committing = (result, transaction.readings, transaction.writer)
                } catch {
                    if !connection.isBroken { _ = try? connection.execute("ROLLBACK", deadline: deadline) }
                    // A transaction is rolled back when its connection is lost before COMMIT: nothing was written.
                    if case .outcomeUnknown(let reason)? = error as? PostgresStoreError {
                        throw PostgresStoreError.connectionLost(reason: reason)
                    }
                    throw error
                }
                try connection.execute("COMMIT", deadline: deadline)
            }
        } catch PostgresStoreError.outcomeUnknown(let reason) where committing != nil {
            let (_, readings, writer) = committing!
            let written = readings.lazy.compactMap { reading in reading.rows.first.map { ($0.key, $0.value.version) } }
            // A transaction that wrote no row (a transform that changed nothing) has nothing to settle.
            if let (key, version) = written.first {
                switch try retrying(
                    until: deadline, unknownBecause: reason,
                    {
                        try committed(key: key, version: version, writer: writer, deadline: deadline)
                    })
                {
                case true?: break
                case false?:
                    throw PostgresStoreError.connectionLost(reason: reason + "; the transaction did not commit")
                case nil:
                    throw PostgresStoreError.outcomeUnknown(
                        reason: reason + "; the row was written again before its outcome could be read")
                }
            }
        }
        applyWritten(committing!.readings)
        return committing!.result
    }

    /// Whether the transaction `writer` that wrote `key` at `version` committed, read from the row once its lock is
    /// free (so that transaction has ended): true when the row names `writer`, false when the row has not reached
    /// `version`, nil when it was written again since (the outcome stays unknown).
    private func committed(key: String, version: Int64, writer: UUID, deadline: ContinuousClock.Instant) throws
        -> Bool?
    {
        let row = try server.withConnection { connection in
            try connection.execute(script: Schema.begin(server.limits), deadline: deadline)
            defer { _ = try? connection.execute("ROLLBACK", deadline: deadline) }
            // A row the transaction inserted is locked by inserting it again, not by `FOR UPDATE`.
            try connection.execute(snapshot.schema.placeholder, [namespace, key], deadline: deadline)
            return try connection.execute(snapshot.schema.selectWriterForUpdate, [namespace, key], deadline: deadline)
                .first
        }
        if let found = row?[1].flatMap(UUID.init(uuidString:)), found == writer { return true }
        if let found = row?[0].flatMap({ Int64($0) }), found < version { return false }
        return nil
    }

    /// Runs `attempt` until it returns, again after each error (waiting 50 ms, 100 ms, … up to 1 s in between)
    /// while `deadline` allows; then throws `.outcomeUnknown` with `reason` and the last error. Only errors that no
    /// later attempt can cure end it at once: a closed store, a password refused, a schema this version cannot use.
    ///
    /// Any other error, the server's own included, says only that the outcome could not be read yet: a server back
    /// from a crash can refuse a session or a statement for a moment.
    private func retrying<T>(
        until deadline: ContinuousClock.Instant, unknownBecause reason: String, _ attempt: () throws -> T
    ) throws -> T {
        var delay = Duration.milliseconds(50)
        while true {
            do {
                return try attempt()
            } catch {
                settlingFailures.add(1, ordering: .releasing)
                let final: Bool
                switch error as? PostgresStoreError {
                case .closed?, .authenticationFailed?, .unsupportedSchemaVersion?, .damagedSchema?: final = true
                default: final = false
                }
                guard !final, ContinuousClock.now + delay < deadline else {
                    throw PostgresStoreError.outcomeUnknown(reason: reason + "; then, finding out: \(error)")
                }
                Thread.sleep(forTimeInterval: Double(delay.wholeMilliseconds) / 1_000)
                delay = min(delay * 2, .seconds(1))
            }
        }
    }

    private func applyWritten(_ readings: [Written]) {
        var changed: [String] = []
        for written in readings {
            changed += snapshot.learn(written)
            server.share(written, namespace: namespace, except: snapshot)
        }
        snapshot.publish(changed)  // a key written twice is announced once
    }

    private func write(_ text: String?, value: PrefValue?, key: String, in transaction: Transaction) throws -> Written {
        try write(
            text, value: value, key: key, on: transaction.connection, deadline: transaction.deadline,
            writer: transaction.writer)
    }

    /// One upsert (or removal) on `connection`, naming `writer` in the row; returns what it read back, to merge
    /// once committed.
    private func write(
        _ text: String?, value: PrefValue?, key: String, on connection: Connection, deadline: ContinuousClock.Instant,
        writer: UUID? = nil
    ) throws -> Written {
        var written = Written()
        let rows: [[String?]]
        do {
            rows = try connection.execute(
                snapshot.schema.write,
                [namespace, key, text, hints.hint(key: key), writer?.uuidString, lockTimeout],
                preparedAs: "prefs_values_write", deadline: deadline)
        } catch {
            // 22P05: text jsonb cannot hold (NUL); 22P02: JSON it does not accept.
            guard case .serverError(let state, let message) = error, state == "22P05" || state == "22P02" else {
                throw error
            }
            throw PrefsError.encodingFailed(key: key, reason: "PostgreSQL's jsonb refused it: \(message)")
        }
        // A removal of a key without a value returns no row: the key reads as absent either way.
        if let version = rows.first?[0].flatMap({ Int64($0) }) {
            written.rows[key] = Entry(value: value, version: version)
            if let xid = rows.first?[1].flatMap({ UInt64($0) }) { written.xid = xid }
        }
        return written
    }

    /// `lock_timeout`, as a single write sets it for its own transaction (`4000ms`).
    private var lockTimeout: String { String(server.limits.lockTimeout.wholeMilliseconds) + "ms" }

    private func checkOpen() throws {
        if closed.load(ordering: .acquiring) { throw PostgresStoreError.closed }
    }

    /// Refuses, before anything is sent, a key no store may hold (``Prefs/KeyValueStore/validateKey(_:)``) and one
    /// that with the namespace is too long for the table's index (``Schema/largestIndexedKey``).
    private func checkKey(_ key: String) throws {
        try validateKey(key)
        let size = namespace.utf8.count + key.utf8.count
        guard size <= Schema.largestIndexedKey else {
            let shown = key.count > 40 ? String(key.prefix(40)) + "…" : key
            throw PrefsError.tooLarge(
                path: "the index entry of key \(String(reflecting: shown)) (\(key.utf8.count) bytes) and namespace "
                    + "\(String(reflecting: namespace)) (\(namespace.utf8.count) bytes) in "
                    + "\(snapshot.schema.prefix)prefs_values",
                size: size, limit: Schema.largestIndexedKey)
        }
    }

    /// The value's JSON text, or nil for a removal; refuses a text beyond ``Limits/largestValue``.
    private func encode(_ value: PrefValue?, key: String) throws -> String? {
        guard let value else { return nil }
        let text: String
        do {
            text = try value.databaseJSONText()
        } catch PrefsError.encodingFailed(_, let reason) {
            throw PrefsError.encodingFailed(key: key, reason: reason)
        }
        let size = text.utf8.count
        if size > snapshot.largestValue {
            throw PrefsError.tooLarge(path: place(key), size: size, limit: snapshot.largestValue)
        }
        return text
    }

    /// Where `key` is kept, for messages: `"public".prefs_values, namespace "com.example.app", key "theme"`.
    private func place(_ key: String) -> String {
        "\(snapshot.schema.prefix)prefs_values, namespace \(String(reflecting: namespace)), key \(String(reflecting: key))"
    }
}
