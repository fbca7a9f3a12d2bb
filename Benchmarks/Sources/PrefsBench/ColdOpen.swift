// `cold_open_vs_userdefaults`: what the first read of a preference costs an app that has just started.
import Foundation
import Prefs

#if canImport(Glibc)
    import Glibc
#endif

/// The cold-open scenario: each sample is a fresh process (this executable with `--cold-open-child`) that opens a
/// 1 000-key suite and reads one key, timing only that (not the process start); ours and Foundation's children
/// alternate, and the ratio is the median of the ratios of adjacent pairs.
func coldOpenScenarios(folders: Folders) -> [Scenario] {
    [
        Scenario(
            name: "cold_open_vs_userdefaults", target: 1,
            ours: "fresh process: SuiteFileStore(suiteName:) + first read, 1 000 keys",
            baseline: "fresh process: UserDefaults(suiteName:) + first read, same suite"
        ) { budget in
            try await compareColdOpen(keyCount: 1_000, budget: budget)
        }
    ]
}

/// Cold opens of a suite of `keyCount` keys: ours against Foundation's, one fresh process per sample.
func compareColdOpen(keyCount: Int, budget: Budget) async throws -> Comparison {
    let suite = "bench-cold-\(keyCount)"
    let key = "key-\(keyCount / 2)"
    try SuiteFileStore(suiteName: suite).replaceAll(integerKeys(keyCount))
    // Both read the file Foundation itself would read.
    guard UserDefaults(suiteName: suite)?.object(forKey: key) as? Int == keyCount / 2 else {
        throw BenchError.failed("Foundation does not read the suite Prefs wrote")
    }
    var ours: [Double] = []
    var baseline: [Double] = []
    for run in 0..<(budget.runs + 1) {
        let sides = run.isMultiple(of: 2) ? ["ours", "baseline"] : ["baseline", "ours"]
        var pair: [String: Double] = [:]
        for side in sides {
            pair[side] = try coldOpenChild(side: budget.side?.rawValue ?? side, suite: suite, key: key)
        }
        if run == 0 { continue }  // the first pair warms the page cache and the dynamic loader
        ours.append(pair["ours"]!)
        baseline.append(pair["baseline"]!)
    }
    let ratios = zip(ours, baseline).map { $0 / $1 }
    return Comparison(ours: Stats(ours), baseline: Stats(baseline), ratio: Stats(ratios).median)
}

/// Runs one cold-open child and returns the nanoseconds it measured.
private func coldOpenChild(side: String, suite: String, key: String) throws -> Double {
    let child = Process()
    child.executableURL = URL(filePath: try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
    child.arguments = ["--cold-open-child", side, suite, key]
    let output = Pipe()
    child.standardOutput = output
    try child.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    child.waitUntilExit()
    guard child.terminationStatus == 0,
        let nanoseconds = Double(String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    else { throw BenchError.failed("the cold-open child (\(side)) failed") }
    return nanoseconds
}

/// The child: opens `suite` the way `side` says, reads `key` once, and prints how long that took.
func runColdOpenChild(side: String, suite: String, key: String) throws {
    let start = monotonicNanoseconds()
    let value: Int?
    switch side {
    case "ours":
        let store = try SuiteFileStore(suiteName: suite)
        value = StoredValue(key: key, default: -1, store: store).wrappedValue
    case "baseline":
        value = UserDefaults(suiteName: suite)?.object(forKey: key) as? Int
    default:
        throw BenchError.failed("--cold-open-child needs ours or baseline")
    }
    let elapsed = monotonicNanoseconds() - start
    guard value == Int(key.split(separator: "-").last ?? "") else {
        throw BenchError.failed("the cold-open child read \(String(describing: value)) for \(key)")
    }
    print(elapsed)
}
