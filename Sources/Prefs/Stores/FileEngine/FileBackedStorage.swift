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

    private let snapshot = Mutex(SnapshotState())
    /// Serialises writers in this process; recursive so a transform may itself write to the same store.
    private let writer = NSRecursiveLock()
    /// How deep the current writer thread is nested; only touched while holding `writer`.
    nonisolated(unsafe) private var writerDepth = 0
    /// Whether the first write has swept temporary files left by killed writers; only touched under `writer`.
    nonisolated(unsafe) private var sweptTemporaryFiles = false
    private let watch = Mutex<FileWatchToken?>(nil)

    var path: String { file.url.path }

    /// Opens the storage, loading the file if it exists. Throws when the file exists but cannot be read or
    /// decoded; the file is left untouched.
    init(url: URL, lockURL: URL? = nil, codec: any SnapshotCodec, changes: ChangeFeed = ChangeFeed()) {
        self.file = LockedFile(url: url, lockURL: lockURL)
        self.codec = codec
        self.changes = changes
        self.layers = StoreLayers(changes: changes)
    }

    deinit {
        watch.withLock { $0?.cancel() }
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
            _ = try refreshLocked(announcing: false)
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

    private func startWatching() {
        let token = DirectoryWatcher.shared.watch(fileAt: file.url) { [weak self] in
            self?.reloadFromDisk()
        }
        watch.withLock { $0 = token }
    }

    /// Called by the watcher when the file's folder changed: reload and announce what changed.
    func reloadFromDisk() {
        do {
            let changed = try refresh(lock: .shared)
            changes.publish(changedKeys: changed)
        } catch {
            ErrorReporter.reportOnce(error, key: "", operation: .read, source: changes)
        }
    }

    // MARK: Reads

    func value(forKey key: String) throws -> PrefValue? {
        // Layers hook: reads come from the merged snapshot.
        let (value, damage) = snapshot.withLock { (layers.value(forKey: key), $0.damage) }
        if let damage { throw damage }
        return value
    }

    func allValues() throws -> [String: PrefValue] {
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
        var changed: Set<String> = []
        let result = try withWriteLock { () throws -> PrefValue? in
            changed = try refreshLocked()
            let old = snapshot.withLock { $0.values[key] }
            // Layers hook: without a value of the user's, the transform starts from the default below it.
            let new = try transform(old ?? layers.valueBelowUser(key))
            guard new != old else { return new }
            // The transform may have written other keys through this store: apply on top of the latest state.
            var next = snapshot.withLock { $0.values }
            next[key] = new
            try write(next)
            changed.insert(key)
            return new
        }
        changes.publish(changedKeys: changed)
        return result
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
        var changed: Set<String> = []
        try withWriteLock {
            changed = try refreshLocked()
            let old = snapshot.withLock { $0.values }
            var new = old
            try change(&new)
            guard new != old else { return }
            try write(new)
            changed.formUnion(SnapshotState.diff(old, new))
        }
        changes.publish(changedKeys: changed)
    }

    /// Re-encodes the current values after `prepare` changed the codec (a new vault key). `prepare` returns how
    /// to undo its change, which runs if the write fails so the codec keeps matching the file.
    func rewrite(prepare: () throws -> () -> Void) throws {
        try withWriteLock {
            _ = try refreshLocked()
            let undo = try prepare()
            do { try write(snapshot.withLock { $0.values }) } catch {
                undo()
                throw error
            }
        }
    }

    private func write(_ values: [String: PrefValue]) throws {
        let data = try codec.encode(values)
        if !sweptTemporaryFiles {
            // Holding the exclusive lock: no writer can be mid-write, so any temporary file is a killed one's.
            sweptTemporaryFiles = true
            file.removeStaleTemporaryFiles()
        }
        let identity = try file.writeAtomically(data)
        snapshot.withLock {
            $0 = SnapshotState(values: values, identity: identity)
            _ = layers.userReplaced(values)  // Layers hook: the merged snapshot follows the file's values.
        }
    }

    private func withWriteLock<T>(_ body: () throws -> T) throws -> T {
        writer.lock()
        defer { writer.unlock() }
        writerDepth += 1
        defer { writerDepth -= 1 }
        if writerDepth > 1 { return try body() }
        return try file.withLock(.exclusive, body)
    }

    // MARK: Loading

    /// Re-reads the file if another process replaced it, returning the keys whose values changed.
    private func refresh(lock kind: LockKind) throws -> Set<String> {
        try file.withLock(kind) { try refreshLocked() }
    }

    /// Takes newly read values into the snapshot and the layers' mirror of them; returns the changed keys.
    private func load(_ values: [String: PrefValue], identity: FileIdentity?) -> Set<String> {
        snapshot.withLock { state in
            let changed = state.load(values, identity: identity)
            _ = layers.userReplaced(values)  // Layers hook: the merged snapshot follows the file's values.
            return changed
        }
    }

    /// Must hold the file lock (except for the first load, see `open`). A file that cannot be read or decoded marks the
    /// storage damaged and throws, leaving the file and the last good snapshot in memory as they were. Returns no
    /// keys when `announcing` is false, which saves building the set nobody will publish.
    private func refreshLocked(announcing: Bool = true) throws -> Set<String> {
        let current = try file.identity()
        switch snapshot.withLock({ $0.refresh(currentIdentity: current) }) {
        case .upToDate:
            return []
        case .cleared:
            let changed = load([:], identity: nil)
            return announcing ? changed : []
        case .read:
            break
        }
        let values: [String: PrefValue]
        let identity: FileIdentity?
        do {
            guard let (data, readIdentity) = try file.read() else {
                let changed = load([:], identity: nil)
                return announcing ? changed : []
            }
            values = try codec.decode(data, path: path)
            identity = readIdentity
        } catch {
            snapshot.withLock { $0.damage = error }
            throw error
        }
        let (changed, recovered) = snapshot.withLock { state in
            let recovered = state.damage != nil
            let changed = state.load(values, identity: identity)
            _ = layers.userReplaced(values)  // Layers hook: the merged snapshot follows the file's values.
            return (changed, recovered)
        }
        if recovered { ErrorReporter.forgetIncidents(of: changes) }
        return announcing ? changed : []
    }
}
