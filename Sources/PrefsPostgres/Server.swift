import Foundation
import Prefs
import Synchronization

/// The connections of one process to one server (one connection string, set of limits, schema and change source),
/// shared by every ``PostgresStore`` opened on it.
///
/// Two kinds of connection, so that no write can hold up hearing or reading what others changed:
/// - the *feed* connection belongs to a background thread, the listener, and carries nothing else. It `LISTEN`s on
///   the `prefs_values` channel where its own `NOTIFY` comes back (``PostgresStore/ChangeSource``) and runs every read
///   of the change feed (``Snapshot/catchUp(on:deadline:)``), each store's first read of its namespace included. The
///   listener sleeps on its socket and on a wake-up pipe (``ListenerWait``), and reads the feed when a notification
///   comes from another session, when a store opens, and every poll interval (polling) or heartbeat (listening). That
///   read is the one way changes are learned; a notification only says when to run it.
/// - writes borrow the *writer*, opened by the first write and kept while idle, or open an extra connection when it
///   is busy (another write holds it, a row lock keeps it waiting, a transform runs); extras are closed when given
///   back, so a write to one key never queues behind a write blocked on another.
///
/// A failed read of the feed is reported once per cause and retried with a growing delay; a lost feed connection is
/// made again the same way. Through a pooler, the listener checks every heartbeat that its own `NOTIFY` still comes
/// back (a pooler can change mode under a live connection) and polls, saying so once, when it does not.
final class Server: Sendable {
    let secrets: ConnectionSecrets
    let limits: PostgresStore.Limits
    /// The PostgreSQL schema every statement names.
    let schema: Schema
    /// How the listener learns of changes: listening, polling, or deciding by the probe.
    let source: PostgresStore.ChangeSource
    private let registryKey: String
    /// The channel of the listener's own `NOTIFY`s, which it listens to while it listens.
    private let probeChannel: String

    private struct State {
        var snapshots: [ObjectIdentifier: Snapshot] = [:]
        /// The connection writes borrow while it is idle: nil until the first write, and after it broke.
        var writer: Connection?
        var writerBusy = false
        /// The extra connections open right now.
        var extras = 0
        /// The server processes of this process's write connections (as each reported itself when it connected): a
        /// notification they sent is a write this process merged already, and costs no read of the feed.
        var writers: [Int32: Int] = [:]
        /// Whether the listener holds a feed connection.
        var feedOpen = false
        /// Why the change feed cannot be read right now (a connection attempt or a read failed); nil once a read
        /// succeeded.
        var failure: PostgresStoreError?
        /// The listener's finished attempts (reads of the feed, connection attempts), which a store opening waits on.
        var attempts = 0
        /// Set by a store that wants the feed read now (its first read).
        var readRequested = false
        /// Whether the listener reads the feed every `source.interval` rather than when notified.
        var polling = true
        /// How the re-check's own `NOTIFY` went, once its sender is done: when it was committed, or nil when it could
        /// not be sent.
        var probeSent: ContinuousClock.Instant??
    }
    private let state: Locked<State>
    private let listenerWait: ListenerWait
    private let stopped = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    /// Counts the listener's reconnections, for tests and logs.
    let reconnections = Atomic<Int>(0)
    /// The reads of the change feed (counted as each starts), the rows they brought and the reads that failed, for
    /// tests.
    let feedReads = Atomic<Int>(0)
    let feedRows = Atomic<Int>(0)
    let feedFailures = Atomic<Int>(0)
    /// What the listener thread does now, for a failing test's message.
    let listenerActivity = Atomic<Int>(0)
    /// What the listener reports its failures through (``PrefsConfig/errorHandler``, once per cause).
    private let reported = ReportLedger()
    /// Set once the store has reported that it cannot hear its notifications and polls instead.
    private let reportedDeafness = Atomic<Bool>(false)

    static let applicationName = "prefs"
    private static let registry = Locked<[String: Server]>([:])

