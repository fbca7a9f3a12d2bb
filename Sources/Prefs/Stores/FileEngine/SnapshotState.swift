/// The decisions of the file engine, kept apart from its I/O so they can be tested without files: what a store
/// knows about its file, and what to do when it looks at the file again.
struct SnapshotState: Sendable {
    /// The values last read from, or written to, the file.
    var values: [String: PrefValue] = [:]
    /// The identity (device, inode, size, change time) of the file those values came from; nil when absent.
    var identity: FileIdentity?
    /// Set while the file on disk cannot be decoded; writes are refused so it is never overwritten.
    var damage: (any Error)?

    /// What a refresh must do, given the identity the file has now.
    enum Refresh: Equatable {
        /// The file is the one the values came from: nothing to read.
        case upToDate
        /// The file is gone: the store is empty now.
        case cleared
        /// The file changed, or the last read failed: read and decode it again.
        case read
    }

    /// A damaged store re-reads even an unchanged file, so a repaired file is noticed.
    func refresh(currentIdentity current: FileIdentity?) -> Refresh {
        if damage == nil, let current, current == identity { return .upToDate }
        if current == nil { return .cleared }
        return .read
    }

    /// Takes newly read values; returns the keys whose values changed.
    mutating func load(_ newValues: [String: PrefValue], identity newIdentity: FileIdentity?) -> Set<String> {
        let changed = Self.diff(values, newValues)
        self = SnapshotState(values: newValues, identity: newIdentity)
        return changed
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
