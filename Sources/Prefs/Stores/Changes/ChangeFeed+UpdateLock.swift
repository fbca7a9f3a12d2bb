import Foundation

extension ChangeFeed {
    /// Runs `body` while holding the lock that serialises read-modify-write updates of a store without its own
    /// (the default ``KeyValueStore/updateValue(forKey:_:)``). The lock lives in the feed because the feed is the
    /// one piece of state every store, including a custom one, is guaranteed to own.
    package func withUpdateLock<T>(_ body: () throws -> T) rethrows -> T {
        updateLock.lock()
        defer { updateLock.unlock() }
        return try body()
    }
}
