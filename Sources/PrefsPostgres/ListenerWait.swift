import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// What the listener thread sleeps on: a wake-up pipe, and the socket of its own connection, which no other thread
/// uses.
final class ListenerWait: Sendable {
    private let wakeRead: Int32
    private let wakeWrite: Int32
    /// Set once the descriptors are closed: a late wake must not write to a reused descriptor number.
    private let closed = Locked(false)

    init() throws(PostgresStoreError) {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else {
            throw .unreachable(reason: "cannot create a pipe: \(String(cString: strerror(errno)))")
        }
        for end in ends {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
        }
        wakeRead = ends[0]
        wakeWrite = ends[1]
    }

    /// Closes the descriptors; called once, by the listener thread as it ends.
    func closeDescriptors() {
        closed.withLock { closed in
            closed = true
            close(wakeRead)
            close(wakeWrite)
        }
    }

    /// Wakes the listener (a store asking for a read, a close, a test).
    func wake() {
        closed.withLock { closed in
            guard !closed else { return }
            var byte: UInt8 = 1
            _ = write(wakeWrite, &byte, 1)
        }
    }

    /// Waits at most `milliseconds` for a wake or for data on `socket` (-1: none); returns whether the socket is
    /// readable. Wakes are drained.
    func wait(socket: Int32, milliseconds: Int32) -> Bool {
        var descriptors = [
            pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0),
            pollfd(fd: socket, events: Int16(POLLIN), revents: 0),
        ]
        let ready = poll(&descriptors, socket < 0 ? 1 : 2, milliseconds)
        // It fails only for lack of kernel memory (the arguments are sound): ending the listener would leave the
        // store deaf for good, so it waits a moment and goes on.
        if ready < 0, errno != EINTR { usleep(10_000) }
        if descriptors[0].revents != 0 {
            var buffer = [UInt8](repeating: 0, count: 64)
            while read(wakeRead, &buffer, buffer.count) > 0 {}
        }
        return socket >= 0 && descriptors[1].revents != 0
    }
}
