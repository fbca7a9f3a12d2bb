import Foundation
import Synchronization

/// The engine behind every store Prefs ships but the PostgreSQL one: a ``StoreState`` under one lock, and one
/// function, ``run(_:_:_:_:)``, through which everything that changes the store passes: a write, an update, a batch,
/// a deferred `set` (a change of memory only), a deferred window's commit, a flush, the flush at exit or at the last
/// close, restoring a value a stale rewrite put back, moving a damaged file aside, the first load and every later look
/// at the file.
///
/// A run takes this process's writer lock (the feed's update lock, recursive so that a transform or a batch may write
/// through the same store), then for a write the file's own lock (`flock` on the file; see `POSIXFileSystem`); looks
/// at the file and loads it when it changed; applies the change; and commits: encodes, writes a temporary file,
/// checks that the file is still the one read, renames, syncs the folder; then memory follows and the keys whose
/// values changed are announced. Observers run after every lock is released.
///
/// An engine without a file (``InMemoryStore``) runs the same way, skipping every step that touches a file.
final class StoreEngine: Sendable {
    let changes: ChangeFeed
    let layers: StoreLayers
    /// The file under the store; nil for a store kept in memory only.
    let file: BoundFile?

    /// A store file and what the engine uses to reach it.
    struct BoundFile: Sendable {
        /// The file read and replaced: the path given, or the target of the symbolic link there.
        let path: String
        let codec: any SnapshotCodec
        let fileSystem: any FileSystem
        let clock: EngineClock
        /// What a write does with a file that does not decode.
        let damagePolicy: DamagedFilePolicy
    }

    let guarded: Mutex<Guarded>

    /// The state, and the engine's own plumbing beside it, under one lock.
    struct Guarded {
        var store: StoreState
        /// The watch on the file, while the store is open.
        var watch: FileWatchToken?
        /// The queue that runs looks at the file, deferred commits and restoring writes, one at a time; made when
        /// first needed, so that opening a store costs nothing more.
        var queue: DispatchQueue?
        /// Whether a look at the file is queued and not started yet (events are merged into it).
        var lookQueued = false
        /// When the earliest scheduled deferred commit runs; nil when none is scheduled.
        var commitDue: Duration?
        /// The text of the last failed deferred commit reported, so a failure that repeats is reported once.
        var reportedFailure: String?
        var registeredForExit = false
        /// The streams of `damageUpdates()`, and whether they were last told the file is damaged.
        var damageStreams: [UInt64: AsyncStream<(any Error)?>.Continuation] = [:]
        var nextStream: UInt64 = 0
        var damageTold: Bool?
        /// During the first load of a file that does not decode: when it was last seen to change.
        var firstLoadSeen: (identity: FileIdentity?, since: Duration)?

        var workQueue: DispatchQueue {
            mutating get {
                if let queue { return queue }
                let made = DispatchQueue(label: "Prefs.StoreEngine")
                queue = made
                return made
            }
        }
    }

    var writer: NSRecursiveLock { changes.updateLock }

    /// The write in progress. Only the thread holding `writer` reads or changes it, so a write keeps its nesting,
    /// batch, file lock and reports without entering `guarded`.
    @exclusivity(unchecked) nonisolated(unsafe) var write = WriteInProgress()

    /// An engine for the file at `path`, not loaded yet (see ``open()``).
    /// - Parameters:
    ///   - grace: How long the file may stay unreadable (another writer rewriting it in place) before it counts as
    ///     damaged; zero for files only Prefs writes.
    ///   - restoresStaleRewrites: Whether values a lock-less in-place rewrite put back are restored (a suite).
    init(
        path: String, codec: any SnapshotCodec, fileSystem: any FileSystem = POSIXFileSystem(),
        clock: EngineClock = .system, grace: Duration = .zero, restoresStaleRewrites: Bool = false,
        onDamage damagePolicy: DamagedFilePolicy = .refuse, changes: ChangeFeed = ChangeFeed()
    ) {
        file = BoundFile(
            path: POSIX.resolvingSymbolicLink(path), codec: codec, fileSystem: fileSystem, clock: clock,
            damagePolicy: damagePolicy)
        guarded = Mutex(Guarded(store: StoreState(file: grace, restoresStaleRewrites: restoresStaleRewrites)))
        self.changes = changes
        layers = StoreLayers(changes: changes)
        layers.attach(self)
    }

