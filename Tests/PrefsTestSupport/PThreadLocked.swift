import Foundation

/// `let log = PThreadLocked<[String]>([])` is a value behind an `NSLock` (a pthread mutex), for test code that
/// threads share.
///
/// ThreadSanitizer sees pthread mutexes; it cannot see `Synchronization.Mutex`, which locks with raw futex calls on
/// Linux, so `make tsan` would report a test's own locked accesses as races.
public final class PThreadLocked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    /// `PThreadLocked(0)` holds `value`.
    public init(_ value: Value) { self.value = value }

    /// `locked.withLock { $0 += 1 }` runs `body` with the value while holding the lock.
    public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
