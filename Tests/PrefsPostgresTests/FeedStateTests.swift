import Prefs
import PrefsPostgres
import TestThreads
import Testing

/// The merge rule of the change feed (``FeedState``), played through every order of the events that can interleave
/// around an instance's own write: the write's transaction beginning and committing, the instance learning what it
/// wrote, the instance's read of the feed being sent, its snapshot being taken and its answer merged, and another
/// client's transaction (a removal, a re-insert at version 1 or at a higher version, an update, a `TRUNCATE`, a write
/// of another key) beginning and committing. A model of the table plays PostgreSQL's part: rows become visible when
/// their transaction commits, a snapshot says which transactions had ended, and a read returns what the change feed's
/// query returns.
///
/// After every event the instance must hold, for every key, a value the table held at some moment no older than what
/// the instance has learned (the snapshot of its last read, the commit of each own write it learned); after one more
/// read, exactly the table.
@Suite("The change feed's merge, in every order", .ownThreads)
struct FeedStateTests {
    /// What another client's transaction does.
    enum Change: CaseIterable, Sendable {
        case delete, reinsertAtOne, reinsertHigher, update, truncate, writeOtherKey, deleteOtherKey
    }

    /// One step of a run.
    enum Step: Equatable, CustomStringConvertible {
        case writeBegins(Int)
        case writeCommits(Int)
        case writeLearned(Int)
        case readSent, snapshotTaken, readMerged
        case changeBegins, changeCommits
        var description: String {
            switch self {
            case .writeBegins(let n): "W\(n)b"
            case .writeCommits(let n): "W\(n)c"
            case .writeLearned(let n): "L\(n)"
            case .readSent: "R"
            case .snapshotTaken: "S"
            case .readMerged: "M"
            case .changeBegins: "Cb"
            case .changeCommits: "Cc"
            }
        }
    }

    /// One own write, another client's change, one read: every order (560 of them) of each change, for a write of a
    /// value and for a removal.
    @Test(arguments: Change.allCases, [PrefValue?.some(.int(2)), nil])
    func anOwnWriteAChangeAndARead(_ change: Change, _ written: PrefValue?) throws {
        let chains: [[Step]] = [
            [.writeBegins(1), .writeCommits(1), .writeLearned(1)], [.readSent, .snapshotTaken, .readMerged],
            [.changeBegins, .changeCommits],
        ]
        let orders = interleavings(chains)
        #expect(orders.count == 560)
        for order in orders {
            var run = Run(writes: [written])
            for step in order { try run.play(step, change: change, order: order) }
            try run.readAndCompare(order: order)
        }
    }

    /// Two own writes of one key from two threads, committed one after the other (the second waited for the first's
    /// row lock) and learned in either order, beside a read.
    @Test func twoOwnWritesOfOneKeyLearnedInEitherOrder() throws {
        let chains: [[Step]] = [
            [.writeBegins(1), .writeCommits(1), .writeLearned(1)],
            [.writeBegins(2), .writeCommits(2), .writeLearned(2)], [.readSent, .snapshotTaken, .readMerged],
        ]
        let orders = interleavings(chains).filter { order in
            order.firstIndex(of: .writeCommits(1))! < order.firstIndex(of: .writeCommits(2))!
        }
        #expect(orders.count == 840)
        for order in orders {
            var run = Run(writes: [.int(2), .int(3)])
            for step in order { try run.play(step, change: nil, order: order) }
            try run.readAndCompare(order: order)
        }
    }

    /// A snapshot's text as `pg_current_snapshot()` prints it reads back, and says which transactions had ended.
    @Test func aSnapshotSaysWhichTransactionsHadEnded() throws {
        let snapshot = try #require(Visibility("100:105:101,103"))
        #expect(snapshot == Visibility(xmin: 100, xmax: 105, inProgress: [101, 103]))
        #expect([99, 100, 102, 104].allSatisfy(snapshot.includes))
        #expect(![101, 103, 105, 106].contains(where: snapshot.includes))
        #expect(Visibility("7:7:")?.includes(6) == true)
        #expect(Visibility("7:7:")?.includes(7) == false)
        #expect(Visibility("nonsense") == nil)
    }

