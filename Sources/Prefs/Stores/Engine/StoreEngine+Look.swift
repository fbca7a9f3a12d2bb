import Foundation
import Synchronization

extension StoreEngine {
    // MARK: Reading the file

    /// The outcome of a look at the file.
    enum Look {
        /// The state after the look, when the look saw it (else the run reads it).
        case ready(StoreState?)
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
    func look(at file: BoundFile, access: Access, through lock: FileLock?) throws -> Look {
        let fileSystem = file.fileSystem
        let current = try prefsIO { () throws(SystemCallError) in try fileSystem.identity(at: file.path) }
        let known = guarded.withLock { $0.store }
        let refresh = known.refresh(currentIdentity: current, writing: lock != nil)
        if refresh == .upToDate { return .ready(known) }
        if refresh == .cleared { return .ready(load([:], contents: nil, in: file, announcing: access != .load)) }
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
        guard let contents else { return .ready(load([:], contents: nil, in: file, announcing: access != .load)) }
        let hash = StableHash.ofContents(contents.data)
        if refresh == .compareBytes, known.file?.contentHash == hash {
            let racy = fileSystem.isRacy(contents.identity)
            return .ready(
                guarded.withLock {
                    $0.store.bytesUnchanged(racy: racy)
                    return $0.store
                })
        }
        // The commit file, read under the same lock as the file; a look lets go of its shared lock at once, so that
        // writers waiting for the file are held up by two reads at most, never by decoding.
        let commitFileData = try? fileSystem.read(CommitFile.path(of: file.path), through: nil)
        shared?.release()
        let commitFile = commitFileData.flatMap { CommitFile.decode($0.data) }
        let values: [String: PrefValue]
        if contents.data.isEmpty {
            // An empty file holds no values: the one a write's lock creates, or one emptied by anyone. A suite's may
            // be Foundation's in-place rewrite halfway, and is waited for through the grace when that cannot be
            // ruled out: it was emptied within the last tick, or Prefs last committed it with values (Linux
            // updates a truncated file's size before its times, so its times alone do not tell).
            if lock?.createdEmpty != true,
                emptySuiteMayBeRewriting(contents, commitFile: commitFile, in: file, known: known)
            {
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
        return .ready(
            load(
                values, contents: contents, commitFile: commitFile, hash: hash, in: file,
                announcing: access != .load, verified: reader != nil))
    }

    /// Whether an empty suite file may be another writer's in-place rewrite halfway: it changed within the last
    /// tick, or the commit file beside it says Prefs last committed it with values.
    func emptySuiteMayBeRewriting(
        _ contents: FileContents, commitFile: (record: CommitRecord, copy: Data?)?, in file: BoundFile,
        known: StoreState
    ) -> Bool {
        guard (known.file?.grace ?? .zero) > .zero else { return false }
        if file.fileSystem.isRacy(contents.identity) { return true }
        guard let record = commitFile?.record else { return false }
        return record.contentSize > 0 && !record.describesPrevious(Data())
    }

    /// The first load of a file whose writer is in the middle of a commit waits for that commit (a few
    /// milliseconds), at most the lock's timeout (a writer stopped with its lock held): nil then, and the file is
    /// read without a lock, for the next write to read again under its own.
    func waitForSharedLock(of file: BoundFile) -> FileLock? {
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
    static func emptyFile(_ file: BoundFile) -> any Error {
        PrefsError.corruptFile(path: file.path, reason: "the file is empty")
    }

    /// Whether the file is still the one the values came from (`known`), checked under its lock just before a
    /// commit's rename: the same identity, and, when that identity may hide an in-place rewrite
    /// (``StoreState/Refresh``), the same bytes. When only the bytes differ, the next look reads the file again.
    func fileIsAsRead(_ file: BoundFile, known state: StoreState) -> Bool {
        let base = state.file?.identity
        guard (try? file.fileSystem.identity(at: file.path)) == base else { return false }
        guard base != nil, state.file?.racy == true, let known = state.file?.contentHash else { return true }
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
    func unreadable(_ error: any Error, in file: BoundFile, access: Access, emptyFile: Bool = false) -> Look {
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
                return .ready(nil)
            }
            return .suspect
        }
    }

    /// Takes newly read values (nil contents: no file), with the commit file beside it (decoded), read with the
    /// file: only when another writer changed it. `verified`: both were read under a lock of the file. Returns the
    /// state it leaves.
    @discardableResult
    func load(
        _ values: [String: PrefValue], contents: FileContents?, commitFile: (record: CommitRecord, copy: Data?)? = nil,
        hash: UInt64? = nil, in file: BoundFile, announcing: Bool, verified: Bool = true
    ) -> StoreState {
        var record: CommitRecord?
        var lastCommit: [String: PrefValue]?
        var intact = true
        let contentHash = contents.map { hash ?? StableHash.ofContents($0.data) }
        if let contents, let contentHash {
            intact = commitFile?.record.describes(size: contents.data.count, hash: contentHash) ?? false
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
        let (recovered, state) = guarded.withLock { guarded -> (Bool, StoreState) in
            let recovered = guarded.store.damage != nil
            let changed = guarded.store.load(
                values, identity: contents?.identity,
                contentHash: contentHash, record: record, intact: intact, now: now, keyHash: file.codec.recordHash,
                lastCommit: lastCommit, racy: racy, verified: verified, reportingChanges: announcing)
            if announcing { announce(changed, of: guarded.store.values) }
            return (recovered, guarded.store)
        }
        if recovered {
            changes.reported.forget()
            publishDamage()
        }
        return state
    }

    /// A store file that cannot be decoded, with what to do about it in the one report the app gets.
    static func namingTheWayOut(_ error: any Error) -> any Error {
        guard case .corruptFile(let path, let reason)? = error as? PrefsError else { return error }
        return PrefsError.corruptFile(path: path, reason: reason + PrefsError.damagedFileWayOut)
    }
}
