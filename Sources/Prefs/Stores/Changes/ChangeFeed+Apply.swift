public import Foundation

extension ChangeFeed {
    /// What a store tells the feed while it applies a change inside ``ChangeFeed/apply(locking:_:)``.
    ///
    /// It exists only for the length of the body: whatever it is told is recorded at once, under your store's lock,
    /// which fixes its place in the order observers see.
    public struct Announcer {
        let feed: ChangeFeed

        /// `changes.announce(["theme": .string("dark"), "zoom": nil])`: these keys now hold these values (nil:
        /// removed). Observers see every value announced, in the order announced; they run once
        /// ``ChangeFeed/apply(locking:_:)`` has released your lock.
        public func announce(_ newValues: [String: PrefValue?]) { feed.announce(newValues) }

        /// `changes.invalidate(["theme"])`: these keys changed without an announcement (a batch's writes before it
        /// commits, or the writes a batch takes back when its body throws), so every wrapper reads them from the
        /// store again; no observer runs.
        public func invalidate(_ keys: Set<String>) { feed.invalidate(keys) }
    }

    /// `try changes.apply(locking: lock) { changes in … }` applies a change to your store and announces it, in the
    /// order the contract needs: it takes `lock`, runs `body` (which changes the store's values and tells
    /// `changes` what it changed), releases `lock`, then runs the observers of what `body` announced on this
    /// thread, before it returns, even if `body` threw.
    ///
    /// ```swift
    /// func setValue(_ value: PrefValue?, forKey key: String) throws {
    ///     try validateKey(key)
    ///     try changes.apply(locking: writer) { changes in
    ///         values[key] = value
    ///         changes.announce([key: value])
    ///     }
    /// }
    /// ```
    ///
    /// Every write of your store goes through it, holding `lock` only inside it. Applied inside another `apply` of
    /// the same feed on the same thread (a batch's body writing, with a recursive lock), it runs `body` and leaves
    /// the delivery to the outermost one, which delivers once every level has released the lock.
    ///
    /// - Parameters:
    ///   - lock: The lock under which your store applies its changes, held for the whole of `body`.
    ///   - body: Applies the change and tells the ``Announcer`` what changed; its result or error is returned.
    public func apply<T>(locking lock: some NSLocking, _ body: (Announcer) throws -> T) rethrows -> T {
        let outermost = enterApply()
        defer {
            leaveApply()
            if outermost { deliverAnnouncements() }
        }
        lock.lock()
        defer { lock.unlock() }
        return try body(Announcer(feed: self))
    }
}
