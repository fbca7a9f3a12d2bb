// prefs-bench: Prefs against raw Foundation, Synchronization and libsodium, measured side by side in one run.
//
//   swift run --package-path Benchmarks -c release prefs-bench [--quick] [--json] [--scaling] [--latency]
//                                    [--only NAME[,NAME…]] [--side ours|baseline] [--sizes N,N…]
//
// The process first re-launches itself with XDG_CONFIG_HOME, XDG_DATA_HOME and XDG_STATE_HOME pointing into a fresh
// scratch folder (Foundation reads them once at start-up), so no benchmark ever touches the user's real preferences. The
// scratch folder is removed afterwards. The exit status is nonzero only when a benchmark could not run; a missed
// target is reported, not treated as a failure.

import Foundation

#if canImport(Glibc)
    import Glibc
#endif

struct Options {
    var quick = false
    var json = false
    var scaling = false
    var latency = false
    var latencyWriter: (path: String, count: Int)? = nil
    var postgresLatencyWriter: Int? = nil
    var postgresFanOutWatcher = false
    var postgresListenWatcher = false
    var postgresFleetMember = false
    var coldOpenChild: (side: String, suite: String, key: String)? = nil
    var inputMemoryChild: String? = nil
    var only: Set<String>? = nil
    var side: Budget.Side? = nil
    var sizes = [10, 100, 1_000, 10_000]

    static let usage =
        "usage: prefs-bench [--quick] [--json] [--scaling] [--latency] [--only NAME[,NAME…]] [--side ours|baseline]"
        + " [--sizes N,N…]"

    init(_ arguments: [String]) throws {
        var remaining = arguments[...]
        while let argument = remaining.popFirst() {
            switch argument {
            case "--quick": quick = true
            case "--json": json = true
            case "--scaling": scaling = true
            case "--latency": latency = true
            case "--latency-writer":
                guard let path = remaining.popFirst(), let count = remaining.popFirst().flatMap({ Int($0) }) else {
                    throw BenchError.failed("--latency-writer needs a path and a count")
                }
                latencyWriter = (path, count)
            case "--postgres-latency-writer":
                guard let count = remaining.popFirst().flatMap({ Int($0) }) else {
                    throw BenchError.failed("--postgres-latency-writer needs a count")
                }
                postgresLatencyWriter = count
            case "--postgres-fanout-watcher": postgresFanOutWatcher = true
            case "--postgres-listen-watcher": postgresListenWatcher = true
            case "--postgres-fleet-member": postgresFleetMember = true
            case "--cold-open-child":
                guard let side = remaining.popFirst(), let suite = remaining.popFirst(),
                    let key = remaining.popFirst()
                else { throw BenchError.failed("--cold-open-child needs a side, a suite and a key") }
                coldOpenChild = (side, suite, key)
            case "--input-memory-child":
                guard let spec = remaining.popFirst() else {
                    throw BenchError.failed("--input-memory-child needs a spec")
                }
                inputMemoryChild = spec
            case "--only":
                guard let names = remaining.popFirst() else { throw BenchError.failed("--only needs a name") }
                only = (only ?? []).union(names.split(separator: ",").map(String.init))
            case "--side":
                guard let name = remaining.popFirst(), let side = Budget.Side(rawValue: name) else {
                    throw BenchError.failed("--side needs ours or baseline")
                }
                self.side = side
            case "--sizes":
                let sizes = (remaining.popFirst() ?? "").split(separator: ",").compactMap { Int($0) }
                guard !sizes.isEmpty, sizes.allSatisfy({ $0 > 1 }) else {
                    throw BenchError.failed("--sizes needs key counts above 1, like 10,100")
                }
                self.sizes = sizes
            case "-h", "--help":
                print(Self.usage)
                exit(0)
            default: throw BenchError.failed("unknown argument \(argument)\n\(Self.usage)")
            }
        }
    }

    func includes(_ name: String) -> Bool { only?.contains(name) ?? true }
}

