// The child-process side of the deferred-write tests (Tests/PrefsTests/DeferredWriteTests.swift) and of the
// deferred crash loop (Tests/PrefsReliabilityTests/DeferredCrashTests.swift).
import Foundation
import Prefs
import PrefsTestSupport

#if canImport(Glibc)
    import Glibc
#endif

enum DeferredCommands {
    /// Runs `arguments` if they name a deferred-write command; returns false otherwise.
    static func run(_ arguments: [String]) -> Bool {
        do {
            switch arguments.first {
            case "deferred-set-exit":
                try setThenExit(spec: arguments[1], key: arguments[2], value: Int(arguments[3])!)
            case "deferred-set-hang":
                try setThenHang(spec: arguments[1], key: arguments[2], value: Int(arguments[3])!)
            case "deferred-mix":
                try mix(spec: arguments[1], tag: arguments[2], count: Int(arguments[3])!)
            case "deferred-count-on":
                try countOn(
                    spec: arguments[1], key: arguments[2], windowMilliseconds: Int(arguments[3])!,
                    flushEvery: Int(arguments[4])!)
            default: return false
            }
        } catch {
            fail("\(arguments[0]): \(type(of: error)) \(error)")
        }
        return true
    }

    /// The store a spec names, with deferred writes that wait up to `window`.
    static func deferred(_ spec: String, window: Duration = .seconds(3600)) throws -> any KeyValueStore {
        guard let store = try StoreSpec.open(spec) as? FileBackedStore else { fail("not a file store: \(spec)") }
        return store.deferringWrites(window: window)
    }

    /// deferred-set-exit SPEC KEY VALUE: a deferred set with an hour's window, then a normal exit, which must
    /// commit it.
    static func setThenExit(spec: String, key: String, value: Int) throws {
        PrefsConfig.errorHandler = { report in fail("reported: \(report)") }
        try deferred(spec).set(value, for: PrefKey(key, default: 0))
        emit("set")
    }

    /// deferred-set-hang SPEC KEY VALUE: a deferred set with an hour's window, then waits to be killed.
    static func setThenHang(spec: String, key: String, value: Int) throws -> Never {
        let store = try deferred(spec)
        try store.set(value, for: PrefKey(key, default: 0))
        emit("set")
        while true { pause() }
    }

    /// deferred-mix SPEC TAG COUNT: COUNT rounds of a deferred set of "last-TAG" to the round's number and a
    /// read-modify-write `append("TAG-i")` to "list", through the same deferred store; then a normal exit. Any
    /// reported error fails the process.
    static func mix(spec: String, tag: String, count: Int) throws {
        PrefsConfig.errorHandler = { report in fail("reported: \(report)") }
        let store = try deferred(spec, window: .milliseconds(20))
        let last = StoredValue(key: "last-\(tag)", default: -1, store: store)
        let list = StoredValue(key: "list", default: [String](), store: store)
        for index in 0..<count {
            last.set(index)
            list.append("\(tag)-\(index)")
        }
        emit("ok")
    }

    /// deferred-count-on SPEC KEY WINDOW_MS FLUSH_EVERY: prints "start N M" with the stored values of KEY and
    /// KEY-after, then stores N+1, N+2, … in KEY and then the same in KEY-after, through a store deferring writes by
    /// WINDOW_MS, about one value a millisecond, printing "V T" once both sets have returned (T: the monotonic clock in nanoseconds) and, every FLUSH_EVERY values, "flushed V" once a flush
    /// has returned.
    static func countOn(spec: String, key name: String, windowMilliseconds: Int, flushEvery: Int) throws {
        let store = try deferred(spec, window: .milliseconds(windowMilliseconds))
        let key = PrefKey(name, default: 0)
        let after = PrefKey(name + "-after", default: 0)
        var value = try store.value(for: key)
        emit("start \(value) \(try store.value(for: after))")
        while true {
            value += 1
            try store.set(value, for: key)
            try store.set(value, for: after)
            emit("\(value) \(monotonicNanoseconds())")
            if value.isMultiple(of: flushEvery) {
                try store.flush()
                emit("flushed \(value)")
            }
            usleep(1_000)  // the pace of the writer, as a UI's would be; nothing waits on it
        }
    }

    static func monotonicNanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }
}
