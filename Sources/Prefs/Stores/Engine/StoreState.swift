import Foundation

/// Everything a store knows, in one value: its values, the file they came from and that file's health and commit
/// record, the changes in memory that are not in the file yet, and its lifetime. `StoreEngine` holds it under one
/// lock, beside its own plumbing (the watch, the looks and commits it has queued, the damage listeners), and
/// performs what its transitions return; the transitions touch no file and no clock (they are given the time and
/// what was read), so `StoreStateTests` checks them without files. The write in progress, which only the thread
/// holding the engine's writer lock sees, is a ``WriteInProgress`` beside it.
struct StoreState: Sendable {
    /// The values reads are served from: the file's, with the changes not written yet.
    private(set) var values: [String: PrefValue]
    /// What this state knows of its file; nil for a store without one (``InMemoryStore``).
    private(set) var file: FileKnowledge?

    /// The file as this process last read or wrote it.
    struct FileKnowledge: Sendable {
        /// How long the file may stay unreadable before it counts as damaged (see ``Health/suspect(since:)``).
        let grace: Duration
        /// Whether lock-less in-place rewrites of the file (Foundation's, of a UserDefaults suite) are undone when
        /// they put back a value from before the latest Prefs commit of its key.
        let restoresStaleRewrites: Bool
        /// The identity (device, inode, size, times) of the file the values came from; nil when there is none.
        var identity: FileIdentity?
        /// A hash of that file's bytes: an in-place rewrite at the same size within one tick of the file system's
        /// clock keeps the identity, and only the bytes tell.
        var contentHash: UInt64?
        /// Whether the identity may hide such a rewrite (the file was modified within a tick of being read: see
        /// `FileSystem.isRacy`): then its bytes are compared before anything is written on top of it.
        var racy = false
        /// Whether the values were read holding a lock of the file, or committed by this process: a write relies on
        /// them only then, and reads the file again under its lock otherwise.
        var verified = true
        /// The commit record kept with that file, and whether the file's bytes are still the ones it describes.
        var record: CommitRecord?
        var recordIntact = false
        var health = Health.healthy
        /// Whether a second look at a suspect file is already scheduled.
        var recheckScheduled = false
        /// The keys whose values in memory are not in the file yet, with what the file holds for them.
        var unwritten: [String: Unwritten] = [:]
        /// Whether the first write (which sweeps temporary files left by killed writers) is still to come.
        var sweepDue = true
    }

    /// Whether the file on disk reads.
    enum Health: Sendable {
        /// It read, or there is none: the values are the file's.
        case healthy
        /// It could not be decoded since `since`, but may be in the middle of another writer's in-place rewrite:
        /// the last good values keep being served, nothing is reported and nothing is announced.
        case suspect(since: Duration)
        /// It cannot be decoded, for longer than the grace: writes are refused so it is never overwritten.
        case damaged(any Error)
    }

    /// A value in memory that is not in the file yet.
    struct Unwritten: Equatable, Sendable {
        /// What the file holds for the key (nil: nothing).
        var base: PrefValue?
        /// The commit of the file when `base` was its value, where its record tells: a deferred change gives way
        /// when the record says the key changed after it.
        var since: CommitStamp?
        /// Why it is not written: a deferred write, or a value a stale rewrite put back that is to be written again.
        var reason: Reason

        enum Reason: Equatable, Sendable {
            /// A write through a store that defers its writes: committed within its window.
            case deferred
            /// A write inside a batch: committed when the batch ends.
            case batch
            /// A value a stale in-place rewrite put back, to be written again.
            case restored
        }
    }

    /// One commit of one file: the record's lineage and generation.
    struct CommitStamp: Equatable, Sendable {
        let lineage: UInt64
        let generation: UInt64
    }

    init(values: [String: PrefValue] = [:]) {
        self.values = values
    }

    init(file grace: Duration, restoresStaleRewrites: Bool = false) {
        values = [:]
        file = FileKnowledge(grace: grace, restoresStaleRewrites: restoresStaleRewrites)
    }

    // MARK: Reading the file

