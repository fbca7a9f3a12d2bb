import Foundation
import Synchronization

extension StoreEngine {
    // MARK: The commit

    /// The values a commit writes.
    struct Draft {
        var values: [String: PrefValue]
        /// The keys changed, when known (else every key is compared).
        var changedKeys: Set<String>?
        /// The values observers last heard of, when they are not memory's (a batch's start).
        var announcedFrom: [String: PrefValue]?
        /// Write even if nothing changed.
        var force = false
        /// Where the file goes instead: `.some(nil)` deleted, `.some(name)` renamed.
        var moveAside: String??
        /// This run's own changes, to apply again on top of a file changed under the lock.
        var own: [String: PrefValue?] = [:]
        /// The whole content this run writes, whatever the file holds (an import).
        var replacement: [String: PrefValue]?

        mutating func rebase(onto latest: [String: PrefValue]) {
            values = replacement ?? latest
            for (key, value) in own { values[key] = value }
        }
    }

    /// The draft for `edit`, from the latest values (`state`); nil when there is nothing to write.
    func draft(for edit: Edit, from state: StoreState) -> Draft? {
        let values = state.values
        let pending = state.needsWrite
        switch edit {
        case .keep, .deferred:
            return nil
        case .none:
            return state.hasRestoredValues ? Draft(values: values, changedKeys: []) : nil
        case .pending:
            return pending ? Draft(values: values, changedKeys: []) : nil
        case .set(let key, let value):
            guard values[key] != value else { return nil }
            var draft = Draft(values: values, changedKeys: [key], own: [key: value])
            draft.values[key] = value
            return draft
        case .replace(let new):
            guard new != values else { return nil }
            return Draft(values: new, replacement: new)
        case .remove(let keys):
            let present = keys.filter { values[$0] != nil }
            guard !present.isEmpty else { return nil }
            var draft = Draft(values: values, changedKeys: Set(present))
            for key in present {
                draft.values[key] = nil
                draft.own.updateValue(nil, forKey: key)
            }
            return draft
        case .batch:
            let start = write.endBatch()
            guard pending || (start != nil && start != values) else { return nil }
            // Its changes are in memory, which a file changed under the lock replaces: kept to apply again.
            let own = state.unwritten(.batch).map { ($0, values[$0]) }
            return Draft(values: values, announcedFrom: start, own: Dictionary(uniqueKeysWithValues: own))
        case .rewrite:
            return Draft(values: values, changedKeys: [], force: true)
        case .moveAside(let destination):
            return Draft(values: [:], moveAside: destination)
        }
    }

    /// Commits `draft`, made from `state`: encode, temporary file, the check that the file is still the one read
    /// (`checking`), the rename, the folder sync; then memory follows the file and the changes are announced.
    /// Returns false when the file changed under the lock (the run reads it and applies its change again); nothing
    /// was written then.
    func commit(
        _ draft: Draft, from state: StoreState, in file: BoundFile, checking: Bool, renamed: inout Bool
    ) throws -> Bool {
        let fileSystem = file.fileSystem
        let now = file.clock.now()
        if case .some(let destination) = draft.moveAside {
            renamed = true
            return try moveAside(to: destination, in: file)
        }
        let data = try file.codec.encode(draft.values)
        if data.count > POSIX.maximumFileSize {
            throw PrefsError.tooLarge(path: file.path, size: data.count, limit: POSIX.maximumFileSize)
        }
        // After encoding: a vault's key hashes need the key the encoding resolved.
        let base = state.file?.identity
        var record = state.commitRecord(
            for: draft.values, changedKeys: draft.changedKeys, now: now, keyHash: file.codec.recordHash,
            freshLineage: draft.force)
        record.contentSize = UInt64(data.count)
        record.contentHash = StableHash.ofContents(data)
        if state.file?.sweepDue == true, base != nil { fileSystem.removeStaleTemporaries(beside: file.path) }
        let temporary = try prefsIO { () throws(SystemCallError) in
            try fileSystem.writeTemporary(beside: file.path, data: data, mode: 0o600, durable: true)
        }
        // Under the lock only a writer that takes none (Foundation rewriting a suite in place, someone deleting the
        // file) changes the file: its change is read, and this one applied on top.
        if checking, !fileIsAsRead(file, known: state) {
            fileSystem.discard(temporary)
            return false
        }
        // The commit file, in place, before the rename and under the lock: a process that reads the new file under
        // its lock finds the record of it. A suite's keeps a copy of the bytes too, so that any Prefs process can
        // put back a commit a stale in-place rewrite undid, the first one included (with copies only once a rewrite
        // was seen, another process appending on top of that first one lost the committer's values: 9 to 23 of 300
        // appends beside Foundation, in 1 run of 4 to 8).
        try? fileSystem.overwrite(
            CommitFile.path(of: file.path),
            with: CommitFile.encode(record, copy: state.file?.restoresStaleRewrites == true ? data : nil),
            mode: 0o600)
        let identity: FileIdentity
        do {
            identity = try fileSystem.commit(temporary, to: file.path)
        } catch is CommitRace {
            return false
        }
        renamed = true
        write.replacedFile()
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
        let racy = fileSystem.isRacy(identity)
        guarded.withLock { guarded in
            let changed = guarded.store.committed(
                draft.values, identity: identity, record: record, announcedFrom: draft.announcedFrom,
                changedKeys: draft.changedKeys, racy: racy)
            announce(changed, of: guarded.store.values)
        }
        file.codec.didCommit()
        if let committedError { throw committedError }
        return true
    }

    /// Moves the damaged file to a free `<name>.damaged-<UTC date and time>` beside it, empties the store and leaves
    /// the report of where it went for the end of the run.
    func keepAside(_ file: BoundFile, damagedBy error: any Error, at now: Date = Date()) throws {
        let destination = try Self.asideName(for: file, at: now)
        _ = try moveAside(to: destination, in: file)
        let reason: String
        // What happened only: the way out the unreadable file's error names is taken now.
        if case .corruptFile(_, let text)? = error as? PrefsError {
            reason = PrefsError.reasonAlone(text)
        } else {
            reason = "\(error)"
        }
        let report = PrefsError.damagedFileKeptAside(path: file.path, keptAt: destination, reason: reason)
        write.reports.append(report)
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

    /// Moves the file to `destination` (nil: deletes it, with a suite's commit copy) and empties the store.
    func moveAside(to destination: String?, in file: BoundFile) throws -> Bool {
        write.replacedFile()
        try prefsIO { () throws(SystemCallError) in
            // The commit file first: its record, and a suite's copy, describe commits of the file that goes, and
            // would otherwise be restored into whatever file takes its name.
            try? file.fileSystem.remove(CommitFile.path(of: file.path))
            if let destination {
                try file.fileSystem.move(file.path, to: destination)
            } else {
                try file.fileSystem.remove(file.path)
            }
        }
        try? file.fileSystem.syncFolder(of: file.path)
        guarded.withLock { guarded in
            let changed = guarded.store.cleared()
            announce(changed, of: guarded.store.values)
        }
        publishDamage()
        changes.reported.forget()
        return true
    }
}
