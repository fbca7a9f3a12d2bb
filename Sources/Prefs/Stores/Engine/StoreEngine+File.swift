import Foundation
import Synchronization

extension StoreEngine {
    // MARK: Reading the file

    /// What a read of the file gave.
    enum Read {
        /// Its values, and the identity of the bytes read (nil: there is no file).
        case values([String: PrefValue], FileIdentity?)
        case failed(any Error)
    }

    /// Reads the file (through `lock` when one is held) and decodes it; a file that stays unsettled for the grace is
    /// taken as it is then: empty, it holds no values; otherwise it is damaged.
    func read(_ file: BoundFile, through lock: FileLock?) -> Read {
        let deadline = file.clock.now() + file.grace
        var pause = Duration.microseconds(500)
        while true {
            if let read = readOnce(file, through: lock, final: file.clock.now() >= deadline) { return read }
            file.clock.pause(pause)
            pause = min(pause * 2, .milliseconds(20))
        }
    }

    /// One read; nil when the file does not decode, or is empty, and a writer that takes no lock may be halfway
    /// through rewriting it (unless `final`).
    private func readOnce(_ file: BoundFile, through lock: FileLock?, final: Bool) -> Read? {
        let contents: FileContents?
        do throws(PrefsError) {
            contents = try prefsIO { () throws(SystemCallError) in try file.fileSystem.read(file.path, through: lock) }
        } catch {
            // A file that cannot even be read (a folder in its place, no permission) is unreadable like one that
            // cannot be decoded: never overwritten, reported, and recovered from once it reads again.
            return .failed(Self.namingTheWayOut(error))
        }
        guard let contents else { return .values([:], nil) }
        do {
            if !contents.data.isEmpty {
                return .values(try file.codec.decode(contents.data, path: file.path), contents.identity)
            }
            if lock?.createdEmpty == true { return .values([:], contents.identity) }
            if !final, file.grace > .zero { return nil }
            return .values(try file.codec.decodeEmpty(path: file.path), contents.identity)
        } catch {
            if !final, file.grace > .zero, case .corruptFile? = error as? PrefsError { return nil }
            return .failed(Self.namingTheWayOut(error))
        }
    }

    /// Takes newly read values at `identity` (nil: no file), announcing what changed unless `announcing` is false
    /// (the first load). Returns memory as it is then.
    @discardableResult
    func load(_ values: [String: PrefValue], identity: FileIdentity?, announcing: Bool) -> View {
        let (view, recovered) = guarded.withLock { guarded -> (View, Bool) in
            let recovered = guarded.store.damage != nil
            let changed = guarded.store.load(values, identity: identity)
            if announcing { announce(changed, in: guarded) }
            return (View(store: guarded.store, layers: guarded.layers), recovered)
        }
        if recovered {
            changes.reported.forget()
            publishDamage()
        }
        return view
    }

    /// The file at `identity` does not read: memory keeps its values and writes are refused; or, when the store's
    /// policy keeps such a file aside, the store holds no values and its next write moves the file. Returns whether
    /// the file is to be kept aside.
    @discardableResult
    func markDamaged(_ error: any Error, identity: FileIdentity?) -> Bool {
        let keepsAside = keepsDamagedFilesAside(error)
        guarded.withLock { guarded in
            let changed = guarded.store.failedToRead(error, identity: identity, keepsAside: keepsAside)
            announce(changed, in: guarded)
        }
        publishDamage()
        return keepsAside
    }

    /// Whether `error` is a file that does not decode, which this store's policy keeps aside at its next write.
    func keepsDamagedFilesAside(_ error: any Error) -> Bool {
        guard file?.damagePolicy == .keepAside, case .corruptFile? = error as? PrefsError else { return false }
        return true
    }

    /// A store file that cannot be decoded, with what to do about it in the one report the app gets.
    static func namingTheWayOut(_ error: any Error) -> any Error {
        guard case .corruptFile(let path, let reason)? = error as? PrefsError else { return error }
        return PrefsError.corruptFile(path: path, reason: reason + PrefsError.damagedFileWayOut)
    }

