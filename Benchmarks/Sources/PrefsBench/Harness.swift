import Foundation
import Prefs
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Nanoseconds on the monotonic clock.
func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

/// Keeps a value alive so the optimizer cannot drop the work that produced it.
@inline(never)
func blackHole<T>(_ value: T) {
    withExtendedLifetime(value) {}
}

/// Compares a cached read of `value` with a bare `Mutex<Int>` read: the read scenarios of every store share it.
func compareCachedReadWithMutex(_ value: StoredValue<Int>, _ budget: Budget) async throws -> Comparison {
    let floor = MutexFloor()
    return try await compare(
        ours: reading { value.wrappedValue },
        baseline: reading { floor.value.withLock { $0 } }, budget: budget)
}

/// Compares two durable writes, `ours` and `baseline`, each called once per operation with the next number (1, 2,
/// 3, …, shared by both sides so every write stores a new value), at most 5 000 operations a run.
func compareWrites(
    ours: @escaping (Int) throws -> Void, baseline: @escaping (Int) throws -> Void, budget: Budget
) async throws -> Comparison {
    var next = 0
    func batch(_ write: @escaping (Int) throws -> Void) -> Batch {
        { count in
            for _ in 0..<count {
                next += 1
                try write(next)
            }
        }
    }
    return try await compare(ours: batch(ours), baseline: batch(baseline), budget: budget, limit: 5_000)
}

/// Compares `set` on a `StoredValue<Int>` with Foundation's `set` + `synchronize()` of the same key: the
/// durable-write scenario and the scaling table share it.
func compareDurableWrites(
    _ value: StoredValue<Int>, _ defaults: UserDefaults, key: String, budget: Budget
) async throws -> Comparison {
    try await compareWrites(
        ours: { value.set($0) },
        baseline: {
            defaults.set($0, forKey: key)
            defaults.synchronize()
        }, budget: budget)
}

/// Compares `set` on a `SecureStoredValue<String>` (a new token each time) with a durable atomic write of the same
/// vault's plaintext: the secure-write scenario and the scaling table share it.
func compareSecureWrites(
    _ secret: SecureStoredValue<String>, _ plain: PlainDurableWriter, plaintext: [UInt8], budget: Budget
) async throws -> Comparison {
    try await compareWrites(
        ours: { try secret.set(token($0)) }, baseline: { _ in try plain.write(plaintext) }, budget: budget)
}

/// The loop of a latency writer child: sets the numbers 1 to `count` through `set`, printing the monotonic clock
/// before and after each, and waiting for a line on standard input before the next (none: stop).
func writeLatencyStamps(count: Int, _ set: (Int) throws -> Void) throws {
    for index in 1...count {
        let before = monotonicNanoseconds()
        try set(index)
        let after = monotonicNanoseconds()
        FileHandle.standardOutput.write(Data("\(before) \(after)\n".utf8))
        guard readLine() != nil else { break }
    }
}

/// A batch that reads `read()` once per operation and keeps the sum alive, so the reads are not optimised away.
func reading(_ read: @escaping () throws -> Int) -> Batch {
    { count in
        var sum = 0
        for _ in 0..<count { sum &+= try read() }
        blackHole(sum)
    }
}

/// A body that runs its operation `count` times; loops live inside the body so no closure call sits between
/// two operations.
typealias Batch = (_ count: Int) async throws -> Void

/// The median, fastest and slowest of several runs, in nanoseconds per operation.
struct Stats {
    let median: Double
    let min: Double
    let max: Double

    init(_ samples: [Double]) {
        let sorted = samples.sorted()
        let middle = sorted.count / 2
        median = sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
        min = sorted.first ?? 0
        max = sorted.last ?? 0
    }
}

/// How long each timed run lasts and how many runs make one result.
struct Budget {
    /// The target duration of one run (one batch of operations), in nanoseconds.
    let runNanoseconds: Double
    /// Runs per side; the median is reported.
    let runs: Int
    /// For profiling (`--side ours`): run only this side, in place of both.
    var side: Side? = nil

    enum Side: String {
        case ours, baseline
    }

    static let full = Budget(runNanoseconds: 20_000_000, runs: 41)
    static let quick = Budget(runNanoseconds: 6_000_000, runs: 9)
}

