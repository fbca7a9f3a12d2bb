import Foundation
import Prefs
import PrefsTestSupport
import TestThreads
import Testing

/// Many writers at once, in several processes and in several tasks of one process: no update may be lost.
@Suite(.enabled(if: Reliability.enabled), .ownThreads)
struct LoadTests {
    /// 4 processes each make `count` read-modify-write updates on a suite, a file store and a vault at the same
    /// time (see the helper's `rmw`): appends and dictionary entries with unique names, and toggles of a
    /// per-process flag an odd number of times, so each lost update shows in the final state.
    @Test func processesKeepEveryUpdate() async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let processes = 4
        let count = Reliability.scaled(250)
        let specs = directory.specs
        let started = ContinuousClock.now
        let exits = try await withThrowingTaskGroup(of: ChildProcess.Exit.self) { group in
            for index in 0..<processes {
                let arguments = ["rmw", "p\(index)", String(count)] + specs.map(\.spec)
                group.addTask {
                    try await onThread { try ChildProcess.run(arguments, timeLimit: Reliability.timeLimit) }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        for exit in exits { #expect(exit.succeeded, "\(exit.description)") }
        let elapsed = ContinuousClock.now - started

        let appends = (0..<count).filter { $0 % 3 == 0 }
        let entries = (0..<count).filter { $0 % 3 == 1 }
        let toggles = count - appends.count - entries.count
        let expectedList = Set((0..<processes).flatMap { process in appends.map { "p\(process)-\($0)" } })
        var expectedMap: [String: Int] = [:]
        for process in 0..<processes { for index in entries { expectedMap["p\(process)-\(index)"] = index } }

        for (name, spec, _) in specs {
            let store = try StoreSpec.open(spec)
            let list = try store.value(for: PrefKey("list", default: [String]()))
            let map = try store.value(for: PrefKey("map", default: [String: Int]()))
            let flags = try (0..<processes).map { try store.value(for: PrefKey<Bool?>("flag-p\($0)", default: nil)) }
            let kept = Set(list).intersection(expectedList).count + map.filter { expectedMap[$0.key] == $0.value }.count
            let flagsRight = flags.filter { $0 == (toggles % 2 == 1) }.count
            Reliability.report(
                "load \(name) processes=\(processes) updates=\(processes * count) "
                    + "appends-kept=\(Set(list).count)/\(expectedList.count) entries-kept=\(map.count)/\(expectedMap.count) "
                    + "flags-right=\(flagsRight)/\(processes) kept=\(kept + flagsRight * toggles) time=\(elapsed)")
            #expect(list.count == expectedList.count, "\(name): duplicate or lost appends")
            #expect(Set(list) == expectedList, "\(name)")
            #expect(map == expectedMap, "\(name)")
            #expect(flagsRight == processes, "\(name): \(flags)")
        }
    }

    /// 8 tasks share the same wrappers: each appends, sets and reads its own key, bumps a shared counter and
    /// subscribes, while an observer waits for the final list. Runs on every kind of store.
    @Test(arguments: ["InMemoryStore", "SuiteFileStore", "FileStore", "EncryptedFileStore"])
    func tasksShareWrappers(store name: String) async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store: any KeyValueStore =
            if let spec = directory.specs.first(where: { $0.name == name })?.spec {
                try StoreSpec.open(spec)
            } else {
                InMemoryStore()
            }
        let tasks = 8
        // The observer's stream keeps every version of the list it has not received yet, and the writers (which
        // never suspend) run before it: memory grows with the square of the appends. Ten times 500 rounds peaked
        // at 19 GB in a soak, so the in-memory case grows three times, not ten.
        // Under ThreadSanitizer (`make tsan`) the point is the races, which a fifth of the rounds meets as well.
        #if PREFS_TSAN
            let inMemoryRounds = 100
        #else
            let inMemoryRounds = Reliability.soak ? 1_500 : 500
        #endif
        let rounds = name == "InMemoryStore" ? inMemoryRounds : Reliability.scaled(40)
        let list = StoredValue(key: "list", default: [String](), store: store)
        let counter = StoredValue(key: "counter", default: 0, store: store)
        let own = (0..<tasks).map { StoredValue(key: "own-\($0)", default: -1, store: store) }

        let observer = Task {
            for await current in list.values where current.count == tasks * rounds { return true }
            return false
        }
        let errors = await withTaskGroup(of: [String].self) { group in
            for task in 0..<tasks {
                group.addTask {
                    var errors: [String] = []
                    for round in 0..<rounds {
                        list.append("t\(task)-\(round)")
                        own[task].wrappedValue = round
                        if own[task].wrappedValue != round {
                            errors.append("task \(task) read back \(own[task].wrappedValue)")
                        }
                        counter.update { $0 += 1 }
                        _ = list.wrappedValue.count
                        if round % 8 == 0 {
                            var subscription = counter.values.makeAsyncIterator()
                            _ = await subscription.next()
                        }
                    }
                    return errors
                }
            }
            return await group.reduce(into: []) { $0 += $1 }
        }
        let sawFinal = try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask { await observer.value }
            group.addTask {
                try await Task.sleep(for: .seconds(60))
                observer.cancel()
                return false
            }
            defer { group.cancelAll() }
            return try await group.next() ?? false
        }
        Reliability.report(
            "threads \(name) tasks=\(tasks) rounds=\(rounds) list=\(list.wrappedValue.count) "
                + "counter=\(counter.wrappedValue) errors=\(errors.count)")
        #expect(sawFinal, "the observer never saw all \(tasks * rounds) appends")
        #expect(errors == [])
        #expect(Set(list.wrappedValue).count == tasks * rounds)
        #expect(list.wrappedValue.count == tasks * rounds)
        #expect(counter.wrappedValue == tasks * rounds)
        #expect(own.map(\.wrappedValue) == Array(repeating: rounds - 1, count: tasks))
    }
}
