import Foundation
import Synchronization

/// Turns a whole store snapshot into file bytes and back: JSON, a property list, or an encrypted vault.
protocol SnapshotCodec: Sendable {
    func encode(_ values: [String: PrefValue]) throws -> Data
    func decode(_ data: Data, path: String) throws -> [String: PrefValue]
    /// Called once the bytes of the last `encode` are in place (renamed over the file), even when their
    /// durability could not be confirmed.
    func didCommit()
}

extension SnapshotCodec {
    func didCommit() {}
}

extension Error {
    /// Whether this is the error of a write that took effect although it reports a failure.
    var isCommitted: Bool {
        if case .durabilityNotConfirmed? = self as? PrefsError { return true }
        return false
    }
}

/// The machinery shared by every file-backed store: an in-memory snapshot that serves reads, durable atomic
/// writes under a cross-process lock, reloads when another process replaces the file, and change announcements
/// of exactly the keys whose values changed.
final class FileBackedStorage: Sendable {
    let file: LockedFile
    let codec: any SnapshotCodec
    let changes: ChangeFeed

    private struct Snapshot {
        var values: [String: PrefValue] = [:]
        var identity: FileIdentity?
        /// Set while the file on disk cannot be decoded; writes are refused so it is never overwritten.
        var damage: (any Error)?
    }

    private let snapshot = Mutex(Snapshot())
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
    }

    deinit {
        watch.withLock { $0?.cancel() }
    }

    /// Loads the file now (missing is an empty store) and starts watching it for other processes' writes.
    ///
    /// The first load takes no lock (so opening creates no lock file): files are only ever replaced by an atomic
    /// rename, so reading the current file always gets one complete version, and its identity comes from the
    /// descriptor that was read. Nothing in this process can write this storage before `open` returns.
    ///
    /// A write by another process between that load and the start of watching would raise no event, so once the
    /// watch is in place the file's identity is checked again and a changed file is reloaded under the lock.
    func open(watching: Bool = true) throws {
        _ = try refreshLocked(announcing: false)
        guard watching else { return }
        startWatching()
        let loaded = snapshot.withLock { $0.identity }
        if try file.identity() != loaded { reloadFromDisk() }
    }

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
            PrefsConfig.report(error, key: "", operation: .read)
        }
    }

    // MARK: Reads

    func value(forKey key: String) throws -> PrefValue? {
        let (value, damage) = snapshot.withLock { ($0.values[key], $0.damage) }
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
        var changed: Set<String> = []
        var committedError: (any Error)?
        let result = try withWriteLock { () throws -> PrefValue? in
            changed = try refreshLocked()
            let old = snapshot.withLock { $0.values[key] }
            let new = try transform(old)
            guard new != old else { return new }
            // The transform may have written other keys through this store: apply on top of the latest state.
            var next = snapshot.withLock { $0.values }
            next[key] = new
            do { try write(next) } catch  where error.isCommitted { committedError = error }
            changed.insert(key)
            return new
        }
        changes.publish(changedKeys: changed)
        if let committedError { throw committedError }
        return result
    }

    /// Replaces every value at once (imports, rekeying), durably and atomically.
    func replaceAll(_ values: [String: PrefValue]) throws {
        for key in values.keys { try validateKey(key) }
        var changed: Set<String> = []
        var committedError: (any Error)?
        try withWriteLock {
            _ = try refreshLocked()
            let old = snapshot.withLock { $0.values }
            do { try write(values) } catch  where error.isCommitted { committedError = error }
            changed = Self.diff(old, values)
        }
        changes.publish(changedKeys: changed)
        if let committedError { throw committedError }
    }

    /// Re-encodes the current values after `prepare` changed the codec (a new vault key). `prepare` returns how
    /// to undo its change, which runs if the write fails so the codec keeps matching the file.
    func rewrite(prepare: () throws -> () -> Void) throws {
        try withWriteLock {
            _ = try refreshLocked()
            let undo = try prepare()
            do { try write(snapshot.withLock { $0.values }) } catch  where !error.isCommitted {
                undo()
                throw error
            }
        }
    }

    /// Past the rename the new values are in effect even if a later step throws (`isCommitted`): memory and the
    /// codec follow the file, and the error is rethrown for the caller to report.
    private func write(_ values: [String: PrefValue]) throws {
        let data = try codec.encode(values)
        if !sweptTemporaryFiles {
            // Holding the exclusive lock: no writer can be mid-write, so any temporary file is a killed one's.
            sweptTemporaryFiles = true
            file.removeStaleTemporaryFiles()
        }
        var identity: FileIdentity?
        var committedError: PrefsError?
        do {
            identity = try file.writeAtomically(data)
        } catch {
            guard error.isCommitted else { throw error }
            committedError = error
            identity = try? file.identity()
        }
        let written = Snapshot(values: values, identity: identity)
        snapshot.withLock { $0 = written }
        codec.didCommit()
        if let committedError { throw committedError }
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

    /// Must hold the file lock (except for the first load, see `open`). A file that cannot be decoded marks the
    /// storage damaged and throws, leaving the file and the last good snapshot in memory as they were. Returns no
    /// keys when `announcing` is false, which saves building the set nobody will publish.
    private func refreshLocked(announcing: Bool = true) throws -> Set<String> {
        let current = try file.identity()
        let known = snapshot.withLock { $0.damage == nil ? $0.identity : nil }
        if let current, current == known { return [] }
        guard let (data, identity) = try file.read() else {
            let old = snapshot.withLock { state in
                defer { state = Snapshot() }
                return state.values
            }
            return Set(old.keys)
        }
        let values: [String: PrefValue]
        do {
            values = try codec.decode(data, path: path)
        } catch {
            snapshot.withLock { $0.damage = error }
            throw error
        }
        let old = snapshot.withLock { state in
            defer { state = Snapshot(values: values, identity: identity) }
            return state.values
        }
        return announcing ? Self.diff(old, values) : []
    }

    static func diff(_ old: [String: PrefValue], _ new: [String: PrefValue]) -> Set<String> {
        // The first load of a file: everything is new, and there is nothing to compare.
        if old.isEmpty { return Set(new.keys) }
        var changed = Set<String>()
        for (key, value) in old where new[key] != value { changed.insert(key) }
        for key in new.keys where old[key] == nil { changed.insert(key) }
        return changed
    }
}
