/// Everything a store knows, in one place, with the decisions it makes kept apart from its I/O so they can be
/// tested without files: the values and the file they came from, the file's health, the deferred writes not yet
/// in the file, and the write in progress (its nesting and batch). `FileBackedStorage` holds it under one lock, reads
/// it, and performs what its transitions return; `InMemoryStore` holds it with no file under it.
struct StoreState: Sendable {
    /// How long a UserDefaults suite may stay unreadable before it counts as damaged. Foundation's `synchronize()`
    /// rewrites a property list in place (truncate, write, close), so a reader can meet an empty or half-written
    /// file for the few milliseconds the rewrite takes; only a file that stays unreadable this long is damaged.
    /// Files only Prefs writes (always by atomic rename) get no grace.
    static let inPlaceRewriteGrace: Duration = .milliseconds(500)

    /// How long an unreadable suite that is not empty must stay unchanged, at its first load, to count as damaged
    /// before the grace is over: no writer is at work on it. A rewriter descheduled halfway for longer than this
    /// makes the open fail; 50 ms was met by a sanitizer build's child on a loaded machine once the XML reader got
    /// fast enough to look every millisecond.
    static let inPlaceRewriteQuiet: Duration = .milliseconds(200)

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
        case suspect(since: Duration)
        /// It cannot be decoded, for longer than the grace: writes are refused so it is never overwritten.
        case damaged(any Error)
    }

    var health = Health.healthy
    /// Whether a re-check of a suspect file is already scheduled.
    var recheckScheduled = false

    /// Keys changed in memory by deferred writes and not yet in the file, each with the value the file held for it
    /// when it was first deferred (nil: absent). A reload keeps a deferred value while the file still holds that
    /// base; a key another writer has changed since gives way to that later, acknowledged write. Every write to the
    /// file commits them all (it holds the writer lock, so none can be added meanwhile).
    private(set) var pending: [String: PrefValue?] = [:]
    /// Whether the first write has swept temporary files left by killed writers.
    private var swept = false

    /// How deep the write in progress is nested (a transform or a batch writing through the same store); only the
    /// thread holding the storage's writer lock changes it.
    private(set) var writerDepth = 0
    /// Whether a watcher event came during the write under way (see ``deferEventToWrite()``).
    private(set) var eventDuringWrite = false
    /// The values when the current batch began; nil when no batch runs.
    private(set) var batchStart: [String: PrefValue]?
    /// How many writes in a row have met a file rewritten in place since it was read (a UserDefaults suite).
    var foreignRetries = 0
    /// The file a write of this process has just renamed into place, until memory takes its values: the watcher's
    /// event for that rename is no news, and must not make the watcher wait for the write to end.
    var landing: FileIdentity?

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

    /// Whether a watcher that finds the file at `current` may have seen another writer's change: not when the
    /// values came from that file, nor when it is the one this process's write has just put in place.
    func isNews(currentIdentity current: FileIdentity?) -> Bool {
        refresh(currentIdentity: current) != .upToDate && (current == nil || current != landing)
    }

    /// Records that the file could not be decoded at `now`, and decides what that means.
    mutating func failedToDecode(_ error: any Error, at now: Duration) -> Unreadable {
        let since: Duration
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
    /// which nobody observes yet). Clears damage and suspicion; deferred changes stay (see ``take(_:identity:)``).
    mutating func load(
        _ newValues: [String: PrefValue], identity newIdentity: FileIdentity?, diffing: Bool = true,
        staleRevert: (String, PrefValue?) -> Bool = { _, _ in false }
    ) -> Set<String> {
        let old = values
        take(newValues, identity: newIdentity, staleRevert: staleRevert)
        return diffing ? Self.diff(old, values) : []
    }

    /// Takes new values without comparing them (a write whose changes the caller knows). Clears damage and
    /// suspicion. A key with a deferred change keeps its value in memory while the file still holds the value the
    /// change replaced, so a reload never takes back a change this process has not committed yet; a key that
    /// another writer changed since gives way: the file's value, acknowledged to that writer, is kept. Except when
    /// `staleRevert` says the file's value is a stale copy put back by a foreign rewrite (see
    /// `ForeignRewriteGuard`): that is no write of the key, and the deferred change stands.
    mutating func take(
        _ newValues: [String: PrefValue], identity newIdentity: FileIdentity?,
        staleRevert: (String, PrefValue?) -> Bool = { _, _ in false }
    ) {
        var merged = newValues
        for (key, base) in pending {
            if newValues[key] == base || staleRevert(key, newValues[key]) {
                merged[key] = values[key]
            } else {
                pending.removeValue(forKey: key)
            }
        }
        values = merged
        identity = newIdentity
        landing = nil
        health = .healthy
    }

    // MARK: Deferred writes

    /// Records that `keys` changed in memory, from the values in `before`, and are left to a commit. A key
    /// deferred already keeps its first base: the file still holds that.
    mutating func deferred(_ keys: some Sequence<String>, before: [String: PrefValue]) {
        for key in keys where pending.index(forKey: key) == nil { pending.updateValue(before[key], forKey: key) }
    }

    /// A write put every value in memory into the file: nothing is pending.
    mutating func committed() { pending.removeAll() }

    /// The values as far as the file holds them: memory, with each deferred key at the value the file has for it.
    var fileValues: [String: PrefValue] {
        guard !pending.isEmpty else { return values }
        var file = values
        for (key, base) in pending { file[key] = base }
        return file
    }

    /// Whether this write is the first, which sweeps temporary files left by killed writers (the caller holds the
    /// file's exclusive lock, so any such file is a killed writer's).
    mutating func takeSweep() -> Bool {
        defer { swept = true }
        return !swept
    }

    // MARK: The write in progress

    /// How a write begins: `outermost` takes the file's lock; a nested one runs inside the write around it.
    enum WriteEntry: Equatable {
        case outermost
        case nested
    }

    /// A write begins on the thread holding the writer lock.
    mutating func beginWrite() -> WriteEntry {
        writerDepth += 1
        return writerDepth == 1 ? .outermost : .nested
    }

    /// The write begun last ends; true when it was the outermost one and a watcher event came meanwhile
    /// (``deferEventToWrite()``), so the file must be looked at again.
    mutating func endWrite() -> Bool {
        precondition(writerDepth > 0, "a write ended that did not begin")
        writerDepth -= 1
        guard writerDepth == 0, eventDuringWrite else { return false }
        eventDuringWrite = false
        return true
    }

    /// A watcher event that may be news came: while a write of this process is under way, it is left to the write
    /// to look again when it ends (true), rather than the watcher waiting for the write's locks.
    mutating func deferEventToWrite() -> Bool {
        guard writerDepth > 0 else { return false }
        eventDuringWrite = true
        return true
    }

    /// Whether a batch is running: its writes change memory only, and reach the file when it ends.
    var inBatch: Bool { batchStart != nil }

    /// How a batch begins: the outermost one remembers the values it started from; a nested one joins it. Both
    /// are given the values to go back to if their body throws.
    enum BatchEntry: Equatable {
        case outermost(start: [String: PrefValue])
        case nested(start: [String: PrefValue])
    }

    /// A batch begins (inside a write: call ``beginWrite()`` first).
    mutating func beginBatch() -> BatchEntry {
        if batchStart != nil { return .nested(start: values) }
        batchStart = values
        return .outermost(start: values)
    }

    /// What the end of the outermost batch must do.
    enum BatchEnd: Equatable {
        /// Its writes left every value as it was: nothing to write.
        case unchanged
        /// Write `values`; observers hear of the keys that changed since `start`.
        case write(values: [String: PrefValue], start: [String: PrefValue])
    }

    /// The outermost batch's body returned: memory holds its values, which are now written like any others.
    mutating func endBatch() -> BatchEnd {
        guard let start = batchStart else { return .unchanged }
        batchStart = nil
        return values == start ? .unchanged : .write(values: values, start: start)
    }

    /// A batch's body threw: memory goes back to the values it began with, and the outermost batch ends. Returns
    /// the keys whose values move back.
    mutating func abandonBatch(_ entry: BatchEntry) -> Set<String> {
        switch entry {
        case .outermost(let start):
            batchStart = nil
            return rollBack(to: start)
        case .nested(let start):
            return rollBack(to: start)
        }
    }

    /// A write of values already in memory failed: memory goes back to `start`. Returns the keys whose values move
    /// back.
    mutating func rollBack(to start: [String: PrefValue]) -> Set<String> {
        let changed = Self.diff(values, start)
        values = start
        return changed
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
