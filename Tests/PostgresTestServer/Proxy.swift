import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// `try Proxy(to: port)` forwards TCP connections from a port of its own on 127.0.0.1 to `port`; ``pause()`` stops
/// forwarding without closing anything, like a network path that swallows packets, and ``resume()`` goes on;
/// ``cut()`` closes the connections open now, as a failing middlebox or a server's host going down does, and
/// forwards new ones.
///
/// Faults at a named step, the same way on every run: ``cutConnection(whenClientSends:)`` loses a connection just
/// before a statement reaches the server (one sent while the connection is set up, say);
/// ``cutConnection(afterForwarding:thenRefuseSessionsWith:)`` loses it just after (the answer to `COMMIT`), and can
/// then refuse every new session with a server's `FATAL` message until ``clearFaults()``;
/// ``holdMessage(containing:)`` keeps a statement on its way (sent by the client, not yet at the server) until
/// ``releaseHeld()``.
public final class Proxy: Sendable {
    /// The port clients connect to.
    public let port: Int
    private let listener: Int32
    private let target: Int
    private let paused = Atomic<Bool>(false)
    private let stopped = Atomic<Bool>(false)
    /// Bumped by ``cut()``: a forwarding thread started under an older value closes its sockets.
    private let generation = Atomic<Int>(0)
    private let accepted = Atomic<Int>(0)
    private let forwarded = Atomic<Int>(0)
    private let refused = Atomic<Int>(0)
    private let forwarding = Atomic<Int>(0)
    /// What the accepting thread does now: 0 accepting, 1 connecting to the target, 2 starting a forwarding thread,
    /// 3 ended.
    private let stage = Atomic<Int>(0)

    private struct Faults {
        /// A connection whose client sends this text is closed before it reaches the server, until cleared.
        var cutBefore: [UInt8]?
        /// Once: the first message holding this text reaches the server, then its connection is closed.
        var cutAfter: [UInt8]?
        /// Armed by `cutAfter` when it fires.
        var refusalAfterCut: String?
        /// New sessions get this `FATAL` message, until cleared.
        var refusal: String?
        /// Once: the first message holding this text waits in the proxy, with everything its connection sends after
        /// it, until released.
        var hold: [UInt8]?
    }

    private let faults = Mutex(Faults())
    /// How many connections the faults above closed, and how many sessions they refused.
    private let faultCuts = Atomic<Int>(0)
    private let refusedSessions = Atomic<Int>(0)
    /// How many messages were held, and how many times held messages were released.
    private let held = Atomic<Int>(0)
    private let releases = Atomic<Int>(0)