    /// What a refresh must do, given the identity the file has now.
    enum Refresh: Equatable {
        /// The file is the one the values came from: nothing to read.
        case upToDate
        /// The file has the identity the values came from, but that identity may hide an in-place rewrite: its
        /// bytes tell.
        case compareBytes
        /// The file is gone: the store is empty now.
        case cleared
        /// The file changed, or the last read failed: read and decode it again.
        case read
    }

    /// A damaged or suspect store re-reads even an unchanged file, so a repaired or finished file is noticed; a
    /// write (`writing`) re-reads a file whose values were not read under a lock.
    func refresh(currentIdentity current: FileIdentity?, writing: Bool = false) -> Refresh {
        guard let file else { return .upToDate }
        if case .healthy = file.health, current == file.identity, file.verified || !writing {
            return file.racy && current != nil ? .compareBytes : .upToDate
        }
        return current == nil ? .cleared : .read
    }

    /// The file's bytes were compared with those the values came from and found the same; `racy`: whether its
    /// identity may still hide a rewrite.
    mutating func bytesUnchanged(racy: Bool) { file?.racy = racy }

    /// A file read as `newValues`, with its identity and commit record (`intact`: the file's bytes are the ones the
    /// record was committed with), at `now`.
    ///
    /// - Deferred changes stay in memory while the file still holds what they replaced; one whose key another
    ///   writer changed since gives way to that later, acknowledged write. The record tells, even when the other
    ///   writer put back the value the change replaced; without one, the values are compared.
    /// - For a suite rewritten in place since its last Prefs commit, a key the rewrite put back to a value that its
    ///   latest commit replaced within the record's window is a stale copy: memory takes the latest committed value
    ///   (this process's, or from `lastCommit`, the copy the committer kept), and it is due to be written again
    ///   (``needsWrite``).
    ///
    /// Clears damage and suspicion. Returns the keys whose values in memory changed (none unless
    /// `reportingChanges`).
    mutating func load(
        _ newValues: [String: PrefValue], identity: FileIdentity?, contentHash: UInt64? = nil, record: CommitRecord?,
        intact: Bool, now: Duration, keyHash: (String) -> UInt64, lastCommit: [String: PrefValue]? = nil,
        racy: Bool = false, verified: Bool = true, reportingChanges: Bool = true
    ) -> Set<String> {
        guard var file else { return [] }
        // The values this process knows Prefs committed last: memory, but for changes not committed yet (a value
        // restored after a stale rewrite was committed before, and counts).
        var known = values
        for (key, change) in file.unwritten where change.reason != .restored { known[key] = change.base }
        var merged = newValues
        var unwritten: [String: Unwritten] = [:]
        let stamp = intact ? record.map(\.stamp) : nil
        // Restoring is decided only from a file and a commit file read under the file's lock (one commit's).
        if file.restoresStaleRewrites, verified, let record, !intact {
            let committed = lastCommit ?? [:]
            for key in Set(known.keys).union(newValues.keys).union(committed.keys)
            where record.recent[keyHash(key)] != nil {
                let latest = record.staleValue(keyHash(key), found: newValues[key].recordHash, now: now)
                guard let latest else { continue }
                // The latest Prefs commit of the key, as this process knows it or as the committer's copy holds it.
                let restored: PrefValue?
                if known[key].recordHash == latest {
                    restored = known[key]
                } else if committed[key].recordHash == latest {
                    restored = committed[key]
                } else {
                    continue
                }
                merged[key] = restored
                unwritten[key] = Unwritten(base: newValues[key], since: nil, reason: .restored)
            }
        }
        // A batch's writes are the write in progress (read again only to apply them on top): they stay.
        for (key, change) in file.unwritten where change.reason == .batch {
            merged[key] = values[key]
            unwritten[key] = Unwritten(base: newValues[key], since: nil, reason: .batch)
        }
        for (key, change) in file.unwritten where change.reason == .deferred {
            let changedSince: Bool
            if let since = change.since, let record, intact, record.lineage == since.lineage,
                let answer = record.changed(keyHash(key), since: since.generation)
            {
                changedSince = answer
            } else {
                // A stale copy put back by a rewrite is no write of the key.
                changedSince = unwritten[key] == nil && newValues[key] != change.base
            }
            guard !changedSince else { continue }
            merged[key] = values[key]
            unwritten[key] = Unwritten(base: newValues[key], since: stamp ?? change.since, reason: .deferred)
        }
        file.unwritten = unwritten
        file.identity = identity
        file.contentHash = contentHash
        file.racy = racy
        file.verified = verified
        file.record = record
        file.recordIntact = intact
        file.health = .healthy
        self.file = file
        let old = values
        values = merged
        // Not computed for a first load, which announces nothing: a set of every key was 8% of opening a vault.
        return reportingChanges ? Self.diff(old, merged) : []
    }