    /// The server for `secrets` and `limits`, with its feed connection (created on first use); `snapshot` is
    /// registered with it before this returns. Call ``load(_:)`` for its first read.
    /// With `mayStartAway`, a server that cannot be reached does not stop this: the listener connects once it can.
    static func attach(
        _ snapshot: Snapshot, secrets: ConnectionSecrets, limits: PostgresStore.Limits,
        source: PostgresStore.ChangeSource, mayStartAway: Bool = false
    ) throws -> Server {
        let schema = snapshot.schema
        let key = [secrets.connectionString, String(describing: limits), schema.name, source.description]
            .joined(separator: "\u{0}")
        return try registry.withLock { servers in
            if let server = servers[key], !server.isStopped {
                server.state.withLock { $0.snapshots[ObjectIdentifier(snapshot)] = snapshot }
                return server
            }
            let channel = "prefs_probe_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
            var feed: Feed? = nil
            var failure: PostgresStoreError? = nil
            do {
                feed = try openFeed(secrets: secrets, limits: limits, schema: schema, source: source, channel: channel)
            } catch let error as PostgresStoreError where mayStartAway && error.meansAway {
                failure = error  // the listener connects as soon as the server answers
            }
            let server = try Server(
                secrets: secrets, limits: limits, schema: schema, source: source, registryKey: key,
                probeChannel: channel, feed: feed, failure: failure)
            server.state.withLock { $0.snapshots[ObjectIdentifier(snapshot)] = snapshot }
            servers[key] = server
            server.start(feed)
            return server
        }
    }

    /// Unregisters `snapshot`; the last one stops the thread and closes the connections (with `wait`, before this
    /// returns).
    func detach(_ snapshot: Snapshot, wait: Bool) {
        let last = Self.registry.withLock { servers in
            let remaining = state.withLock { state in
                state.snapshots[ObjectIdentifier(snapshot)] = nil
                return state.snapshots.count
            }
            guard remaining == 0 else { return false }
            if servers[registryKey] === self { servers[registryKey] = nil }
            return true
        }
        guard last else { return }
        if !stopped.exchange(true, ordering: .acquiringAndReleasing) {
            state.withLockAndSignal { $0.writer = $0.writerBusy ? $0.writer : nil }
            wake()
        }
        if wait {
            finished.wait()
            finished.signal()
        }
    }

    private init(
        secrets: ConnectionSecrets, limits: PostgresStore.Limits, schema: Schema, source: PostgresStore.ChangeSource,
        registryKey: String, probeChannel: String, feed: Feed?, failure: PostgresStoreError?
    ) throws {
        self.secrets = secrets
        self.limits = limits
        self.schema = schema
        self.source = source
        self.registryKey = registryKey
        self.probeChannel = probeChannel
        state = Locked(State(feedOpen: feed != nil, failure: failure, polling: !(feed?.listens ?? false)))
        listenerWait = try ListenerWait()
        if let feed, !feed.listens { reportDeafness() }
    }

    private static func connect(secrets: ConnectionSecrets, limits: PostgresStore.Limits) throws(PostgresStoreError)
        -> Connection
    {
        try Connection(secrets: secrets, limits: limits, applicationName: applicationName)
    }

    /// The listener's connection and what it learned when it connected.
    private struct Feed: Sendable {
        let connection: Connection
        /// Whether it listens: its own `NOTIFY` came back.
        var listens: Bool
        /// Whether it talks to the server process it connected to (no pooler between them, which could change mode
        /// under it), so that hearing needs no re-check.
        let direct: Bool
    }

    /// A connection that has checked the schema (creating it when missing) and, unless `source` only polls, listens
    /// for notifications if it can hear them.
    ///
    /// - Throws: ``PostgresStoreError/connectionRefused(reason:)`` for ``PostgresStore/ChangeSource/listen`` when
    ///   its own `NOTIFY` did not come back.
    private static func openFeed(
        secrets: ConnectionSecrets, limits: PostgresStore.Limits, schema: Schema, source: PostgresStore.ChangeSource,
        channel: String
    ) throws -> Feed {
        let connection = try connect(secrets: secrets, limits: limits)
        try schema.prepare(on: connection)
        guard source.kind != .poll else { return Feed(connection: connection, listens: false, direct: false) }
        let hears = try probe(connection, channel: channel, secrets: secrets, limits: limits)
        if !hears, source.kind == .listen { throw deafness(source) }
        return Feed(connection: connection, listens: hears, direct: connection.direct)
    }