    /// An engine without a file, holding `values`.
    init(values: [String: PrefValue]) {
        file = nil
        guarded = Mutex(Guarded(store: StoreState(values: values)))
        changes = ChangeFeed()
        layers = StoreLayers(changes: changes)
        layers.attach(self)
    }

    deinit {
        guarded.withLock { $0.watch?.cancel() }
    }

    var path: String { file?.path ?? "" }

    // MARK: Reads

    /// The effective value of `key`: the store's own, through its layers.
    func value(forKey key: String) throws -> PrefValue? {
        let (value, damage, shut) = guarded.withLock {
            (layers.value(forKey: key, user: $0.store.values[key]), $0.store.damage, $0.store.isShut)
        }
        if shut { throw PrefsError.storeClosed(path: path) }
        if let damage { throw damage }
        return value
    }

    func allValues() throws -> [String: PrefValue] {
        let (values, damage, shut) = guarded.withLock { ($0.store.values, $0.store.damage, $0.store.isShut) }
        if shut { throw PrefsError.storeClosed(path: path) }
        if let damage { throw damage }
        return values
    }

    /// The error that keeps the file from being read, if any.
    var damage: (any Error)? { guarded.withLock { $0.store.damage } }

    var isShut: Bool { guarded.withLock { $0.store.isShut } }

    // MARK: Writes

    /// Reads, transforms and durably writes one key while holding the file's lock.
    @discardableResult
    func update(forKey key: String, _ transform: (PrefValue?) throws -> PrefValue?) throws -> PrefValue? {
        try validateKey(key)
        try layers.checkWritable(key)  // Layers hook: a forced key is refused.
        return try perform(.write) { state in
            let old = state.values[key]
            // Layers hook: without a value of the user's, the transform starts from the default below it.
            let new = try transform(old ?? layers.valueBelowUser(key))
            return (new, new == old ? .none : .set(key, new))
        }
    }

    /// Replaces every value at once, in one durable, atomic write.
    func replaceAll(_ values: [String: PrefValue]) throws {
        try perform(.write) { _ in ((), .replace(values)) }
    }

    /// Removes several keys in one durable, atomic write.
    func removeValues(forKeys keys: some Sequence<String>) throws {
        let keys = Array(keys)
        try perform(.write) { _ in ((), .remove(keys)) }
    }

    /// Runs `body` holding the write lock: every write it makes is applied in memory at once and written in one
    /// durable, atomic write when it returns (or, `deferring`, left to the deferred commit within that window).
    /// Observers hear of each changed key once, after that. If `body` or the write throws, memory goes back to the
    /// values before the batch. A batch inside a batch joins it; if the inner one throws, only its own writes are
    /// undone.
    func batch<T>(deferring window: Duration? = nil, _ body: () throws -> T) throws -> T {
        var deferred = false
        let result = try perform(.write) { state throws -> (T, Edit) in
            let (start, outermost) = write.beginBatch(at: state.batchPoint)
            let result: T
            do {
                result = try body()
            } catch {
                if outermost { write.endBatch() }
                guarded.withLock { changes.invalidate($0.store.rollBack(to: start)) }
                throw error
            }
            guard outermost else { return (result, .keep) }
            if window != nil, file != nil {
                // A deferred batch: its changes wait for the deferred commit, announced now.
                deferred = true
                let from = write.endBatch() ?? [:]
                guarded.withLock { guarded in
                    guarded.store.deferBatchChanges()
                    announce(StoreState.diff(from, guarded.store.values), of: guarded.store.values)
                }
                return (result, .keep)
            }
            return (result, .batch(from: start))
        }
        if deferred, let window { scheduleCommit(within: window) }
        return result
    }

    /// Writes the current values after `prepare` changed the codec (a new vault key). `prepare` returns how to undo
    /// its change, which runs if the write fails before its commit point.
    func rewrite(prepare: () throws -> () -> Void) throws {
        var undo: (() -> Void)?
        do {
            try perform(.write) { _ throws -> ((), Edit) in
                if write.inBatch {
                    throw PrefsError.io(
                        path: path, operation: "re-encrypt", errno: EBUSY,
                        message: "the vault key cannot change inside a batch; change it before or after")
                }
                undo = try prepare()
                return ((), .rewrite)
            }
        } catch  where !error.isCommitted {
            undo?()
            throw error
        }
    }

