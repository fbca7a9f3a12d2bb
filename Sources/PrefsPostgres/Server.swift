import Foundation
import Prefs
import Synchronization

/// The connections of one process to one server (one connection string and set of limits), shared by every
/// ``PostgresStore`` opened on it.
///
/// Idle, it holds one connection, the *primary*: it carries writes and the reads of the change feed, and, where its
/// own `NOTIFY` comes back (``PostgresStore/ChangeSource``), it `LISTEN`s on the `prefs_values` channel. A background
/// thread, the listener, sleeps on its socket and on a wake-up pipe (``ListenerWait``) without holding it, and takes
/// it when the socket has data, a writer handed over notifications, or a read of the feed is due (every poll
/// interval while polling, every heartbeat while listening): then it reads what changed since its last read, under
/// the table's grants (``Snapshot/catchUp(on:deadline:)``). That read is the one way changes are learned; a
/// notification only says when to run it. A write borrows the primary when it is free, or opens an extra connection when it is not (another write
/// holds it, or a row lock keeps it waiting); extras are closed when given back, so a write to one key never queues
/// behind a write blocked on another. While a write holds the primary the listener does not watch its socket, so
/// the write's answer wakes no one; hints that arrive with the answer are read by the writer and handed to the
/// listener, which handles them as it handles its own: every hint is handled once, in the order it arrived.
final class Server: Sendable {
    let secrets: ConnectionSecrets
    let limits: PostgresStore.Limits
    /// The PostgreSQL schema every statement names.
    let schema: Schema
    /// How the listener learns of changes: listening, polling, or deciding by the probe.
    let source: PostgresStore.ChangeSource
    private let registryKey: String

    private struct State {
        var primary: Connection?
        var primaryBusy = false
        /// Whether the listener is the one holding the primary: it gives it back within moments (it only takes
        /// what arrived and re-reads the rows it names), so a writer waits for it rather than opening a connection.
        var listenerHoldsPrimary = false
        var snapshots: [ObjectIdentifier: Snapshot] = [:]
        /// Hints the writers took off the primary (libpq queues them while it reads a result), oldest first.
        var hints: [String] = []
        /// When a writer last gave the primary back in working order: an answer the listener did not see, which
        /// counts as hearing from the server.
        var lastAnswer = ContinuousClock.now
        /// The extra connections open right now, for tests.
        var extras = 0
        /// Why the listener last failed to connect, reported once per distinct cause.
        var listenerFailure: PostgresStoreError?
        /// Whether the listener reads the feed every `source.interval` (its notifications are not heard, or it
        /// does not listen), rather than when notified.
        var polling = true
        /// Set when a read of the feed came due while a writer held the primary: the writer wakes the listener as it
        /// gives the primary back.
        var readPending = false
    }
    private let state: Locked<State>
    private let listenerWait: ListenerWait
    private let stopped = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    /// Counts the listener's reconnections, for tests and logs.
    let reconnections = Atomic<Int>(0)
    /// What the listener thread does now, for a failing test's message.
    let listenerActivity = Atomic<Int>(0)
    /// What the listener reports its failures through (``PrefsConfig/errorHandler``, once per cause).
    private let reported = ReportLedger()
    /// Set once the store has reported that it cannot hear its notifications and polls instead.
    private let reportedDeafness = Atomic<Bool>(false)

    static let applicationName = "prefs"
    private static let registry = Locked<[String: Server]>([:])