    /// Whether `connection` hears a `NOTIFY` sent from another connection on `channel` within
    /// ``PostgresStore/ChangeSource/probeBound``; it then listens on `channel` and on the `prefs_values` channel.
    ///
    /// Through a pooler in transaction mode the `LISTEN` ran on whichever server connection served it, and the
    /// other connection's `NOTIFY` reaches that server connection, not this client: nothing comes back. It then
    /// sends `UNLISTEN *`, which reaches the same server connection only if the pooler hands it out again;
    /// ``PostgresStore/ChangeSource/poll(every:)`` sends neither.
    private static func probe(
        _ connection: Connection, channel: String, secrets: ConnectionSecrets, limits: PostgresStore.Limits
    ) throws -> Bool {
        let deadline = ContinuousClock.now + limits.writeDeadline
        try connection.execute(script: "LISTEN \(Schema.channel); LISTEN \(channel)", deadline: deadline)
        do {
            let sender = try connect(secrets: secrets, limits: limits)
            try sender.execute("SELECT pg_catalog.pg_notify($1, '')", [channel], deadline: deadline)
        } catch {
            // The second connection failed as the first did not: not a question of hearing.
            throw error.meansAway ? error : .connectionLost(reason: "\(error)")
        }
        let hears = connection.hears(
            channel: channel, until: ContinuousClock.now + PostgresStore.ChangeSource.probeBound)
        if !hears { try connection.execute("UNLISTEN *", deadline: deadline) }
        return hears
    }

    /// What a store that cannot hear its own notifications says: as the error of ``PostgresStore/ChangeSource/listen``,
    /// or as the report of ``PostgresStore/ChangeSource/automatic`` (and of a store whose pooler changed mode).
    static func deafness(_ source: PostgresStore.ChangeSource) -> PostgresStoreError {
        let cause =
            "no NOTIFY sent from a second connection came back within "
            + "\(PostgresStore.ChangeSource.probeBound.wholeMilliseconds) ms: the connection likely goes through a "
            + "pooler in transaction mode (PgBouncer's pool_mode = transaction), which does not carry LISTEN; "
        if source.kind == .listen {
            return .connectionRefused(
                reason: cause + "use PostgresStore.ChangeSource.poll(every:) or .automatic, or connect directly or "
                    + "through a pooler in session mode")
        }
        return .connectionRefused(
            reason: cause + "changes are read every \(source.interval.wholeMilliseconds) ms instead "
                + "(PostgresStore.ChangeSource.poll(every:) polls without this check)")
    }

    /// Reports, once for this server's life, that notifications are not heard and the store polls (not for
    /// ``PostgresStore/ChangeSource/poll(every:)``, which asked for it).
    private func reportDeafness() {
        guard source.kind != .poll, !reportedDeafness.exchange(true, ordering: .relaxed) else { return }
        ErrorReporter.report(
            Self.deafness(source.kind == .listen ? .automatic(pollingEvery: source.interval) : source), key: "",
            operation: .read)
    }

    /// Whether the listener reads the feed on a timer rather than when notified, for tests and prefs-bench.
    var polls: Bool { state.withLock { $0.polling } }

    private var isStopped: Bool { stopped.load(ordering: .acquiring) }

    /// The connections held right now (the feed's, the writer and any extras), for tests and prefs-bench.
    var openConnections: Int {
        state.withLock { ($0.feedOpen ? 1 : 0) + ($0.writer == nil ? 0 : 1) + $0.extras }
    }

    /// Why the change feed cannot be read right now; nil while it can.
    var failure: PostgresStoreError? { state.withLock { $0.failure } }

    /// Wakes the listener thread (a store asking for a read, a close, a test).
    func wake() { listenerWait.wake() }

    /// Has the listener read `snapshot`'s namespace whole, waiting at most for a connection attempt and a read.
    ///
    /// - Throws: Why the listener could not connect or read (``failure``), ``PostgresStoreError/timedOut(reason:)``
    ///   when it did not answer in time, ``PostgresStoreError/closed``.
    func load(_ snapshot: Snapshot) throws {
        var seen = state.withLock { state in
            state.readRequested = true
            return state.attempts
        }
        wake()
        let bound = limits.connectTimeout + limits.writeDeadline + PostgresStore.ChangeSource.probeBound
        let deadline = ContinuousClock.now + bound
        while !snapshot.isLoaded {
            let remaining = deadline - ContinuousClock.now
            guard !isStopped else { throw PostgresStoreError.closed }
            guard remaining > .zero else {
                throw PostgresStoreError.timedOut(
                    reason: "the first read of the namespace did not finish within \(bound.wholeMilliseconds) ms")
            }
            let attempted: (State) -> Bool = { $0.attempts > seen }
            let (attempts, failure) = state.withLock(
                waitingUntil: attempted, atMost: Double(remaining.wholeMilliseconds) / 1_000
            ) { ($0.attempts, $0.failure) }
            if attempts > seen, !snapshot.isLoaded, let failure { throw failure }
            seen = attempts
        }
    }