    /// Looks at the file (opening the store, or after a watcher event) and loads it when another writer changed it,
    /// announcing what changed unless `opening`. It only reads, under this process's writer lock, and takes no lock
    /// of the file: files are replaced whole by a rename, and a writer that takes no lock is read again until its
    /// file decodes or the grace ends.
    func look(opening: Bool) throws {
        guard let file else { return }
        writer.lock()
        if !opening { guarded.withLock { $0.lookQueued = false } }  // a later event needs a later look
        let result = Result { () throws in
            if tx.shut { return }
            let (known, damaged) = guarded.withLock { ($0.store.identity, $0.store.damage != nil) }
            let current = try prefsIO { () throws(SystemCallError) in try file.fileSystem.identity(at: file.path) }
            guard opening || damaged || current != known else { return }
            switch read(file, through: nil) {
            case .values(let values, let identity): load(values, identity: identity, announcing: !opening)
            case .failed(let error):
                // A file kept aside at the next write is reported then, with where it went.
                if !markDamaged(error, identity: current) { throw error }
            }
        }
        writer.unlock()
        changes.deliverAnnouncements()
        try result.get()
    }

    // MARK: Writing the file

    /// Takes the file's lock for the write in progress, and reads the file when it is not the one memory came from.
    /// A file that does not decode is refused, or, by the store's policy, kept aside.
    func lockAndRead(_ file: BoundFile) throws -> View {
        while true {
            let lock = try file.fileSystem.lock(file.path, timeout: LockWait.timeout, clock: file.clock)
            tx.lock = lock
            let view = currentViewForWrite()
            let outcome: Read
            if view.store.identity != lock.identity {
                outcome = read(file, through: lock)
            } else if let damage = view.store.damage ?? view.store.asideDue {
                outcome = .failed(damage)
            } else {
                return view
            }
            switch outcome {
            case .values(let values, let identity):
                return load(values, identity: identity ?? lock.identity, announcing: true)
            case .failed(let error):
                guard keepsDamagedFilesAside(error) else {
                    markDamaged(error, identity: lock.identity)
                    throw error
                }
                // The store's policy: keep the damaged file aside and go on from no values, under its lock.
                try keepAside(file, damagedBy: error)
                releaseLock()
            }
        }
    }

    private func currentViewForWrite() -> View { guarded.withLock { View(store: $0.store, layers: $0.layers) } }

    /// Removes the empty file the write's lock created, when the write wrote nothing (it holds the lock still).
    func removePlaceholder(of file: BoundFile) {
        guard tx.lock?.createdEmpty == true, (try? file.fileSystem.remove(file.path)) != nil else { return }
        guarded.withLock { $0.store.placeholderRemoved() }
    }

    /// Lets go of the file's lock the write in progress holds, if any.
    func releaseLock() {
        tx.lock?.release()
        tx.lock = nil
    }

    /// Commits what the write in progress staged on top of `before`, memory as the write found it (with the
    /// deferred changes, which go along): encode, temporary file, rename, folder sync; then memory follows the file
    /// and the changed keys are announced. With nothing to write, a file the lock created empty is removed again.
    func commitStaged(over before: StoreState, in file: BoundFile, wrote: inout Bool) throws {
        var values = before.values
        var changed: [String] = []
        for (key, value) in tx.staged where values[key] != value {
            values[key] = value
            changed.append(key)
        }
        guard !changed.isEmpty || tx.force || before.hasDeferredChanges else { return }
        let fileSystem = file.fileSystem
        let data = try file.codec.encode(values)
        if data.count > POSIX.maximumFileSize {
            throw PrefsError.tooLarge(path: file.path, size: data.count, limit: POSIX.maximumFileSize)
        }
        if before.sweepDue, tx.lock?.createdEmpty == false { fileSystem.removeStaleTemporaries(beside: file.path) }
        let temporary = try prefsIO { () throws(SystemCallError) in
            try fileSystem.writeTemporary(beside: file.path, data: data, mode: 0o600, durable: true)
        }
        renaming.store(temporary.identity.inode, ordering: .releasing)
        defer { renaming.store(0, ordering: .releasing) }
        try prefsIO { () throws(SystemCallError) in try fileSystem.commit(temporary, to: file.path) }
        wrote = true
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
        changes.reported.writeReachedTheFile()
        guarded.withLock { guarded in
            guarded.store.committed(values, identity: temporary.identity)
            announce(changed, in: guarded)
        }
        file.codec.didCommit()
        if let committedError { throw committedError }
    }

