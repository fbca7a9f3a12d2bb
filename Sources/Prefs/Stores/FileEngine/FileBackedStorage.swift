import Foundation
import Synchronization

/// The machinery shared by every file-backed store: an in-memory snapshot that serves reads, durable atomic
/// writes under a cross-process lock, reloads when another process replaces the file, and change announcements
/// of exactly the keys whose values changed.
final class FileBackedStorage: Sendable {
    let file: LockedFile
    let codec: any SnapshotCodec
    let changes: ChangeFeed
    /// The layers merged over and under the file's values (registered defaults at least); see `Stores/Layers`.
    let layers: StoreLayers

    /// Everything the engine knows: values, the file's health, deferred keys, the write in progress.
    let snapshot: Mutex<StoreState>
    /// Serialises writers in this process; recursive so a transform may itself write to the same store.
    let writer = NSRecursiveLock()
    private let watch = Mutex<FileWatchToken?>(nil)
    /// For a UserDefaults suite: restores Prefs commits that a foreign in-place rewrite undid (see
    /// `ForeignRewriteGuard`); nil for files only Prefs writes.
    let rewriteGuard: ForeignRewriteGuard?
    /// Commits the changes made in memory by deferred writes (see `DeferredCommitter.swift`).
    let committer = DeferredCommitter()

    var path: String { file.url.path }

    /// Opens the storage, loading the file if it exists. Throws when the file exists but cannot be read or
    /// decoded; the file is left untouched.
    /// - Parameter unreadableGrace: How long the file may stay unreadable (another writer rewriting it in place)
    ///   before the storage counts as damaged; zero for files only Prefs writes.
    init(
        url: URL, lockURL: URL? = nil, codec: any SnapshotCodec, changes: ChangeFeed = ChangeFeed(),
        unreadableGrace: Duration = .zero, guardingForeignRewrites: Bool = false
    ) {
        self.snapshot = Mutex(StoreState(grace: unreadableGrace))
        self.file = LockedFile(url: url, lockURL: lockURL)
        self.rewriteGuard = guardingForeignRewrites ? ForeignRewriteGuard(path: file.path) : nil
        self.codec = codec
        self.changes = changes
        self.layers = StoreLayers(changes: changes)
        layers.attach(self)
    }

    deinit {
        watch.withLock { $0?.cancel() }
        try? commitDeferred(retrying: false)  // deferred writes still in memory; a failure is reported
    }

    // MARK: Lifetime

    /// How many open stores use this storage; at zero it shuts down. Nil once it has shut down.
    private let openStores = Mutex<Int?>(0)

    /// Whether the storage has shut down (every store on it closed): the registry then opens a new one.
    var isShut: Bool { openStores.withLock { $0 == nil } }

    /// Called by each store that uses this storage, when it is made. A storage that has shut stays shut: a store
    /// made from a closed one (`deferringWrites()`) is closed too.
    func retain() { openStores.withLock { $0 = $0.map { $0 + 1 } } }

    /// Called by each store that uses this storage when it is closed (or deinitialised unclosed). The last one
    /// stops the watch and closes the lock file, after any write in progress has finished.
    func release() {
        let last = openStores.withLock { count -> Bool in
            guard let current = count else { return false }
            if current > 1 {
                count = current - 1
                return false
            }
            return true
        }
        guard last else { return }
        // Deferred writes still in memory reach the file first (a failure is reported), then the storage shuts.
        try? commitDeferred(retrying: false)
        openStores.withLock { $0 = nil }
        watch.withLock { token in
            token?.cancel()
            token = nil
        }
        writer.lock()
        defer { writer.unlock() }
        file.closeLock()
    }

    /// Throws ``PrefsError/storeClosed(path:)`` once the storage has shut down.
    func checkOpen() throws {
        if isShut { throw PrefsError.storeClosed(path: path) }
    }

    /// Loads the file now (missing is an empty store) and starts watching it for other processes' writes. A file
    /// that cannot be decoded is watched all the same, so the store recovers when it is repaired; the error is
    /// thrown after the watch is in place.
    ///
    /// The first load takes no lock (so opening creates no lock file): files are only ever replaced by an atomic
    /// rename, so reading the current file always gets one complete version, and its identity comes from the
    /// descriptor that was read. Nothing in this process can write this storage before `open` returns.
    ///
    /// A write by another process between that load and the start of watching would raise no event, so once the
    /// watch is in place the file's identity is checked again and a changed file is reloaded under the lock.
    func open() throws {
        let failure: (any Error)?
        do {
            // No grace at the first load: nothing has been served yet, and a file that cannot be read is refused
            // at once (and watched, so the store recovers when the file is repaired or its rewrite finishes).
            try loadFirst()
            failure = nil
        } catch {
            failure = error
        }
        startWatching()
        if let failure { throw failure }
        let loaded = snapshot.withLock { $0.identity }
        if try file.identity() != loaded { reloadFromDisk() }
    }

