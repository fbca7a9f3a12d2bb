package import Prefs

/// One key as a read of the table or a write found it: its value (nil once removed) and the row's version.
package struct Entry: Sendable, Equatable {
    package var value: PrefValue?
    package var version: Int64

    package init(value: PrefValue?, version: Int64) {
        self.value = value
        self.version = version
    }
}

/// A PostgreSQL snapshot as `pg_current_snapshot()` prints it, `xmin:xmax:xip,…`: which transactions had ended when
/// it was taken. Every transaction below `xmin` had; none at or above `xmax` had; between them, all but those in
/// `inProgress`.
package struct Visibility: Sendable, Equatable {
    package let xmin: UInt64
    package let xmax: UInt64
    package let inProgress: [UInt64]

    package init(xmin: UInt64, xmax: UInt64, inProgress: [UInt64]) {
        self.xmin = xmin
        self.xmax = xmax
        self.inProgress = inProgress
    }

    /// Parses `pg_current_snapshot()::text`; nil for anything else.
    package init?(_ text: String) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, let xmin = UInt64(parts[0]), let xmax = UInt64(parts[1]) else { return nil }
        var inProgress: [UInt64] = []
        for part in parts[2].split(separator: ",") {
            guard let xid = UInt64(part) else { return nil }
            inProgress.append(xid)
        }
        self.init(xmin: xmin, xmax: xmax, inProgress: inProgress)
    }

    /// Whether the transaction `xid` had ended (committed or rolled back) when the snapshot was taken, so that what
    /// it committed is in the snapshot.
    package func includes(_ xid: UInt64) -> Bool { xid < xmin || (xid < xmax && !inProgress.contains(xid)) }
}

/// What one read of the change feed found.
package struct Reading: Sendable {
    /// The read's snapshot: the rows are the table as of it.
    package var snapshot: Visibility
    /// Rows by key.
    package var rows: [String: Entry] = [:]
    /// Keys whose rows could not be decoded: each keeps what it had.
    package var unreadable: Set<String> = []
    /// The keys the read covered (rows missing among them have no row in the table); nil for a read of the whole
    /// namespace.
    package var keys: Set<String>? = nil
    /// Whether the table was truncated since the read's bound: the namespace must be read whole.
    package var truncated = false

    package init(
        snapshot: Visibility, rows: [String: Entry] = [:], unreadable: Set<String> = [], keys: Set<String>? = nil,
        truncated: Bool = false
    ) {
        self.snapshot = snapshot
        self.rows = rows
        self.unreadable = unreadable
        self.keys = keys
        self.truncated = truncated
    }
}

