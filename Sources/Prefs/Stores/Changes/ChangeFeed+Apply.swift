import Foundation

extension ChangeFeed {
    /// Runs `body` holding the update lock, as every write Prefs makes to a store of the app's own does, then, once
    /// the lock is released, the observers of what it announced: on this thread, before it returns, even if `body`
    /// threw. Inside another one on the same thread (a batch's body writing, a transform), it leaves the delivery to
    /// the outermost one.
    func writing<T>(_ body: () throws -> T) rethrows -> T {
        let outermost = enterApply()
        defer {
            leaveApply()
            if outermost { deliverAnnouncements() }
        }
        updateLock.lock()
        defer { updateLock.unlock() }
        return try body()
    }

    /// Tells every observer that `keys` changed outside Prefs: delivered at once, or, from inside a write of this
    /// thread (a store telling of a change from its `write`), once that write has released its lock.
    func publishOutsideChange(_ keys: [String]) {
        guard isApplying(on: .current) else { return publish(keys) }
        enqueueUnknown(keys)
    }
}