/// Runs this executable again inside fresh XDG folders and returns its exit status.
func relaunchInScratchFolders() -> Int32 {
    var template = Array((NSTemporaryDirectory() + "/prefs-bench.XXXXXX").utf8CString)
    guard let made = mkdtemp(&template) else {
        printError("prefs-bench: cannot create a scratch folder\n")
        return 1
    }
    let scratch = String(cString: made)
    defer { try? FileManager.default.removeItem(atPath: scratch) }
    var environment = ProcessInfo.processInfo.environment
    environment["PREFS_BENCH_CHILD"] = "1"
    environment["PREFS_BENCH_SCRATCH"] = scratch
    environment["XDG_CONFIG_HOME"] = scratch + "/config"
    environment["XDG_DATA_HOME"] = scratch + "/data"
    // Vaults keep rollback records in the state folder: the scratch one, never the real ~/.local/state.
    environment["XDG_STATE_HOME"] = scratch + "/state"
    let child = Process()
    child.executableURL = URL(
        filePath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments[0])
    child.arguments = Array(CommandLine.arguments.dropFirst())
    child.environment = environment
    do {
        try child.run()
    } catch {
        printError("prefs-bench: cannot relaunch: \(error)\n")
        return 1
    }
    // Let an interrupt stop the child while this process stays to remove the scratch folder.
    signal(SIGINT, SIG_IGN)
    child.waitUntilExit()
    if child.terminationReason == .uncaughtSignal { return 128 + child.terminationStatus }
    return child.terminationStatus
}

func printError(_ text: String) {
    FileHandle.standardError.write(Data(text.utf8))
}

func log(_ message: String) {
    printError("prefs-bench: \(message)\n")
}

func jsonNumber(_ value: Double) -> String {
    value.isFinite ? String(format: "%.6g", value) : "null"
}

func jsonString(_ value: String) -> String {
    let data = (try? JSONSerialization.data(withJSONObject: [value], options: [.fragmentsAllowed])) ?? Data()
    let array = String(decoding: data, as: UTF8.self)
    return String(array.dropFirst().dropLast())
}

func pad(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
}

/// Every comparison scenario, in the order they run and print.
func allScenarios(folders: Folders) -> [Scenario] {
    comparisonScenarios(folders: folders) + roundTwoScenarios(folders: folders) + coldOpenScenarios(folders: folders)
        + foundationDefaultsScenarios(folders: folders) + postgresScenarios() + deferredScenarios(folders: folders)
}

/// Runs the selected benchmarks and prints their results; returns the exit status.
func runBenchmarks(_ options: Options) async throws {
    let folders = try Folders.fromEnvironment()
    try FileManager.default.createDirectory(at: folders.config, withIntermediateDirectories: true)
    try FileManager.default.createDirectory(at: folders.data, withIntermediateDirectories: true)
    var budget = options.quick ? Budget.quick : Budget.full
    budget.side = options.side

    if options.scaling {
        let rows = try await measureScaling(folders: folders, budget: budget, sizes: options.sizes, log: log)
        print(
            "Median cost per operation by number of keys in the suite or vault (\(ProcessInfo.processInfo.activeProcessorCount) cores):"
        )
        print(scalingTable(rows))
        return
    }

    var results: [ComparisonResult] = []
    for scenario in allScenarios(folders: folders) where options.includes(scenario.name) {
        log("running \(scenario.name)")
        let comparison: Comparison
        do {
            comparison = try await scenario.run(budget)
        } catch let skip as BenchSkip {
            print("skipped \(scenario.name): \(skip)")
            continue
        }
        results.append(
            ComparisonResult(
                name: scenario.name, ours: comparison.ours, baseline: comparison.baseline, ratio: comparison.ratio,
                target: scenario.target))
    }
    var growth: Int? = nil
    if options.includes(RSSGrowth.name) {
        log("running \(RSSGrowth.name)")
        growth = try await subscribeCancelGrowth(cycles: 100_000, folders: folders)
    }
    let deferred =
        try await deferredFigures(folders: folders, quick: options.quick, includes: options.includes)
        + inputMemoryFigures(folders: folders, quick: options.quick, includes: options.includes)
        + postgresFanOutFigures(quick: options.quick, includes: options.includes)
        + postgresFleetFigures(quick: options.quick, includes: options.includes)
        + postgresLagFigures(quick: options.quick, includes: options.includes)

    let scenarios = Dictionary(uniqueKeysWithValues: allScenarios(folders: folders).map { ($0.name, $0) })
    print(
        "prefs-bench (\(options.quick ? "quick" : "full"), median of \(budget.runs) runs, "
            + "\(ProcessInfo.processInfo.activeProcessorCount) cores)")
    print(
        pad("scenario", 38) + pad("ours (min–max)", 34) + pad("baseline (min–max)", 34) + pad("ratio", 9)
            + "target")
    for result in results {
        let ours =
            "\(formatDuration(result.ours.median)) (\(formatDuration(result.ours.min))–"
            + "\(formatDuration(result.ours.max)))"
        let baseline =
            "\(formatDuration(result.baseline.median)) (\(formatDuration(result.baseline.min))–"
            + "\(formatDuration(result.baseline.max)))"
        let verdict = result.met ? "met" : "MISSED"
        print(
            pad(result.name, 38) + pad(ours, 34) + pad(baseline, 34) + pad(String(format: "%.3f", result.ratio), 9)
                + "≤ \(String(format: "%g", result.target)) \(verdict)")
        if let scenario = scenarios[result.name] {
            print("    ours: \(scenario.ours); baseline: \(scenario.baseline)")
        }
    }
    if let growth {
        let verdict = growth <= RSSGrowth.target ? "met" : "MISSED"
        print(pad(RSSGrowth.name, 38) + "\(growth) bytes after 100 000 cycles (≤ 1 MiB \(verdict))")
    }
    for figure in deferred { print(pad(figure.name, 38) + figure.line) }

    if options.json {
        var objects = results.map { result in
            "{\"name\":\(jsonString(result.name)),\"ours_ns\":\(jsonNumber(result.ours.median)),"
                + "\"baseline_ns\":\(jsonNumber(result.baseline.median)),\"ratio\":\(jsonNumber(result.ratio)),"
                + "\"target\":\(jsonNumber(result.target)),\"met\":\(result.met)}"
        }
        if let growth {
            objects.append(
                "{\"name\":\(jsonString(RSSGrowth.name)),\"value\":\(growth),\"target\":\(RSSGrowth.target),"
                    + "\"met\":\(growth <= RSSGrowth.target)}")
        }
        objects += deferred.map { "{\"name\":\(jsonString($0.name)),\($0.json),\"met\":\($0.met)}" }
        print("{\"scenarios\":[" + objects.joined(separator: ",") + "]}")
    }
}