    // MARK: Moving the file aside

    /// Moves a file that cannot be decoded aside, keeping it as `<name>.damaged-<UTC date and time>` in the same
    /// folder, and starts afresh with no values; returns where it went, or nil when the file reads (nothing moves).
    func moveDamagedFileAside(at now: Date = Date()) throws -> URL? {
        try withFileLock { file in
            switch read(file, through: tx.lock) {
            case .values(let values, let identity):
                load(values, identity: identity, announcing: true)
                return nil
            case .failed:
                let destination = try Self.asideName(for: file, at: now)
                try moveAside(to: destination, in: file)
                return URL(filePath: destination, directoryHint: .notDirectory)
            }
        }
    }

    /// Deletes the file, under its lock, and empties the store (deferred changes too): what `prefs delete DOMAIN`
    /// does. Observers hear of every key whose value changed.
    func deleteFile() throws {
        try withFileLock { file in
            // No file (the lock's placeholder goes again): nothing to delete.
            if tx.lock?.createdEmpty != true { try moveAside(to: nil, in: file) }
        }
    }

    /// Runs `body` holding the writer lock and the file's lock, outside any other write of this thread.
    private func withFileLock<T>(_ body: (BoundFile) throws -> T) throws -> T {
        guard let file else { throw PrefsError.storeClosed(path: path) }
        writer.lock()
        let result = Result { () throws -> T in
            if tx.shut { throw PrefsError.storeClosed(path: path) }
            guard tx.depth == 0 else {
                throw PrefsError.io(
                    path: path, operation: "move aside", errno: EDEADLK,
                    message: "the file cannot be moved or deleted inside a write of the same store; do it after")
            }
            tx.depth = 1
            defer {
                removePlaceholder(of: file)
                tx.depth = 0
                releaseLock()
            }
            tx.lock = try file.fileSystem.lock(file.path, timeout: LockWait.timeout, clock: file.clock)
            return try body(file)
        }
        let reports = tx.takeReports()
        writer.unlock()
        changes.deliverAnnouncements()
        for report in reports { ErrorReporter.report(report, key: "", operation: .write) }
        return try result.get()
    }

    /// Moves the damaged file to a free `<name>.damaged-<UTC date and time>` beside it, empties the store and leaves
    /// the report of where it went for the end of the write.
    func keepAside(_ file: BoundFile, damagedBy error: any Error, at now: Date = Date()) throws {
        let destination = try Self.asideName(for: file, at: now)
        try moveAside(to: destination, in: file)
        let reason: String
        // What happened only: the way out the unreadable file's error names is taken now.
        if case .corruptFile(_, let text)? = error as? PrefsError {
            reason = PrefsError.reasonAlone(text)
        } else {
            reason = "\(error)"
        }
        tx.reports.append(PrefsError.damagedFileKeptAside(path: file.path, keptAt: destination, reason: reason))
    }

    /// `<path>.damaged-<UTC date and time>`, or with `-2`, `-3`… when that is taken.
    static func asideName(for file: BoundFile, at now: Date) throws -> String {
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

    /// Moves the file to `destination` (nil: deletes it) and empties the store.
    private func moveAside(to destination: String?, in file: BoundFile) throws {
        try prefsIO { () throws(SystemCallError) in
            if let destination {
                try file.fileSystem.move(file.path, to: destination)
            } else {
                try file.fileSystem.remove(file.path)
            }
        }
        try? file.fileSystem.syncFolder(of: file.path)
        guarded.withLock { guarded in
            let old = guarded.store.values
            guarded.store.committed([:], identity: nil)
            announce(StoreState.diff(old, [:]), in: guarded)
        }
        publishDamage()
        changes.reported.forget()
    }
}
