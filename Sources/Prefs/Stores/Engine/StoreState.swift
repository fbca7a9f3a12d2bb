import Foundation

/// Everything a store knows, in one value: its values, the file they came from and whether it reads, the changes in
/// memory the file does not hold yet, and its lifetime. `StoreEngine` holds it under one lock and changes it only
/// holding its writer lock too; the transitions touch no file and no clock, so `StoreStateTests` checks them
/// without files.
struct StoreState: Sendable {
    /// The values reads are served from: the file's, with the deferred changes not written yet.
    private(set) var values: [String: PrefValue]
    /// The identity of the file the values came from; nil when there is none.
    private(set) var identity: FileIdentity?
    /// Why the file cannot be read, while it cannot: reads throw it and writes are refused.
    private(set) var damage: (any Error)?
    /// Why the file does not decode, when the store keeps such a file aside: it reads as no values, and the next
    /// write moves it aside and starts afresh.
    private(set) var asideDue: (any Error)?
    /// The deferred changes: each key's value in the file when it was first changed in memory.
    private(set) var unwritten: [String: PrefValue?] = [:]
    /// Whether the first write (which sweeps temporary files left by killed writers) is still to come.
    private(set) var sweepDue = true
    /// How many open store handles use this state; nil once it has shut (every handle closed).
    private(set) var handles: Int? = 0

    init(values: [String: PrefValue] = [:]) {
        self.values = values
    }

    // MARK: The file

    /// Whether the file at `current` must be read: it is not the one the values came from, or it did not read.
    func mustRead(_ current: FileIdentity?) -> Bool { current != identity || damage != nil || asideDue != nil }

    /// The file now holds `newValues` (nil identity: there is no file). A deferred change stays in memory while the
    /// file still holds the value it replaced, and gives way to another writer's change of its key. Returns the
    /// keys whose values in memory changed.
    mutating func load(_ newValues: [String: PrefValue], identity: FileIdentity?) -> Set<String> {
        var merged = newValues
        var kept: [String: PrefValue?] = [:]
        for (key, base) in unwritten where newValues[key] == base {
            merged[key] = values[key]
            kept[key] = base
        }
        unwritten = kept
        self.identity = identity
        damage = nil
        asideDue = nil
        let changed = Self.diff(values, merged)
        values = merged
        return changed
    }

    /// The file at `identity` cannot be read: the values stay, and writes are refused; unless the store keeps such
    /// a file aside (`keepsAside`): then it holds no values, and the next write moves it. Returns the keys whose
    /// values changed.
    mutating func failedToRead(_ error: any Error, identity: FileIdentity?, keepsAside: Bool = false) -> Set<String> {
        self.identity = identity
        guard keepsAside else {
            damage = error
            return []
        }
        asideDue = error
        unwritten = [:]
        defer { values = [:] }
        return Set(values.keys)
    }

    /// The file holds `newValues` now, committed by this process at `identity` (nil: it was removed), and every
    /// deferred change with them.
    mutating func committed(_ newValues: [String: PrefValue], identity: FileIdentity?) {
        values = newValues
        self.identity = identity
        unwritten = [:]
        damage = nil
        asideDue = nil
        sweepDue = false
    }

    /// The lock's placeholder, created for a write that wrote nothing, was removed again.
    mutating func placeholderRemoved() { identity = nil }

    // MARK: Memory

    /// Changes `key` in memory, deferred (the file gets it at the next commit) when the store has a file. Returns
    /// whether the value changed.
    mutating func change(_ key: String, to value: PrefValue?, deferred: Bool) -> Bool {
        let before = values[key]
        guard before != value else { return false }
        if deferred, unwritten[key] == nil { unwritten[key] = .some(before) }
        values[key] = value
        return true
    }

    var hasDeferredChanges: Bool { !unwritten.isEmpty }

    // MARK: Lifetime

    /// A store handle is made on this state; false when it has shut (the registry then opens a new one).
    mutating func retain() -> Bool {
        guard let count = handles else { return false }
        handles = count + 1
        return true
    }

    /// A store handle closed; true when it was the last, and the state is shut now: nothing new is accepted.
    mutating func release() -> Bool {
        guard let count = handles else { return false }
        handles = count > 1 ? count - 1 : nil
        return handles == nil
    }

    var isShut: Bool { handles == nil }

    // MARK: Comparing

    /// The keys whose values differ between `old` and `new`.
    static func diff(_ old: [String: PrefValue], _ new: [String: PrefValue]) -> Set<String> {
        if old.isEmpty { return Set(new.keys) }
        var changed = Set<String>()
        for (key, value) in old where new[key] != value { changed.insert(key) }
        for key in new.keys where old[key] == nil { changed.insert(key) }
        return changed
    }

}
