/// The decisions of the file engine, kept apart from its I/O so they can be tested without files: what a store
/// knows about its file, and what to do when it looks at the file again.
struct SnapshotState: Sendable {
    /// How long a UserDefaults suite may stay unreadable before it counts as damaged. Foundation's `synchronize()`
    /// rewrites a property list in place (truncate, write, close), so a reader can meet an empty or half-written
    /// file for the few milliseconds the rewrite takes; only a file that stays unreadable this long is damaged.
    /// Files only Prefs writes (always by atomic rename) get no grace.
    static let inPlaceRewriteGrace: Duration = .milliseconds(500)

    /// How long the file may stay unreadable before it counts as damaged: zero, or ``inPlaceRewriteGrace``.
    let grace: Duration

    /// The values last read from, or written to, the file.
    var values: [String: PrefValue] = [:]
    /// The identity (device, inode, size, change time) of the file those values came from; nil when absent.
    var identity: FileIdentity?
    /// Whether the file on disk reads.
    enum Health {
        /// It read, or there is none: the values are the file's.
        case healthy
        /// It could not be decoded since then, but may be in the middle of a rewrite: the last good values keep
        /// being served, nothing is reported and nothing is announced.
        case suspect(since: ContinuousClock.Instant)
        /// It cannot be decoded, for longer than the grace: writes are refused so it is never overwritten.
        case damaged(any Error)
    }

    var health = Health.healthy
    /// Whether a re-check of a suspect file is already scheduled.
    var recheckScheduled = false

    init(values: [String: PrefValue] = [:], identity: FileIdentity? = nil, grace: Duration = .zero) {
        self.values = values
        self.identity = identity
        self.grace = grace
    }

    /// What a refresh must do, given the identity the file has now.
    enum Refresh: Equatable {
        /// The file is the one the values came from: nothing to read.
        case upToDate
        /// The file is gone: the store is empty now.
        case cleared
        /// The file changed, or the last read failed: read and decode it again.
        case read
    }

    /// What a file that could not be decoded means now.
    enum Unreadable: Equatable {
        /// Possibly a rewrite in progress: keep serving the last good values, and look again within `recheck`
        /// (`scheduleRecheck` says whether a re-check must be scheduled, or one is pending already).
        case suspect(recheck: Duration, scheduleRecheck: Bool)
        /// Unreadable for longer than the grace period: the store is damaged and the error is to be reported.
        case damaged
    }

    /// Whether the store is waiting to see if its unreadable file is being rewritten.
    var isSuspect: Bool {
        if case .suspect = health { return true }
        return false
    }

    /// The error that keeps the file from being read, while it is damaged.
    var damage: (any Error)? {
        if case .damaged(let error) = health { return error }
        return nil
    }

    /// A damaged or suspect store re-reads even an unchanged file, so a repaired or finished file is noticed.
    func refresh(currentIdentity current: FileIdentity?) -> Refresh {
        if case .healthy = health, let current, current == identity { return .upToDate }
        if current == nil { return .cleared }
        return .read
    }

    /// Records that the file could not be decoded at `now`, and decides what that means.
    mutating func failedToDecode(_ error: any Error, at now: ContinuousClock.Instant) -> Unreadable {
        let since: ContinuousClock.Instant
        switch health {
        case .healthy: since = now
        case .suspect(let start): since = start
        case .damaged: since = now - grace
        }
        let elapsed = now - since
        if elapsed >= grace {
            health = .damaged(error)
            return .damaged
        }
        health = .suspect(since: since)
        defer { recheckScheduled = true }
        return .suspect(recheck: grace - elapsed, scheduleRecheck: !recheckScheduled)
    }

    /// Takes newly read values; returns the keys whose values changed (none when not `diffing`: a first load,
    /// which nobody observes yet). Clears damage and suspicion.
    mutating func load(
        _ newValues: [String: PrefValue], identity newIdentity: FileIdentity?, diffing: Bool = true
    ) -> Set<String> {
        let changed = diffing ? Self.diff(values, newValues) : []
        take(newValues, identity: newIdentity)
        return changed
    }

    /// Takes new values without comparing them (a write whose changes the caller knows). Clears damage and
    /// suspicion.
    mutating func take(_ newValues: [String: PrefValue], identity newIdentity: FileIdentity?) {
        let scheduled = recheckScheduled
        self = SnapshotState(values: newValues, identity: newIdentity, grace: grace)
        recheckScheduled = scheduled
    }

    /// The new values of `keys`, as a change feed announces them (nil: removed).
    func newValues(of keys: Set<String>) -> [String: PrefValue?] {
        Dictionary(uniqueKeysWithValues: keys.map { ($0, values[$0]) })
    }

    /// The keys whose values differ between two snapshots.
    static func diff(_ old: [String: PrefValue], _ new: [String: PrefValue]) -> Set<String> {
        // The first load of a file: everything is new, and there is nothing to compare.
        if old.isEmpty { return Set(new.keys) }
        var changed = Set<String>()
        for (key, value) in old where new[key] != value { changed.insert(key) }
        for key in new.keys where old[key] == nil { changed.insert(key) }
        return changed
    }
}