    // MARK: Writing

    /// Runs `body` on a connection of its own: the writer when it is free, else an extra one (kept as the writer
    /// when there is none, closed otherwise).
    ///
    /// - Throws: What `body` throws; the typed error of a failed connection attempt (`authenticationFailed`,
    ///   `connectionLost` for a server away, …) when no connection can be made.
    func withConnection<T>(_ body: (Connection) throws -> T) throws -> T {
        guard !isStopped else { throw PostgresStoreError.closed }
        let idle: Connection? = state.withLock { state in
            guard let writer = state.writer, !state.writerBusy else { return nil }
            state.writerBusy = true
            return writer
        }
        if let idle {
            idle.noticeIdleClose()
            if !idle.isBroken {
                defer { giveBack(idle) }
                return try body(idle)
            }
            giveBack(idle)  // found closed by the server while idle: let go
        }
        let fresh: Connection
        switch Result(catching: { () throws(PostgresStoreError) in try Self.connect(secrets: secrets, limits: limits) })
        {
        case .success(let connection): fresh = connection
        case .failure(.unreachable(let reason)): throw PostgresStoreError.connectionLost(reason: reason)
        case .failure(let error): throw error
        }
        state.withLock { state in
            state.extras += 1
            state.writers[fresh.backendPID, default: 0] += 1
        }
        defer { giveBack(fresh) }
        return try body(fresh)
    }

    /// Takes a connection back from a write: the writer is free again, an extra becomes the writer when there is none;
    /// a broken one, or any once stopped, is let go.
    private func giveBack(_ connection: Connection) {
        // A pooler can hand this client a server connection that listens: what it heard is not this connection's.
        _ = connection.takeNotifications()
        let keep = !connection.isBroken && !isStopped
        state.withLock { state in
            var letGo = !keep
            if state.writer === connection {
                state.writerBusy = false
                if letGo { state.writer = nil }
            } else {
                state.extras -= 1
                if keep, state.writer == nil {
                    state.writer = connection
                } else {
                    letGo = true
                }
            }
            if letGo {
                let pid = connection.backendPID
                state.writers[pid, default: 1] -= 1
                if state.writers[pid] == 0 { state.writers[pid] = nil }
            }
        }
    }

    /// Gives what a write committed to every other snapshot of the namespace in this process; the writing store
    /// merges it itself.
    func share(_ written: Written, namespace: String, except writer: Snapshot) {
        // Most processes open one store per server: then there is no one to share with, and nothing is allocated.
        let others = state.withLock { state in
            state.snapshots.count < 2
                ? [] : state.snapshots.values.filter { $0 !== writer && $0.namespace == namespace }
        }
        for snapshot in others { snapshot.publish(snapshot.learn(written)) }
    }

    // MARK: Listening

    private func start(_ feed: Feed?) {
        let thread = Thread { [self] in run(feed) }
        thread.name = "Prefs.PostgresStore.listener"
        thread.start()
    }

    /// Where the listener is in a re-check of hearing: its own `NOTIFY` sent from the writer's side, and whether it
    /// came back.
    private struct Recheck {
        var heard = false
    }