/// Times one batch of `count` operations, in nanoseconds per operation.
func timePerOperation(_ count: Int, _ body: Batch) async throws -> Double {
    let start = monotonicNanoseconds()
    try await body(count)
    let elapsed = monotonicNanoseconds() - start
    return Double(elapsed) / Double(count)
}

/// Finds how many operations fill one run, warming the code up on the way.
func calibrate(_ body: Batch, budget: Budget, limit: Int) async throws -> Int {
    var count = 1
    while true {
        let perOperation = try await timePerOperation(count, body)
        let total = perOperation * Double(count)
        if total >= budget.runNanoseconds / 8 || count >= limit {
            let fitted = Int(budget.runNanoseconds / Swift.max(perOperation, 0.1))
            return Swift.min(Swift.max(1, fitted), limit)
        }
        count = Swift.min(count * 4, limit)
    }
}

/// Both sides of a comparison. `ratio` is the median of the ratios of adjacent runs: a run of ours and the
/// baseline's run next to it see the same machine load, so their ratio stays steady when the absolute times
/// swing (other processes building, fsync latency of a shared disk).
struct Comparison {
    let ours: Stats
    let baseline: Stats
    let ratio: Double
}

/// Measures two bodies in the same process, interleaved run by run (alternating which goes first), after a
/// calibration and a warm-up of each, so that machine noise hits both sides alike.
func compare(
    ours: Batch, baseline: Batch, budget: Budget, limit: Int = 50_000_000
) async throws -> Comparison {
    switch budget.side {
    case .ours: return try await compareWithoutProfiling(ours: ours, baseline: ours, budget: budget, limit: limit)
    case .baseline:
        return try await compareWithoutProfiling(ours: baseline, baseline: baseline, budget: budget, limit: limit)
    case nil: return try await compareWithoutProfiling(ours: ours, baseline: baseline, budget: budget, limit: limit)
    }
}

private func compareWithoutProfiling(
    ours: Batch, baseline: Batch, budget: Budget, limit: Int
) async throws -> Comparison {
    let oursCount = try await calibrate(ours, budget: budget, limit: limit)
    let baselineCount = try await calibrate(baseline, budget: budget, limit: limit)
    _ = try await timePerOperation(oursCount, ours)
    _ = try await timePerOperation(baselineCount, baseline)
    var oursSamples: [Double] = []
    var baselineSamples: [Double] = []
    for run in 0..<budget.runs {
        if run.isMultiple(of: 2) {
            oursSamples.append(try await timePerOperation(oursCount, ours))
            baselineSamples.append(try await timePerOperation(baselineCount, baseline))
        } else {
            baselineSamples.append(try await timePerOperation(baselineCount, baseline))
            oursSamples.append(try await timePerOperation(oursCount, ours))
        }
    }
    let ratios = zip(oursSamples, baselineSamples).map { $0 / $1 }
    return Comparison(ours: Stats(oursSamples), baseline: Stats(baselineSamples), ratio: Stats(ratios).median)
}

/// Measures one body on its own (the scaling table).
func measure(_ body: Batch, budget: Budget, limit: Int = 50_000_000) async throws -> Stats {
    let count = try await calibrate(body, budget: budget, limit: limit)
    _ = try await timePerOperation(count, body)
    var samples: [Double] = []
    for _ in 0..<budget.runs { samples.append(try await timePerOperation(count, body)) }
    return Stats(samples)
}

/// The resident set size of this process, from `/proc/self/status`, in bytes.
func residentBytes() throws -> Int {
    let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
    for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        if fields.count >= 2, let kilobytes = Int(fields[1]) { return kilobytes * 1024 }
    }
    throw BenchError.failed("no VmRSS line in /proc/self/status")
}

/// A benchmark that could not run: the only reason `prefs-bench` exits with a nonzero status.
enum BenchError: Error, CustomStringConvertible {
    case failed(String)

    var description: String {
        switch self {
        case .failed(let reason): reason
        }
    }
}

/// Formats nanoseconds for people: `41.3 ns`, `12.1 µs`, `3.20 ms`.
func formatDuration(_ nanoseconds: Double) -> String {
    switch nanoseconds {
    case ..<1_000: String(format: "%.1f ns", nanoseconds)
    case ..<1_000_000: String(format: "%.2f µs", nanoseconds / 1_000)
    default: String(format: "%.2f ms", nanoseconds / 1_000_000)
    }
}
