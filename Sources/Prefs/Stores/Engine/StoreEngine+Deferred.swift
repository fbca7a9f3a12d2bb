import Foundation
import Synchronization

extension StoreEngine {
    /// How long a failed deferred commit waits before it is tried again, unless a change or a flush comes first.
    static let retryDelay: Duration = .seconds(1)

    /// Makes sure the deferred changes are committed within `window` from now, on the engine's clock, and at exit.
    func scheduleCommit(within window: Duration) {
        guard let file else { return }
        let delay = max(window, .zero)
        let deadline = file.clock.now() + delay
        let (queue, register) = guarded.withLock { guarded -> (DispatchQueue?, Bool) in
            defer { guarded.registeredForExit = true }
            let register = !guarded.registeredForExit
            if let due = guarded.commitDue, due <= deadline { return (nil, register) }
            guarded.commitDue = deadline
            return (guarded.workQueue, register)
        }
        if register { EngineRegistry.flushAtExit(self) }
        guard let queue else { return }
        file.clock.schedule(delay, queue) { [weak self] in
            guard let self else { return }
            self.guarded.withLock { if $0.commitDue == deadline { $0.commitDue = nil } }
            try? self.commitDeferred(fromBackground: true)
        }
    }

    /// Whether deferred changes wait to be committed.
    var hasDeferredChanges: Bool { guarded.withLock { $0.store.hasDeferredChanges } }

    /// Writes every change deferred so far in one durable, atomic write, and returns once it is in the file; with
    /// nothing deferred it returns at once. A failure is reported (once while it repeats), the values stay in memory
    /// and, when `retrying`, another commit is scheduled.
    func commitDeferred(retrying: Bool = true, fromBackground: Bool = false) throws {
        // From inside a batch or a transform of this store, on the thread holding its locks, a flush would wait for
        // itself; what that write holds reaches the file when it ends.
        writer.lock()
        let (inside, shut) = (tx.depth > 0, tx.shut)
        writer.unlock()
        if shut { throw PrefsError.storeClosed(path: path) }
        if inside {
            throw PrefsError.io(
                path: path, operation: "flush", errno: EDEADLK,
                message: "flush() cannot run inside a batch or an update of the same store; call it after")
        }
        guard hasDeferredChanges else { return }
        do {
            try transact(.commit, background: fromBackground) { _ in }
            guarded.withLock { $0.reportedFailure = nil }
        } catch {
            // Closed meanwhile (a timed commit racing the last close, which committed what was deferred).
            if case .storeClosed? = error as? PrefsError { throw error }
            let text = String(describing: error)
            let (isNew, keys) = guarded.withLock { guarded in
                defer { guarded.reportedFailure = text }
                return (guarded.reportedFailure != text, guarded.store.unwritten.keys.sorted())
            }
            if isNew {
                changes.reported.fromBackground(if: fromBackground) {
                    ErrorReporter.report(error, key: keys.joined(separator: ", "), operation: .write)
                }
            }
            if retrying, !keys.isEmpty { scheduleCommit(within: Self.retryDelay) }
            throw error
        }
    }

    /// The queue of the engine's background work, for `flush() async`.
    var backgroundQueue: DispatchQueue { guarded.withLock { $0.workQueue } }
}

/// The engines of this process, in one registry: one engine per file, so stores opened on the same path share their
/// values and change feed and never disagree, not even for the moment an inotify event takes; and the engines with
/// deferred writes, flushed when the process exits normally (`exit`, or returning from `main`).
enum EngineRegistry {
    private final class Entry: Sendable {
        // Set once, in `init`, and read only holding the registry's lock.
        nonisolated(unsafe) private(set) weak var engine: StoreEngine?
        init(_ engine: StoreEngine) { self.engine = engine }
    }

    private struct Entries {
        /// By kind and standardized path: the engine stores opened on that file share.
        var byFile: [String: Entry] = [:]
        /// The engines that deferred a write, flushed at exit.
        var flushedAtExit: [Entry] = []
    }

    private static let entries = Mutex(Entries())

    private static let installed: Void = {
        atexit { EngineRegistry.flushAll() }
    }()

    /// The engine of the file at `path`, retained for one more store handle; opened with `make` when this process
    /// has none open. `make` runs without the registry's lock (opening reads the file and may report); if two
    /// threads open one file at once, the first to finish wins and the other's engine is dropped.
    static func retainedEngine(
        at path: String, kind: String, make: () throws -> StoreEngine
    ) rethrows -> StoreEngine {
        let id = kind + ":" + URL(filePath: path).standardizedFileURL.path
        if let existing = entries.withLock({ $0.byFile[id]?.engine }), existing.retain() { return existing }
        let made = try make()
        return entries.withLock { entries in
            if let existing = entries.byFile[id]?.engine, existing.retain() { return existing }
            entries.byFile = entries.byFile.filter { $0.value.engine.map { !$0.isShut } ?? false }
            entries.byFile[id] = Entry(made)
            _ = made.retain()
            return made
        }
    }

    /// `engine` deferred a write: its deferred changes are committed when the process exits normally.
    static func flushAtExit(_ engine: StoreEngine) {
        _ = installed
        entries.withLock { entries in
            entries.flushedAtExit.removeAll { $0.engine == nil }
            entries.flushedAtExit.append(Entry(engine))
        }
    }

    /// Commits every engine's deferred writes; failures are reported.
    static func flushAll() {
        let engines = entries.withLock { $0.flushedAtExit.compactMap(\.engine) }
        for engine in engines { try? engine.commitDeferred(retrying: false) }
    }
}
