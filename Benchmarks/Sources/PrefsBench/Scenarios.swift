import Foundation
import Prefs
import Synchronization

/// One row of the results: our cost beside its baseline's, measured interleaved in the same run.
struct ComparisonResult {
    let name: String
    let ours: Stats
    let baseline: Stats
    /// The median of the paired run ratios (see ``Comparison``).
    let ratio: Double
    let target: Double
    var met: Bool { ratio <= target }
}

/// A scenario: its name, goal, what is compared, and how to measure it.
struct Scenario {
    let name: String
    let target: Double
    let ours: String
    let baseline: String
    let run: (Budget) async throws -> Comparison
}

/// The floor for a synchronized read.
final class MutexFloor: Sendable {
    let value = Mutex(42)
}

/// Every comparison of the issue, in its order.
func comparisonScenarios(folders: Folders) -> [Scenario] {
    [
        Scenario(
            name: "read_vs_userdefaults", target: 0.05, ours: "cached StoredValue<Int> read",
            baseline: "UserDefaults.object(forKey:) as? Int"
        ) { budget in
            let store = try SuiteFileStore(suiteName: "bench-read", directory: folders.config)
            try store.replaceAll(integerKeys(10).merging(["answer": .int(42)]) { $1 })
            let answer = StoredValue(key: "answer", default: 0, store: store)
            let defaults = try foundationSuite("bench-foundation-read", keys: 10, folders: folders)
            defaults.set(42, forKey: "answer")
            return try await compare(
                ours: reading { answer.wrappedValue },
                baseline: reading { defaults.object(forKey: "answer") as? Int ?? 0 }, budget: budget)
        },
        Scenario(
            name: "read_vs_mutex", target: 2, ours: "cached StoredValue<Int> read", baseline: "Mutex<Int> read"
        ) { budget in
            let store = try SuiteFileStore(suiteName: "bench-read", directory: folders.config)
            return try await compareCachedReadWithMutex(StoredValue(key: "answer", default: 0, store: store), budget)
        },
        Scenario(
            name: "read_10k_keys_vs_10_keys", target: 1.5, ours: "read, 10 000 keys in the suite",
            baseline: "read, 10 keys in the suite"
        ) { budget in
            let large = try SuiteFileStore(suiteName: "bench-10000-keys", directory: folders.config)
            try large.replaceAll(integerKeys(10_000))
            let small = try SuiteFileStore(suiteName: "bench-10-keys", directory: folders.config)
            try small.replaceAll(integerKeys(10))
            let inLarge = StoredValue(key: "key-7", default: 0, store: large)
            let inSmall = StoredValue(key: "key-7", default: 0, store: small)
            return try await compare(
                ours: reading { inLarge.wrappedValue },
                baseline: reading { inSmall.wrappedValue }, budget: budget)
        },
        Scenario(
            name: "codable_read_vs_json_decode", target: 0.05, ours: "cached read of a Codable struct",
            baseline: "JSONDecoder on its stored Data"
        ) { budget in
            let store = try SuiteFileStore(suiteName: "bench-codable", directory: folders.config)
            let appearance = StoredValue(key: "appearance", default: Appearance.sample, store: store)
            var changed = Appearance.sample
            changed.fontSize = 16
            appearance.set(changed)
            let data = try JSONEncoder().encode(changed)
            let decoder = JSONDecoder()
            return try await compare(
                ours: reading { appearance.wrappedValue.fontSize },
                baseline: reading { try decoder.decode(Appearance.self, from: data).fontSize }, budget: budget)
        },
        Scenario(
            name: "durable_write_vs_userdefaults_sync", target: 1.0, ours: "set on a 100-key suite",
            baseline: "UserDefaults set + synchronize()"
        ) { budget in
            let store = try SuiteFileStore(suiteName: "bench-write", directory: folders.config)
            try store.replaceAll(integerKeys(100))
            let counter = StoredValue(key: "counter", default: 0, store: store)
            let defaults = try foundationSuite("bench-foundation-write", keys: 100, folders: folders)
            return try await compareDurableWrites(counter, defaults, key: "counter", budget: budget)
        },
        Scenario(
            name: "secure_write_vs_plain_durable_write", target: 1.2, ours: "secure set, 100 secrets",
            baseline: "durable atomic write of the same plaintext"
        ) { budget in
            let vaultURL = folders.data.appending(path: "bench/write.vault")
            let vault = try EncryptedFileStore(url: vaultURL, key: .raw(Data(randomKey())))
            try vault.replaceAll(secrets(100))
            let secret = SecureStoredValue<String>(key: "secret-0", store: vault)
            let plaintext = try vaultPlaintext(secrets(100), scratch: folders.data)
            let plain = PlainDurableWriter(path: folders.data.appending(path: "bench/plain.json").path)
            return try await compareSecureWrites(secret, plain, plaintext: plaintext, budget: budget)
        },
        Scenario(
            name: "secure_open_vs_read_and_decrypt", target: 7, ours: "open + first read, 1 000 secrets",
            baseline: "read file + one AEAD decrypt"
        ) { budget in
            try await compareSecureOpen(secretCount: 1_000, folders: folders, budget: budget)
        },
        Scenario(
            name: "notify_vs_bare_asyncstream", target: 3, ours: "set → subscriber receives (in memory)",
            baseline: "yield → receive, bare AsyncStream"
        ) { budget in
            try await compareFanout(subscribers: 1, budget: budget)
        },
        Scenario(
            name: "fanout_1000_vs_bare_asyncstream", target: 2, ours: "one set, 1 000 subscribers receive",
            baseline: "1 000 bare yields → receives"
        ) { budget in
            try await compareFanout(subscribers: 1_000, budget: budget)
        },
    ]
}