    public init(to target: Int) throws {
        self.target = target
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var address = Self.loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listening = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                bind(listener, generic, length) == 0 && getsockname(listener, generic, &length) == 0
            }
        }
        guard listening, listen(listener, 64) == 0 else {
            close(listener)
            throw PostgresServerError("the proxy cannot listen: \(String(cString: strerror(errno)))")
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread { [self] in acceptLoop() }.start()
    }

    /// Stops forwarding: bytes already sent stay in the kernel's buffers, nothing is closed.
    public func pause() { paused.store(true, ordering: .releasing) }
    /// Forwards again.
    public func resume() { paused.store(false, ordering: .releasing) }

    /// Closes every connection forwarded so far (within 50 ms), without sending or reading anything more on them.
    public func cut() { generation.add(1, ordering: .acquiringAndReleasing) }

    /// `proxy.cutConnection(whenClientSends: "SET lock_timeout")`: from now on, a connection whose client sends a
    /// message holding `text` is closed before that message reaches the server (so its statement never runs), until
    /// ``clearFaults()``.
    public func cutConnection(whenClientSends text: String) {
        faults.withLock { $0.cutBefore = Array(text.utf8) }
    }

    /// `proxy.cutConnection(afterForwarding: "COMMIT")`: once, the first message holding `text` reaches the server,
    /// and its connection is closed before any answer comes back. With `message`, every session opened from then
    /// on is refused with it (as a `FATAL` error, SQLSTATE 53300, the one a server with too many clients sends)
    /// until ``clearFaults()``.
    public func cutConnection(afterForwarding text: String, thenRefuseSessionsWith message: String? = nil) {
        faults.withLock {
            $0.cutAfter = Array(text.utf8)
            $0.refusalAfterCut = message
        }
    }

    /// Forwards everything again: no connection is cut and no session refused by a fault from now on.
    public func clearFaults() { faults.withLock { $0 = Faults() } }

    /// `proxy.holdMessage(containing: "prefs_values_feed")`: once, the first message a client sends holding `text`
    /// waits in the proxy (the client has sent it, the server has not received it), with everything that client
    /// sends after it, until ``releaseHeld()``; what the server sends still reaches the client.
    public func holdMessage(containing text: String) { faults.withLock { $0.hold = Array(text.utf8) } }

    /// Sends the held message, and what came after it, on to the server.
    public func releaseHeld() { releases.add(1, ordering: .acquiringAndReleasing) }

    /// How many messages ``holdMessage(containing:)`` has held so far.
    public var messagesHeld: Int { held.load(ordering: .acquiring) }

    /// How many connections the faults closed.
    public var cutsByFaults: Int { faultCuts.load(ordering: .acquiring) }
    /// How many forwarded connections are open now (a cut one is closed within 50 ms).
    public var connectionsOpen: Int { forwarding.load(ordering: .acquiring) }
    /// How many sessions the faults refused.
    public var sessionsRefused: Int { refusedSessions.load(ordering: .acquiring) }

    /// What the proxy has done so far, for a failing test's message.
    public var statistics: String {
        let stages = ["accepting", "connecting to the target", "starting a forwarding thread", "ended"]
        return "proxy: \(accepted.load(ordering: .relaxed)) accepted, \(forwarded.load(ordering: .relaxed)) "
            + "forwarded, \(refused.load(ordering: .relaxed)) not connected to the target, "
            + "\(forwarding.load(ordering: .relaxed)) forwarding now, paused \(paused.load(ordering: .relaxed)), "
            + "accepting thread \(stages[stage.load(ordering: .relaxed)]), \(cutsByFaults) cut and "
            + "\(sessionsRefused) refused by faults"
    }

    /// Stops accepting and forwarding; the forwarding threads close their sockets.
    public func stop() {
        stopped.store(true, ordering: .releasing)
        shutdown(listener, Int32(SHUT_RDWR))
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return address
    }

    private func acceptLoop() {
        while !stopped.load(ordering: .acquiring) {
            let client = accept(listener, nil, nil)
            guard client >= 0 else {
                if errno == EINTR { continue }
                break
            }
            accepted.add(1, ordering: .relaxed)
            if let refusal = faults.withLock({ $0.refusal }) {
                Thread { [self] in refuse(client, with: refusal) }.start()
                continue
            }
            stage.store(1, ordering: .relaxed)
            let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = Self.loopback(port: target)
            let connected = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                    connect(server, generic, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                }
            }
            guard connected else {
                refused.add(1, ordering: .relaxed)
                stage.store(0, ordering: .relaxed)
                close(client)
                close(server)
                continue
            }
            stage.store(2, ordering: .relaxed)
            let born = generation.load(ordering: .acquiring)
            Thread { [self] in pump(client, server, born: born) }.start()
            forwarded.add(1, ordering: .relaxed)
            stage.store(0, ordering: .relaxed)
        }
        stage.store(3, ordering: .relaxed)
        close(listener)
    }

    /// Copies bytes both ways until either side closes; while paused it waits without reading.
    private func pump(_ first: Int32, _ second: Int32, born: Int) {
        forwarding.add(1, ordering: .relaxed)
        defer {
            close(first)
            close(second)
            forwarding.subtract(1, ordering: .relaxed)
        }
        var buffer = [UInt8](repeating: 0, count: 65_536)
        // What the client sent from a held message on, and the releases counted when it was held.
        var withheld: (bytes: [UInt8], releases: Int)? = nil
        while !stopped.load(ordering: .acquiring), generation.load(ordering: .acquiring) == born {
            if let pending = withheld, releases.load(ordering: .acquiring) > pending.releases {
                withheld = nil
                guard writeAll(pending.bytes, to: second) else { return }
            }
            var descriptors = [
                pollfd(fd: first, events: Int16(POLLIN), revents: 0),
                pollfd(fd: second, events: Int16(POLLIN), revents: 0),
            ]
            // Woken every 50 ms to notice pause, resume and stop.
            guard poll(&descriptors, 2, 50) >= 0 || errno == EINTR else { return }
            if generation.load(ordering: .acquiring) != born { return }
            if paused.load(ordering: .acquiring) { continue }
            for (from, to) in [(0, second), (1, first)] where descriptors[from].revents != 0 {
                let count = read(descriptors[from].fd, &buffer, buffer.count)
                guard count > 0 else { return }
                if from == 0, withheld != nil {
                    withheld?.bytes += buffer[..<count]
                    continue
                }
                // What the client sends is matched against the faults (libpq sends each message whole).
                let cutAfterSending = from == 0 ? fault(in: buffer[..<count]) : .none
                if cutAfterSending == .before { return }
                if cutAfterSending == .hold {
                    withheld = (Array(buffer[..<count]), releases.load(ordering: .acquiring))
                    held.add(1, ordering: .acquiringAndReleasing)
                    continue
                }
                guard writeAll(Array(buffer[..<count]), to: to) else { return }
                if cutAfterSending == .after { return }
            }
        }
    }

    /// Writes all of `bytes` to `socket`; false when it is closed.
    private func writeAll(_ bytes: [UInt8], to socket: Int32) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let written = bytes[sent...].withUnsafeBytes { write(socket, $0.baseAddress, $0.count) }
            guard written > 0 else { return false }
            sent += written
        }
        return true
    }

    private enum Cut { case none, before, after, hold }

    /// Whether `bytes`, sent by a client, trigger a fault: the connection is then closed before or after they are
    /// forwarded. A fault that fires after forwarding arms its refusal of new sessions.
    private func fault(in bytes: ArraySlice<UInt8>) -> Cut {
        let cut = faults.withLock { faults -> Cut in
            if let text = faults.hold, bytes.firstRange(of: text) != nil {
                faults.hold = nil
                return .hold
            }
            if let text = faults.cutBefore, bytes.firstRange(of: text) != nil { return .before }
            if let text = faults.cutAfter, bytes.firstRange(of: text) != nil {
                faults.cutAfter = nil
                faults.refusal = faults.refusalAfterCut
                return .after
            }
            return .none
        }
        if cut == .before || cut == .after { faultCuts.add(1, ordering: .releasing) }
        return cut
    }

    /// Answers a new session as a server refusing it does: declines SSL and GSS encryption, reads the startup
    /// message, sends `FATAL` with `message`, and closes.
    private func refuse(_ client: Int32, with message: String) {
        defer { close(client) }
        for _ in 0..<3 {
            guard let length = readInt32(client), length >= 8, length < 10_000,
                let rest = readExactly(client, count: Int(length) - 4)
            else { return }
            let code = rest.prefix(4).reduce(0) { $0 << 8 | Int32($1) }
            // SSLRequest and GSSENCRequest are answered "N" (not supported); the startup message gets the refusal.
            if code == 80_877_103 || code == 80_877_104 {
                guard write(client, "N", 1) == 1 else { return }
                continue
            }
            var fields: [UInt8] = []
            for (tag, value) in [("S", "FATAL"), ("V", "FATAL"), ("C", "53300"), ("M", message)] {
                fields += Array(tag.utf8) + Array(value.utf8) + [0]
            }
            fields.append(0)
            let size = Int32(fields.count + 4)
            let packet = Array("E".utf8) + withUnsafeBytes(of: size.bigEndian, Array.init) + fields
            _ = packet.withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
            refusedSessions.add(1, ordering: .releasing)
            return
        }
    }

    private func readInt32(_ socket: Int32) -> Int32? {
        readExactly(socket, count: 4).map { $0.reduce(0) { $0 << 8 | Int32($1) } }
    }

    /// Reads `count` bytes, waiting at most 5 s for each part of them.
    private func readExactly(_ socket: Int32, count: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 5_000) > 0 else { return nil }
            let got = bytes[filled...].withUnsafeMutableBytes { read(socket, $0.baseAddress, $0.count) }
            guard got > 0 else { return nil }
            filled += got
        }
        return bytes
    }
}
