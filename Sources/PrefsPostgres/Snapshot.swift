import Foundation
import Prefs
import Synchronization

/// What one own write committed: the rows it returned, by key, and the id of its transaction.
struct Written: Sendable {
    var rows: [String: Entry] = [:]
    /// The writing transaction's id (`pg_current_xact_id()`); `UInt64.max` when the server did not say, which no
    /// snapshot includes, so the entry stays until a read sent after it was learned.
    var xid = UInt64.max
}

/// The in-memory copy of one namespace that serves every read, shared by the store and the listener: a
/// ``FeedState`` behind a lock, the reads of the change feed that change it (run by the listener thread alone, one
/// after another), and the announcements of what changed.
///
/// Everything in it was read from the table (by a read of the feed or a write's `RETURNING`); notifications only say
/// when to read.
final class Snapshot: Sendable {
    let namespace: String
    /// The PostgreSQL schema the rows are read from.
    let schema: Schema
    /// The largest value text (in bytes) a read accepts: a row beyond it is skipped and reported, never received.
    let largestValue: Int
    let changes = ChangeFeed()
    private let state = Locked(FeedState())
    /// Rows already reported as unreadable, by key and version, so each is reported once.
    private let reported = Locked<Set<String>>([])
    /// When the last read of the feed was merged: a bound older than ``Schema/removalsKept`` (half of it, for
    /// margin) may miss deletions the table has pruned from its log, so the read after it reads the namespace whole.
    /// Only the listener thread touches it.
    private let lastMerged = Locked<ContinuousClock.Instant?>(nil)

    /// The local file that keeps the last values seen, when the store was opened with one.
    let cache: FileStore?

    init(namespace: String, schema: Schema, largestValue: Int, cache: FileStore? = nil) {
        self.namespace = namespace
        self.schema = schema
        self.largestValue = largestValue
        self.cache = cache
    }

    /// Whether a read of the whole namespace was merged.
    var isLoaded: Bool { state.withLock { $0.loaded } }

    /// Starts from what the cache file holds (the server being away), unless the namespace was read meanwhile; the
    /// first read of the table replaces it all.
    func seed(from cache: FileStore) throws {
        let values = try cache.allValues()
        state.withLock { $0.seed(values) }
    }

    /// Serialises the cache file's writes, so the last one written holds the newest values.
    private let cacheWrites = Locked<Void>(())

    /// Writes every value to the cache file, if there is one; a failure is reported, and the next change retries.
    func saveCache() {
        guard let cache else { return }
        let failure = cacheWrites.withLock { _ in Result { try cache.replaceAll(allValues()) } }
        if case .failure(let error) = failure { ErrorReporter.report(error, key: "", operation: .write) }
    }

    func value(forKey key: String) -> PrefValue? { state.withLock { $0.value(forKey: key) } }

    func allValues() -> [String: PrefValue] { state.withLock { $0.allValues() } }

    /// Learns what an own write committed (see ``FeedState/learn(_:xid:)``); returns the keys whose value changed.
    func learn(_ written: Written) -> [String] { state.withLock { $0.learn(written.rows, xid: written.xid) } }

    /// Saves the cache and tells observers that `keys` changed (each once, however often it is named).
    func publish(_ keys: [String]) {
        guard !keys.isEmpty else { return }
        saveCache()
        changes.publish(keys)
    }

    /// Makes the next read read the namespace whole.
    func forgetBound() { state.withLock { $0.forget() } }

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

    /// Reads what changed since the last read (everything the first time, after ``forgetBound()``, or after a
    /// truncation, a restore or a long silence) and merges it; returns the keys whose value changed, for the caller
    /// to publish or not, and how many rows of keys the server sent. Only the listener thread calls it.
    func catchUp(on connection: Connection, deadline: ContinuousClock.Instant) throws -> (changed: [String], rows: Int)
    {
        if let last = lastMerged.withLock({ $0 }), ContinuousClock.now - last > Schema.removalsKept / 2 {
            forgetBound()
        }
        var sent = 0
        while true {
            let ticket = state.withLock { $0.beginRead() }
            let rows = try connection.execute(
                schema.changesSince,
                [
                    namespace, String(largestValue), ticket.bound.map { String($0.xmax) },
                    "{" + (ticket.bound?.inProgress ?? []).map(String.init).joined(separator: ",") + "}",
                ], preparedAs: "prefs_values_feed", deadline: deadline)
            var reading = Reading(snapshot: Visibility(xmin: 0, xmax: 0, inProgress: []))
            var keys: Set<String> = []
            var snapshot: Visibility? = nil
            for row in rows {
                switch row[0] {
                case "h": snapshot = row[1].flatMap(Visibility.init)
                case "x": reading.truncated = true
                default:
                    guard let key = row[1] else { continue }
                    sent += 1
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
            guard let snapshot else {
                throw PostgresStoreError.serverError(
                    sqlState: "", message: "the change feed's answer has no snapshot row; \(rows.count) rows")
            }
            reading.snapshot = snapshot
            if ticket.bound != nil { reading.keys = keys }
            switch state.withLock({ $0.finish(ticket, reading) }) {
            case .readWhole: continue
            case .merged(let changed):
                lastMerged.withLock { $0 = ContinuousClock.now }
                return (changed, sent)
            }
        }
    }
}
