import Foundation
import Synchronization

extension StoreEngine {
    // MARK: Opening

    /// Loads the file now (a missing file is an empty store) and starts watching it for other processes' writes. A
    /// file that cannot be decoded is watched all the same, so the store recovers when it is repaired; its error
    /// is thrown once the watch is in place, unless the store keeps damaged files aside (its first write does).
    ///
    /// Opening only reads: it takes no lock and creates nothing. A write by another process between that load and
    /// the start of watching raises no event, so the file is looked at once more after.
    func open() throws {
        guard let file else { return }
        var failure: (any Error)?
        do { try look(opening: true) } catch { failure = error }
        let token = file.fileSystem.watch(file.path) { [weak self] in self?.fileMayHaveChanged() }
        guarded.withLock { $0.watch = token }
        if let failure { throw failure }
        fileMayHaveChanged()
    }

    /// The file's folder changed (a watcher event). Most events are this store's own writes, or other files in the
    /// folder: when the file is still the one the values came from there is nothing to do, which a `stat` tells.
    /// Otherwise the file is looked at on the engine's queue, never on the watcher's thread.
    func fileMayHaveChanged() {
        guard let file else { return }
        let current = try? file.fileSystem.identity(at: file.path)
        if let current, current.inode == renaming.load(ordering: .acquiring) { return }  // this process's commit
        let queue = guarded.withLock { guarded -> DispatchQueue? in
            guard guarded.store.mustRead(current), !guarded.lookQueued, !guarded.store.isShut else { return nil }
            guarded.lookQueued = true
            return guarded.workQueue
        }
        queue?.async { [weak self] in self?.lookAtFile() }
    }

    /// A look at the file, as a watcher event makes on the engine's queue: loads another writer's change and
    /// announces it. Failures are reported once.
    func lookAtFile() {
        do { try look(opening: false) } catch {
            changes.reported.fromBackground {
                changes.reported.reportOnce(error, key: "", operation: .read, file: path)
            }
        }
    }

    // MARK: Handles

    /// A store handle is made on this engine; false when it has shut (the registry then opens a new one).
    func retain() -> Bool { guarded.withLock { $0.store.retain() } }

    /// A store handle was closed, or released unclosed. The last one commits the deferred changes still in memory
    /// (a failure is reported) and shuts the engine in one step under the writer lock, so that no write can come
    /// between the two; afterwards nothing of it touches the file or its folder.
    func release() {
        writer.lock()
        var reports: [any Error] = []
        if guarded.withLock({ $0.store.handles == 1 && $0.store.hasDeferredChanges }) {
            do { try run(.commit) { _ in } } catch {
                let keys = guarded.withLock { $0.store.unwritten.keys.sorted() }
                ErrorReporter.report(error, key: keys.joined(separator: ", "), operation: .write)
            }
            reports = tx.takeReports()
        }
        let (shut, token) = guarded.withLock { guarded -> (Bool, FileWatchToken?) in
            guard guarded.store.release() else { return (false, nil) }
            defer { guarded.watch = nil }
            return (true, guarded.watch)
        }
        if shut { tx.shut = true }
        writer.unlock()
        token?.cancel()
        deliver(reports)
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
            continuation.yield(guarded.store.damage ?? guarded.store.asideDue)
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
            let damage = guarded.store.damage ?? guarded.store.asideDue
            guard guarded.damageTold != (damage != nil) else { return }
            guarded.damageTold = damage != nil
            for stream in guarded.damageStreams.values { stream.yield(damage) }
        }
    }
}