/// The state of one namespace as one instance knows it, and the rule by which reads of the table and its own writes
/// change it: a pure value, so that every order of a write, a read's sending, its snapshot and another client's
/// commit can be played through it (FeedStateTests).
///
/// It keeps two layers:
/// - `feed`: the table as of `seen`, the snapshot of the last read merged. Reads are sent one after another, each
///   bounded by the snapshot of the one before: it returns every row (and every SQL deletion and `TRUNCATE`) of a
///   transaction that `seen` does not include, so that after it is merged `feed` is the table as of its snapshot,
///   removals and re-inserts at any version included.
/// - `own`: what this process's writes committed that `seen` does not include yet, each with the id of the
///   transaction that wrote it. A read whose snapshot includes that transaction, or one sent after the write was
///   learned, brings the row as it is then (the write or anything after it), so the entry goes; until then it is
///   newer than `feed` for its key.
///
/// A key reads as its `own` entry if it has one, else as `feed` has it. Nothing compares versions across the two
/// layers: a removal has none and a re-insert starts again at 1, so only transaction ids order them.
package struct FeedState: Sendable {
    package private(set) var feed: [String: Entry] = [:]
    package private(set) var own: [String: Own] = [:]
    /// The snapshot of the last read merged; nil before the first and after ``forget()``: the next read reads the
    /// namespace whole.
    package private(set) var seen: Visibility?
    /// Whether a read of the whole namespace was merged.
    package private(set) var loaded = false
    /// Stamps reads as they are sent and own writes as they are learned.
    private var clock: UInt64 = 0

    /// Nothing known yet: the first read reads the namespace whole.
    package init() {}

    /// What an own write committed: the entry, the writing transaction's id, and the stamp of the moment it was
    /// learned.
    package struct Own: Sendable, Equatable {
        package var entry: Entry
        package var xid: UInt64
        package var learnedAt: UInt64
    }

    /// What a read needs to be sent, and to be merged once it has come back.
    package struct Ticket: Sendable, Equatable {
        /// The read returns what this snapshot does not include; nil: the whole namespace.
        package let bound: Visibility?
        package let sentAt: UInt64
    }

    /// What a read's merge gave.
    package enum Outcome: Equatable {
        /// The keys whose value changed, each once.
        case merged([String])
        /// The table was truncated or restored since the bound: read the namespace whole (``beginRead()`` again).
        case readWhole
    }

    /// The value `key` reads as.
    package func value(forKey key: String) -> PrefValue? {
        if let own = own[key] { return own.entry.value }
        return feed[key]?.value
    }

    /// Every key and value.
    package func allValues() -> [String: PrefValue] {
        var values = feed.compactMapValues(\.value)
        for (key, own) in own { values[key] = own.entry.value }
        return values
    }

    /// Starts from `values` (a cache file's) until the first read of the namespace, unless one was merged already.
    package mutating func seed(_ values: [String: PrefValue]) {
        guard !loaded else { return }
        feed = values.mapValues { Entry(value: $0, version: 0) }
    }

    /// Makes the next read read the namespace whole (after a reconnection, the server may be another one).
    package mutating func forget() { seen = nil }

    /// Stamps a read about to be sent and gives its bound.
    package mutating func beginRead() -> Ticket {
        clock += 1
        return Ticket(bound: seen, sentAt: clock)
    }

    /// Merges what the read of `ticket` found; returns the keys whose value changed, or asks for a whole read.
    package mutating func finish(_ ticket: Ticket, _ reading: Reading) -> Outcome {
        if let bound = ticket.bound {
            // A bound other than the one the read was sent with (forgotten meanwhile), a truncated table, or a
            // snapshot older than the bound (the table restored on another server): the read says nothing exact.
            guard seen == bound, !reading.truncated, reading.snapshot.xmax >= bound.xmax else {
                seen = nil
                return .readWhole
            }
        }
        let covered = reading.keys ?? Set(feed.keys).union(reading.rows.keys).union(reading.unreadable)
        var before: [String: PrefValue?] = [:]
        for key in covered.union(own.keys) { before[key] = value(forKey: key) }
        for key in covered where !reading.unreadable.contains(key) { feed[key] = reading.rows[key] }
        for (key, written) in own
        where written.learnedAt < ticket.sentAt || reading.snapshot.includes(written.xid) {
            // The read brings the row as it is since that write; an unreadable row keeps the write's value, the last
            // good one.
            if reading.unreadable.contains(key) { feed[key] = written.entry }
            own[key] = nil
        }
        seen = reading.snapshot
        if reading.keys == nil { loaded = true }
        return .merged(before.compactMap { key, old in old == value(forKey: key) ? nil : key }.sorted())
    }

    /// Learns what an own write committed in the transaction `xid` (its rows as the write returned them); returns
    /// the keys whose value changed.
    package mutating func learn(_ written: [String: Entry], xid: UInt64) -> [String] {
        clock += 1
        var changed: [String] = []
        for (key, entry) in written.sorted(by: { $0.key < $1.key }) {
            // The last read merged already brings this write, or what came after it.
            if let seen, seen.includes(xid) { continue }
            // A write of the key by another thread of this process, learned first, committed after this one: it
            // waited for this one's row lock, so it read this one's version.
            if let other = own[key], other.xid != xid, other.entry.version > entry.version { continue }
            let old = value(forKey: key)
            own[key] = Own(entry: entry, xid: xid, learnedAt: clock)
            if old != entry.value { changed.append(key) }
        }
        return changed
    }
}
