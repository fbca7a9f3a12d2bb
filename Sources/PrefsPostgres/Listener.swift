import Foundation
import Prefs
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The background thread that keeps a ``Snapshot`` current: it owns a connection that `LISTEN`s on the
/// `prefs_values` channel and sleeps in `poll(2)` on its socket and on a wake-up pipe. When the connection is
/// lost it reconnects with a growing delay (up to one second), re-reads the namespace and announces every key
/// that changed meanwhile.
final class Listener: Sendable {
    private let snapshot: Snapshot
    private let secrets: ConnectionSecrets
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let stopped = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    /// The connection the thread starts with; it takes it over.
    private let initial: Locked<Connection?>
    /// Counts the reconnections, for tests and logs.
    let reconnections = Atomic<Int>(0)

    static let applicationName = "prefs-listen"

    init(snapshot: Snapshot, secrets: ConnectionSecrets, connection: Connection) throws {
        self.snapshot = snapshot
        self.secrets = secrets
        initial = Locked(connection)
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else {
            throw PostgresStoreError.unreachable(reason: "cannot create a pipe: \(String(cString: strerror(errno)))")
        }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        wakeRead = ends[0]
        wakeWrite = ends[1]
    }

    func start() {
        let thread = Thread { [self] in run() }
        thread.name = "Prefs.PostgresStore.listener"
        thread.start()
    }

    /// Asks the thread to stop; with `wait`, returns once it has closed its connection.
    func stop(wait: Bool) {
        if !stopped.exchange(true, ordering: .acquiringAndReleasing) {
            var byte: UInt8 = 1
            _ = write(wakeWrite, &byte, 1)
        }
        if wait {
            finished.wait()
            finished.signal()
        }
    }

    private var isStopped: Bool { stopped.load(ordering: .acquiring) }

    private func run() {
        var connection = initial.withLock { stored in
            let value = stored
            stored = nil
            return value
        }
        while !isStopped {
            guard let current = connection, !current.isBroken else {
                connection = nil
                connection = reconnect()
                continue
            }
            var descriptors = [
                pollfd(fd: current.socket, events: Int16(POLLIN), revents: 0),
                pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0),
            ]
            let ready = poll(&descriptors, 2, -1)
            if ready < 0 {
                if errno == EINTR { continue }
                break
            }
            if descriptors[1].revents != 0 { break }
            guard current.consumeInput() else { continue }
            let payloads = current.takeNotifications()
            if !payloads.isEmpty {
                do { try handle(payloads, on: current) } catch { continue }
            }
        }
        connection = nil
        close(wakeRead)
        close(wakeWrite)
        finished.signal()
    }

    /// Connects again, waiting 50 ms, 100 ms, … up to 1 s between attempts; nil once asked to stop. After
    /// connecting it listens first, then re-reads the namespace, so no change can fall between the two.
    private func reconnect() -> Connection? {
        var delay: Int32 = 50
        while !isStopped {
            if let connection = try? Connection(secrets: secrets, applicationName: Self.applicationName) {
                do {
                    try connection.execute("LISTEN " + Schema.channel)
                    let fresh = try snapshot.load(from: connection)
                    reconnections.add(1, ordering: .relaxed)
                    snapshot.publish(snapshot.replaceAll(fresh))
                    return connection
                } catch {}
            }
            var descriptor = pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)
            if poll(&descriptor, 1, delay) > 0 { return nil }
            delay = min(delay * 2, 1_000)
        }
        return nil
    }

    /// Applies a batch of notifications: small values come in the payload, large ones and deleted rows are
    /// re-read, and anything unexpected re-reads the whole namespace.
    private func handle(_ payloads: [String], on connection: Connection) throws {
        var updates: [(key: String, entry: Entry)] = []
        var reread: [String] = []
        var reloadAll = false
        for payload in payloads {
            guard case .dictionary(let fields)? = try? PrefValue(jsonText: payload) else {
                reloadAll = true
                continue
            }
            if fields["reload"] != nil {
                reloadAll = true
                continue
            }
            guard case .string(let namespace)? = fields["namespace"] else {
                reloadAll = true
                continue
            }
            guard namespace == snapshot.namespace else { continue }
            guard case .string(let key)? = fields["key"] else {
                reloadAll = true
                continue
            }
            guard fields["deleted"] == nil, case .int(let version)? = fields["version"] else {
                reread.append(key)
                continue
            }
            if fields["removed"] != nil {
                updates.append((key, Entry(value: nil, version: version)))
            } else if let value = fields["value"] {
                updates.append((key, Entry(value: value, version: version)))
            } else if version > snapshot.entry(forKey: key)?.version ?? -1 {
                reread.append(key)
            }
        }
        var changed = snapshot.apply(updates)
        if reloadAll {
            changed += snapshot.replaceAll(try snapshot.load(from: connection))
        } else {
            for key in Set(reread) { changed += snapshot.replace(try snapshot.load(key: key, from: connection)) }
        }
        var seen = Set<String>()
        snapshot.publish(changed.filter { seen.insert($0).inserted })
    }
}