    /// Records that the file could not be decoded at `now`, and decides what that means. With `graceful` false the
    /// file is damaged at once.
    /// `limit` replaces the grace (a first load waits longer for a file that keeps changing).
    mutating func failedToDecode(
        _ error: any Error, at now: Duration, graceful: Bool = true, limit: Duration? = nil
    ) -> Unreadable {
        guard var file else { return .damaged }
        defer { self.file = file }
        let grace = file.grace > .zero ? (limit ?? file.grace) : .zero
        let since: Duration
        switch file.health {
        case .healthy: since = now
        case .suspect(let start): since = start
        case .damaged: since = now - grace
        }
        let elapsed = now - since
        if !graceful || elapsed >= grace {
            file.health = .damaged(error)
            return .damaged
        }
        file.health = .suspect(since: since)
        defer { file.recheckScheduled = true }
        return .suspect(recheck: grace - elapsed, scheduleRecheck: !file.recheckScheduled)
    }

    /// What a file that could not be decoded means now.
    enum Unreadable: Equatable {
        /// Possibly a rewrite in progress: keep serving the last good values, and look again within `recheck`
        /// (`scheduleRecheck`: no second look is scheduled yet).
        case suspect(recheck: Duration, scheduleRecheck: Bool)
        /// Unreadable for longer than the grace: the store is damaged and the error is reported.
        case damaged
    }

    /// The second look at a suspect file is running.
    mutating func recheckRan() { file?.recheckScheduled = false }

    var isSuspect: Bool {
        if case .suspect? = file?.health { return true }
        return false
    }

    /// The error that keeps the file from being read, while it is damaged.
    var damage: (any Error)? {
        if case .damaged(let error)? = file?.health { return error }
        return nil
    }

    /// The file's values as far as this process knows them: memory, with each unwritten key at the file's value.
    var fileValues: [String: PrefValue] {
        guard let unwritten = file?.unwritten, !unwritten.isEmpty else { return values }
        var known = values
        for (key, change) in unwritten { known[key] = change.base }
        return known
    }

    /// The keys in memory that the file does not hold yet.
    var unwrittenKeys: some Collection<String> { (file?.unwritten ?? [:]).keys }

    /// Whether deferred changes wait for a commit.
    var hasDeferredChanges: Bool { file?.unwritten.values.contains { $0.reason == .deferred } ?? false }

    /// Whether memory holds values the file should hold: deferred changes, or values to restore.
    var needsWrite: Bool { !(file?.unwritten.isEmpty ?? true) }

    /// Whether memory holds values a stale rewrite put back, to be written again.
    var hasRestoredValues: Bool { file?.unwritten.values.contains { $0.reason == .restored } ?? false }

    /// The keys unwritten for `reason`.
    func unwritten(_ reason: Unwritten.Reason) -> [String] {
        (file?.unwritten ?? [:]).filter { $0.value.reason == reason }.map(\.key)
    }

    // MARK: Changing values

