import Foundation
import Prefs
import Synchronization

/// The connections of one process to one server (one connection string and set of limits), shared by every
/// ``PostgresStore`` opened on it.
///
/// Idle, it holds one connection, the *primary*: it `LISTEN`s on the `prefs_values` channel and also carries
/// writes. A background thread, the listener, sleeps on its socket and on a wake-up pipe (``ListenerWait``) without
/// holding it, and takes it only when the socket has data: then it re-reads what the hints name, under the table's
/// grants. A write borrows the primary when it is free, or opens an extra connection when it is not (another write
/// holds it, or a row lock keeps it waiting); extras are closed when given back, so a write to one key never queues
/// behind a write blocked on another. While a write holds the primary the listener does not watch its socket, so
/// the write's answer wakes no one; hints that arrive with the answer are read by the writer and handed to the
/// listener, which handles them as it handles its own: every hint is handled once, in the order it arrived.
final class Server: Sendable {
    let secrets: ConnectionSecrets
    let limits: PostgresStore.Limits
    /// The PostgreSQL schema every statement names.
    let schema: Schema
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
    private let reportSource = ChangeFeed()

    static let applicationName = "prefs"
    private static let registry = Locked<[String: Server]>([:])

    /// The server for `secrets` and `limits`, connected and listening (created on first use); `snapshot` is
    /// registered with it before this returns, so it receives every hint from now on.
    /// With `mayStartAway`, a server that cannot be reached does not stop this: the listener connects once it can.
    static func attach(
        _ snapshot: Snapshot, secrets: ConnectionSecrets, limits: PostgresStore.Limits, mayStartAway: Bool = false
    ) throws -> Server {
        let schema = snapshot.schema
        let key = [secrets.connectionString, String(describing: limits), schema.name].joined(separator: "\u{0}")
        return try registry.withLock { servers in
            if let server = servers[key], !server.isStopped {
                server.state.withLock { $0.snapshots[ObjectIdentifier(snapshot)] = snapshot }
                return server
            }
            let server = try Server(
                secrets: secrets, limits: limits, schema: schema, registryKey: key, mayStartAway: mayStartAway)
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
        secrets: ConnectionSecrets, limits: PostgresStore.Limits, schema: Schema, registryKey: String,
        mayStartAway: Bool
    ) throws {
        self.secrets = secrets
        self.limits = limits
        self.schema = schema
        self.registryKey = registryKey
        var primary: Connection? = nil
        do {
            primary = try Self.connectAndListen(secrets: secrets, limits: limits, schema: schema)
        } catch let error as PostgresStoreError where mayStartAway && error.meansAway {
            // Without a primary, the listener thread connects as soon as the server answers.
        }
        state = Locked(State(primary: primary))
        listenerWait = try ListenerWait()
        if let primary { listenerWait.watch(primary.socket) }
    }

    private static func connect(secrets: ConnectionSecrets, limits: PostgresStore.Limits) throws(PostgresStoreError)
        -> Connection
    {
        try Connection(
            secrets: secrets, limits: limits, applicationName: applicationName,
            setup: [Schema.notifyInline, Schema.pinnedSearchPath])
    }

    /// A connection that has checked the schema (creating it when missing) and listens for hints.
    private static func connectAndListen(secrets: ConnectionSecrets, limits: PostgresStore.Limits, schema: Schema)
        throws -> Connection
    {
        let connection = try connect(secrets: secrets, limits: limits)
        try schema.prepare(on: connection)
        try connection.execute("LISTEN " + Schema.channel, deadline: ContinuousClock.now + limits.writeDeadline)
        return connection
    }

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
        state.withLock { state in
            state.primaryBusy = false
            state.hints += hints
            if !broken { state.lastAnswer = ContinuousClock.now }
            listenerWait.resume()
        }
        if !hints.isEmpty || broken { wake() }
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

    /// Takes the primary for the listener when it is free and there is work: data on its socket (`readable`),
    /// hints handed over by writers, a heartbeat due, or a broken connection to replace. Returns it with the hints
    /// handed over (nil when it was not taken), and moves `lastHeard` to the last answer a writer saw.
    private func takePrimary(readable: Bool, lastHeard: inout ContinuousClock.Instant) -> (Connection, [String])? {
        state.withLock { state in
            // A writer holding it gives it back, watched again, and hands over what it read.
            guard let primary = state.primary, !state.primaryBusy else { return nil }
            lastHeard = max(lastHeard, state.lastAnswer)
            let heartbeatDue = ContinuousClock.now - lastHeard >= limits.heartbeat
            guard readable || heartbeatDue || !state.hints.isEmpty || primary.isBroken else { return nil }
            state.primaryBusy = true
            state.listenerHoldsPrimary = true
            defer { state.hints = [] }
            return (primary, state.hints)
        }
    }

    private func run() {
        var lastHeard = ContinuousClock.now
        var readable = true
        while !isStopped {
            if state.withLock({ $0.primary == nil && !$0.primaryBusy }) {
                reconnect()  // started while the server was away
                lastHeard = ContinuousClock.now
                continue
            }
            if let (primary, queued) = takePrimary(readable: readable, lastHeard: &lastHeard) {
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
                    continue
                }
                var hints = queued
                if primary.consumeInput() { hints += primary.takeNotifications(skippingOwn: true) }
                // Re-reading can receive more hints (libpq queues them while it reads a result): handle them too
                // before sleeping, or they would wait for the next packet.
                while !hints.isEmpty, !primary.isBroken {
                    lastHeard = ContinuousClock.now
                    try? handle(hints, on: primary)
                    hints = primary.takeNotifications(skippingOwn: true)
                }
                if ContinuousClock.now - lastHeard >= limits.heartbeat {
                    // A network path can swallow packets without closing the socket: ask for an answer.
                    _ = try? primary.execute("SELECT 1", deadline: ContinuousClock.now + limits.networkTimeout)
                    lastHeard = ContinuousClock.now
                    // Hints that came with the answer are in libpq's queue, not on the socket: take them now.
                    let arrived = primary.takeNotifications(skippingOwn: true)
                    if !arrived.isEmpty {
                        state.withLock { $0.hints = arrived + $0.hints }
                        wake()
                    }
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
            // While a writer holds the primary, the heartbeat waits for it: its answer counts as hearing.
            var untilHeartbeat = (limits.heartbeat - (ContinuousClock.now - lastHeard)).wholeMilliseconds
            if untilHeartbeat <= 0 { untilHeartbeat = limits.heartbeat.wholeMilliseconds }
            listenerActivity.store(Activity.waiting.rawValue, ordering: .relaxed)
            readable = listenerWait.wait(milliseconds: Int32(min(max(1, untilHeartbeat), 60_000)))
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
    /// connecting it listens first, then re-reads every snapshot, so no change can fall between the two. A failure
    /// to connect is reported to ``PrefsConfig/errorHandler`` once per cause, with the server's reason.
    private func reconnect() {
        var delay: Int32 = 50
        while !isStopped {
            listenerActivity.store(Activity.connecting.rawValue, ordering: .relaxed)
            do {
                let connection = try Self.connectAndListen(secrets: secrets, limits: limits, schema: schema)
                try reloadAll(on: connection)
                reconnections.add(1, ordering: .relaxed)
                ErrorReporter.forgetIncidents(of: reportSource)
                state.withLockAndSignal { state in
                    state.primary = connection
                    state.primaryBusy = false
                    state.listenerHoldsPrimary = false
                    state.listenerFailure = nil
                    listenerWait.watch(connection.socket)
                }
                return
            } catch {
                let typed = error as? PostgresStoreError ?? .connectionLost(reason: "\(error)")
                state.withLock { $0.listenerFailure = typed }
                ErrorReporter.reportOnce(typed, key: "", operation: .read, source: reportSource)
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

    private func reloadAll(on connection: Connection) throws {
        let snapshots = state.withLock { Array($0.snapshots.values) }
        for snapshot in snapshots {
            let reading = try snapshot.load(from: connection, deadline: ContinuousClock.now + limits.writeDeadline)
            snapshot.publish(snapshot.merge(reading))
        }
    }

    /// Re-reads what a batch of hints names. A hint is never trusted for anything but what to read: a forged one
    /// costs a read and changes nothing.
    private func handle(_ hints: [String], on connection: Connection) throws {
        var keys: [String: Set<String>] = [:]
        var wholeNamespaces: Set<String> = []
        var everything = false
        for hint in hints {
            guard case .dictionary(let fields)? = try? PrefValue(jsonText: hint),
                fields["reset"] == nil, case .string(let namespace)? = fields["namespace"]
            else {
                everything = true
                continue
            }
            if case .string(let key)? = fields["key"] {
                keys[namespace, default: []].insert(key)
            } else {
                wholeNamespaces.insert(namespace)
            }
        }
        let snapshots = state.withLock { Array($0.snapshots.values) }
        let deadline = ContinuousClock.now + limits.writeDeadline
        for snapshot in snapshots {
            let reading: Reading
            if everything || wholeNamespaces.contains(snapshot.namespace) {
                reading = try snapshot.load(from: connection, deadline: deadline)
            } else if let named = keys[snapshot.namespace] {
                reading = try snapshot.load(named, from: connection, deadline: deadline)
            } else {
                continue
            }
            snapshot.publish(snapshot.merge(reading))
        }
    }
}
