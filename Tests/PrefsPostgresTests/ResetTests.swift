import Foundation
import PostgresTestServer
import Prefs
import PrefsPostgres
import PrefsTestSupport
import Synchronization
import TestThreads
import Testing

/// Versions going down (a `TRUNCATE`, a restore) and reloads racing with writes.
@Suite("PostgresStore resets and monotonic reads", .ownThreads)
struct ResetTests {
    @Test func aTruncateIsDetectedAndEveryInstanceResynchronises() async throws {
        let database = try Database()
        let first = try database.store()
        let second = try database.store("com.example.app")
        for value in 1...5 { try first.setValue(.int(Int64(value)), forKey: "x") }
        try first.setValue(.int(1), forKey: "y")
        try await eventually("the second instance to see x = 5") { try second.value(forKey: "x") == .int(5) }
        let announced = Collector(second.changedKeys())

        try database.sql(
            "TRUNCATE prefs_values; INSERT INTO prefs_values (namespace, key, value) VALUES ('com.example.app', 'x', '100')"
        )
        for store in [first, second] {
            try await eventually("the instance to resynchronise") { try store.allValues() == ["x": .int(100)] }
        }
        try await eventually("the changes to be announced") { Set(announced.values).isSuperset(of: ["x", "y"]) }
        // The versions restarted at 1: acknowledged sets of either instance still apply, here and there.
        try first.setValue(.int(7), forKey: "x")
        #expect(try first.value(forKey: "x") == .int(7))
        try await eventually("the second instance to see the new x") { try second.value(forKey: "x") == .int(7) }
        try second.setValue(.int(8), forKey: "x")
        #expect(try second.value(forKey: "x") == .int(8))
        try await eventually("the first instance to see it") { try first.value(forKey: "x") == .int(8) }
    }

    @Test func aRestoreThatLowersVersionsIsFollowed() async throws {
        let database = try Database()
        let first = try database.store()
        let second = try database.store()
        for value in 1...5 { try first.setValue(.int(Int64(value)), forKey: "x") }
        try await eventually("the second instance to see x = 5") { try second.value(forKey: "x") == .int(5) }
        // A restore of an older dump: the row comes back with an older value and a lower version.
        try database.sql(
            "BEGIN; DELETE FROM prefs_values; INSERT INTO prefs_values (namespace, key, value, version) "
                + "VALUES ('com.example.app', 'x', '2', 2); COMMIT")
        for store in [first, second] {
            try await eventually("the instance to follow the restore") { try store.value(forKey: "x") == .int(2) }
        }
        try second.setValue(.int(9), forKey: "x")
        try await eventually("the first instance to see the write after the restore") {
            try first.value(forKey: "x") == .int(9)
        }
    }

    /// Reloads (which anyone can trigger with a `reset` hint) run while this process writes: a read right after
    /// its own `set` returns never gives an older value.
    @Test func readsNeverGoBackwardsWhileReloadsRun() async throws {
        let database = try Database()
        let store = try database.store()
        let watcher = try database.store()
        let (_, intruder) = try database.roleWithoutTableRights()
        let stop = Atomic<Bool>(false)
        let spammer = Thread {
            while !stop.load(ordering: .relaxed) {
                _ = try? intruder.execute(#"NOTIFY prefs_values, '{"reset": true}'"#)
            }
        }
        spammer.start()
        defer { stop.store(true, ordering: .relaxed) }
        let level = StoredValue(key: "level", default: 0, store: watcher)
        let seen = Collector(level.values)
        var backwards = 0
        for value in 1...300 {
            try store.setValue(.int(Int64(value)), forKey: "level")
            if try store.value(forKey: "level") != .int(Int64(value)) { backwards += 1 }
        }
        #expect(backwards == 0)
        // The writes are done: the spammer stops, and the watcher (which also hears each write's hint) catches up
        // through its listener and the collector's task, which shares Swift Testing's threads with other tests.
        stop.store(true, ordering: .relaxed)
        try await eventually("the watcher to see the last value") { seen.values.last == 300 }
        // What the watcher yielded only ever went up.
        let yielded = seen.values
        #expect(zip(yielded, yielded.dropFirst()).allSatisfy { $0 < $1 }, "\(yielded)")
    }
}
