import Foundation
import Prefs
import PrefsTestSupport

/// The deferred-write scenarios (issue 27): a deferred `set` against Foundation's `set`, a flush against a durable
/// `set`, and two figures that are not ratios: the latency of single deferred sets and the file writes of a slider.
func deferredScenarios(folders: Folders) -> [Scenario] {
    [10, 1_000].map { keys in
        Scenario(
            name: "deferred_set_vs_userdefaults_set_\(keys)", target: 3,
            ours: "deferred set, \(keys)-key suite (commits in the background)",
            baseline: "UserDefaults set, no synchronize()"
        ) { budget in
            let store = try SuiteFileStore(suiteName: "bench-deferred-\(keys)", directory: folders.config)
            try store.replaceAll(integerKeys(keys))
            let value = StoredValue(key: "counter", default: 0, store: store.deferringWrites())
            let defaults = try foundationSuite("bench-foundation-deferred-\(keys)", keys: keys, folders: folders)
            var next = 0
            let result = try await compare(
                ours: { count in
                    for _ in 0..<count {
                        next += 1
                        value.set(next)
                    }
                },
                baseline: { count in
                    for _ in 0..<count {
                        next += 1
                        defaults.set(next, forKey: "counter")
                    }
                }, budget: budget)
            try flushOnThisThread(store)
            return result
        }
    } + [
        Scenario(
            name: "deferred_flush_vs_durable_set", target: 1.1, ours: "deferred set + flush(), 100-key suite",
            baseline: "durable set, same suite"
        ) { budget in
            let store = try SuiteFileStore(suiteName: "bench-flush", directory: folders.config)
            try store.replaceAll(integerKeys(100))
            let quick = store.deferringWrites()
            let deferred = StoredValue(key: "counter", default: 0, store: quick)
            let durable = StoredValue(key: "counter", default: 0, store: store)
            var next = 0
            return try await compare(
                ours: { count in
                    for _ in 0..<count {
                        next += 1
                        deferred.set(next)
                        try flushOnThisThread(quick)
                    }
                },
                baseline: { count in
                    for _ in 0..<count {
                        next += 1
                        durable.set(next)
                    }
                }, budget: budget, limit: 5_000)
        }
    ]
}

/// A figure that is not a ratio: its line of the report, whether it met its target, and its JSON object.
struct DeferredFigure {
    let name: String
    let line: String
    let met: Bool
    let json: String
}

/// The latency of single deferred sets and the file writes of a 60 Hz slider, both on a 1 000-key suite.
func deferredFigures(folders: Folders, quick: Bool, includes: (String) -> Bool) async throws -> [DeferredFigure] {
    var figures: [DeferredFigure] = []
    let window: Duration = .milliseconds(50)
    if includes("deferred_set_latency_1000") {
        log("running deferred_set_latency_1000")
        let store = try SuiteFileStore(suiteName: "bench-deferred-latency", directory: folders.config)
        try store.replaceAll(integerKeys(1_000))
        let value = StoredValue(key: "counter", default: 0, store: store.deferringWrites(window: window))
        var samples: [Double] = []
        let count = quick ? 2_000 : 20_000
        samples.reserveCapacity(count)
        for next in 1...count {
            let start = monotonicNanoseconds()
            value.set(next)
            samples.append(Double(monotonicNanoseconds() - start))
        }
        try flushOnThisThread(store)
        samples.sort()
        let p50 = samples[count / 2]
        let p99 = samples[count * 99 / 100]
        let worst = samples[count - 1]
        let met = p99 <= 100_000
        figures.append(
            DeferredFigure(
                name: "deferred_set_latency_1000",
                line: "\(count) single sets: p50 \(formatDuration(p50)), p99 \(formatDuration(p99)), "
                    + "max \(formatDuration(worst)) (p99 ≤ 100 µs \(met ? "met" : "MISSED"))",
                met: met,
                json: "\"p50_ns\":\(jsonNumber(p50)),\"p99_ns\":\(jsonNumber(p99)),\"max_ns\":\(jsonNumber(worst))"))
    }
    if includes("slider_60hz_file_writes") {
        log("running slider_60hz_file_writes")
        let store = try SuiteFileStore(suiteName: "bench-slider", directory: folders.config)
        try store.replaceAll(integerKeys(1_000))
        let slider = StoredValue(key: "volume", default: 0.0, store: store.deferringWrites(window: window))
        let writes = try FileReplacements(of: store.url)
        let frames = 180
        let frame: UInt64 = 1_000_000_000 / 60
        var slowest: UInt64 = 0
        var overOneMillisecond = 0
        let start = monotonicNanoseconds()
        for index in 1...frames {
            let due = start + UInt64(index - 1) * frame
            let now = monotonicNanoseconds()
            if due > now { usleep(UInt32((due - now) / 1_000)) }  // the next frame
            let before = monotonicNanoseconds()
            slider.set(Double(index) / Double(frames))
            let took = monotonicNanoseconds() - before
            slowest = max(slowest, took)
            if took > 1_000_000 { overOneMillisecond += 1 }
        }
        let elapsed = Double(monotonicNanoseconds() - start)
        try flushOnThisThread(store)
        let count = writes.count()
        // The background commits: every write but the final flush's, when it had anything left to write.
        let windows = Int((elapsed / Double(DeferredCommitWindow.nanoseconds(window))).rounded(.up))
        let met = count <= windows + 1
        figures.append(
            DeferredFigure(
                name: "slider_60hz_file_writes",
                line: "\(frames) sets at 60 Hz in \(formatDuration(elapsed)): \(count) file writes for \(windows) "
                    + "windows of 50 ms, flush included (≤ one per window \(met ? "met" : "MISSED")); slowest set "
                    + "\(formatDuration(Double(slowest))), \(overOneMillisecond) over 1 ms",
                met: met,
                json: "\"writes\":\(count),\"windows\":\(windows),\"slowest_set_ns\":\(slowest),"
                    + "\"sets_over_1ms\":\(overOneMillisecond)"))
    }
    return figures
}

/// Durations in nanoseconds, for the window arithmetic above.
enum DeferredCommitWindow {
    static func nanoseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
    }
}

/// The synchronous `flush()`, which async code would otherwise not pick: it writes on the caller's thread, as a
/// durable `set` does.
func flushOnThisThread(_ store: any KeyValueStore) throws {
    try store.flush()
}
