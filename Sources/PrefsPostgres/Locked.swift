import Foundation

/// A value behind an `NSLock`.
///
/// `Synchronization.Mutex` would do, but on Linux it locks with raw futex calls that ThreadSanitizer cannot see, so
/// `make tsan` would report every access from the listener thread; `NSLock` is a pthread mutex, which it sees.
package final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    package init(_ value: Value) { self.value = value }

    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