    /// Moves a file that cannot be decoded aside, keeping it as `<name>.damaged-<UTC date and time>` in the same
    /// folder, and starts afresh with no values; returns where it went, or nil when the file reads (nothing moves).
    func moveDamagedFileAside(at now: Date = Date()) throws -> URL? {
        try perform(.moveAside) { state throws -> (URL?, Edit) in
            guard state.damage != nil, let file else { return (nil, .keep) }
            let destination = try Self.asideName(for: file, at: now)
            return (URL(filePath: destination, directoryHint: .notDirectory), .moveAside(destination))
        }
    }

    /// Deletes the file, under its lock, and empties the store: what `prefs delete DOMAIN` does. Observers hear of
    /// every key whose value changed.
    func deleteFile() throws {
        try perform(.moveAside) { _ -> ((), Edit) in
            guard let file, (try? file.fileSystem.identity(at: file.path)) != nil else { return ((), .keep) }
            return ((), .moveAside(nil))
        }
    }

    // MARK: The one transaction

    /// How a run reaches the file.
    enum Access: Equatable {
        /// A write: under the file's lock, from its latest values.
        case write
        /// Moving a damaged file aside, or deleting the file: a write that expects the file may not read.
        case moveAside
        /// The first load: no lock, nothing announced; a file being rewritten in place is waited for.
        case load
        /// A look at the file after a watcher event: no lock; a file being rewritten is looked at again later.
        case look
        /// A change of memory only (a deferred `set`), left to the deferred commit; inside a batch it joins the
        /// batch like any write.
        case memory
    }

    /// What a run's change does to the store's values, applied to the latest ones after the caller's code ran.
    enum Edit {
        /// Nothing: the file changes only to write back values a stale rewrite put back, if any.
        case none
        /// Nothing at all (a deferred batch, whose changes wait for their commit).
        case keep
        /// The values in memory that the file does not hold yet (deferred changes): a flush.
        case pending
        case set(String, PrefValue?)
        /// A deferred `set`: memory changes now, and the file within the window.
        case deferred(String, PrefValue?, within: Duration)
        case replace([String: PrefValue])
        case remove([String])
        /// The values a batch left in memory; `from`: memory when it began, to go back to if its commit fails.
        case batch(from: StoreState.BatchStart)
        /// The values in memory, written again whatever changed (a new vault key).
        case rewrite
        /// The file, moved to this name; nil: deleted.
        case moveAside(String?)
    }

    /// Runs `apply` as one transaction (see the type's description), and delivers what it announced once every
    /// lock is released, unless this thread is inside another run of this engine, whose end delivers. Its reports
    /// are those of the store's background work when `fromBackground` (none after the store has closed). `apply`
    /// is given the state as the run found it.
    @discardableResult
    func perform<T>(
        _ access: Access, delivering: Bool = true, fromBackground: Bool = false,
        _ apply: (StoreState) throws -> (T, Edit)
    ) throws -> T {
        var outermost = false
        var reports: [any Error] = []
        defer {
            if outermost, delivering {
                changes.deliverAnnouncements()
                if !reports.isEmpty {
                    changes.reported.fromBackground(if: fromBackground) {
                        for report in reports { ErrorReporter.report(report, key: "", operation: .read) }
                    }
                }
            }
        }
        return try run(access, &outermost, &reports, apply)
    }

