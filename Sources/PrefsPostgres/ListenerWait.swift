import CLibPQ
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// What the listener thread sleeps on: a wake-up pipe, and the primary connection's socket while no writer holds
/// the primary.
///
/// A writer that takes the primary calls ``pause()`` before it sends anything, so the answer to its statement never
/// wakes the listener; giving the primary back, it calls ``resume()``, and data that arrived meanwhile (a hint the
/// writer's statement did not read) wakes the listener then. On Linux the socket leaves and rejoins an epoll set, which
/// takes effect inside a wait already in progress: a write costs two system calls and no thread switch. Elsewhere a
/// `poll(2)` in progress cannot drop a descriptor, so a listener woken by a paused socket waits on the pipe alone,
/// and ``resume()`` wakes it.
final class ListenerWait: Sendable {
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private struct Watched {
        /// The socket watched while not paused; -1 for none.
        var socket: Int32 = -1
        var paused = false
        /// Set while the listener waits without the socket because it was paused (not on Linux): ``resume()`` wakes
        /// it.
        var listenerWaits = false
        /// Set once the descriptors are closed: a late wake or hand-back must not touch a reused descriptor number.
        var closed = false
    }
    private let watched = Locked(Watched())
    #if os(Linux)
        private let epoll: Int32
    #endif

    init() throws(PostgresStoreError) {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else {
            throw .unreachable(reason: "cannot create a pipe: \(String(cString: strerror(errno)))")
        }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        wakeRead = ends[0]
        wakeWrite = ends[1]
        #if os(Linux)
            epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
            guard epoll >= 0 else {
                let reason = String(cString: strerror(errno))
                close(wakeRead)
                close(wakeWrite)
                throw .unreachable(reason: "cannot create an epoll descriptor: \(reason)")
            }
            control(EPOLL_CTL_ADD, wakeRead)
        #endif
    }

    /// Closes the descriptors; called once, by the listener thread as it ends.
    func closeDescriptors() {
        watched.withLock { watched in
            watched.closed = true
            #if os(Linux)
                close(epoll)
            #endif
            close(wakeRead)
            close(wakeWrite)
        }
    }

    /// Wakes the listener (a hint handed over, a broken primary, a close, a test).
    func wake() {
        watched.withLock { watched in
            guard !watched.closed else { return }
            var byte: UInt8 = 1
            _ = write(wakeWrite, &byte, 1)
        }
    }

    /// Watches `socket` (a new primary's; -1 when there is none) in place of the one watched so far.
    func watch(_ socket: Int32) {
        watched.withLock { watched in
            guard !watched.closed else { return }
            #if os(Linux)
                if watched.socket >= 0, !watched.paused { control(EPOLL_CTL_DEL, watched.socket) }
                if socket >= 0 { control(EPOLL_CTL_ADD, socket) }
            #endif
            watched.socket = socket
            watched.paused = false
        }
    }

    /// A writer takes the primary: its socket is no longer watched.
    func pause() {
        watched.withLock { watched in
            guard !watched.paused, !watched.closed else { return }
            watched.paused = true
            #if os(Linux)
                if watched.socket >= 0 { control(EPOLL_CTL_DEL, watched.socket) }
            #endif
        }
    }

    /// The writer gave the primary back: its socket is watched again.
    func resume() {
        let wakeListener = watched.withLock { watched in
            guard watched.paused, !watched.closed else { return false }
            watched.paused = false
            #if os(Linux)
                if watched.socket >= 0 { control(EPOLL_CTL_ADD, watched.socket) }
            #endif
            return watched.listenerWaits
        }
        if wakeListener { wake() }
    }

    /// Waits at most `milliseconds` for a wake or for data on the watched socket; returns whether the socket is
    /// readable. Wakes are drained.
    func wait(milliseconds: Int32) -> Bool {
        #if os(Linux)
            var events = [epoll_event](repeating: epoll_event(), count: 2)
            let ready = epoll_wait(epoll, &events, 2, milliseconds)
            var readable = false
            for event in events.prefix(Int(max(0, ready))) {
                if event.data.fd == wakeRead { drain() } else { readable = true }
            }
        #else
            let socket = watched.withLock { watched in
                watched.listenerWaits = watched.paused
                return watched.paused ? -1 : watched.socket
            }
            var descriptors = [
                pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0),
                pollfd(fd: socket, events: Int16(POLLIN), revents: 0),
            ]
            let ready = poll(&descriptors, 2, milliseconds)
            watched.withLock { $0.listenerWaits = false }
            if descriptors[0].revents != 0 { drain() }
            let readable = descriptors[1].revents != 0
        #endif
        // Either call fails only for lack of kernel memory (the arguments are sound): ending the listener would leave
        // the store deaf for good, so it waits a moment and goes on.
        if ready < 0, errno != EINTR { usleep(10_000) }
        return readable
    }

    /// Empties the wake pipe, so the next wait sleeps again.
    private func drain() {
        var buffer = [UInt8](repeating: 0, count: 64)
        _ = read(wakeRead, &buffer, buffer.count)
    }

    #if os(Linux)
        private func control(_ operation: Int32, _ descriptor: Int32) {
            var event = epoll_event()
            event.events = EPOLLIN.rawValue
            event.data.fd = descriptor
            _ = epoll_ctl(epoll, operation, descriptor, &event)
        }
    #endif
}
