import Foundation
import Prefs
import Synchronization

/// One key as this instance last read it from the table: its value (nil once removed) and the row's version.
struct Entry: Sendable, Equatable {
    var value: PrefValue?
    var version: Int64
}

/// What one read of the table found: rows by key, and the keys whose rows could not be decoded (kept as they
/// were). `startedAt` is ``Snapshot/startRead()``, taken before the statement was sent.
struct Reading: Sendable {
    var rows: [String: Entry] = [:]
    var unreadable: Set<String> = []
    /// The keys the read covered: rows missing among them have no row in the table.
    var keys: Set<String>?
    let startedAt: UInt64
}

/// The in-memory copy of one namespace that serves every read, shared by the store and the listener.
///
/// Everything in it was read from the table (by a `SELECT` or a write's `RETURNING`); notifications only say what
/// to read. Each held entry remembers when it was learned, on a counter that also stamps every read before it is
/// sent. A read sent after an entry was learned started after that entry's commit, so it is the newer truth and
/// replaces it, even with a lower version (a `TRUNCATE` or a restore reset the table). A read sent before an entry
/// was learned replaces it only with a higher version, so reads never go backwards.
final class Snapshot: Sendable {
    let namespace: String
    /// The PostgreSQL schema the rows are read from.
    let schema: Schema
    /// The largest value text (in bytes) a read accepts: a row beyond it is skipped and reported, never received.
    let largestValue: Int
    let changes = ChangeFeed()
    private struct Held {
        var entry: Entry
        var learnedAt: UInt64
    }
    private let entries = Locked<[String: Held]>([:])
    private let clock = Atomic<UInt64>(0)
    /// Rows already reported as unreadable, by key and version, so each is reported once.
    private let reported = Locked<Set<String>>([])

    /// The local file that keeps the last values seen, when the store was opened with one.
    let cache: FileStore?

    init(namespace: String, schema: Schema, largestValue: Int, cache: FileStore? = nil) {
        self.namespace = namespace
        self.schema = schema
        self.largestValue = largestValue
        self.cache = cache
    }

    /// Set (under the entries' lock) once a read of the whole namespace was merged.
    private let loaded = Atomic<Bool>(false)

    /// Starts from what the cache file holds (the server being away), unless the namespace was read meanwhile; the
    /// first read of the table replaces it all.
    func seed(from cache: FileStore) throws {
        let values = try cache.allValues()
        entries.withLock { entries in
            guard !loaded.load(ordering: .relaxed) else { return }
            let learnedAt = clock.add(1, ordering: .sequentiallyConsistent).newValue
            for (key, value) in values {
                entries[key] = Held(entry: Entry(value: value, version: 0), learnedAt: learnedAt)
            }
        }
    }

    /// Serialises the cache file's writes, so the last one written holds the newest values.
    private let cacheWrites = Locked<Void>(())

    /// Writes every value to the cache file, if there is one; a failure is reported, and the next change retries.
    func saveCache() {
        guard let cache else { return }
        let failure = cacheWrites.withLock { _ in Result { try cache.replaceAll(allValues()) } }
        if case .failure(let error) = failure { ErrorReporter.report(error, key: "", operation: .write) }
    }

    func value(forKey key: String) -> PrefValue? { entries.withLock { $0[key]?.entry.value } }

    func allValues() -> [String: PrefValue] { entries.withLock { $0.compactMapValues(\.entry.value) } }

    /// The stamp to take just before sending a statement whose rows will be merged.
    func startRead() -> UInt64 { clock.add(1, ordering: .sequentiallyConsistent).newValue }

    /// Merges what a read found (see the type's rule); returns the keys whose value changed.
    func merge(_ reading: Reading) -> [String] {
        entries.withLock { entries in
            let learnedAt = clock.add(1, ordering: .sequentiallyConsistent).newValue
            if reading.keys == nil { loaded.store(true, ordering: .relaxed) }
            var changed: [String] = []
            let covered = reading.keys ?? Set(entries.keys).union(reading.rows.keys)
            for key in covered where !reading.unreadable.contains(key) {
                let fresh = reading.rows[key]
                let held = entries[key]
                if let held, held.learnedAt > reading.startedAt {
                    // Learned while this read was on its way: only a newer version of the row replaces it.
                    guard let fresh, fresh.version > held.entry.version else { continue }
                }
                if let fresh {
                    entries[key] = Held(entry: fresh, learnedAt: learnedAt)
                } else {
                    entries[key] = nil
                }
                if held?.entry.value != fresh?.value { changed.append(key) }
            }
            return changed
        }
    }

