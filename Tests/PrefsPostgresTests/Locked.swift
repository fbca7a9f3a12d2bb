import Foundation

/// A value behind an `NSLock`, which ThreadSanitizer sees (it cannot see `Synchronization.Mutex` on Linux), so
/// `make tsan` checks these helpers instead of suppressing them.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
