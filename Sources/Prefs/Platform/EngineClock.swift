package import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where a store's engine reads the time, waits for it to pass and schedules work: the system's clock, or a test's.
///
/// Each engine is given its clock when it is made. Every bounded wait of the engine (the file's lock, a file
/// another writer is rewriting in place) and every timer (a deferred store's window, the retry of a failed commit,
/// the second look at a file being rewritten) goes through it, so a test hands an engine a clock it moves itself.
package struct EngineClock: Sendable {
    /// Time since the system started: the same in every process, so a commit record's times can be compared by
    /// another process; never goes back.
    package let now: @Sendable () -> Duration
    /// Returns once `duration` has passed on this clock, blocking the calling thread.
    package let pause: @Sendable (Duration) -> Void
    /// Runs `work` on `queue` once `duration` has passed on this clock.
    package let schedule: @Sendable (Duration, DispatchQueue, @escaping @Sendable () -> Void) -> Void

    package init(
        now: @escaping @Sendable () -> Duration, pause: @escaping @Sendable (Duration) -> Void,
        schedule: @escaping @Sendable (Duration, DispatchQueue, @escaping @Sendable () -> Void) -> Void
    ) {
        self.now = now
        self.pause = pause
        self.schedule = schedule
    }

    /// The system's clock (`CLOCK_BOOTTIME` on Linux: it counts a suspension too).
    package static let system = EngineClock(
        now: systemNow, pause: waitOnSystemClock,
        schedule: { delay, queue, work in
            queue.asyncAfter(deadline: .now() + .nanoseconds(nanoseconds(delay)), execute: work)
        })

    /// `duration` in whole nanoseconds, negative durations as zero.
    static func nanoseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0, attoseconds >= 0 else { return 0 }
        return Int(clamping: seconds.multipliedReportingOverflow(by: 1_000_000_000).partialValue)
            + Int(attoseconds / 1_000_000_000)
    }
}

@Sendable private func systemNow() -> Duration {
    var time = timespec()
    #if os(Linux)
        clock_gettime(CLOCK_BOOTTIME, &time)
    #else
        clock_gettime(CLOCK_MONOTONIC, &time)
    #endif
    return .seconds(time.tv_sec) + .nanoseconds(time.tv_nsec)
}

@Sendable private func waitOnSystemClock(_ duration: Duration) {
    guard duration > .zero else { return }
    let (seconds, attoseconds) = duration.components
    var request = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
    var remaining = timespec()
    while nanosleep(&request, &remaining) != 0, errno == EINTR { request = remaining }
}

/// How long a writer waits for the cross-process lock of a store's file before it gives up with
/// `PrefsError.lockTimedOut`. See `PrefsConfig.lockTimeout`.
enum LockWait {
    @TaskLocal static var scoped: Duration?

    static var timeout: Duration {
        get { scoped ?? ProcessSettings.values.withLock { $0.lockTimeout } }
        set { ProcessSettings.values.withLock { $0.lockTimeout = max(.zero, newValue) } }
    }
}
