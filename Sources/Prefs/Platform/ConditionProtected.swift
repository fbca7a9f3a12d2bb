import Foundation

/// State behind a lock that threads can also wait on until another thread changes it (`Mutex` cannot wait).
final class ConditionProtected<State>: @unchecked Sendable {
    // Sendable: `state` is only touched holding `condition`.
    private let condition = NSCondition()
    private var state: State

    init(_ state: State) { self.state = state }

    /// What a critical section can do besides changing the state: wait for a change, or announce one.
    struct Signals {
        fileprivate let condition: NSCondition

        /// Releases the lock until another thread broadcasts or `timeout` passes, then holds it again.
        func wait(for timeout: Duration) {
            let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) * 1e-18
            _ = condition.wait(until: Date(timeIntervalSinceNow: max(0, seconds)))
        }

        /// Wakes every thread waiting in `wait(for:)`.
        func broadcast() { condition.broadcast() }
    }

    func withLock<T>(_ body: (inout State, Signals) throws -> T) rethrows -> T {
        condition.lock()
        defer { condition.unlock() }
        return try body(&state, Signals(condition: condition))
    }
}

/// The calling thread, for telling who made an announcement.
struct ThreadID: Hashable, Sendable {
    let raw: UInt

    static var current: ThreadID {
        #if canImport(Darwin)
            ThreadID(raw: UInt(bitPattern: pthread_self()))
        #else
            ThreadID(raw: UInt(pthread_self()))
        #endif
    }
}