    /// The error that keeps the file from being read, if any.
    var damage: (any Error)? { snapshot.withLock { $0.damage } }

    /// The streams of `damageUpdates()`, and whether they were last told the file is damaged.
    private let damageWatchers = Mutex<(told: Bool?, next: UInt64, streams: [UInt64: DamageStream.Continuation])>(
        (nil, 0, [:]))
    typealias DamageStream = AsyncStream<(any Error)?>

    /// The file's damage now (nil: it reads), then each time that changes.
    func damageUpdates() -> DamageStream {
        let (stream, continuation) = DamageStream.makeStream()
        let id = damageWatchers.withLock { watchers in
            watchers.next += 1
            watchers.streams[watchers.next] = continuation
            return watchers.next
        }
        continuation.yield(damage)
        continuation.onTermination = { [weak self] _ in
            self?.damageWatchers.withLock { _ = $0.streams.removeValue(forKey: id) }
        }
        return stream
    }

    /// Tells the streams of `damageUpdates()` when the file became damaged or readable again.
    private func publishDamage() {
        // Read under the watchers' lock, so that two threads telling of two changes tell them in order.
        damageWatchers.withLock { watchers in
            let damage = self.damage
            guard watchers.told != (damage != nil) else { return }
            watchers.told = damage != nil
            for stream in watchers.streams.values { stream.yield(damage) }
        }
    }

    private func startWatching() {
        let token = DirectoryWatcher.shared.watch(fileAt: file.resolvedURL) { [weak self] in
            self?.reloadFromDisk()
        }
        watch.withLock { $0 = token }
    }

    /// Called by the watcher when the file's folder changed: reload and announce what changed. A file that cannot
    /// be decoded is reported only once it has stayed unreadable for the grace period (see `StoreState`).
    func reloadFromDisk() {
        if isShut { return }
        // Most events are this store's own writes, or other files in the folder: when the file is still the one
        // the values came from there is nothing to read, and no reason to take the lock a writer may be waiting
        // for. Comparing identities needs no lock; reading the file does.
        if let current = try? file.identity(), !snapshot.withLock({ $0.isNews(currentIdentity: current) }) { return }
        // Often this process's own rename, seen before the write recorded it: rather than wait for the write to end
        // (spinning, then making the next write wait in turn), let the write look again when it ends.
        if snapshot.withLock({ $0.deferEventToWrite() }) { return }
        let before = snapshot.withLock { $0.identity }
        do {
            try file.withLock(.shared) { try refreshLocked() }
        } catch {
            ErrorReporter.reportOnce(
                error, key: "", operation: .read, source: changes, file: file.url.path(percentEncoded: false))
        }
        changes.deliverAnnouncements()
        // The event may have been this process's own write, seen before it recorded the file's new identity:
        // nothing was loaded then, and there is nothing to restore.
        if snapshot.withLock({ $0.identity }) != before { restoreAfterForeignRewrite() }
    }

    /// Looks at a suspect file again once its grace period is over, in case no watcher event comes.
    private func scheduleRecheck(after delay: Duration) {
        EngineClock.current.schedule(delay + .milliseconds(20), .global()) { [weak self] in
            guard let self else { return }
            self.snapshot.withLock { $0.recheckScheduled = false }
            self.reloadFromDisk()
        }
    }

    // MARK: Reads

    func value(forKey key: String) throws -> PrefValue? {
        try checkOpen()
        // Layers hook: reads come from the merged snapshot.
        let (value, damage) = snapshot.withLock { (layers.value(forKey: key, user: $0.values[key]), $0.damage) }
        if let damage { throw damage }
        return value
    }

    func allValues() throws -> [String: PrefValue] {
        try checkOpen()
        let (values, damage) = snapshot.withLock { ($0.values, $0.damage) }
        if let damage { throw damage }
        return values
    }

    // MARK: Writes