    /// Changes `key` in memory only, for `reason` (a deferred write, or a write inside a batch): a later commit
    /// writes it. Returns whether the value changed.
    mutating func setInMemory(_ value: PrefValue?, forKey key: String, reason: Unwritten.Reason) -> Bool {
        let before = values[key]
        guard before != value else { return false }
        if var file {
            if let change = file.unwritten[key] {
                // A batch's change deferred as a whole stays deferred; a deferred one written in a batch too.
                if change.reason == .restored { file.unwritten[key]?.reason = reason }
            } else {
                let stamp = file.recordIntact ? file.record?.stamp : nil
                file.unwritten[key] = Unwritten(base: before, since: stamp, reason: reason)
            }
            self.file = file
        }
        values[key] = value
        return true
    }

    /// Replaces memory as a whole, for `reason`; returns the keys that changed.
    mutating func replaceInMemory(with newValues: [String: PrefValue], reason: Unwritten.Reason) -> Set<String> {
        let changed = Self.diff(values, newValues)
        for key in changed { _ = setInMemory(newValues[key], forKey: key, reason: reason) }
        return changed
    }

    /// A deferred batch ended: its changes wait for the deferred commit like deferred writes.
    mutating func deferBatchChanges() {
        guard var file else { return }
        for (key, change) in file.unwritten where change.reason == .batch { file.unwritten[key]?.reason = .deferred }
        self.file = file
    }

    /// What a commit of `newValues` writes: the record to keep with the file (nil for a store without one), given
    /// `changedKeys` when the caller knows them (else the file's values are compared with `newValues`).
    /// `freshLineage`: the keys' hashes change (a vault's new key), so earlier generations cannot be compared.
    func commitRecord(
        for newValues: [String: PrefValue], changedKeys: Set<String>?, now: Duration, keyHash: (String) -> UInt64,
        freshLineage: Bool = false
    ) -> CommitRecord {
        let file = self.file
        let restoring = file?.restoresStaleRewrites ?? false
        let known = fileValues
        let keys = changedKeys.map { $0.union(unwrittenKeys) } ?? Self.diff(known, newValues)
        let changes = keys.filter { known[$0] != newValues[$0] }.map { key in
            (
                key: keyHash(key), old: restoring ? known[key].recordHash : 0,
                new: restoring ? newValues[key].recordHash : 0
            )
        }
        guard let record = file?.record, !freshLineage else {
            return CommitRecord(lineage: .random(in: 1 ... .max)).next(
                changing: changes, intact: file?.identity == nil, keepsRecent: restoring, now: now)
        }
        return record.next(changing: changes, intact: file?.recordIntact ?? false, keepsRecent: restoring, now: now)
    }

    /// `newValues` are in the file now, with `identity` and `record`: memory follows. Returns the keys whose values
    /// in memory changed, measured from `announcedFrom` when given (the values at the start of a batch, whose
    /// changes observers have not heard of yet).
    mutating func committed(
        _ newValues: [String: PrefValue], identity: FileIdentity?, record: CommitRecord?,
        announcedFrom: [String: PrefValue]? = nil, changedKeys: Set<String>? = nil, racy: Bool = false
    ) -> Set<String> {
        let old = announcedFrom ?? values
        if var file {
            file.identity = identity
            file.racy = racy
            file.verified = true
            file.contentHash = record?.contentHash
            file.record = record
            file.recordIntact = record != nil
            file.unwritten = [:]
            file.health = .healthy
            file.sweepDue = false
            self.file = file
        }
        let changed = changedKeys.map { $0.filter { old[$0] != newValues[$0] } } ?? Self.diff(old, newValues)
        values = newValues
        return changed
    }

    /// The file was moved aside or removed: the store is empty and healthy.
    mutating func cleared() -> Set<String> {
        committed([:], identity: nil, record: nil)
    }

    /// The file's bytes changed without its identity showing it (an in-place rewrite within one tick of the file
    /// system's clock): the next look reads it.
    mutating func changedInPlace() { file?.identity = .unknown }

    /// The empty file a write's lock created is gone again (that write wrote nothing): there is no file, and memory
    /// (deferred changes included) stays as it is.
    mutating func emptyFileRemoved() {
        file?.identity = nil
        file?.contentHash = nil
        file?.record = nil
        file?.recordIntact = false
    }

    // MARK: Batches

    /// Memory when a batch began: its values and the changes not written yet.
    typealias BatchStart = (values: [String: PrefValue], unwritten: [String: Unwritten])