/// Opening a vault of `secretCount` secrets and reading one, against reading and decrypting the same bytes.
func compareSecureOpen(
    secretCount: Int, folders: Folders, budget: Budget
) async throws -> Comparison {
    let key = randomKey()
    let vaultURL = folders.data.appending(path: "bench/open-\(secretCount).vault")
    try EncryptedFileStore(url: vaultURL, key: .raw(Data(key))).replaceAll(secrets(secretCount))
    let plaintext = try vaultPlaintext(secrets(secretCount), scratch: folders.data)
    let sealed = try PlainSealedFile.create(
        path: folders.data.appending(path: "bench/plain-\(secretCount).sealed").path, plaintext: plaintext, key: key)
    let name = "secret-\(secretCount / 2)"
    return try await compare(
        ours: { count in
            var sum = 0
            for _ in 0..<count {
                let vault = try EncryptedFileStore(url: vaultURL, key: .raw(Data(key)))
                sum &+= SecureStoredValue<String>(key: name, store: vault).wrappedValue?.utf8.count ?? 0
            }
            blackHole(sum)
        },
        baseline: reading { try sealed.readAndDecrypt() }, budget: budget, limit: 100_000)
}

/// One set reaching `subscribers` iterators of `values`, against the same number of bare yields and receives.
/// Each operation sets a new value and then receives it on every iterator, in the same task.
func compareFanout(subscribers: Int, budget: Budget) async throws -> Comparison {
    let store = InMemoryStore()
    let level = StoredValue(key: "level", default: 0, store: store)
    var ours: [AsyncStream<Int>.Iterator] = []
    for _ in 0..<subscribers {
        var iterator = level.values.makeAsyncIterator()
        guard await iterator.next() == 0 else { throw BenchError.failed("values did not start with the default") }
        ours.append(iterator)
    }
    var continuations: [AsyncStream<Int>.Continuation] = []
    var bare: [AsyncStream<Int>.Iterator] = []
    for _ in 0..<subscribers {
        let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
        continuations.append(continuation)
        bare.append(stream.makeAsyncIterator())
    }
    var next = 0
    let result = try await compare(
        ours: { count in
            var sum = 0
            for _ in 0..<count {
                next += 1
                level.set(next)
                for index in ours.indices { sum &+= await ours[index].next() ?? 0 }
            }
            guard sum == count * subscribers * next - subscribers * count * (count - 1) / 2 else {
                throw BenchError.failed("a subscriber missed a value")
            }
        },
        baseline: { count in
            var sum = 0
            for _ in 0..<count {
                next += 1
                for continuation in continuations { continuation.yield(next) }
                for index in bare.indices { sum &+= await bare[index].next() ?? 0 }
            }
            blackHole(sum)
        }, budget: budget)
    for continuation in continuations { continuation.finish() }
    return result
}

/// The memory scenario's name and goal (1 MiB).
enum RSSGrowth {
    static let name = "subscribe_cancel_rss_growth_bytes"
    static let target = 1 << 20
}

/// Resident memory growth after `cycles` subscribe/cancel cycles of `values`, in bytes.
///
/// Each cycle subscribes, receives the current value in a task, leaves the task waiting for the next one and
/// cancels it, so the subscription ends through cancellation as it does in an app.
func subscribeCancelGrowth(cycles: Int, folders: Folders) async throws -> Int {
    let store = try SuiteFileStore(suiteName: "bench-subscribe", directory: folders.config)
    let theme = StoredValue(key: "theme", default: "light", store: store)
    theme.set("dark")
    func cycle() async {
        let stream = theme.values
        let task = Task {
            var iterator = stream.makeAsyncIterator()
            var received = 0
            while await iterator.next() != nil { received += 1 }
            return received
        }
        task.cancel()
        _ = await task.value
    }
    for _ in 0..<2_000 { await cycle() }
    let before = try residentBytes()
    for _ in 0..<cycles { await cycle() }
    return try residentBytes() - before
}