    /// Reads, transforms and durably writes one key while holding the cross-process lock.
    @discardableResult
    func update(forKey key: String, _ transform: (PrefValue?) throws -> PrefValue?) throws -> PrefValue? {
        try validateKey(key)
        try layers.checkWritable(key)  // Layers hook: a forced key is refused.
        defer { changes.deliverAnnouncements() }
        return try redoingIfAnotherWriterCommitted {
            try withWriteLock { () throws -> PrefValue? in
                try refreshWaitingForReadableFile()
                let old = snapshot.withLock { $0.values[key] }
                // Layers hook: without a value of the user's, the transform starts from the default below it.
                let new = try transform(old ?? layers.valueBelowUser(key))
                guard new != old else { return new }
                // The transform may have written other keys through this store: apply on top of the latest state.
                var next = snapshot.withLock { $0.values }
                next[key] = new
                try write(next, changing: key)
                return new
            }
        }
    }

    /// Runs a whole read-modify-write again when its commit found that another process wrote the file after the
    /// lock file it held was removed (see `LockedFile.writeAtomically`): the change is redone on the new values, so
    /// no update is lost. Only then does a transform run a second time.
    private func redoingIfAnotherWriterCommitted<T>(_ body: () throws -> T) throws -> T {
        var attempts = 0
        while true {
            do {
                return try body()
            } catch is LockLostError {
                attempts += 1
                if attempts >= 100 { throw lockLostError(operation: "write") }
            }
        }
    }

    private func lockLostError(operation: String) -> PrefsError {
        .io(
            path: path, operation: operation, errno: ESTALE,
            message: "the lock file was removed during the write and another process changed the file meanwhile; "
                + "nothing was written")
    }

    /// Replaces every value at once (imports), durably and atomically.
    func replaceAll(_ values: [String: PrefValue]) throws {
        for key in values.keys { try validateKey(key) }
        try edit { $0 = values }
    }

    /// Removes several keys in one durable, atomic write.
    func removeValues(forKeys keys: some Sequence<String>) throws {
        try edit { values in
            for key in keys { values.removeValue(forKey: key) }
        }
    }

    /// Applies `change` to the latest values under the cross-process lock and writes the result in one atomic,
    /// durable write (none if nothing changed), then announces exactly the keys whose values changed.
    func edit(_ change: (inout [String: PrefValue]) throws -> Void) throws {
        defer { changes.deliverAnnouncements() }
        try redoingIfAnotherWriterCommitted {
            try withWriteLock {
                try refreshWaitingForReadableFile()
                let old = snapshot.withLock { $0.values }
                var new = old
                try change(&new)
                guard new != old else { return }
                try write(new)
            }
        }
    }

    /// Writes the deferred changes in memory on the path every write takes: under the cross-process lock, on top of
    /// the file's latest values (a key another writer changed since it was deferred gives way), with the base check
    /// and the record against foreign rewrites, the size rule, and a redo when the lock file was lost meanwhile.
    /// Nothing deferred, nothing written.
    func commitDeferredChanges() throws {
        try redoingIfAnotherWriterCommitted {
            try withWriteLock {
                try refreshWaitingForReadableFile()
                let (values, deferred) = snapshot.withLock { ($0.values, !$0.pending.isEmpty) }
                if deferred { try write(values) }
            }
        }
    }

    /// Re-encodes the current values after `prepare` changed the codec (a new vault key). `prepare` returns how
    /// to undo its change, which runs if the write fails before its commit point, so the codec keeps matching the
    /// file; after the rename the new key stays, whatever is thrown.
    func rewrite(prepare: () throws -> () -> Void) throws {
        try withWriteLock {
            try refreshWaitingForReadableFile()
            if snapshot.withLock({ $0.inBatch }) {
                throw PrefsError.io(
                    path: path, operation: "re-encrypt", errno: EBUSY,
                    message: "the vault key cannot change inside a batch; change it before or after")
            }
            let undo = try prepare()
            do { try write(snapshot.withLock { $0.values }) } catch  where !error.isCommitted {
                undo()  // the file is still under the old key
                if error is LockLostError { throw lockLostError(operation: "re-encrypt") }
                throw error
            }
        }
    }