    /// Memory now, as a batch beginning keeps it to go back to.
    var batchPoint: BatchStart { (values, file?.unwritten ?? [:]) }

    /// A batch's body, or the commit of values already in memory, failed: memory goes back to `start`. Returns the
    /// keys whose values move back.
    mutating func rollBack(to start: BatchStart) -> Set<String> {
        let changed = Self.diff(values, start.values)
        values = start.values
        file?.unwritten = start.unwritten
        return changed
    }

    /// The commit of a batch that ended failed before its rename: memory goes back to `start`, and as a retry may
    /// have read a newer file since the batch began, the next look reads the file again. Returns the keys whose
    /// values move back.
    mutating func batchCommitFailed(from start: BatchStart) -> Set<String> {
        let changed = rollBack(to: start)
        changedInPlace()
        return changed
    }

    // MARK: Lifetime

    /// How many open store handles use this state; nil once it has shut (every handle closed).
    private(set) var handles: Int? = 0

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

    /// The keys whose values differ between two snapshots.
    static func diff(_ old: [String: PrefValue], _ new: [String: PrefValue]) -> Set<String> {
        if old.isEmpty { return Set(new.keys) }
        var changed = Set<String>()
        for (key, value) in old where new[key] != value { changed.insert(key) }
        for key in new.keys where old[key] == nil { changed.insert(key) }
        return changed
    }
}

extension CommitRecord {
    /// The commit this record describes.
    var stamp: StoreState.CommitStamp { StoreState.CommitStamp(lineage: lineage, generation: generation) }
}

/// The write in progress on the thread holding an engine's writer lock: how deeply it is nested (a transform or a
/// batch writing through the same store), the batch it is in, the file lock it holds and the reports it owes. Only
/// that thread reads or changes it, so a write keeps it without entering the state's lock.
struct WriteInProgress {
    /// How deep the write in progress is nested; 0 when none runs.
    private(set) var depth = 0
    /// Memory when the current batch began; nil when no batch runs.
    private(set) var batchStart: StoreState.BatchStart?
    /// The file's lock while a write of this process holds it.
    var heldLock: FileLock?
    /// Reports made holding the locks, told once the outermost write has let go of them.
    var reports: [any Error] = []
    /// Counts the writes begun and the changes made on this thread; a run whose count moved while its caller's code
    /// ran (a write inside a transform, a batch's body) reads the state again before it drafts its commit.
    private(set) var changes: UInt64 = 0
    /// Counts the renames and removals of the file this thread's runs made: a run whose count moved while its
    /// caller's code ran holds the lock of a file that is no longer at the path.
    private(set) var replacements: UInt64 = 0
    /// Whether the store has shut: set by the last `close()`, under the writer lock.
    var shut = false

    /// A write begins; true for the outermost one.
    mutating func beginWrite() -> Bool {
        changes &+= 1
        depth += 1
        return depth == 1
    }

    mutating func endWrite() {
        precondition(depth > 0, "a write ended that did not begin")
        depth -= 1
    }

    /// The store changed outside a run (its last handle closed).
    mutating func changed() { changes &+= 1 }

    /// A run renamed a file into place, or moved or removed the file.
    mutating func replacedFile() { replacements &+= 1 }

    /// Whether a batch is running: its writes change memory only, and reach the file when it ends.
    var inBatch: Bool { batchStart != nil }

    /// A batch begins with memory at `point`; returns what to go back to if its body throws, and whether it is the
    /// outermost.
    mutating func beginBatch(at point: StoreState.BatchStart) -> (restore: StoreState.BatchStart, outermost: Bool) {
        if batchStart != nil { return (point, false) }
        batchStart = point
        return (point, true)
    }

    /// The outermost batch's body returned or threw: returns the values it started from.
    @discardableResult
    mutating func endBatch() -> [String: PrefValue]? {
        defer { batchStart = nil }
        return batchStart?.values
    }

    /// The reports owed, taken.
    mutating func takeReports() -> [any Error] {
        defer { reports = [] }
        return reports
    }
}
