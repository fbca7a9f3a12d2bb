import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// `try Proxy(to: port)` forwards TCP connections from a port of its own on 127.0.0.1 to `port`; ``pause()`` stops
/// forwarding without closing anything, like a network path that swallows packets, and ``resume()`` goes on;
/// ``cut()`` closes the connections open now, as a failing middlebox or a server's host going down does, and
/// forwards new ones.
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

    /// What the proxy has done so far, for a failing test's message.
    public var statistics: String {
        let stages = ["accepting", "connecting to the target", "starting a forwarding thread", "ended"]
        return "proxy: \(accepted.load(ordering: .relaxed)) accepted, \(forwarded.load(ordering: .relaxed)) "
            + "forwarded, \(refused.load(ordering: .relaxed)) not connected to the target, "
            + "\(forwarding.load(ordering: .relaxed)) forwarding now, paused \(paused.load(ordering: .relaxed)), "
            + "accepting thread \(stages[stage.load(ordering: .relaxed)])"
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
        while !stopped.load(ordering: .acquiring), generation.load(ordering: .acquiring) == born {
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
                var sent = 0
                while sent < count {
                    let written = buffer[sent..<count].withUnsafeBytes { write(to, $0.baseAddress, $0.count) }
                    guard written > 0 else { return }
                    sent += written
                }
            }
        }
    }
}
