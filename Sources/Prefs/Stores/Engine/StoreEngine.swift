import Foundation
import Synchronization

/// The engine behind every store Prefs ships but the PostgreSQL one: a ``StoreState`` under one lock, and one
/// function, ``run(_:_:)``, through which everything that changes the store passes: a write, an update, a batch, a
/// deferred window's commit, a flush, the flush at exit or at the last close, restoring a value a stale rewrite put
/// back, moving a damaged file aside, the first load and every later look at the file.
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
        /// The file's lock while a write of this process holds it.
        var heldLock: FileLock?
        /// Reports made holding the locks, told once the run that made them has let go of them.
        var reports: [any Error] = []

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
        return try perform(.write) {
            let old = guarded.withLock { $0.store.values[key] }
            // Layers hook: without a value of the user's, the transform starts from the default below it.
            let new = try transform(old ?? layers.valueBelowUser(key))
            return (new, new == old ? .none : .set(key, new))
        }
    }

    /// Replaces every value at once, in one durable, atomic write.
    func replaceAll(_ values: [String: PrefValue]) throws {
        try perform(.write) { ((), .replace(values)) }
    }

    /// Removes several keys in one durable, atomic write.
    func removeValues(forKeys keys: some Sequence<String>) throws {
        let keys = Array(keys)
        try perform(.write) { ((), .remove(keys)) }
    }

    /// Runs `body` holding the write lock: every write it makes is applied in memory at once and written in one
    /// durable, atomic write when it returns (or, `deferring`, left to the deferred commit within that window).
    /// Observers hear of each changed key once, after that. If `body` or the write throws, memory goes back to the
    /// values before the batch. A batch inside a batch joins it; if the inner one throws, only its own writes are
    /// undone.
    func batch<T>(deferring window: Duration? = nil, _ body: () throws -> T) throws -> T {
        var deferred = false
        let result = try perform(.write) { () throws -> (T, Edit) in
            let (start, outermost) = guarded.withLock { $0.store.beginBatch() }
            let result: T
            do {
                result = try body()
            } catch {
                guarded.withLock { changes.invalidate($0.store.rollBack(to: start, endingBatch: outermost)) }
                throw error
            }
            guard outermost else { return (result, .keep) }
            if window != nil, file != nil {
                // A deferred batch: its changes wait for the deferred commit, announced now.
                deferred = true
                guarded.withLock { guarded in
                    guarded.store.deferBatchChanges()
                    let changed = StoreState.diff(guarded.store.endBatch() ?? [:], guarded.store.values)
                    announce(changed, of: guarded.store.values)
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
            try perform(.write) { () throws -> ((), Edit) in
                if guarded.withLock({ $0.store.inBatch }) {
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
        try perform(.moveAside) { () throws -> (URL?, Edit) in
            guard guarded.withLock({ $0.store.damage }) != nil, let file else { return (nil, .keep) }
            let destination = try Self.asideName(for: file, at: now)
            return (URL(filePath: destination, directoryHint: .notDirectory), .moveAside(destination))
        }
    }

    /// Deletes the file, under its lock, and empties the store: what `prefs delete DOMAIN` does. Observers hear of
    /// every key whose value changed.
    func deleteFile() throws {
        try perform(.moveAside) { () -> ((), Edit) in
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
    /// lock is released, unless this thread is inside another run of this engine, whose end delivers.
    @discardableResult
    func perform<T>(_ access: Access, delivering: Bool = true, _ apply: () throws -> (T, Edit)) throws -> T {
        var outermost = false
        defer {
            if outermost, delivering {
                changes.deliverAnnouncements()
                let reports = guarded.withLock { guarded in
                    defer { guarded.reports = [] }
                    return guarded.reports
                }
                for report in reports { ErrorReporter.report(report, key: "", operation: .read) }
            }
        }
        return try run(access, &outermost, apply)
    }

    /// The transaction itself: see the type's description. Sets `outermost` when this thread is in no other run of
    /// this engine.
    private func run<T>(_ access: Access, _ outermost: inout Bool, _ apply: () throws -> (T, Edit)) throws -> T {
        writer.lock()
        defer { writer.unlock() }
        let (isOutermost, inBatch) = try guarded.withLock { guarded throws in
            if guarded.store.isShut, access != .load { throw PrefsError.storeClosed(path: path) }
            if access == .look { guarded.lookQueued = false }  // a later event needs a later look
            return (guarded.store.beginWrite(), guarded.store.inBatch)
        }
        outermost = isOutermost
        defer { guarded.withLock { $0.store.endWrite() } }
        guard let file else { return try commitInMemory(apply, inBatch: inBatch) }
        let writes = access == .write || access == .moveAside
        // The file's lock, taken by the first run that writes while the file exists and held until it ends; a run
        // inside it (a write in a transform) commits under it. A file that appears, or is replaced under the lock by
        // a writer that takes none, is locked afresh.
        var lock: FileLock?
        defer { releaseLock(&lock) }
        // A write that ends without a commit (nothing to write, or a failure) takes back the empty file its lock
        // created: nothing is left of it.
        var committed = false
        defer { if !committed, let lock, lock.createdEmpty { removeCreatedFile(of: file) } }
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
                if writes, !inBatch, lock == nil, guarded.withLock({ $0.heldLock == nil }) {
                    let taken = try file.fileSystem.lock(file.path, timeout: LockWait.timeout, clock: file.clock)
                    lock = taken
                    guarded.withLock { $0.heldLock = taken }
                }
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
                    case .ready:
                        break
                    }
                }
                if outcome == nil {
                    outcome = try apply()
                    planned = nil
                }
                guard let (result, edit) = outcome else { continue }
                if inBatch {
                    applyInBatch(edit)
                    return result
                }
                guard writes else { return result }
                if planned == nil { planned = .some(draft(for: edit)) }
                guard case .some(.some(var draft)) = planned else { return result }
                if readAgain { draft.rebase(onto: guarded.withLock { $0.store.values }) }
                if try commit(draft, in: file, checking: foundChanged < 3, renamed: &committed) { return result }
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
        guarded.withLock { if $0.heldLock === held { $0.heldLock = nil } }
        held.release()
        lock = nil
    }

    /// What a run of an engine without a file does: apply, and memory is the store.
    private func commitInMemory<T>(_ apply: () throws -> (T, Edit), inBatch: Bool) throws -> T {
        let (result, edit) = try apply()
        if inBatch {
            applyInBatch(edit)
        } else if let draft = draft(for: edit) {
            guarded.withLock { guarded in
                let changed = guarded.store.committed(
                    draft.values, identity: nil, record: nil, announcedFrom: draft.announcedFrom,
                    changedKeys: draft.changedKeys)
                announce(changed, of: guarded.store.values)
            }
        }
        return result
    }

    /// A write inside a batch: memory changes now, readers decode the key again, observers hear at the end.
    private func applyInBatch(_ edit: Edit) {
        guarded.withLock { guarded in
            switch edit {
            case .set(let key, let value):
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

    /// The values a commit writes.
    private struct Draft {
        var values: [String: PrefValue]
        /// The keys changed, when known (else every key is compared).
        var changedKeys: Set<String>?
        /// The values observers last heard of, when they are not memory's (a batch's start).
        var announcedFrom: [String: PrefValue]?
        /// Write even if nothing changed.
        var force = false
        /// Where the file goes instead: `.some(nil)` deleted, `.some(name)` renamed.
        var moveAside: String??
        /// This run's own changes, to apply again on top of a file changed under the lock.
        var own: [String: PrefValue?] = [:]
        /// The whole content this run writes, whatever the file holds (an import).
        var replacement: [String: PrefValue]?

        mutating func rebase(onto latest: [String: PrefValue]) {
            values = replacement ?? latest
            for (key, value) in own { values[key] = value }
        }
    }

    /// The draft for `edit`, from the latest values; nil when there is nothing to write.
    private func draft(for edit: Edit) -> Draft? {
        guarded.withLock { guarded -> Draft? in
            let values = guarded.store.values
            let pending = guarded.store.needsWrite
            switch edit {
            case .keep:
                return nil
            case .none:
                return guarded.store.hasRestoredValues ? Draft(values: values, changedKeys: []) : nil
            case .pending:
                return pending ? Draft(values: values, changedKeys: []) : nil
            case .set(let key, let value):
                guard values[key] != value else { return nil }
                var draft = Draft(values: values, changedKeys: [key], own: [key: value])
                draft.values[key] = value
                return draft
            case .replace(let new):
                guard new != values else { return nil }
                return Draft(values: new, replacement: new)
            case .remove(let keys):
                let present = keys.filter { values[$0] != nil }
                guard !present.isEmpty else { return nil }
                var draft = Draft(values: values, changedKeys: Set(present))
                for key in present {
                    draft.values[key] = nil
                    draft.own.updateValue(nil, forKey: key)
                }
                return draft
            case .batch:
                let start = guarded.store.endBatch()
                guard pending || (start != nil && start != values) else { return nil }
                // Its changes are in memory, which a file changed under the lock replaces: kept to apply again.
                let own = guarded.store.unwritten(.batch).map { ($0, values[$0]) }
                return Draft(values: values, announcedFrom: start, own: Dictionary(uniqueKeysWithValues: own))
            case .rewrite:
                return Draft(values: values, changedKeys: [], force: true)
            case .moveAside(let destination):
                return Draft(values: [:], moveAside: destination)
            }
        }
    }

    /// The outcome of a look at the file.
    private enum Look {
        case ready
        /// It does not decode, and may be halfway through another writer's in-place rewrite.
        case suspect
        case damaged(any Error)
        /// A look found the file changed while a writer holds its lock: it looks again after that commit.
        case busy
    }

    /// How soon a look that found a writer in the middle of a commit looks again.
    static let busyRetry: Duration = .milliseconds(2)

    /// Looks at the file and loads it when it changed; announces what changed unless this is the first load.
    ///
    /// A `stat` decides in the common case: the file is the one the values came from (this process's own commit
    /// among them, whose modification time was set back) and nothing is read. A file changed by another writer is
    /// read holding a lock of it (the write's, or a shared one for a look), so that what is loaded, restored and
    /// reported rests on one commit's file and commit file; the first load of a file whose writer is in the middle
    /// of a commit reads it without, and the next write reads it again under its lock.
    private func look(at file: BoundFile, access: Access, through lock: FileLock?) throws -> Look {
        let fileSystem = file.fileSystem
        let current = try prefsIO { () throws(SystemCallError) in try fileSystem.identity(at: file.path) }
        let refresh = guarded.withLock { $0.store.refresh(currentIdentity: current, writing: lock != nil) }
        if refresh == .upToDate { return .ready }
        if refresh == .cleared {
            load([:], contents: nil, in: file, announcing: access != .load)
            return .ready
        }
        var reader = lock
        var shared: FileLock?
        defer { shared?.release() }
        if reader == nil {
            do {
                shared = try fileSystem.lockShared(file.path)
                if shared == nil, access == .look { return .busy }
                if shared == nil { shared = waitForSharedLock(of: file) }
            } catch {
                // A name that cannot be locked (a folder in the file's place): its read below says what it is.
            }
            reader = shared
        }
        let contents: FileContents?
        do throws(any Error) {
            // A file that cannot even be read (a folder in its place, no permission) is unreadable like one that
            // cannot be decoded: never overwritten, reported, and recovered from once it reads again.
            contents = try prefsIO { () throws(SystemCallError) in try fileSystem.read(file.path, through: reader) }
        } catch {
            return unreadable(Self.namingTheWayOut(error), in: file, access: access)
        }
        guard let contents else {
            load([:], contents: nil, in: file, announcing: access != .load)
            return .ready
        }
        let hash = StableHash.ofContents(contents.data)
        if refresh == .compareBytes, guarded.withLock({ $0.store.file?.contentHash }) == hash {
            let racy = fileSystem.isRacy(contents.identity)
            guarded.withLock { $0.store.bytesUnchanged(racy: racy) }
            return .ready
        }
        // The commit file, read under the same lock as the file; a look lets go of its shared lock at once, so that
        // writers waiting for the file are held up by two reads at most, never by decoding.
        let commitFile = try? fileSystem.read(CommitFile.path(of: file.path), through: nil)
        shared?.release()
        let values: [String: PrefValue]
        if contents.data.isEmpty {
            // An empty file holds no values: the one a write's lock creates, or one emptied by anyone. A suite's may
            // be Foundation's in-place rewrite halfway, and is waited for through the grace when that cannot be
            // ruled out: it was emptied within the last tick, or Prefs last committed it with values (Linux
            // updates a truncated file's size before its times, so its times alone do not tell).
            if lock?.createdEmpty != true, emptySuiteMayBeRewriting(contents, commitFile: commitFile, in: file) {
                let verdict = unreadable(Self.emptyFile(file), in: file, access: access, emptyFile: true)
                if case .damaged = verdict {} else { return verdict }
            }
            do throws(any Error) {
                values = lock?.createdEmpty == true ? [:] : try file.codec.decodeEmpty(path: file.path)
            } catch {
                return unreadable(Self.namingTheWayOut(error), in: file, access: access)
            }
        } else {
            do throws(any Error) {
                values = try file.codec.decode(contents.data, path: file.path)
            } catch {
                return unreadable(Self.namingTheWayOut(error), in: file, access: access)
            }
        }
        load(
            values, contents: contents, commitFile: commitFile?.data, hash: hash, in: file,
            announcing: access != .load, verified: reader != nil)
        return .ready
    }

    /// Whether an empty suite file may be another writer's in-place rewrite halfway: it changed within the last
    /// tick, or the commit file beside it says Prefs last committed it with values.
    private func emptySuiteMayBeRewriting(_ contents: FileContents, commitFile: FileContents?, in file: BoundFile)
        -> Bool
    {
        guard guarded.withLock({ ($0.store.file?.grace ?? .zero) > .zero }) else { return false }
        if file.fileSystem.isRacy(contents.identity) { return true }
        guard let record = commitFile.flatMap({ CommitFile.decode($0.data) })?.record else { return false }
        return record.contentSize > 0 && !record.describesPrevious(Data())
    }

    /// The first load of a file whose writer is in the middle of a commit waits for that commit (a few
    /// milliseconds), at most the lock's timeout (a writer stopped with its lock held): nil then, and the file is
    /// read without a lock, for the next write to read again under its own.
    private func waitForSharedLock(of file: BoundFile) -> FileLock? {
        let start = file.clock.now()
        var pause = Duration.microseconds(100)
        while file.clock.now() - start < LockWait.timeout {
            file.clock.pause(pause)
            pause = min(pause * 2, .milliseconds(5))
            guard (try? file.fileSystem.identity(at: file.path)) != nil else { return nil }
            if let lock = try? file.fileSystem.lockShared(file.path) { return lock }
        }
        return nil
    }

    /// What an empty suite is while it may be halfway through an in-place rewrite.
    private static func emptyFile(_ file: BoundFile) -> any Error {
        PrefsError.corruptFile(path: file.path, reason: "the file is empty")
    }

    /// Whether the file is still the one the values came from, checked under its lock just before a commit's
    /// rename: the same identity, and, when that identity may hide an in-place rewrite (``StoreState/Refresh``),
    /// the same bytes. When only the bytes differ, the next look reads the file again.
    private func fileIsAsRead(_ file: BoundFile, base: FileIdentity?) -> Bool {
        guard (try? file.fileSystem.identity(at: file.path)) == base else { return false }
        guard base != nil, let (known, racy) = guarded.withLock({ $0.store.file.map { ($0.contentHash, $0.racy) } }),
            racy, let known
        else { return true }
        if let now = try? file.fileSystem.read(file.path, through: nil), StableHash.ofContents(now.data) == known {
            return true
        }
        guarded.withLock { $0.store.changedInPlace() }
        return false
    }

    /// The first load waits this long for a file being rewritten in place that stopped changing before it counts
    /// it as damaged: a writer at work changes it more often than that.
    static let rewriteQuiet: Duration = .milliseconds(200)

    /// A file that could not be decoded: suspect while it may be another writer's rewrite in progress, damaged
    /// after the grace (reported once, and told to `damageUpdates()`).
    /// `emptyFile`: the file is empty; past the grace it holds no values rather than being damaged (the caller
    /// loads it), and nothing is published.
    private func unreadable(_ error: any Error, in file: BoundFile, access: Access, emptyFile: Bool = false) -> Look {
        let now = file.clock.now()
        let seen = access == .load ? try? file.fileSystem.identity(at: file.path) : nil
        let verdict = guarded.withLock { guarded -> StoreState.Unreadable in
            // At the first load a file that has not changed for a while is not being rewritten: damaged at once.
            guard access == .load, let grace = guarded.store.file?.grace, grace > .zero else {
                return guarded.store.failedToDecode(error, at: now)
            }
            // The first load of a suite: a file that keeps changing is being rewritten, and is waited for (up to
            // the lock's timeout); one that is not empty and has stopped changing for a while is damaged at once.
            if guarded.firstLoadSeen == nil || seen != guarded.firstLoadSeen?.identity {
                guarded.firstLoadSeen = (seen, now)
            }
            let quietFor = now - (guarded.firstLoadSeen?.since ?? now)
            let changing = quietFor < Self.rewriteQuiet || ((seen?.size ?? 0) == 0 && quietFor < grace)
            return guarded.store.failedToDecode(
                error, at: now, graceful: changing, limit: max(grace, LockWait.timeout))
        }
        switch verdict {
        case .damaged:
            if !emptyFile { publishDamage() }
            return .damaged(error)
        case .suspect(let recheck, let schedule):
            if access == .look {
                if schedule { scheduleLook(after: recheck + .milliseconds(20)) }
                return .ready
            }
            return .suspect
        }
    }

    /// Takes newly read values (nil contents: no file), with the bytes of the commit file beside it, read with the
    /// file: only when another writer changed it. `verified`: both were read under a lock of the file.
    private func load(
        _ values: [String: PrefValue], contents: FileContents?, commitFile commitFileData: Data? = nil,
        hash: UInt64? = nil, in file: BoundFile, announcing: Bool, verified: Bool = true
    ) {
        var record: CommitRecord?
        var lastCommit: [String: PrefValue]?
        var intact = true
        if let contents {
            let commitFile = commitFileData.flatMap(CommitFile.decode)
            intact = commitFile?.record.describes(contents.data) ?? false
            // A record whose commit never reached the file (its writer stopped before the rename) tells nothing.
            if let commitFile, intact || !commitFile.record.describesPrevious(contents.data) {
                record = commitFile.record
                if !intact, let copy = commitFile.copy {
                    lastCommit = try? file.codec.decode(copy, path: CommitFile.path(of: file.path))
                }
            }
        }
        let now = file.clock.now()
        let racy = contents.map { file.fileSystem.isRacy($0.identity) } ?? false
        let recovered = guarded.withLock { guarded -> Bool in
            let recovered = guarded.store.damage != nil
            let changed = guarded.store.load(
                values, identity: contents?.identity,
                contentHash: contents.map { hash ?? StableHash.ofContents($0.data) }, record: record, intact: intact,
                now: now, keyHash: file.codec.recordHash, lastCommit: lastCommit, racy: racy, verified: verified)
            if announcing { announce(changed, of: guarded.store.values) }
            return recovered
        }
        if recovered {
            ErrorReporter.forgetIncidents(of: changes)
            publishDamage()
        }
    }

    /// A store file that cannot be decoded, with what to do about it in the one report the app gets.
    private static func namingTheWayOut(_ error: any Error) -> any Error {
        guard case .corruptFile(let path, let reason)? = error as? PrefsError else { return error }
        return PrefsError.corruptFile(path: path, reason: reason + PrefsError.damagedFileWayOut)
    }

    /// Commits `draft`: encode, temporary file, the check that the file is still the one read (`checking`), the
    /// rename, the folder sync; then memory follows the file and the changes are announced. Returns false when the
    /// file changed under the lock (the run reads it and applies its change again); nothing was written then.
    private func commit(_ draft: Draft, in file: BoundFile, checking: Bool, renamed: inout Bool) throws -> Bool {
        let fileSystem = file.fileSystem
        let now = file.clock.now()
        if case .some(let destination) = draft.moveAside {
            renamed = true
            return try moveAside(to: destination, in: file)
        }
        let data = try file.codec.encode(draft.values)
        if data.count > POSIX.maximumFileSize {
            throw PrefsError.tooLarge(path: file.path, size: data.count, limit: POSIX.maximumFileSize)
        }
        // After encoding: a vault's key hashes need the key the encoding resolved.
        let (base, sweep) = guarded.withLock { ($0.store.file?.identity, $0.store.takeSweep()) }
        var record = guarded.withLock {
            $0.store.commitRecord(
                for: draft.values, changedKeys: draft.changedKeys, now: now, keyHash: file.codec.recordHash,
                freshLineage: draft.force)
        }
        record.contentSize = UInt64(data.count)
        record.contentHash = StableHash.ofContents(data)
        if sweep, base != nil { fileSystem.removeStaleTemporaries(beside: file.path) }
        let temporary = try prefsIO { () throws(SystemCallError) in
            try fileSystem.writeTemporary(beside: file.path, data: data, mode: 0o600, durable: true)
        }
        // Under the lock only a writer that takes none (Foundation rewriting a suite in place, someone deleting the
        // file) changes the file: its change is read, and this one applied on top.
        if checking, !fileIsAsRead(file, base: base) {
            fileSystem.discard(temporary)
            return false
        }
        // The commit file, in place, before the rename and under the lock: a process that reads the new file under
        // its lock finds the record of it. A suite whose in-place rewriter was seen keeps a copy of the bytes too.
        let keepsCopy = record.rewriterSeen && guarded.withLock { $0.store.file?.restoresStaleRewrites ?? false }
        try? fileSystem.overwrite(
            CommitFile.path(of: file.path), with: CommitFile.encode(record, copy: keepsCopy ? data : nil),
            mode: 0o600)
        let identity: FileIdentity
        do {
            identity = try fileSystem.commit(temporary, to: file.path)
        } catch is CommitRace {
            return false
        }
        renamed = true
        // Past the rename the values are in the file even if the folder sync fails: memory, the codec and the
        // observers follow the file, and the error says the write took effect.
        var committedError: PrefsError?
        do {
            try fileSystem.syncFolder(of: file.path)
        } catch {
            committedError = .durabilityNotConfirmed(
                path: file.path, operation: error.operation + " " + error.path, errno: error.errno,
                message: error.message)
        }
        ErrorReporter.writeReachedTheFile(of: changes)
        let racy = fileSystem.isRacy(identity)
        guarded.withLock { guarded in
            let changed = guarded.store.committed(
                draft.values, identity: identity, record: record, announcedFrom: draft.announcedFrom,
                changedKeys: draft.changedKeys, racy: racy)
            announce(changed, of: guarded.store.values)
        }
        file.codec.didCommit()
        if let committedError { throw committedError }
        return true
    }

    /// Moves the damaged file to a free `<name>.damaged-<UTC date and time>` beside it, empties the store and leaves
    /// the report of where it went for the end of the run.
    private func keepAside(_ file: BoundFile, damagedBy error: any Error, at now: Date = Date()) throws {
        let destination = try Self.asideName(for: file, at: now)
        _ = try moveAside(to: destination, in: file)
        let reason: String
        // What happened only: the way out the unreadable file's error names is taken now.
        if case .corruptFile(_, let text)? = error as? PrefsError {
            reason = PrefsError.reasonAlone(text)
        } else {
            reason = "\(error)"
        }
        let report = PrefsError.damagedFileKeptAside(path: file.path, keptAt: destination, reason: reason)
        guarded.withLock { $0.reports.append(report) }
    }

    /// `<path>.damaged-<UTC date and time>`, or with `-2`, `-3`… when that is taken.
    private static func asideName(for file: BoundFile, at now: Date) throws -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        let name = file.path + ".damaged-" + formatter.string(from: now)
        var destination = name
        for suffix in 2..<100
        where try prefsIO({ () throws(SystemCallError) in try file.fileSystem.identity(at: destination) }) != nil {
            destination = name + "-\(suffix)"
        }
        return destination
    }

    /// Moves the file to `destination` (nil: deletes it, with a suite's commit copy) and empties the store.
    private func moveAside(to destination: String?, in file: BoundFile) throws -> Bool {
        try prefsIO { () throws(SystemCallError) in
            if let destination {
                try file.fileSystem.move(file.path, to: destination)
            } else {
                try file.fileSystem.remove(file.path)
                try? file.fileSystem.remove(CommitFile.path(of: file.path))
            }
        }
        try? file.fileSystem.syncFolder(of: file.path)
        guarded.withLock { guarded in
            let changed = guarded.store.cleared()
            announce(changed, of: guarded.store.values)
        }
        publishDamage()
        ErrorReporter.forgetIncidents(of: changes)
        return true
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