let options: Options
do {
    options = try Options(Array(CommandLine.arguments.dropFirst()))
} catch {
    printError("prefs-bench: \(error)\n")
    exit(2)
}
if let writer = options.latencyWriter {
    do { try runLatencyWriter(path: writer.path, count: writer.count) } catch {
        printError("prefs-bench: latency writer failed: \(error)\n")
        exit(1)
    }
    exit(0)
}
if let child = options.coldOpenChild {
    do { try runColdOpenChild(side: child.side, suite: child.suite, key: child.key) } catch {
        printError("prefs-bench: cold-open child failed: \(error)\n")
        exit(1)
    }
    exit(0)
}
if let spec = options.inputMemoryChild {
    do { try runInputMemoryChild(spec: spec) } catch {
        printError("prefs-bench: input-memory child failed: \(error)\n")
        exit(1)
    }
    exit(0)
}
if let count = options.postgresLatencyWriter {
    do { try runPostgresLatencyWriter(count: count) } catch {
        printError("prefs-bench: PostgreSQL latency writer failed: \(error)\n")
        exit(1)
    }
    exit(0)
}
if options.postgresFanOutWatcher {
    do { try await runPostgresFanOutWatcher() } catch {
        printError("prefs-bench: PostgreSQL fan-out watcher failed: \(error)\n")
        exit(1)
    }
    exit(0)
}
if options.postgresFleetMember {
    do { try await runPostgresFleetMember() } catch {
        printError("prefs-bench: PostgreSQL fleet member failed: \(error)\n")
        exit(1)
    }
    exit(0)
}
if options.postgresListenWatcher {
    do { try runPostgresListenWatcher() } catch {
        printError("prefs-bench: PostgreSQL listen watcher failed: \(error)\n")
        exit(1)
    }
    exit(0)
}
if ProcessInfo.processInfo.environment["PREFS_BENCH_CHILD"] == nil {
    exit(relaunchInScratchFolders())
}
do {
    if options.latency { try await runLatency(quick: options.quick) } else { try await runBenchmarks(options) }
} catch {
    printError("prefs-bench: failed: \(error)\n")
    exit(1)
}