    /// The transaction itself: see the type's description. Sets `outermost` when this thread is in no other run of
    /// this engine, and then hands over the reports the run owes.
    ///
    /// The state lock is entered twice on the common path of a durable write: once to see the state (with the
    /// look at the file, after the file's lock is taken), and once to commit. What the run decides (the draft, the
    /// commit record, whether the file is still the one read) rests on that one view, which is exact: only a thread
    /// holding the writer lock changes what those decisions read, and this run holds it. A write of this thread
    /// inside `apply` (a transform's, a batch's body) moves ``WriteInProgress/changes``, and the view is taken again.
    private func run<T>(
        _ access: Access, _ outermost: inout Bool, _ reports: inout [any Error],
        _ apply: (StoreState) throws -> (T, Edit)
    ) throws -> T {
        writer.lock()
        defer { writer.unlock() }
        if write.shut, access != .load { throw PrefsError.storeClosed(path: path) }
        if access == .look { guarded.withLock { $0.lookQueued = false } }  // a later event needs a later look
        outermost = write.beginWrite()
        let inBatch = write.inBatch
        defer {
            write.endWrite()
            if outermost { reports = write.takeReports() }
        }
        if access == .memory, !inBatch { return try changeMemory(apply) }
        guard let file else { return try commitInMemory(apply, inBatch: inBatch) }
        let writes = access == .write || access == .moveAside
        // The file's lock, taken by the first run that writes while the file exists and held until it ends; a run
        // inside it (a write in a transform) commits under it. A file that appears, or is replaced under the lock by
        // a writer that takes none, is locked afresh.
        var lock: FileLock?
        defer { releaseLock(&lock) }
        /// How many times this thread's runs had replaced the file when `lock` was taken.
        var replacementsAtLock = write.replacements
        // A write that ends without a commit (nothing to write, or a failure) takes back the empty file its lock
        // created: nothing is left of it, unless a write inside the caller's code committed in its place.
        var committed = false
        defer {
            if !committed, let lock, lock.createdEmpty, write.replacements == replacementsAtLock {
                removeCreatedFile(of: file)
            }
        }
        var outcome: (result: T, edit: Edit)?
        /// The draft of `outcome`, made once: a later pass applies its own changes again on top of the new values.
        var planned: Draft??
        /// Whether the file was read again since the outcome was computed.
        var readAgain = false
        /// How many of this run's commits found the file changed under the lock: after three, a fourth commit
        /// writes without checking, so that a writer that takes no lock and never stops cannot hold it up for good.
        var foundChanged = 0
        do {
            // The one retry loop: a file being rewritten in place is read again a millisecond later, and a commit that
            // finds the file changed since it was read (by a writer that takes no lock) reads it again and applies this
            // run's change on top: a transform runs again, a batch's writes are applied again (its body never runs
            // twice). Inside a batch the file is neither read nor written.
            while true {
                if writes, !inBatch, lock == nil, write.heldLock == nil {
                    let taken = try file.fileSystem.lock(file.path, timeout: LockWait.timeout, clock: file.clock)
                    lock = taken
                    write.heldLock = taken
                    replacementsAtLock = write.replacements
                }
                /// The state as this pass found it.
                var view: StoreState?
                if !inBatch {
                    switch try look(at: file, access: access, through: lock) {
                    case .busy:
                        // A writer is in the middle of a commit: its rename raises an event, or the next look sees it.
                        scheduleLook(after: Self.busyRetry)
                    case .suspect:
                        file.clock.pause(.milliseconds(1))
                        continue
                    case .damaged(let error):
                        if access == .moveAside, outcome == nil { break }
                        guard writes, file.damagePolicy == .keepAside, case .corruptFile? = error as? PrefsError else {
                            throw error
                        }
                        // The store's policy: keep the damaged file aside and go on from no values, under the lock.
                        try keepAside(file, damagedBy: error)
                        releaseLock(&lock)
                        continue
                    case .ready(let state):
                        view = state
                    }
                }
                var state = view.take() ?? guarded.withLock { $0.store }
                if outcome == nil {
                    let (before, replacementsBefore) = (write.changes, write.replacements)
                    outcome = try apply(state)
                    planned = nil
                    // The caller's code closed the store: nothing more reaches the file.
                    if write.shut, writes { throw PrefsError.storeClosed(path: path) }
                    if write.replacements != replacementsBefore, lock != nil {
                        // A write inside the caller's code replaced the file this run holds the lock of: the new
                        // file is locked and looked at before this run's change is applied on top of it.
                        releaseLock(&lock)
                        continue
                    }
                    if write.changes != before, !inBatch { state = guarded.withLock { $0.store } }
                }
                guard let (result, edit) = outcome else { continue }
                if inBatch {
                    state = StoreState(values: [:])  // lets go of memory's values before they change in place
                    applyInBatch(edit)
                    return result
                }
                guard writes else { return result }
                if planned == nil { planned = .some(draft(for: edit, from: state)) }
                guard case .some(.some(var draft)) = planned else { return result }
                if readAgain { draft.rebase(onto: state.values) }
                if try commit(draft, from: state, in: file, checking: foundChanged < 3, renamed: &committed) {
                    return result
                }
                foundChanged += 1
                // The file is read again: a transform runs again on what it holds then (its result was computed from
                // what it held before); other changes are applied again on top of it.
                if case .set = edit { outcome = nil } else { readAgain = true }
                releaseLock(&lock)
            }
        } catch {
            // A batch's values are in memory before its commit: one that fails before its rename goes back to where
            // the batch began, and the file, which a retry may have read since, is read again.
            if !committed, case .batch(let start)? = outcome?.edit {
                guarded.withLock { changes.invalidate($0.store.batchCommitFailed(from: start)) }
                _ = try? look(at: file, access: .look, through: lock)
            }
            throw error
        }
    }

