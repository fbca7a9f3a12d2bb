import Foundation
import Synchronization

extension StoreEngine {
    // MARK: Opening

    /// Loads the file now (a missing file is an empty store) and starts watching it for other processes' writes. A
    /// file that cannot be decoded is watched all the same, so the store recovers when it is repaired; its error
    /// is thrown once the watch is in place.
    ///
    /// The first load takes no lock, so opening creates nothing: files are only replaced by a rename, so a read
    /// gets one whole version, and the identity comes from the descriptor read. A write by another process between
    /// that load and the start of watching raises no event, so the file is looked at once more after.
    func open() throws {
        guard let file else { return }
        var failure: (any Error)?
        do { try perform(.load) { _ in ((), .keep) } } catch { failure = error }
        if keepsDamagedFilesAside(failure) {
            // The store's policy: a write keeps the damaged file aside (under the lock) and the store starts afresh.
            do {
                try perform(.write) { _ in ((), .keep) }
                failure = nil
            } catch { failure = error }
        }
        let token = file.fileSystem.watch(file.path) { [weak self] in self?.fileMayHaveChanged() }
        guarded.withLock { $0.watch = token }
        if let failure { throw failure }
        fileMayHaveChanged()
    }

    /// The file's folder changed (a watcher event). Most events are this store's own writes, or other files in the
    /// folder: when the file is still the one the values came from there is nothing to do, which a `stat` tells
    /// without any lock. Otherwise the file is looked at on the engine's queue, never on the watcher's thread.
    func fileMayHaveChanged() {
        guard let file else { return }
        let current = try? file.fileSystem.identity(at: file.path)
        if guarded.withLock({ $0.store.refresh(currentIdentity: current) == .upToDate }) { return }
        scheduleLook(after: nil)
    }

    /// Looks at the file on the engine's queue: at once (events merged into one look), or `after` a delay (the
    /// second look at a file that did not decode, in case no event comes).
    func scheduleLook(after delay: Duration?) {
        guard let file else { return }
        let queue = guarded.withLock { guarded -> DispatchQueue? in
            if delay == nil {
                if guarded.lookQueued || guarded.store.isShut { return nil }
                guarded.lookQueued = true
            }
            return guarded.workQueue
        }
        guard let queue else { return }
        let look: @Sendable () -> Void = { [weak self] in self?.lookAtFile(recheck: delay != nil) }
        if let delay { file.clock.schedule(delay, queue, look) } else { queue.async(execute: look) }
    }

    /// A look at the file, as a watcher event makes on the engine's queue: loads another writer's change and
    /// announces it, then writes back values a stale rewrite put back. Failures are reported once.
    func lookAtFile(recheck: Bool = false) {
        if recheck { guarded.withLock { $0.store.recheckRan() } }
        var operation = PrefsReport.Operation.read
        do {
            do { try perform(.look, fromBackground: true) { _ in ((), .keep) } } catch
                where keepsDamagedFilesAside(error)
            {
                try perform(.write, fromBackground: true) { _ in ((), .keep) }
            }
            guard guarded.withLock({ $0.store.hasRestoredValues }) else { return }
            operation = .write
            try perform(.write, fromBackground: true) { _ in ((), .none) }
        } catch {
            // Closed meanwhile: nobody is left to tell, and nothing reports once `close()` has returned.
            if case .storeClosed? = error as? PrefsError { return }
            changes.reported.fromBackground {
                changes.reported.reportOnce(error, key: "", operation: operation, file: path)
            }
        }
    }

    /// Whether `error` is a file that does not decode, which this store's policy keeps aside.
    private func keepsDamagedFilesAside(_ error: (any Error)?) -> Bool {
        guard file?.damagePolicy == .keepAside, case .corruptFile? = error as? PrefsError else { return false }
        return true
    }

    // MARK: Handles

    /// A store handle is made on this engine; false when it has shut (the registry then opens a new one).
    func retain() -> Bool { guarded.withLock { $0.store.retain() } }

    /// A store handle was closed, or released unclosed. The last one commits the deferred changes still in memory
    /// (a failure is reported) and shuts the engine in one step under the writer lock, so that no write can come
    /// between the two; afterwards nothing of it touches the file or its folder.
    func release() {
        writer.lock()
        write.changed()
        if guarded.withLock({ $0.store.handles == 1 && $0.store.hasDeferredChanges }) {
            do { try perform(.write, delivering: false) { _ in ((), .pending) } } catch {
                ErrorReporter.report(
                    error,
                    key: guarded.withLock { $0.store.unwritten(.deferred) }.sorted()
                        .joined(separator: ", "), operation: .write)
            }
        }
        let (shut, token) = guarded.withLock { guarded -> (Bool, FileWatchToken?) in
            guard guarded.store.release() else { return (false, nil) }
            defer { guarded.watch = nil }
            return (true, guarded.watch)
        }
        if shut { write.shut = true }
        writer.unlock()
        token?.cancel()
        changes.deliverAnnouncements()
        // Shut: a report of a look or a timed commit still being delivered on another thread ends before this returns.
        if shut, file != nil { changes.reported.close() }
    }

    // MARK: Damage

    /// The file's damage now (nil: it reads), then each time that changes.
    func damageUpdates() -> AsyncStream<(any Error)?> {
        let (stream, continuation) = AsyncStream.makeStream(of: (any Error)?.self)
        let id = guarded.withLock { guarded in
            guarded.nextStream += 1
            guarded.damageStreams[guarded.nextStream] = continuation
            continuation.yield(guarded.store.damage)
            return guarded.nextStream
        }
        continuation.onTermination = { [weak self] _ in
            self?.guarded.withLock { _ = $0.damageStreams.removeValue(forKey: id) }
        }
        return stream
    }

    /// Tells the streams of `damageUpdates()` when the file became damaged or readable again, in order.
    func publishDamage() {
        guarded.withLock { guarded in
            let damage = guarded.store.damage
            guard guarded.damageTold != (damage != nil) else { return }
            guarded.damageTold = damage != nil
            for stream in guarded.damageStreams.values { stream.yield(damage) }
        }
    }
}
