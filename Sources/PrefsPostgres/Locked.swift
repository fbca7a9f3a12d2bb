import Foundation

/// A value behind an `NSLock`.
///
/// `Synchronization.Mutex` would do, but on Linux it locks with raw futex calls that ThreadSanitizer cannot see, so
/// `make tsan` would report every access from the listener thread; `NSLock` is a pthread mutex, which it sees.
package final class Locked<Value>: @unchecked Sendable {
    private let lock = NSCondition()
    private var value: Value

    package init(_ value: Value) { self.value = value }

    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }

    /// Like `withLock`, and wakes the threads waiting in `withLock(waitingUntil:…)` afterwards.
    package func withLockAndSignal<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer {
            lock.broadcast()
            lock.unlock()
        }
        return try body(&value)
    }

    /// Waits until `ready` holds (rechecked whenever `withLockAndSignal` runs) or `seconds` pass, then runs `body`
    /// under the lock either way.
    package func withLock<Result>(
        waitingUntil ready: (Value) -> Bool, atMost seconds: Double, _ body: (inout Value) throws -> Result
    ) rethrows -> Result {
        let deadline = Date(timeIntervalSinceNow: seconds)
        lock.lock()
        defer { lock.unlock() }
        while !ready(value), lock.wait(until: deadline) {}
        return try body(&value)
    }
}
