import Foundation
import Synchronization

/// The engine behind every store Prefs ships but the PostgreSQL one: a ``StoreState`` under one lock, and one
/// transaction, ``transact(_:_:)``, through which every write passes: a `set`, an update, a batch, a deferred
/// `set`, the commit of deferred changes, a flush, the flush at exit or at the last close, a new vault key.
///
/// A write takes this process's writer lock (recursive: a transform or a batch may write through the same store),
/// then, when it commits to a file, the file's own lock (`flock` on the file), reads the file only when it is not
/// the one the values came from, stages its changes, and at the end of the outermost write commits them: encode,
/// temporary file, rename, folder sync; then memory follows and the keys whose values changed are announced.
/// Observers run after every lock is released. Writes made inside a write of the same thread (a transform's, a
/// batch's body) join it: they are staged and committed with it, once.
///
/// Nothing but a write writes: opening a store and a look at a file another process changed only read it.
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
        /// How long a file that does not decode, or is empty, is read again before it counts as damaged (or
        /// empty): a writer that takes no lock may be rewriting it in place. Zero for files only Prefs writes.
        let grace: Duration
        /// What a write does with a file that does not decode.
        let damagePolicy: DamagedFilePolicy
    }

    let guarded: Mutex<Guarded>

    /// The state, the layers resolved over it, and the engine's plumbing beside them, under one lock.
    struct Guarded {
        var store: StoreState
        var layers = LayerStack()
        /// The watch on the file, while the store is open.
        var watch: FileWatchToken?
        /// The queue of looks at the file and deferred commits, one at a time; made when first needed.
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

    /// The write in progress; only the thread holding `writer` reads or changes it.
    @exclusivity(unchecked) nonisolated(unsafe) var tx = Transaction()
    /// The thread running the write in progress (0: none), so its own reads see what it staged.
    private let writerThread = Atomic<UInt>(0)
    /// The inode a commit is renaming into place (0: none), so that the watcher's event for that rename looks at
    /// nothing (the commit records the file's identity a moment later).
    let renaming = Atomic<UInt64>(0)

    /// An engine for the file at `path`, not loaded yet (see ``open()``).
    init(
        path: String, codec: any SnapshotCodec, fileSystem: any FileSystem = POSIXFileSystem(),
        clock: EngineClock = .system, grace: Duration = .zero, onDamage damagePolicy: DamagedFilePolicy = .refuse,
        changes: ChangeFeed = ChangeFeed()
    ) {
        file = BoundFile(
            path: POSIX.resolvingSymbolicLink(path), codec: codec, fileSystem: fileSystem, clock: clock, grace: grace,
            damagePolicy: damagePolicy)
        guarded = Mutex(Guarded(store: StoreState()))
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

    /// The effective value of `key`: the store's own, through its layers unless `throughLayers` is false; on the
    /// thread of the write in progress, with what that write staged.
    func value(forKey key: String, throughLayers: Bool = true) throws -> PrefValue? {
        let staged = isWriterThread ? tx.staged[key] : nil
        let (value, damage, shut) = guarded.withLock {
            let own = staged ?? $0.store.values[key]
            return (throughLayers ? $0.layers.value(forKey: key, user: own) : own, $0.store.damage, $0.store.isShut)
        }
        if shut { throw PrefsError.storeClosed(path: path) }
        if let damage { throw damage }
        return value
    }

    func allValues() throws -> [String: PrefValue] {
        let (values, damage, shut) = guarded.withLock { ($0.store.values, $0.store.damage, $0.store.isShut) }
        if shut { throw PrefsError.storeClosed(path: path) }
        if let damage { throw damage }
        guard isWriterThread, !tx.staged.isEmpty else { return values }
        var merged = values
        for (key, value) in tx.staged { merged[key] = value }
        return merged
    }

    /// The error that keeps the file from being read, if any (or that its next write keeps it aside for).
    var damage: (any Error)? { guarded.withLock { $0.store.damage ?? $0.store.asideDue } }

    var isShut: Bool { guarded.withLock { $0.store.isShut } }

    private var isWriterThread: Bool {
        let writing = writerThread.load(ordering: .relaxed)
        return writing != 0 && writing == ThreadID.current.raw
    }

    // MARK: Writes

    /// Sets one key and commits it durably (nil removes it).
    func set(_ value: PrefValue?, forKey key: String) throws {
        try validateKey(key)
        try transact(.commit) { view in try stage(value, forKey: key, in: view) }
    }

    /// Reads, transforms and durably writes one key while holding the file's lock.
    @discardableResult
    func update(forKey key: String, _ transform: (PrefValue?) throws -> PrefValue?) throws -> PrefValue? {
        try validateKey(key)
        return try transact(.commit) { view in
            // Layers hook: a forced key is refused before its transform runs; without a value of the user's, the
            // transform starts from the default below it.
            if view.layers.isForced(key) { throw PrefsError.forced(key: key) }
            let new = try transform(seen(key, in: view) ?? view.layers.valueBelowUser(key))
            try stage(new, forKey: key, in: view)
            return new
        }
    }

    /// Replaces every value at once, in one durable, atomic write.
    func replaceAll(_ values: [String: PrefValue]) throws {
        try transact(.commit) { view in
            let gone = Set(view.store.values.keys).union(tx.staged.keys).subtracting(values.keys)
            for key in gone { tx.staged[key] = .some(nil) }
            for (key, value) in values { tx.staged[key] = value }
            invalidateStaged(gone.union(values.keys))
        }
    }

    /// Removes several keys in one durable, atomic write.
    func removeValues(forKeys keys: some Sequence<String>) throws {
        try transact(.commit) { _ in
            for key in keys { tx.staged[key] = .some(nil) }
            invalidateStaged(Set(keys))
        }
    }

    /// Applies one change in memory now (every reader and observer in the process sees it when this returns) and
    /// leaves it to a commit within `window`. Inside a write of this store it joins that write.
    func setDeferred(_ value: PrefValue?, forKey key: String, within window: Duration) throws {
        try validateKey(key)
        try transact(.deferred(window)) { view in try stage(value, forKey: key, in: view) }
    }

    /// Runs `body` holding the write lock: every write it makes is staged (reads on this thread see it) and
    /// committed in one durable, atomic write when it returns (or, `deferring`, left to the deferred commit within
    /// that window). Observers hear of each changed key once, after that. If `body` or the write throws, nothing
    /// of it is applied. A batch inside a write joins it; if the inner one throws, only its own writes are undone.
    func batch<T>(deferring window: Duration? = nil, _ body: () throws -> T) throws -> T {
        try transact(window.map { .deferred($0) } ?? .commit, batch: true) { _ in try body() }
    }

    /// Writes the current values after `prepare` changed the codec (a new vault key). `prepare` returns how to undo
    /// its change, which runs if the write fails before its commit point.
    func rewrite(prepare: () throws -> () -> Void) throws {
        var undo: (() -> Void)?
        do {
            try transact(.commit) { _ in
                if tx.depth > 1 {
                    throw PrefsError.io(
                        path: path, operation: "re-encrypt", errno: EBUSY,
                        message: "the vault key cannot change inside a batch; change it before or after")
                }
                undo = try prepare()
                tx.force = true
            }
        } catch  where !error.isCommitted {
            undo?()
            throw error
        }
    }

    /// Memory as a write finds it: the store's state and the layers over it.
    struct View {
        var store: StoreState
        var layers: LayerStack
    }

    /// The value of `key` the write in progress sees: its own staged change, else memory as `view` shows it.
    func seen(_ key: String, in view: View) -> PrefValue? {
        if let staged = tx.staged[key] { return staged }
        return view.store.values[key]
    }

    /// Stages a change for the write in progress; a key an administrator forced is refused.
    private func stage(_ value: PrefValue?, forKey key: String, in view: View) throws(PrefsError) {
        if view.layers.isForced(key) { throw .forced(key: key) }
        tx.staged[key] = .some(value)
        invalidateStaged([key])
    }

    /// Inside a batch or a nested write, where code of this thread reads before the write ends, wrappers of the
    /// staged keys read them again.
    private func invalidateStaged(_ keys: Set<String>) {
        if tx.depth > 1 || tx.inBatch { changes.invalidate(keys) }
    }

    // MARK: The one transaction

    /// How the outermost write ends.
    enum Ending: Equatable {
        /// Durably in the file before it returns (in memory, for a store without one).
        case commit
        /// In memory now, in the file within the window.
        case deferred(Duration)
    }

    /// Runs `body`, which stages changes, as one transaction (see the type's description), and delivers what it
    /// announced once every lock is released, unless this thread is inside another write of this engine, whose end
    /// delivers. `body` is given memory as the write found it (after reading the file, for a commit).
    /// The reports it owes (a damaged file kept aside) are those of the store's background work when `background`:
    /// none after the store has closed.
    @discardableResult
    func transact<T>(
        _ ending: Ending, batch: Bool = false, background: Bool = false, _ body: (View) throws -> T
    ) throws -> T {
        writer.lock()
        let outermost = tx.depth == 0
        let result = Result { () throws -> T in try run(ending, batch: batch, body) }
        let reports = outermost ? tx.takeReports() : []
        writer.unlock()
        if outermost { deliver(reports, background: background) }
        return try result.get()
    }

    /// Runs the observers of what this thread announced and reports what a write owes; holding no lock.
    func deliver(_ reports: [any Error], background: Bool = false) {
        changes.deliverAnnouncements()
        guard !reports.isEmpty else { return }
        changes.reported.fromBackground(if: background) {
            for report in reports { ErrorReporter.report(report, key: "", operation: .write) }
        }
    }

    /// The transaction, holding the writer lock.
    func run<T>(_ ending: Ending, batch: Bool = false, _ body: (View) throws -> T) throws -> T {
        if tx.shut { throw PrefsError.storeClosed(path: path) }
        let outermost = tx.depth == 0
        let mark = tx.staged
        let wasInBatch = tx.inBatch
        tx.depth += 1
        if batch { tx.inBatch = true }
        defer {
            tx.depth -= 1
            tx.inBatch = wasInBatch
        }
        guard outermost else {
            // Joins the write in progress.
            var view: View? = currentView()
            return try perform(body, with: &view, batch: batch, mark: mark).get()
        }
        writerThread.store(ThreadID.current.raw, ordering: .relaxed)
        defer {
            writerThread.store(0, ordering: .relaxed)
            tx.staged = [:]
            tx.force = false
            releaseLock()
        }
        guard let file, ending == .commit else {
            var view: View? = currentView()
            if let damage = view?.store.damage { throw damage }
            let outcome = perform(body, with: &view, batch: batch, mark: mark)
            applyInMemory(deferred: file != nil)
            if file != nil, case .deferred(let window) = ending, !tx.staged.isEmpty { scheduleCommit(within: window) }
            return try outcome.get()
        }
        var wrote = false
        defer { if !wrote { removePlaceholder(of: file) } }
        var view: View? = try lockAndRead(file)
        let before = view!.store
        let outcome = perform(body, with: &view, batch: batch, mark: mark)
        // The caller's code closed the store: nothing more reaches the file.
        if tx.shut { throw PrefsError.storeClosed(path: path) }
        try commitStaged(over: before, in: file, wrote: &wrote)
        return try outcome.get()
    }

    /// Memory now, as a write sees it.
    private func currentView() -> View { guarded.withLock { View(store: $0.store, layers: $0.layers) } }

    /// Runs `body` with `view`, then lets go of it (so memory changes in place, uncopied). If it throws, a batch's
    /// staged changes are undone; outside a batch, what writes inside `body` staged stands (they returned as done).
    private func perform<T>(_ body: (View) throws -> T, with view: inout View?, batch: Bool, mark: [String: PrefValue?])
        -> Result<T, any Error>
    {
        defer { view = nil }
        do { return .success(try body(view!)) } catch {
            if batch { unstage(back: mark) }
            return .failure(error)
        }
    }

    /// The staged changes go back to `mark`; wrappers of the keys that go read them again.
    private func unstage(back mark: [String: PrefValue?]) {
        let dropped = tx.staged.keys.filter { mark[$0] != tx.staged[$0] }
        tx.staged = mark
        changes.invalidate(Set(dropped))
    }

    /// The end of a write to memory only: staged changes applied, deferred for the file when there is one, and
    /// announced.
    private func applyInMemory(deferred: Bool) {
        guard !tx.staged.isEmpty else { return }
        guarded.withLock { guarded in
            var changed: [String] = []
            for (key, value) in tx.staged where guarded.store.change(key, to: value, deferred: deferred) {
                changed.append(key)
            }
            announce(changed, in: guarded)
        }
    }

    /// Announces the effective value (what reads return) of each of `keys`. Called holding the state's lock, so
    /// announcements keep the order in which values were applied.
    func announce(_ keys: some Collection<String>, in guarded: Guarded) {
        guard !keys.isEmpty else { return }
        changes.announce(
            Dictionary(
                uniqueKeysWithValues: keys.map {
                    ($0, guarded.layers.value(forKey: $0, user: guarded.store.values[$0]))
                }
            ))
    }
}

/// The write in progress on the thread holding an engine's writer lock: how deeply it is nested (a transform or a
/// batch writing through the same store), what it staged, the file lock it holds and the reports it owes.
struct Transaction {
    var depth = 0
    /// The changes staged for the outermost write's end, by key (nil: removed).
    var staged: [String: PrefValue?] = [:]
    var inBatch = false
    /// Whether the outermost write rewrites the file even if nothing changed (a new vault key).
    var force = false
    /// The file's lock while the write holds it.
    var lock: FileLock?
    /// Reports made holding the locks, told once the outermost write has let go of them.
    var reports: [any Error] = []
    /// Whether the store has shut: set by the last `close()`, under the writer lock.
    var shut = false

    mutating func takeReports() -> [any Error] {
        defer { reports = [] }
        return reports
    }
}

extension StoreEngine: OwnValues {
    func withLayers<R>(_ body: (inout LayerStack, [String: PrefValue]) -> R) -> R {
        guarded.withLock { body(&$0.layers, $0.store.values) }
    }
    func ownValue(forKey key: String) -> PrefValue? { guarded.withLock { $0.store.values[key] } }
    func ownValues() -> [String: PrefValue] { guarded.withLock { $0.store.values } }
}