    /// The orders in which the steps of `chains` can happen, each chain's steps in their own order.
    private func interleavings(_ chains: [[Step]]) -> [[Step]] {
        var orders: [[Step]] = []
        func extend(_ order: [Step], _ positions: [Int]) {
            if positions.enumerated().allSatisfy({ $0.element == chains[$0.offset].count }) {
                orders.append(order)
                return
            }
            for (chain, position) in positions.enumerated() where position < chains[chain].count {
                var next = positions
                next[chain] += 1
                extend(order + [chains[chain][position]], next)
            }
        }
        extend([], Array(repeating: 0, count: chains.count))
        return orders
    }
}

/// The table as PostgreSQL keeps it, for one namespace: committed rows, transactions in progress, the log of
/// removals, and every value each key held, by moment.
private struct Table {
    struct Row {
        var value: PrefValue?
        var version: Int64
        var changed: UInt64
    }
    private(set) var rows: [String: Row] = [:]
    private var removals: [(key: String?, xid: UInt64)] = []
    private var nextXid: UInt64 = 100
    private var running: Set<UInt64> = []
    /// Bumped by every commit.
    private(set) var moment = 0
    /// Every value each key held from a moment on (nil: absent or removed).
    private var history: [String: [(moment: Int, value: PrefValue?)]] = [:]

    init(_ values: [String: PrefValue]) {
        let xid = begin()
        commit(xid) { table in
            for (key, value) in values { table[key] = Row(value: value, version: 1, changed: xid) }
        }
    }

    mutating func begin() -> UInt64 {
        defer { nextXid += 1 }
        running.insert(nextXid)
        return nextXid
    }

    /// Commits `xid`, whose changes `body` makes (stamping rows with `xid`), with the keys it removed logged.
    mutating func commit(_ xid: UInt64, removing removed: [String?] = [], _ body: (inout [String: Row]) -> Void) {
        let keys = Set(rows.keys)
        body(&rows)
        for key in removed { removals.append((key, xid)) }
        running.remove(xid)
        moment += 1
        for key in keys.union(rows.keys) where history[key]?.last?.value != rows[key]?.value || history[key] == nil {
            history[key, default: []].append((moment, rows[key]?.value))
        }
    }

    var snapshot: Visibility {
        Visibility(xmin: running.min() ?? nextXid, xmax: nextXid, inProgress: running.sorted())
    }

    /// What `prefs_values_feed` returns now for a read bounded by `bound`.
    func feed(after bound: Visibility?) -> Reading {
        let snapshot = snapshot
        guard let bound else {
            return Reading(snapshot: snapshot, rows: rows.mapValues { Entry(value: $0.value, version: $0.version) })
        }
        var reading = Reading(snapshot: snapshot, keys: [])
        for (key, row) in rows where !bound.includes(row.changed) {
            reading.keys?.insert(key)
            reading.rows[key] = Entry(value: row.value, version: row.version)
        }
        for removal in removals where !bound.includes(removal.xid) {
            guard let key = removal.key else {
                reading.truncated = true
                continue
            }
            // The key alone: a row written since the deletion is found by its own stamp above.
            reading.keys?.insert(key)
        }
        return reading
    }

    /// Whether `key` held `value` at some moment from `since` to now.
    func held(_ key: String, _ value: PrefValue?, since: Int) -> Bool {
        let changes = history[key] ?? []
        // The value in force at `since`, and every one after it.
        let inForce = changes.last { $0.moment <= since }.map { [$0.value] } ?? [nil]
        return (inForce + changes.filter { $0.moment > since }.map(\.value)).contains(value)
    }

    var values: [String: PrefValue] { rows.compactMapValues(\.value) }
}

/// One run of steps: the table, the instance's state, and what it learned when.
private struct Run {
    var table = Table(["k": .int(1), "z": .int(1)])
    var state = FeedState()
    /// The values the own writes write to key `k`, in order.
    let writes: [PrefValue?]
    private var writeXids: [Int: UInt64] = [:]
    private var returned: [Int: (entry: Entry, moment: Int)?] = [:]
    private var changeXid: UInt64 = 0
    private var ticket: FeedState.Ticket?
    private var reading: (reading: Reading, moment: Int)?
    /// The oldest moment each key's value may come from: what the instance has learned.
    private var learned: [String: Int] = [:]