    private func run(_ initial: Feed?) {
        var feed = initial
        var lastRead = ContinuousClock.now
        var lastCheck = ContinuousClock.now
        var recheck: Recheck? = nil
        var pending = false
        var retryDelay: Duration? = nil
        var retryAt = ContinuousClock.now
        var readable = false
        while !isStopped {
            guard var current = feed else {
                feed = reconnect()
                (pending, retryDelay, recheck, lastCheck) = (true, nil, nil, .now)
                continue
            }
            let connection = current.connection
            if readable, !connection.consumeInput() {
                feed = lose()
                continue
            }
            readable = false
            for notification in connection.takeNotifications() {
                if notification.channel == probeChannel {
                    recheck?.heard = true
                } else if !isOwnWrite(notification.sender) {
                    pending = true
                }
            }
            let (polling, requested) = state.withLock { state in
                defer { state.readRequested = false }
                return (state.polling, state.readRequested)
            }
            let period = polling ? source.interval : limits.heartbeat
            if requested || ContinuousClock.now - lastRead >= period { pending = true }
            if pending, retryDelay == nil || ContinuousClock.now >= retryAt {
                lastRead = ContinuousClock.now
                listenerActivity.store(Activity.working.rawValue, ordering: .relaxed)
                do {
                    try catchUpAll(on: connection)
                    pending = false
                    if retryDelay != nil || state.withLock({ $0.failure != nil }) { reported.forget() }
                    retryDelay = nil
                    state.withLockAndSignal { state in
                        state.failure = nil
                        state.attempts += 1
                    }
                } catch {
                    if connection.isBroken {
                        feed = lose()
                        continue
                    }
                    let failure = feedFailure(error)
                    feedFailures.add(1, ordering: .relaxed)
                    state.withLockAndSignal { state in
                        state.failure = failure
                        state.attempts += 1
                    }
                    reported.reportOnce(failure, key: "", operation: .read)
                    let delay = min((retryDelay ?? .milliseconds(25)) * 2, .seconds(1))
                    (retryDelay, retryAt) = (delay, ContinuousClock.now + delay)
                }
                // Reading can receive notifications (libpq queues them while it reads a result): take them before
                // sleeping, or they would wait for the next packet.
                continue
            }
            if current.listens, !current.direct {
                if let outcome = checkHearing(&recheck, lastCheck: &lastCheck) {
                    if !outcome {
                        current.listens = false
                        feed = current
                        _ = try? connection.execute("UNLISTEN *", deadline: ContinuousClock.now + limits.writeDeadline)
                        state.withLock { $0.polling = true }
                        reportDeafness()
                        continue
                    }
                }
            }
            // The wait ends when the next read is due (or its retry, or the re-check's), rounded up to the
            // millisecond: a wait that ended a moment early once found nothing due and waited a whole interval more.
            var until = pending ? retryAt : lastRead + period
            if current.listens, !current.direct {
                if let sent = state.withLock({ $0.probeSent }), let committed = sent, recheck?.heard == false {
                    until = min(until, committed + PostgresStore.ChangeSource.probeBound)
                } else if recheck == nil {
                    until = min(until, lastCheck + limits.heartbeat)
                }
            }
            let milliseconds = ((until - ContinuousClock.now) + .microseconds(999)).wholeMilliseconds
            listenerActivity.store(Activity.waiting.rawValue, ordering: .relaxed)
            readable = listenerWait.wait(
                socket: connection.socket, milliseconds: Int32(min(max(1, milliseconds), 60_000)))
            listenerActivity.store(Activity.working.rawValue, ordering: .relaxed)
        }
        listenerActivity.store(Activity.ended.rawValue, ordering: .relaxed)
        state.withLockAndSignal { state in
            state.feedOpen = false
            if !state.writerBusy { state.writer = nil }
        }
        listenerWait.closeDescriptors()
        finished.signal()
    }

    /// Runs the re-check of hearing through a pooler: every heartbeat, a `NOTIFY` on the feed's own channel, sent from
    /// the writer's side on a thread of its own, must come back within ``PostgresStore/ChangeSource/probeBound`` of
    /// its commit. Returns false when it did not (the listener is deaf), true when it did, nil while it runs or is not
    /// due.
    private func checkHearing(_ recheck: inout Recheck?, lastCheck: inout ContinuousClock.Instant) -> Bool? {
        guard let running = recheck else {
            guard ContinuousClock.now - lastCheck >= limits.heartbeat else { return nil }
            recheck = Recheck()
            lastCheck = ContinuousClock.now
            state.withLock { $0.probeSent = nil }
            sendProbe()
            return nil
        }
        guard let sent = state.withLock({ $0.probeSent }) else { return nil }  // the sender is not done yet
        guard let committed = sent else {
            recheck = nil  // it could not be sent: nothing is known, the next heartbeat tries again
            return nil
        }
        if running.heard {
            recheck = nil
            lastCheck = ContinuousClock.now
            return true
        }
        guard ContinuousClock.now - committed >= PostgresStore.ChangeSource.probeBound else { return nil }
        recheck = nil
        return false
    }