    /// Moves a file that cannot be decoded aside, keeping it as `<name>.damaged-<UTC date and time>` in the same
    /// folder, and starts afresh with no values; returns where it went, or nil when the file reads fine (nothing is
    /// moved). Holds the exclusive lock, so no Prefs writer is in the middle of it.
    func moveDamagedFileAside(at now: Date = Date()) throws -> URL? {
        defer { changes.deliverAnnouncements() }
        return try withWriteLock { () throws -> URL? in
            do {
                try refreshWaitingForReadableFile()
                return nil
            } catch {
                guard snapshot.withLock({ $0.damage }) != nil else { throw error }
            }
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "UTC")
            formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
            var destination = file.path + ".damaged-" + formatter.string(from: now)
            var suffix = 1
            while FileManager.default.fileExists(atPath: destination) {
                suffix += 1
                destination = file.path + ".damaged-" + formatter.string(from: now) + "-\(suffix)"
            }
            guard rename(file.path, destination) == 0 else {
                throw SystemCallError(path: file.path, operation: "move aside").prefsError
            }
            try? POSIX.syncDirectory(atPath: file.directoryPath)
            load([:], identity: nil, announcing: true)
            return URL(filePath: destination, directoryHint: .notDirectory)
        }
    }

    // MARK: Batches

    /// Runs `body` holding the write lock; every write it makes is applied in memory at once and written to the
    /// file in one durable, atomic write when it returns. Observers hear of each changed key once, after that
    /// write. If `body` or the write throws, nothing is written and memory goes back to the values before the
    /// batch. A batch inside a batch joins it; if the inner one throws, only its own writes are undone.
    /// With `window`, the batch is deferred: its values are committed with the other deferred writes, in one write.
    func batch<T>(deferringWithin window: Duration? = nil, _ body: () throws -> T) throws -> T {
        defer { changes.deliverAnnouncements() }
        return try withWriteLock { () throws -> T in
            try refreshWaitingForReadableFile()  // inside a batch, nothing to do: its values are in memory
            let entry = snapshot.withLock { $0.beginBatch() }
            let result: T
            do {
                result = try body()
            } catch {
                // Nothing reached the file: memory goes back to the values before this batch, silently.
                snapshot.withLock { changes.invalidate($0.abandonBatch(entry)) }
                throw error
            }
            // A nested batch joins the outer one, which writes its values.
            guard case .outermost = entry, case .write(let final, let start) = snapshot.withLock({ $0.endBatch() })
            else { return result }
            if let window {
                deferBatch(from: start, within: window)
                return result
            }
            do {
                try write(final, committingBatchFrom: start)
            } catch  where !error.isCommitted {
                snapshot.withLock { changes.invalidate($0.rollBack(to: start)) }
                // The body is never run again (it may have done more than write preferences): the caller decides.
                // Memory follows the other writer's file at once.
                if error is LockLostError {
                    try? refreshLocked()
                    throw lockLostError(operation: "write batch")
                }
                throw error
            }
            return result
        }
    }

    /// Inside a batch: makes `values` current in memory without writing the file or announcing, and moves the
    /// changed keys to a new version so every cached read (any wrapper, any thread) decodes them again.
    /// `key`, when given, is the only key whose value differs from the current one: nothing else is compared.
    private func applyInBatch(_ values: [String: PrefValue], changing key: String? = nil) {
        snapshot.withLock { state in
            let changed = key.map { [$0] } ?? StoreState.diff(state.values, values)
            state.values = values
            changes.invalidate(changed)
        }
    }

    /// Writes `values` as the file's new contents. `key`, when given, is the only key whose value differs from the
    /// current one (a single-key update): the snapshot and the layers then compare nothing else, where comparing
    /// every key cost a 10 000-key store more than encoding it.
    private func write(
        _ values: [String: PrefValue], changing key: String? = nil,
        committingBatchFrom batchValues: [String: PrefValue]? = nil
    ) throws {
        if batchValues == nil, snapshot.withLock({ $0.inBatch }) {
            applyInBatch(values, changing: key)
            return
        }
        // Past the rename the new values are in effect even if a later step (syncing the folder) fails: memory, the
        // layers and the codec follow the file, observers hear of it, and the error (`isCommitted`) is rethrown.
        let (identity, committedError): (FileIdentity?, (any Error)?)
        do {
            (identity, committedError) = try replaceFile(
                with: values, expecting: .some(snapshot.withLock { $0.identity }), beforeCommit: baseCheck())
        } catch is ForeignRewriteGuard.BaseChanged {
            // Rewritten in place since it was read: write over the new contents instead.
            return try rewriteOverForeignChange(values, changing: key, committingBatchFrom: batchValues)
        }
        // What the file held before: a batch's start, or memory with each deferred key at its base.
        let replaced = rewriteGuard == nil ? nil : (batchValues ?? snapshot.withLock { $0.fileValues })
        snapshot.withLock { state in
            state.committed()  // the values written included every deferred change
            if let batchValues {
                // A batch's values are in memory already: announce what changed since it began, each key once.
                state.values = batchValues
            }
            if let key, batchValues == nil {
                // Only `key` changed: the user's value, and so at most its effective value.
                state.take(values, identity: identity)
                announceEffective([key], of: values)
            } else {
                announceEffective(state.load(values, identity: identity), of: values)
            }
        }
        codec.didCommit()
        if let replaced { rewriteGuard?.recordCommit(from: replaced, to: values, changing: key) }
        if let committedError { throw committedError }
    }

    /// Encodes `values` and replaces the file with them, durably and atomically; the caller holds the exclusive
    /// lock. One rule for reads and writes: a file an open would refuse is never written. The first write sweeps
    /// the temporary files of killed writers. When a step after the rename fails (syncing the folder), the values
    /// are in the file all the same: that error is returned with the file's identity, to be thrown once memory
    /// follows the file.
    func replaceFile(
        with values: [String: PrefValue], expecting expected: FileIdentity?? = .none,
        beforeCommit: (() throws -> Void)? = nil
    ) throws -> (identity: FileIdentity?, committedError: (any Error)?) {
        let data = try codec.encode(values)
        if data.count > POSIX.maximumFileSize {
            throw PrefsError.tooLarge(path: path, size: data.count, limit: POSIX.maximumFileSize)
        }
        if snapshot.withLock({ $0.takeSweep() }) { file.removeStaleTemporaryFiles() }
        do {
            let identity = try file.writeAtomically(data, expecting: expected, beforeCommit: beforeCommit) {
                landed in self.snapshot.withLock { $0.landing = landed }
            }
            ErrorReporter.writeReachedTheFile(of: changes)
            return (identity, nil)
        } catch  where error.isCommitted {
            ErrorReporter.writeReachedTheFile(of: changes)
            return (try? file.identity(), error)
        }
    }

    private func withWriteLock<T>(_ body: () throws -> T) throws -> T {
        try retryingWhileSuspect {
            writer.lock()
            defer { writer.unlock() }
            try checkOpen()
            let entry = snapshot.withLock { $0.beginWrite() }
            defer { if snapshot.withLock({ $0.endWrite() }) { lookAgainAfterWrite() } }
            if entry == .nested { return try body() }
            return try file.withLock(.exclusive, body)
        }
    }

    /// A watcher event came during this process's write (see `reloadFromDisk`): unless the file is still the one
    /// memory holds, the reload the event would have made runs now, on another thread, as the watcher's does.
    private func lookAgainAfterWrite() {
        if let current = try? file.identity(), !snapshot.withLock({ $0.isNews(currentIdentity: current) }) { return }
        DispatchQueue.global().async { [weak self] in self?.reloadFromDisk() }
    }

    /// Thrown by ``refreshWaitingForReadableFile(canLetGo:)`` to an outermost writer that met a suspect file,
    /// before it changed anything: it lets go of its locks, and ``retryingWhileSuspect(_:)`` starts it again.
    private struct FileIsSuspect: Error {}

    /// Runs `body`, which takes the locks itself, again a millisecond after each time it met a suspect file, holding
    /// no lock in between, until another writer's in-place rewrite ends (or the grace does, and the file's error is
    /// thrown).
    func retryingWhileSuspect<T>(_ body: () throws -> T) throws -> T {
        while true {
            do { return try body() } catch is FileIsSuspect { EngineClock.current.pause(.milliseconds(1)) }
        }
    }

    // MARK: Loading

    /// Refreshes like `refreshLocked`, but while the file is unreadable and may be in the middle of another
    /// writer's in-place rewrite, waits until it reads or the grace period is over (then it throws the file's
    /// error), so writers never fail on a rewrite in progress and never overwrite a file they could not read.
    /// Writers call it first thing under the lock. The outermost one (`canLetGo`, by default when this thread holds
    /// the write lock once) lets go of its locks to wait (``FileIsSuspect``); one nested in another write of this
    /// store waits where it is, since it cannot let go of the locks of the write around it.
    func refreshWaitingForReadableFile(canLetGo: Bool? = nil) throws {
        // In a batch the file was read when it began and is written when it ends; its values live in memory.
        let (inBatch, depth) = snapshot.withLock { ($0.inBatch, $0.writerDepth) }
        if inBatch { return }
        try waitForReadableFile(canLetGo: canLetGo ?? (depth <= 1))
        try restoreForeignReverts()
    }

    /// The loop of `refreshWaitingForReadableFile`, also inside a batch.
    private func waitForReadableFile(canLetGo: Bool) throws {
        while true {
            try refreshLocked()
            guard snapshot.withLock({ $0.isSuspect }) else { return }
            if canLetGo { throw FileIsSuspect() }
            // Every millisecond: a writer that rewrites in place again and again leaves it readable only briefly.
            EngineClock.current.pause(.milliseconds(1))
        }
    }

    // MARK: Foreign rewrites (UserDefaults suites)

    /// The first load. A file another writer may be rewriting in place (a suite: `grace` above zero) that cannot be
    /// read yet is read again every millisecond, holding no lock, until it reads or stays unreadable for the grace
    /// period. A file that is not empty and has not changed for `StoreState.inPlaceRewriteQuiet` (200 ms) is not
    /// being written: it is damaged at once (so opening a damaged suite does not wait the whole grace).
    private func loadFirst() throws {
        let grace = snapshot.withLock { $0.grace }
        try refreshLocked(announcing: false, graceful: grace > .zero)
        let clock = EngineClock.current
        var seen = try? file.identity()
        var lastChange = clock.now()
        while snapshot.withLock({ $0.isSuspect }) {
            clock.pause(.milliseconds(1))
            let current = try? file.identity()
            if current != seen {
                seen = current
                lastChange = clock.now()
            }
            let quiet = clock.now() - lastChange >= StoreState.inPlaceRewriteQuiet && (current?.size ?? 0) > 0
            try refreshLocked(announcing: false, graceful: !quiet)
        }
    }

    /// After the watcher loaded another writer's rewrite while recent commits are remembered: restore any it undid,
    /// off the watcher's thread.
    private func restoreAfterForeignRewrite() {
        guard let rewriteGuard, !rewriteGuard.isIdle else { return }
        DispatchQueue.global().async { [weak self] in
            guard let self, !self.isShut else { return }
            do { try self.edit { _ in } } catch {
                // Closed meanwhile: nobody is left to keep the values of.
                if case .storeClosed? = error as? PrefsError { return }
                ErrorReporter.reportOnce(error, key: "", operation: .write, source: self.changes)
            }
        }
    }

    /// Writes back the values of recent commits that a foreign rewrite undid. Holds the write lock.
    private func restoreForeignReverts() throws {
        guard let rewriteGuard, !snapshot.withLock({ $0.inBatch }) else { return }
        // The file's values, as far as this process knows them: deferred keys at what the file has for them.
        let (values, file, identity, deferred) = snapshot.withLock {
            ($0.values, $0.fileValues, $0.identity, Set($0.pending.keys))
        }
        let restore = rewriteGuard.restorations(in: file, identity: identity, deferred: deferred)
        guard !restore.isEmpty else { return }
        var repaired = values
        for (key, value) in restore { repaired[key] = value }
        try write(repaired)
    }

    /// For a suite: the check before a write's rename that the file is still the one its values were based on.
    private func baseCheck() -> (() throws -> Void)? {
        let (retries, base) = snapshot.withLock { ($0.foreignRetries, $0.identity) }
        guard rewriteGuard != nil, retries < 3 else { return nil }
        return { [file] in
            if (try? file.identity()) != base { throw ForeignRewriteGuard.BaseChanged() }
        }
    }

    /// `values` were to replace the file, but another writer rewrote it in place after it was read: reads the new
    /// contents and writes this write's own changes over them. Bounded: after three such retries in a row the
    /// write no longer checks.
    private func rewriteOverForeignChange(
        _ values: [String: PrefValue], changing key: String?, committingBatchFrom batchValues: [String: PrefValue]?
    ) throws {
        let base = batchValues ?? snapshot.withLock { $0.values }
        var ours: [String: PrefValue?] = [:]
        if let key, batchValues == nil {
            ours.updateValue(values[key], forKey: key)
        } else {
            for changed in StoreState.diff(base, values) { ours.updateValue(values[changed], forKey: changed) }
        }
        snapshot.withLock { $0.foreignRetries += 1 }
        defer { snapshot.withLock { $0.foreignRetries -= 1 } }
        try waitForReadableFile(canLetGo: false)  // in the middle of a write: its transform has run
        try restoreForeignReverts()
        // Deferred changes that still stand are in memory already (see `StoreState.take`), and must be written.
        let (current, deferred) = snapshot.withLock { ($0.values, !$0.pending.isEmpty) }
        var merged = current
        for (changed, value) in ours { merged[changed] = value }
        guard merged != current || deferred else { return }
        try write(merged)
    }

    /// Must hold the file lock (except for the first load, see `open`). Announces the keys whose values changed
    /// (unless `announcing` is false, for the first load, which nobody can observe yet).
    ///
    /// A file that cannot be decoded leaves the file and the last good snapshot as they were. At first it is only
    /// suspect: reads keep the last good values and a re-check is scheduled. Once it has stayed unreadable for the
    /// grace period the storage is damaged and the error is thrown.
    ///
    /// With `graceful` false (the first load), an unreadable file damages the storage at once.
    private func refreshLocked(announcing: Bool = true, graceful: Bool = true) throws {
        let current = try file.identity()
        switch snapshot.withLock({ $0.refresh(currentIdentity: current) }) {
        case .upToDate:
            return
        case .cleared:
            load([:], identity: nil, announcing: announcing)
            return
        case .read:
            break
        }
        let values: [String: PrefValue]
        let identity: FileIdentity?
        let foreign: Bool
        do {
            // A file that cannot even be read (a folder in its place, no permission) is unreadable like one that
            // cannot be decoded: never overwritten, reported, and recovered from once it reads again.
            guard let (data, readIdentity) = try file.read() else {
                load([:], identity: nil, announcing: announcing)
                return
            }
            values = try codec.decode(data, path: path)
            identity = readIdentity
            // Prefs writes a suite as a binary property list; anything else was rewritten by another tool.
            foreign = rewriteGuard != nil && !BinaryPropertyList.startsWithMagic(data)
        } catch {
            // One error for the file, whichever path reports it: what reads throw and what the report says.
            let error = Self.namingTheWayOut(error)
            let verdict = snapshot.withLock { state in
                guard graceful else {
                    state.health = .damaged(error)
                    return StoreState.Unreadable.damaged
                }
                return state.failedToDecode(error, at: EngineClock.current.now())
            }
            switch verdict {
            case .damaged:
                publishDamage()
                throw error
            case .suspect(let recheck, let schedule):
                if schedule { scheduleRecheck(after: recheck) }
                return
            }
        }
        load(values, identity: identity, announcing: announcing, foreign: foreign)
    }

    /// A store file that cannot be decoded, with what to do about it in the one report the app gets.
    private static func namingTheWayOut(_ error: any Error) -> any Error {
        guard case .corruptFile(let path, let reason)? = error as? PrefsError else { return error }
        return PrefsError.corruptFile(
            path: path,
            reason: reason + "; to keep it aside and start afresh: moveDamagedFileAside(), or `prefs repair`")
    }

    private func load(_ values: [String: PrefValue], identity: FileIdentity?, announcing: Bool, foreign: Bool = false) {
        // A deferred change gives way to another writer's change of its key, not to a stale foreign rewrite.
        let rewriteGuard = foreign ? self.rewriteGuard : nil
        let recovered = snapshot.withLock { state in
            let recovered = state.damage != nil
            let changed = state.load(values, identity: identity, diffing: announcing) { key, value in
                rewriteGuard?.replaced(value, forKey: key) ?? false
            }
            if announcing { announceEffective(changed, of: state.values) }
            return recovered
        }
        if recovered {
            ErrorReporter.forgetIncidents(of: changes)
            publishDamage()
        }
    }

    /// Announces the effective value (what reads return) of each of `keys`, given the store's own `values`. Called
    /// holding the snapshot lock, so announcements keep the order in which values were applied.
    func announceEffective(_ keys: some Collection<String>, of values: [String: PrefValue]) {
        guard !keys.isEmpty else { return }
        changes.announce(
            Dictionary(uniqueKeysWithValues: keys.map { ($0, layers.value(forKey: $0, user: values[$0])) }))
    }
}

extension FileBackedStorage: OwnValues {
    func ownValue(forKey key: String) -> PrefValue? { snapshot.withLock { $0.values[key] } }
    func ownValues() -> [String: PrefValue] { snapshot.withLock { $0.values } }
}
