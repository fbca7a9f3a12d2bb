import Foundation
import Prefs

/// The scenarios of performance round two (issue 15): batched writes and large values in a `FileStore`.
func roundTwoScenarios(folders: Folders) -> [Scenario] {
    [
        Scenario(
            name: "batch_10_sets_vs_10_sets", target: 0.2, ours: "ten sets in one batch, 100-key suite",
            baseline: "ten separate durable sets, same suite"
        ) { budget in
            try await compareBatchedSets(keyCount: 100, folders: folders, budget: budget)
        },
        Scenario(
            name: "filestore_data_write_vs_plist", target: 1.5, ours: "FileStore set, 100 keys of 10 KB Data",
            baseline: "SuiteFileStore set, same values"
        ) { budget in
            // Incompressible bytes from a cheap generator (drawing each byte from the system's would take seconds).
            var state: UInt64 = 0x9E37_79B9_7F4A_7C15
            func nextByte() -> UInt8 {
                state ^= state << 13
                state ^= state >> 7
                state ^= state << 17
                return UInt8(truncatingIfNeeded: state)
            }
            let blobs = Dictionary(
                uniqueKeysWithValues: (0..<100).map { index in
                    ("blob-\(index)", PrefValue.data(Data((0..<10_240).map { _ in nextByte() })))
                })
            let json = try FileStore(url: folders.config.appending(path: "bench/blobs.json"))
            try json.replaceAll(blobs)
            let plist = try SuiteFileStore(suiteName: "bench-blobs", directory: folders.config)
            try plist.replaceAll(blobs)
            let inJSON = StoredValue(key: "counter", default: 0, store: json)
            let inPlist = StoredValue(key: "counter", default: 0, store: plist)
            var next = 0
            return try await compare(
                ours: { count in
                    for _ in 0..<count {
                        next += 1
                        inJSON.wrappedValue = next
                    }
                },
                baseline: { count in
                    for _ in 0..<count {
                        next += 1
                        inPlist.wrappedValue = next
                    }
                }, budget: budget, limit: 2_000)
        },
        Scenario(
            name: "declare_1000_keys_vs_register", target: 3,
            ours: "1 000 new wrappers with a description and a range, on a suite holding every earlier run's keys",
            baseline: "UserDefaults.register(defaults:) of 1 000 new keys, one a call, same suite throughout"
        ) { budget in
            try await compareDeclaringKeys(1_000, budget: budget)
        },
    ]
}

/// Declaring `count` keys (what an app's model does at launch: a wrapper each, with a description and a range, on a
/// domain of the preferences folder, which also records them for its published schema) against Foundation
/// registering the same defaults one key at a time. One operation declares `count` new keys on the same store, which
/// holds every key declared before it: a cost that grew with the keys already registered would show as later
/// operations taking longer (the spread of the runs) and as a ratio that grows with the run's length.
func compareDeclaringKeys(_ count: Int, budget: Budget) async throws -> Comparison {
    let store = try SuiteFileStore(suiteName: "bench-declare")
    guard let defaults = UserDefaults(suiteName: "bench-register") else {
        throw BenchError.failed("UserDefaults(bench-register)")
    }
    var round = 0
    return try await compare(
        ours: { operations in
            for _ in 0..<operations {
                round += 1
                for index in 0..<count {
                    _ = StoredValue(
                        key: "r\(round)-\(index)", default: index, schema: .init("Key \(index)", range: 0...1_000_000),
                        store: store)
                }
            }
        },
        baseline: { operations in
            for _ in 0..<operations {
                round += 1
                for index in 0..<count { defaults.register(defaults: ["r\(round)-\(index)": index]) }
            }
        }, budget: budget, limit: 200)
}

/// Ten `set`s through wrappers inside one `try store.batch { … }` on a `FileStore` of `keyCount` keys, against the
/// same ten `set`s each durable on its own.
func compareBatchedSets(keyCount: Int, folders: Folders, budget: Budget) async throws -> Comparison {
    let store = try FileStore(url: folders.config.appending(path: "bench/batch-\(keyCount).json"))
    try store.replaceAll(integerKeys(keyCount))
    let fields = (0..<10).map { StoredValue(key: "key-\($0)", default: 0, store: store) }
    var next = 0
    return try await compare(
        ours: { count in
            for _ in 0..<count {
                next += 1
                try store.batch {
                    for field in fields { field.wrappedValue = next }
                }
            }
        },
        baseline: { count in
            for _ in 0..<count {
                next += 1
                for field in fields { field.wrappedValue = next }
            }
        }, budget: budget, limit: 2_000)
}
