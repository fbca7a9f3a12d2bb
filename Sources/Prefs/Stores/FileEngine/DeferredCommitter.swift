import Foundation
import Synchronization

/// The timer that commits one file's deferred writes, and the reporting of a commit that fails.
///
/// A deferred write changes the storage's snapshot at once (so every reader and observer in the process sees it)
/// and records its key as pending, with the value the file held for it, in the engine's state (`StoreState`). A
/// commit is a write like any other (`FileBackedStorage.commitDeferredChanges`): under the file's lock, on top of
/// its latest values, with every check a durable write makes. A durable write of the storage writes the whole
/// snapshot too, so it commits everything pending.
final class DeferredCommitter: Sendable {
    private struct State {
        /// When the earliest scheduled commit runs, on the clock that scheduled it; nil when none is scheduled.
        var scheduled: Duration?
        /// The text of the last failure reported, so a failure that repeats is reported once.
        var reportedFailure: String?
        /// Whether this storage is known to the exit flush.
        var registered = false
    }

    private let state = Mutex(State())
    /// Runs the timed commits, one at a time; made at the first deferred write, so that opening a store costs
    /// nothing more.
    var queue: DispatchQueue {
        madeQueue.withLock { queue in
            if let queue { return queue }
            let made = DispatchQueue(label: "Prefs.DeferredCommitter")
            queue = made
            return made
        }
    }
    private let madeQueue = Mutex<DispatchQueue?>(nil)
    /// How long a failed commit waits before it is tried again, unless a change or a flush comes first.
    static let retryDelay: Duration = .seconds(1)

    /// Whether the storage must still be registered for the exit flush (true once).
    func needsRegistering() -> Bool {
        state.withLock { state in
            defer { state.registered = true }
            return !state.registered
        }
    }

    // MARK: Scheduling

    /// Makes sure a commit runs within `window` from now, timed by the engine's clock in effect.
    func schedule(_ storage: FileBackedStorage, within window: Duration) {
        let clock = EngineClock.current
        let window = max(window, .zero)
        let deadline = clock.now() + window
        let needed = state.withLock { state in
            if let scheduled = state.scheduled, scheduled <= deadline { return false }
            state.scheduled = deadline
            return true
        }
        guard needed else { return }
        clock.schedule(window, queue) { [weak storage] in
            guard let storage else { return }
            storage.committer.state.withLock { state in
                if state.scheduled == deadline { state.scheduled = nil }
            }
            // A failure is reported and retried by `commitDeferred`, on the same clock.
            EngineClock.withClock(clock) { try? storage.commitDeferred() }
        }
    }

    // MARK: Failures

    /// Reports a failed commit of `keys` unless the same failure was reported last, and schedules another attempt
    /// of `storage` (none for a storage going away).
    func failed(_ error: any Error, keys: [String], storage: FileBackedStorage?) {
        let text = String(describing: error)
        let isNew = state.withLock { state in
            defer { state.reportedFailure = text }
            return state.reportedFailure != text
        }
        if isNew { ErrorReporter.report(error, key: keys.joined(separator: ", "), operation: .write) }
        if let storage, !keys.isEmpty { schedule(storage, within: Self.retryDelay) }
    }

    /// A commit succeeded: a later failure is reported again.
    func succeeded() {
        state.withLock { $0.reportedFailure = nil }
    }
}

/// The storages with deferred writes, flushed when the process exits normally (`exit`, or returning from `main`).
enum DeferredExitFlush {
    private final class Entry: Sendable {
        weak let storage: FileBackedStorage?
        init(_ storage: FileBackedStorage) { self.storage = storage }
    }

    private static let entries = Mutex<[Entry]>([])

    private static let installed: Void = {
        atexit { DeferredExitFlush.flushAll() }
    }()

    static func register(_ storage: FileBackedStorage) {
        _ = installed
        entries.withLock { entries in
            entries.removeAll { $0.storage == nil }
            entries.append(Entry(storage))
        }
    }

    /// Commits every storage's pending writes; failures are reported.
    static func flushAll() {
        let storages = entries.withLock { $0.compactMap(\.storage) }
        for storage in storages { try? storage.commitDeferred() }
    }
}

extension FileBackedStorage {
    /// Applies one change in memory now (every reader and observer in the process sees it when this returns) and
    /// leaves it to a commit within `window`. Inside a batch of this storage it joins the batch instead.
    func setDeferred(_ value: PrefValue?, forKey key: String, within window: Duration) throws {
        try validateKey(key)
        try layers.checkWritable(key)  // Layers hook: a forced key is refused.
        defer { changes.deliverAnnouncements() }
        writer.lock()
        defer { writer.unlock() }
        try checkOpen()
        if snapshot.withLock({ $0.inBatch }) {
            // This thread runs a batch of this storage: the write is one of the batch's.
            try update(forKey: key) { _ in value }
            return
        }
        let changed = try snapshot.withLock { state throws -> Bool in
            // A file that cannot be read is never overwritten, so nothing is accepted for it.
            if let damage = state.damage { throw damage }
            let before = state.values[key]
            guard before != value else { return false }
            state.values[key] = value
            announceEffective([key], of: state.values)
            state.deferred(CollectionOfOne(key), before: before.map { [key: $0] } ?? [:])
            return true
        }
        if changed { scheduleCommit(within: window) }
    }

    /// The end of a deferred batch (holding the write lock): the batch's values are in memory already; announce the
    /// keys that changed since it began, each once, and leave them to one commit.
    func deferBatch(from start: [String: PrefValue], within window: Duration) {
        snapshot.withLock { state in
            let changed = StoreState.diff(start, state.values)
            announceEffective(changed, of: state.values)
            state.deferred(changed, before: start)
        }
        scheduleCommit(within: window)
    }

    /// Makes sure the deferred changes are committed within `window`, and at exit.
    private func scheduleCommit(within window: Duration) {
        if committer.needsRegistering() { DeferredExitFlush.register(self) }
        committer.schedule(self, within: window)
    }

    /// Whether deferred changes are waiting to be committed.
    var hasPendingWrites: Bool { snapshot.withLock { !$0.pending.isEmpty } }

    /// Writes every change deferred so far in one durable, atomic write under the cross-process lock, on top of the
    /// file's latest values, and returns once it is in the file. Nothing to do returns at once. A failure is
    /// reported (once while it repeats), the values stay in memory and, when `retrying`, another commit is
    /// scheduled.
    func commitDeferred(retrying: Bool = true) throws {
        try checkOpen()
        guard hasPendingWrites else { return }
        // A flush from inside a batch or a transform of this storage, on the thread that holds its locks, would
        // wait for itself; what that write holds reaches the file when it ends.
        writer.lock()
        let insideAWrite = snapshot.withLock { $0.writerDepth > 0 }
        writer.unlock()
        if insideAWrite {
            throw PrefsError.io(
                path: path, operation: "flush", errno: EDEADLK,
                message: "flush() cannot run inside a batch or an update of the same store; call it after")
        }
        defer { changes.deliverAnnouncements() }
        do {
            try commitDeferredChanges()
            committer.succeeded()
        } catch {
            // Closed meanwhile (a timed commit racing `close()`): closing committed what was pending, and a closed
            // store's commit is no failure to report or retry.
            if case .storeClosed? = error as? PrefsError { throw error }
            let keys = snapshot.withLock { $0.pending.keys.sorted() }
            committer.failed(error, keys: keys, storage: retrying ? self : nil)
            throw error
        }
    }
}