    init(writes: [PrefValue?]) {
        self.writes = writes
        let ticket = state.beginRead()
        _ = state.finish(ticket, table.feed(after: nil))
        learned = ["k": table.moment, "z": table.moment]
    }

    mutating func play(_ step: FeedStateTests.Step, change: FeedStateTests.Change?, order: [FeedStateTests.Step])
        throws
    {
        switch step {
        case .writeBegins(let n): writeXids[n] = table.begin()
        case .writeCommits(let n):
            let xid = writeXids[n]!
            let value = writes[n - 1]
            var entry: Entry? = nil
            table.commit(xid) { rows in
                // As prefs_values_write: a removal of a key without a value writes nothing and returns no row.
                guard value != nil || rows["k"]?.value != nil else { return }
                let written = Entry(value: value, version: (rows["k"]?.version ?? 0) + 1)
                rows["k"] = .init(value: value, version: written.version, changed: xid)
                entry = written
            }
            returned[n] = entry.map { ($0, table.moment) }
        case .writeLearned(let n):
            guard let (entry, moment) = returned[n] ?? nil else { break }
            _ = state.learn(["k": entry], xid: writeXids[n]!)
            learned["k"] = max(learned["k"]!, moment)
        case .readSent: ticket = state.beginRead()
        case .snapshotTaken: reading = (table.feed(after: ticket!.bound), table.moment)
        case .readMerged: try merge(reading!.reading, ticket: ticket!, moment: reading!.moment, order: order)
        case .changeBegins: changeXid = table.begin()
        case .changeCommits: commitChange(change!)
        }
        for key in ["k", "z", "o"] {
            let value = state.value(forKey: key)
            #expect(
                table.held(key, value, since: learned[key] ?? 0),
                "\(order) with \(String(describing: change)): after \(step), \(key) reads \(String(describing: value))")
        }
    }

    private mutating func merge(_ reading: Reading, ticket: FeedState.Ticket, moment: Int, order: [FeedStateTests.Step])
        throws
    {
        if state.finish(ticket, reading) == .readWhole {
            // The store reads the namespace whole at once, with a snapshot of its own.
            let whole = state.beginRead()
            let outcome = state.finish(whole, table.feed(after: whole.bound))
            try #require(outcome != .readWhole, "\(order)")
            for key in learned.keys { learned[key] = table.moment }
            return
        }
        for key in ["k", "z", "o"] { learned[key] = max(learned[key] ?? 0, moment) }
    }

    private mutating func commitChange(_ change: FeedStateTests.Change) {
        let xid = changeXid
        switch change {
        case .delete:
            table.commit(xid, removing: ["k"]) { $0["k"] = nil }
        case .reinsertAtOne:
            table.commit(xid, removing: ["k"]) { $0["k"] = .init(value: .int(9), version: 1, changed: xid) }
        case .reinsertHigher:
            table.commit(xid, removing: ["k"]) { $0["k"] = .init(value: .int(8), version: 50, changed: xid) }
        case .update:
            table.commit(xid) { rows in
                rows["k"] = .init(value: .int(7), version: (rows["k"]?.version ?? 0) + 1, changed: xid)
            }
        case .truncate:
            table.commit(xid, removing: [nil]) { $0 = [:] }
        case .writeOtherKey:
            table.commit(xid) { $0["o"] = .init(value: .int(5), version: 1, changed: xid) }
        case .deleteOtherKey:
            table.commit(xid, removing: ["z"]) { $0["z"] = nil }
        }
    }

    /// One more read, sent after everything: the instance then holds exactly the table.
    mutating func readAndCompare(order: [FeedStateTests.Step]) throws {
        let ticket = state.beginRead()
        if state.finish(ticket, table.feed(after: ticket.bound)) == .readWhole {
            let whole = state.beginRead()
            _ = state.finish(whole, table.feed(after: whole.bound))
        }
        #expect(state.allValues() == table.values, "\(order)")
        #expect(state.own.isEmpty, "\(order): own writes left after a read that includes them")
    }
}