    /// The server for `secrets` and `limits`, connected and listening (created on first use); `snapshot` is
    /// registered with it before this returns, so it receives every hint from now on.
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
            let server = try Server(
                secrets: secrets, limits: limits, schema: schema, source: source, registryKey: key,
                mayStartAway: mayStartAway)
            server.state.withLock { $0.snapshots[ObjectIdentifier(snapshot)] = snapshot }
            servers[key] = server
            server.start()
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
        if !stopped.exchange(true, ordering: .acquiringAndReleasing) { wake() }
        if wait {
            finished.wait()
            finished.signal()
        }
    }

    private init(
        secrets: ConnectionSecrets, limits: PostgresStore.Limits, schema: Schema, source: PostgresStore.ChangeSource,
        registryKey: String, mayStartAway: Bool
    ) throws {
        self.secrets = secrets
        self.limits = limits
        self.schema = schema
        self.source = source
        self.registryKey = registryKey
        var primary: Connection? = nil
        var hears = false
        do {
            (primary, hears) = try Self.connectAndListen(
                secrets: secrets, limits: limits, schema: schema, source: source)
        } catch let error as PostgresStoreError where mayStartAway && error.meansAway {
            // Without a primary, the listener thread connects as soon as the server answers.
        }
        state = Locked(State(primary: primary, polling: !hears))
        listenerWait = try ListenerWait()
        if let primary { listenerWait.watch(primary.socket) }
        if primary != nil, !hears { reportDeafness() }
    }

    private static func connect(secrets: ConnectionSecrets, limits: PostgresStore.Limits) throws(PostgresStoreError)
        -> Connection
    {
        try Connection(secrets: secrets, limits: limits, applicationName: applicationName)
    }

    /// A connection that has checked the schema (creating it when missing) and, unless `source` only polls, listens
    /// for notifications if it can hear them; returns whether it does.
    ///
    /// - Throws: ``PostgresStoreError/connectionRefused(reason:)`` for ``PostgresStore/ChangeSource/listen`` when
    ///   its own `NOTIFY` did not come back.
    private static func connectAndListen(
        secrets: ConnectionSecrets, limits: PostgresStore.Limits, schema: Schema, source: PostgresStore.ChangeSource
    ) throws -> (Connection, hears: Bool) {
        let connection = try connect(secrets: secrets, limits: limits)
        try schema.prepare(on: connection)
        guard source.kind != .poll else { return (connection, false) }
        let hears = try probe(connection, secrets: secrets, limits: limits)
        if !hears, source.kind == .listen { throw deafness(source) }
        return (connection, hears)
    }

    /// Whether `connection` hears a `NOTIFY` sent from another connection on a channel of its own within
    /// ``PostgresStore/ChangeSource/probeBound``; it then listens on the `prefs_values` channel.
    ///
    /// Through a pooler in transaction mode the `LISTEN` ran on whichever server connection served it, and the
    /// other connection's `NOTIFY` reaches that server connection, not this client: nothing comes back. It then
    /// sends `UNLISTEN *`, which reaches the same server connection only if the pooler hands it out again;
    /// ``PostgresStore/ChangeSource/poll(every:)`` sends neither.
    private static func probe(_ connection: Connection, secrets: ConnectionSecrets, limits: PostgresStore.Limits)
        throws -> Bool
    {
        let deadline = ContinuousClock.now + limits.writeDeadline
        let channel = "prefs_probe_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
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
        try connection.execute(hears ? "UNLISTEN \(channel)" : "UNLISTEN *", deadline: deadline)
        return hears
    }

    /// What a store that cannot hear its own notifications says: as the error of ``PostgresStore/ChangeSource/listen``,
    /// or as the report of ``PostgresStore/ChangeSource/automatic``.
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

    /// Reports, once for this server's life, that notifications are not heard and the store polls (only for
    /// ``PostgresStore/ChangeSource/automatic``: ``PostgresStore/ChangeSource/poll(every:)`` asked for it).
    private func reportDeafness() {
        guard source.kind == .automatic, !reportedDeafness.exchange(true, ordering: .relaxed) else { return }
        ErrorReporter.report(Self.deafness(source), key: "", operation: .read)
    }

    /// Whether the listener reads the feed on a timer rather than when notified, for tests and prefs-bench.
    var polls: Bool { state.withLock { $0.polling } }

    private var isStopped: Bool { stopped.load(ordering: .acquiring) }

    /// The connections held right now (the primary and any extras), for tests and prefs-bench.
    var openConnections: Int { state.withLock { ($0.primary == nil ? 0 : 1) + $0.extras } }

    /// Wakes the listener thread (a writer handing over hints or a broken connection, a close, a test).
    func wake() { listenerWait.wake() }

    // MARK: Borrowing

    /// Runs `body` on a connection of its own: the primary when free, else an extra one, closed afterwards.
    ///
    /// - Throws: What `body` throws; the typed error of a failed connection attempt (`authenticationFailed`,
    ///   `unreachable`, …) when no connection can be made.
    func withConnection<T>(_ body: (Connection) throws -> T) throws -> T {
        guard !isStopped else { throw PostgresStoreError.closed }
        // A primary held by the listener is back within moments; one held by another write may stay busy (a row
        // lock), so that write gets an extra connection at once.
        let listenerIsDone: (State) -> Bool = { !($0.primaryBusy && $0.listenerHoldsPrimary) }
        let primary: Connection? = state.withLock(waitingUntil: listenerIsDone, atMost: Self.listenerHandBack) {
            state in
            guard let primary = state.primary, !state.primaryBusy, !primary.isBroken else { return nil }
            state.primaryBusy = true
            // Before anything is sent: the answer must not wake the listener.
            listenerWait.pause()
            return primary
        }
        if let primary {
            defer { giveBack(primary) }
            primary.noticeIdleClose()
            if !primary.isBroken { return try body(primary) }
        }
        // The primary is busy, or was found closed (the listener reconnects it): an extra connection.
        let extra: Connection
        switch Result(catching: { () throws(PostgresStoreError) in try Self.connect(secrets: secrets, limits: limits) })
        {
        case .success(let connection): extra = connection
        case .failure(.unreachable(let reason)): throw PostgresStoreError.connectionLost(reason: reason)
        case .failure(let error): throw error
        }
        state.withLock { $0.extras += 1 }
        defer { state.withLock { $0.extras -= 1 } }
        return try body(extra)
    }

    /// How long a write waits for the listener to give the primary back before it opens a connection of its own.
    static let listenerHandBack = 0.1

    /// Gives the primary back to the listener's watch, with the hints that came with the writer's answers: the
    /// listener handles them, so they take the one path every hint takes.
    private func giveBack(_ primary: Connection) {
        let hints = primary.takeNotifications(skippingOwn: true)
        let broken = primary.isBroken
        let readPending = state.withLock { state in
            state.primaryBusy = false
            state.hints += hints
            if !broken { state.lastAnswer = ContinuousClock.now }
            listenerWait.resume()
            defer { state.readPending = false }
            return state.readPending
        }
        if !hints.isEmpty || broken || readPending { wake() }
    }

    /// Gives what a write read back (its `RETURNING` rows) to every other snapshot of the namespace in this
    /// process; the writing store merges it itself.
    func share(_ reading: Reading, namespace: String, except writer: Snapshot) {
        // Most processes open one store per server: then there is no one to share with, and nothing is allocated.
        let others = state.withLock { state in
            state.snapshots.count < 2
                ? [] : state.snapshots.values.filter { $0 !== writer && $0.namespace == namespace }
        }
        for snapshot in others { snapshot.publish(snapshot.merge(reading)) }
    }

    // MARK: Listening

    private func start() {
        let thread = Thread { [self] in run() }
        thread.name = "Prefs.PostgresStore.listener"
        thread.start()
    }

    /// What the listener has to do when it takes the primary.
    private struct Work {
        var primary: Connection
        /// Notifications the writers handed over.
        var handedOver: [String]
        /// Whether the feed is read on a timer.
        var polling: Bool
    }

    /// Takes the primary for the listener when it is free and there is work: data on its socket (`readable`),
    /// notifications handed over by writers, a read of the feed due (`due`), or a broken connection to replace.
    /// Returns nil when it was not taken, marking a due read pending when a writer holds it; moves `lastHeard` to the
    /// last answer a writer saw.
    private func takePrimary(
        readable: Bool, lastHeard: inout ContinuousClock.Instant, lastRead: ContinuousClock.Instant
    )
        -> Work?
    {
        state.withLock { state in
            guard let primary = state.primary else { return nil }
            lastHeard = max(lastHeard, state.lastAnswer)
            let due = isDue(polling: state.polling, lastHeard: lastHeard, lastRead: lastRead)
            // A writer holding it gives it back, watched again, hands over what it read, and wakes a pending read.
            guard !state.primaryBusy else {
                if due { state.readPending = true }
                return nil
            }
            guard readable || due || !state.hints.isEmpty || primary.isBroken else { return nil }
            state.primaryBusy = true
            state.listenerHoldsPrimary = true
            state.readPending = false
            defer { state.hints = [] }
            return Work(primary: primary, handedOver: state.hints, polling: state.polling)
        }
    }

    /// Whether a read of the feed is due: every poll interval while polling, every heartbeat while listening (a
    /// network path can swallow packets without closing the socket, and the answer proves it is alive).
    private func isDue(polling: Bool, lastHeard: ContinuousClock.Instant, lastRead: ContinuousClock.Instant) -> Bool {
        polling
            ? ContinuousClock.now - lastRead >= source.interval : ContinuousClock.now - lastHeard >= limits.heartbeat
    }

    private func run() {
        var lastHeard = ContinuousClock.now
        var lastRead = ContinuousClock.now
        var readable = true
        while !isStopped {
            if state.withLock({ $0.primary == nil && !$0.primaryBusy }) {
                reconnect()  // started while the server was away
                lastHeard = ContinuousClock.now
                lastRead = lastHeard
                continue
            }
            if let work = takePrimary(readable: readable, lastHeard: &lastHeard, lastRead: lastRead) {
                let primary = work.primary
                if primary.isBroken {
                    // Nothing is left to be busy: writers go straight to a connection of their own, and the check
                    // at the top of this loop reconnects again should reconnect() return without a connection.
                    state.withLock { state in
                        state.primary = nil
                        state.primaryBusy = false
                        state.listenerHoldsPrimary = false
                        listenerWait.watch(-1)
                    }
                    reconnect()
                    lastHeard = ContinuousClock.now
                    lastRead = lastHeard
                    continue
                }
                var notified = !work.handedOver.isEmpty
                if primary.consumeInput() {
                    notified = !primary.takeNotifications(skippingOwn: true).isEmpty || notified
                }
                var due = isDue(polling: work.polling, lastHeard: lastHeard, lastRead: lastRead)
                // Reading can receive more notifications (libpq queues them while it reads a result): read again for
                // them before sleeping, or they would wait for the next packet.
                while notified || due, !primary.isBroken {
                    lastHeard = ContinuousClock.now
                    lastRead = lastHeard
                    try? catchUpAll(on: primary)
                    notified = !primary.takeNotifications(skippingOwn: true).isEmpty
                    due = false
                }
                state.withLockAndSignal { state in
                    state.primaryBusy = false
                    state.listenerHoldsPrimary = false
                }
                if primary.isBroken {
                    readable = true  // take it again at once, to replace it
                    continue
                }
            }
            // While a writer holds the primary, a due read waits for it to be given back (which wakes this thread).
            // Otherwise the wait ends when the read is due, rounded up to the millisecond: a wait that ended a moment
            // early once found nothing due and waited a whole interval more.
            let (polling, pending) = state.withLock { ($0.polling, $0.readPending) }
            let remaining =
                polling
                ? source.interval - (ContinuousClock.now - lastRead)
                : limits.heartbeat - (ContinuousClock.now - lastHeard)
            var untilDue = (remaining + .microseconds(999)).wholeMilliseconds
            if untilDue <= 0 {
                untilDue = pending ? (polling ? source.interval : limits.heartbeat).wholeMilliseconds : 1
            }
            listenerActivity.store(Activity.waiting.rawValue, ordering: .relaxed)
            readable = listenerWait.wait(milliseconds: Int32(min(max(1, untilDue), 60_000)))
            listenerActivity.store(Activity.working.rawValue, ordering: .relaxed)
            if readable { lastHeard = ContinuousClock.now }
        }
        listenerActivity.store(Activity.ended.rawValue, ordering: .relaxed)
        state.withLock { state in
            state.primary = nil
            listenerWait.watch(-1)
        }
        listenerWait.closeDescriptors()
        finished.signal()
    }

    /// Connects again, waiting 50 ms, 100 ms, … up to 1 s between attempts, until connected or stopped. After
    /// connecting it listens first (when it can hear), then reads every snapshot's namespace whole, so no change can
    /// fall between the two. A failure to connect is reported to ``PrefsConfig/errorHandler`` once per cause, with
    /// the server's reason.
    private func reconnect() {
        var delay: Int32 = 50
        while !isStopped {
            listenerActivity.store(Activity.connecting.rawValue, ordering: .relaxed)
            do {
                let (connection, hears) = try Self.connectAndListen(
                    secrets: secrets, limits: limits, schema: schema, source: source)
                try reloadAll(on: connection)
                reconnections.add(1, ordering: .relaxed)
                reported.forget()
                state.withLockAndSignal { state in
                    state.primary = connection
                    state.primaryBusy = false
                    state.listenerHoldsPrimary = false
                    state.listenerFailure = nil
                    state.polling = !hears
                    listenerWait.watch(connection.socket)
                }
                if !hears { reportDeafness() }
                return
            } catch {
                let typed = error as? PostgresStoreError ?? .connectionLost(reason: "\(error)")
                state.withLock { $0.listenerFailure = typed }
                reported.reportOnce(typed, key: "", operation: .read)
            }
            listenerActivity.store(Activity.backingOff.rawValue, ordering: .relaxed)
            // A wake (a writer handing back a broken connection, or close()) only cuts the wait short. Returning on
            // one left the listener without a connection for good: it waited for a primary no one would make.
            // No socket is watched meanwhile: the primary is gone.
            _ = listenerWait.wait(milliseconds: delay)
            delay = min(delay * 2, 1_000)
        }
    }

    /// What ``listenerActivity`` holds.
    enum Activity: Int {
        case working, waiting, connecting, backingOff, ended
    }

    /// Why the listener could not reconnect, while it cannot.
    var listenerFailure: PostgresStoreError? { state.withLock { $0.listenerFailure } }

    /// Reads every snapshot's namespace whole (the server may be another one now) and announces what changed.
    private func reloadAll(on connection: Connection) throws {
        let snapshots = state.withLock { Array($0.snapshots.values) }
        for snapshot in snapshots { snapshot.forgetHorizon() }
        try catchUpAll(on: connection)
    }

    /// Reads what changed since each snapshot's last read and announces it. A notification's payload is never read:
    /// a forged one costs a read of the feed and changes nothing.
    private func catchUpAll(on connection: Connection) throws {
        let snapshots = state.withLock { Array($0.snapshots.values) }
        let deadline = ContinuousClock.now + limits.writeDeadline
        for snapshot in snapshots { snapshot.publish(try snapshot.catchUp(on: connection, deadline: deadline)) }
    }
}