    /// Removes the empty file a lock of this run created for a write that wrote nothing (the run holds its lock).
    private func removeCreatedFile(of file: BoundFile) {
        guard (try? file.fileSystem.remove(file.path)) != nil else { return }
        guarded.withLock { $0.store.emptyFileRemoved() }
    }

    /// Lets go of the file's lock this run took, if any.
    private func releaseLock(_ lock: inout FileLock?) {
        guard let held = lock else { return }
        if write.heldLock === held { write.heldLock = nil }
        held.release()
        lock = nil
    }

    /// What a `.memory` run does outside a batch: the change applied to memory and announced at once, and the
    /// deferred commit scheduled. A file that cannot be read is never overwritten, so nothing is accepted for it.
    private func changeMemory<T>(_ apply: (StoreState) throws -> (T, Edit)) throws -> T {
        var state = guarded.withLock { $0.store }
        let (result, edit) = try apply(state)
        guard case .deferred(let key, let value, let window) = edit else { return result }
        state = StoreState(values: [:])  // lets go of memory's values before they change in place
        let changed = try guarded.withLock { guarded throws in
            if let damage = guarded.store.damage { throw damage }
            guard guarded.store.setInMemory(value, forKey: key, reason: .deferred) else { return false }
            announce([key], of: guarded.store.values)
            return true
        }
        if changed { scheduleCommit(within: window) }
        return result
    }

    /// What a run of an engine without a file does: apply, and memory is the store.
    private func commitInMemory<T>(_ apply: (StoreState) throws -> (T, Edit), inBatch: Bool) throws -> T {
        var state = guarded.withLock { $0.store }
        let before = write.changes
        let (result, edit) = try apply(state)
        // The view lets go of memory's values before they change in place (else they would be copied).
        if inBatch {
            state = StoreState(values: [:])
            applyInBatch(edit)
            return result
        }
        if case .set(let key, let value) = edit {
            state = StoreState(values: [:])
            guarded.withLock { guarded in
                if guarded.store.setInMemory(value, forKey: key, reason: .deferred) {
                    announce([key], of: guarded.store.values)
                }
            }
            return result
        }
        if write.changes != before { state = guarded.withLock { $0.store } }
        guard let draft = draft(for: edit, from: state) else { return result }
        guarded.withLock { guarded in
            let changed = guarded.store.committed(
                draft.values, identity: nil, record: nil, announcedFrom: draft.announcedFrom,
                changedKeys: draft.changedKeys)
            announce(changed, of: guarded.store.values)
        }
        return result
    }

    /// A write inside a batch: memory changes now, readers decode the key again, observers hear at the end.
    private func applyInBatch(_ edit: Edit) {
        guarded.withLock { guarded in
            switch edit {
            case .set(let key, let value), .deferred(let key, let value, _):
                if guarded.store.setInMemory(value, forKey: key, reason: .batch) { changes.invalidate([key]) }
            case .replace(let values):
                changes.invalidate(guarded.store.replaceInMemory(with: values, reason: .batch))
            case .remove(let keys):
                var values = guarded.store.values
                for key in keys { values[key] = nil }
                changes.invalidate(guarded.store.replaceInMemory(with: values, reason: .batch))
            case .none, .keep, .pending, .batch, .rewrite, .moveAside:
                break
            }
        }
    }

    /// Announces the effective value (what reads return) of each of `keys`, given the store's own `values`. Called
    /// holding the state's lock, so announcements keep the order in which values were applied.
    func announce(_ keys: some Collection<String>, of values: [String: PrefValue]) {
        guard !keys.isEmpty else { return }
        changes.announce(
            Dictionary(uniqueKeysWithValues: keys.map { ($0, layers.value(forKey: $0, user: values[$0])) }))
    }
}

extension StoreEngine: OwnValues {
    func ownValue(forKey key: String) -> PrefValue? { guarded.withLock { $0.store.values[key] } }
    func ownValues() -> [String: PrefValue] { guarded.withLock { $0.store.values } }
}