    /// Saves the cache and tells observers that `keys` changed (each once, however often it is named).
    func publish(_ keys: [String]) {
        guard !keys.isEmpty else { return }
        saveCache()
        changes.publish(keys)
    }

    // MARK: Reading rows

    /// Decodes one row's `value::text` (nil once removed, or when its text has more than ``largestValue`` bytes:
    /// `size`); a value of the wrong shape or size is reported once and nil is returned, so the caller keeps what
    /// it had.
    func decode(_ text: String?, size: Int?, key: String, version: Int64) -> Entry? {
        guard let size else { return Entry(value: nil, version: version) }
        do {
            guard let text, size <= largestValue else {
                throw PrefsError.decodingFailed(
                    key: key,
                    reason: "a value of \(size) bytes, more than the \(largestValue) a row may have "
                        + "(PostgresStore.Limits.largestValue); skipped")
            }
            return Entry(value: try PrefValue(jsonText: text), version: version)
        } catch {
            let first = reported.withLock { $0.insert("\(version)\u{0}\(key)").inserted }
            if first {
                let reason: String
                if case .decodingFailed(_, let detail) = error as? PrefsError {
                    reason = detail
                } else {
                    reason = "\(error)"
                }
                ErrorReporter.report(
                    PrefsError.decodingFailed(
                        key: key,
                        reason: "row \(String(reflecting: key)) of namespace "
                            + "\(String(reflecting: namespace)) in \(schema.prefix)prefs_values holds \(reason)"),
                    key: key, operation: .read)
            }
            return nil
        }
    }

    /// The horizon the next read of the change feed starts from (nil: the next read reads every row).
    private let horizon = Locked<UInt64?>(nil)

    /// Forgets the horizon: the next ``catchUp(on:deadline:)`` reads every row (after a reconnection, when the server
    /// may be another one).
    func forgetHorizon() { horizon.withLock { $0 = nil } }

    /// Reads what changed since the last read (everything the first time, see ``Schema/changesSince``) and merges
    /// it; returns the keys whose value changed, for the caller to publish or not.
    ///
    /// A truncated table, or a horizon lower than the one read from (a table restored on another server), makes it
    /// read every row instead.
    func catchUp(on connection: Connection, deadline: ContinuousClock.Instant) throws -> [String] {
        let from = horizon.withLock { $0 }
        var reading = Reading(keys: nil, startedAt: startRead())
        let rows = try connection.execute(
            schema.changesSince, [namespace, String(largestValue), from.map { String($0) } ?? "0"], deadline: deadline)
        var reached: UInt64? = nil
        var truncated = false
        var keys: Set<String> = []
        for row in rows {
            switch row[0] {
            case "h": reached = row[1].flatMap { UInt64($0) }
            case "x": truncated = true
            default:
                guard let key = row[1] else { continue }
                keys.insert(key)
                // A key deleted by SQL and not written since has no row: it is gone.
                guard let version = row[3].flatMap({ Int64($0) }) else { continue }
                if let entry = decode(row[2], size: row[4].flatMap { Int($0) }, key: key, version: version) {
                    reading.rows[key] = entry
                } else {
                    reading.unreadable.insert(key)
                }
            }
        }
        if let from, truncated || (reached ?? from) < from {
            horizon.withLock { if $0 == from { $0 = nil } }
            return try catchUp(on: connection, deadline: deadline)
        }
        if from != nil { reading.keys = keys }
        let changed = merge(reading)
        // Only once merged: a read that starts from the new horizon must not find this one's rows missing.
        if let reached { horizon.withLock { if $0 == from { $0 = reached } } }
        return changed
    }
}