    /// Sends the re-check's `NOTIFY` on a thread of its own, so that a slow write connection never holds up the
    /// listener, and records when it was committed (or that it could not be sent).
    private func sendProbe() {
        Thread { [self] in
            let sent: ContinuousClock.Instant?
            do {
                _ = try withConnection { connection in
                    try connection.execute(
                        "SELECT pg_catalog.pg_notify($1, '')", [probeChannel],
                        deadline: ContinuousClock.now + limits.writeDeadline)
                }
                sent = ContinuousClock.now
            } catch {
                sent = nil
            }
            state.withLock { $0.probeSent = .some(sent) }
            wake()
        }.start()
    }

    /// Connects the feed again, waiting 50 ms, 100 ms, … up to 1 s between attempts, until connected or stopped. It
    /// listens first (when it can hear), and every snapshot's next read reads its namespace whole (the server may be
    /// another one), so no change can fall between the two. A failure to connect is reported to
    /// ``PrefsConfig/errorHandler`` once per cause, with the server's reason.
    private func reconnect() -> Feed? {
        var delay: Int32 = 50
        while !isStopped {
            listenerActivity.store(Activity.connecting.rawValue, ordering: .relaxed)
            do {
                let feed = try Self.openFeed(
                    secrets: secrets, limits: limits, schema: schema, source: source, channel: probeChannel)
                let snapshots = state.withLock { Array($0.snapshots.values) }
                for snapshot in snapshots { snapshot.forgetBound() }
                reconnections.add(1, ordering: .relaxed)
                state.withLockAndSignal { state in
                    state.feedOpen = true
                    state.polling = !feed.listens
                }
                if !feed.listens { reportDeafness() }
                return feed
            } catch {
                let typed = error as? PostgresStoreError ?? .connectionLost(reason: "\(error)")
                state.withLockAndSignal { state in
                    state.failure = typed
                    state.attempts += 1
                }
                reported.reportOnce(typed, key: "", operation: .read)
            }
            listenerActivity.store(Activity.backingOff.rawValue, ordering: .relaxed)
            // A wake (a store opening, close()) only cuts the wait short: returning on one left the listener without
            // a connection for good.
            _ = listenerWait.wait(socket: -1, milliseconds: delay)
            delay = min(delay * 2, 1_000)
        }
        return nil
    }

    /// Lets go of the feed connection, found broken: the listener reconnects.
    private func lose() -> Feed? {
        state.withLock { $0.feedOpen = false }
        return nil
    }

    /// Whether `sender` is the server process of one of this process's write connections.
    private func isOwnWrite(_ sender: Int32) -> Bool { state.withLock { $0.writers[sender] != nil } }

    /// What ``listenerActivity`` holds.
    enum Activity: Int {
        case working, waiting, connecting, backingOff, ended
    }

    /// A failed read of the feed as it is reported and kept in ``failure``: the server's refusal names what was read.
    private func feedFailure(_ error: any Error) -> PostgresStoreError {
        let typed = error as? PostgresStoreError ?? .serverError(sqlState: "", message: "\(error)")
        guard case .serverError(let code, let message) = typed else { return typed }
        return .serverError(
            sqlState: code,
            message: "reading the change feed of \(schema.prefix)prefs_values failed: \(message); changes made "
                + "elsewhere are not seen until it succeeds (retried every second at most)")
    }

    /// Reads what changed since each snapshot's last read and announces it. A notification's payload is never read:
    /// a forged one costs a read of the feed and changes nothing.
    private func catchUpAll(on connection: Connection) throws {
        // Counted as it starts, so a test that sees what a read brought finds it counted.
        feedReads.add(1, ordering: .relaxed)
        let snapshots = state.withLock { Array($0.snapshots.values) }
        let deadline = ContinuousClock.now + limits.writeDeadline
        for snapshot in snapshots {
            let (changed, rows) = try snapshot.catchUp(on: connection, deadline: deadline)
            feedRows.add(rows, ordering: .relaxed)
            snapshot.publish(changed)
        }
    }
}
