import Foundation
import Prefs

/// One key as this instance last saw it in the table: its value (nil once removed) and the row's version.
struct Entry: Sendable, Equatable {
    var value: PrefValue?
    var version: Int64
}

/// The in-memory copy of one namespace that serves every read, shared by the store and its listener thread.
final class Snapshot: Sendable {
    let namespace: String
    let changes = ChangeFeed()
    private let entries = Locked<[String: Entry]>([:])
    /// Rows already reported as unreadable, by key and version, so each is reported once.
    private let reported = Locked<Set<String>>([])

    init(namespace: String) { self.namespace = namespace }

    func value(forKey key: String) -> PrefValue? { entries.withLock { $0[key]?.value } }

    func allValues() -> [String: PrefValue] { entries.withLock { $0.compactMapValues(\.value) } }

    /// Applies entries newer than the ones held; returns the keys whose value changed.
    func apply(_ updates: [(key: String, entry: Entry)]) -> [String] {
        entries.withLock { entries in
            var changed: [String] = []
            for (key, entry) in updates {
                let old = entries[key]
                guard entry.version > old?.version ?? -1 else { continue }
                entries[key] = entry
                if old?.value != entry.value { changed.append(key) }
            }
            return changed
        }
    }

    /// Sets keys to exactly what was just read from the table (nil: no row); returns the keys whose value changed.
    func replace(_ rows: [String: Entry?]) -> [String] {
        entries.withLock { entries in
            var changed: [String] = []
            for (key, entry) in rows {
                let old = entries[key]
                entries[key] = entry
                if old?.value != entry?.value { changed.append(key) }
            }
            return changed
        }
    }

    /// Replaces the whole namespace with a fresh read of it; returns the keys whose value changed.
    func replaceAll(_ fresh: [String: Entry]) -> [String] {
        entries.withLock { entries in
            var changed: [String] = []
            for key in Set(entries.keys).union(fresh.keys) where entries[key]?.value != fresh[key]?.value {
                changed.append(key)
            }
            entries = fresh
            return changed
        }
    }

    func entry(forKey key: String) -> Entry? { entries.withLock { $0[key] } }

    func publish(_ keys: [String]) {
        changes.publish(changedKeys: keys)
    }

    // MARK: Reading rows

    /// Decodes one row's `value::text`; a value of the wrong shape is reported once and nil is returned, so the
    /// caller keeps what it had.
    func decode(_ text: String?, key: String, version: Int64) -> Entry? {
        guard let text else { return Entry(value: nil, version: version) }
        do {
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
                            + "\(String(reflecting: namespace)) in prefs_values holds \(reason)"),
                    key: key, operation: .read)
            }
            return nil
        }
    }

    /// Reads the whole namespace; unreadable rows keep the entry held so far.
    func load(from connection: Connection) throws -> [String: Entry] {
        var fresh: [String: Entry] = [:]
        for row in try connection.execute(Schema.selectNamespace, [namespace]) {
            guard let key = row[0], let version = row[2].flatMap({ Int64($0) }) else { continue }
            if let entry = decode(row[1], key: key, version: version) {
                fresh[key] = entry
            } else if let held = entry(forKey: key) {
                fresh[key] = held
            }
        }
        return fresh
    }

    /// Reads one key; nil in the result means there is no row, and an unreadable row is left out.
    func load(key: String, from connection: Connection) throws -> [String: Entry?] {
        guard let row = try connection.execute(Schema.selectKey, [namespace, key]).first else { return [key: nil] }
        guard let version = row[1].flatMap({ Int64($0) }), let entry = decode(row[0], key: key, version: version)
        else { return [:] }
        return [key: entry]
    }
}
