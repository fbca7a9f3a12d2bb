import Foundation
import Prefs
import PrefsTestSupport
import Synchronization
import TestThreads
import Testing

#if canImport(Glibc)
    import Glibc
#endif

struct Unencodable: Codable, Equatable, Sendable {
    var ratio: Double
}

/// Every entry point that takes user input, fed the inputs users get wrong: each gives a typed error or the
/// documented fallback, never a crash, and what was stored before is still there.
@Suite(.enabled(if: Reliability.enabled), .ownThreads)
struct BadInputTests {
    static let badSuiteNames = ["", "a/b", "/etc/passwd", "..", "a..b", "a\u{0}b", String(repeating: "s", count: 250)]

    @Test func badSuiteNamesAreRefused() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        for name in Self.badSuiteNames {
            #expect {
                _ = try SuiteFileStore(suiteName: name, directory: directory.url)
            } throws: { error in
                guard case PrefsError.invalidSuiteName(name, _) = error else { return false }
                return true
            }
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == [])
        // Odd but valid names work and round-trip.
        for name in [" ", "ünïcødé 🚀", "a.b", "-", String(repeating: "s", count: 249)] {
            let store = try SuiteFileStore(suiteName: name, directory: directory.url)
            try store.set(name, for: PrefKey("name", default: ""))
            #expect(try store.value(for: PrefKey("name", default: "")) == name)
        }
        Reliability.report("bad-input suite-names refused=\(Self.badSuiteNames.count) crashes=0")
    }

    static let cases: [(name: String, open: @Sendable (TempDir) throws -> any KeyValueStore)] = [
        ("InMemoryStore", { _ in InMemoryStore() }),
        ("SuiteFileStore", { try StoreSpec.open($0.specs[0].spec) }),
        ("FileStore", { try StoreSpec.open($0.specs[1].spec) }),
        ("EncryptedFileStore", { try StoreSpec.open($0.specs[2].spec) }),
    ]

    @Test(arguments: 0..<4)
    func badKeysAndValues(store index: Int) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let (name, open) = Self.cases[index]
        var store: any KeyValueStore = try open(directory)
        try Fixtures.write(to: store)

        // Keys no store can hold.
        for key in ["", "a\u{0}b", "\u{0}"] {
            #expect {
                try store.set(1, for: PrefKey(key, default: 0))
            } throws: { error in
                guard case PrefsError.invalidKey(key, _) = error else { return false }
                return true
            }
            #expect(throws: PrefsError.self) { try store.updateValue(forKey: key) { _ in .int(1) } }
        }
        // Keys that look like paths or are huge are just keys.
        let odd = ["a/b", "/", "../../etc/passwd", " ", "ünï🚀", String(repeating: "k", count: 1 << 20)]
        for key in odd { try store.set(key.utf8.count, for: PrefKey(key, default: -1)) }

        // Values that cannot be encoded: NaN inside a Codable struct, and values nested too deep.
        let settings = PrefKey("ratio-settings", default: Unencodable(ratio: 0))
        try store.set(Unencodable(ratio: 0.5), for: settings)
        do {
            try store.set(Unencodable(ratio: .nan), for: settings)
            #expect(try store.value(for: settings).ratio.isNaN, "\(name) stored NaN, so it must read back as NaN")
        } catch {
            #expect(error is PrefsError, "\(name): \(error)")
            #expect(try store.value(for: settings) == Unencodable(ratio: 0.5))
        }
        for depth in [510, 511, 600, 2_000] {
            var value = PrefValue.int(1)
            for _ in 0..<depth { value = .array([value]) }
            do { try store.setValue(value, forKey: "deep") } catch { #expect(error is PrefsError, "\(name): \(error)") }
        }

        // A wrapper with a bad key falls back to its default and reports instead of crashing.
        let reports = Mutex<[String]>([])
        PrefsConfig.errorHandler = { report in reports.withLock { $0.append(report.key) } }
        let bad = StoredValue(key: "", default: 7, store: store)
        bad.wrappedValue = 8
        #expect(bad.wrappedValue == 7)
        #expect(reports.withLock { $0.contains("") })

        // Nothing stored was lost, in this process and in a fresh one.
        #expect(Fixtures.mismatches(in: store) == [])
        if index > 0 {
            store = InMemoryStore()
            let reopened = try open(directory)
            #expect(Fixtures.mismatches(in: reopened) == [], "\(name) after reopening")
            for key in odd { #expect(try reopened.value(for: PrefKey(key, default: -1)) == key.utf8.count) }
            let verify = try ChildProcess.run(
                ["verify-fixtures", directory.specs[index - 1].spec], timeLimit: Reliability.timeLimit)
            #expect(verify.lines == ["ok"], "\(name): \(verify.description)")
        }
        Reliability.report("bad-input keys-values \(name) crashes=0 lost=0")
    }

    /// Stored deep values must open again in a fresh process: a store may refuse a value, never write a file it
    /// cannot read back (SuiteFileStore once did, at depth 511).
    @Test func deepValuesNeverMakeAFileUnreadable() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let depths = [1, 100, 505, 508, 509, 510, 511, 512, 513, 1_000, 5_000]
        for (name, spec, _) in directory.specs {
            let exit = try ChildProcess.run(
                ["deep", spec, depths.map(String.init).joined(separator: ",")], timeLimit: Reliability.timeLimit)
            let lines = exit.lines
            #expect(exit.succeeded, "\(name): \(exit.description)")
            let stored = lines.filter { $0.hasSuffix(" stored") }.compactMap { Int($0.split(separator: " ")[0]) }
            #expect(lines.count == depths.count, "\(name): \(lines)")
            #expect(stored.contains(100) && !stored.contains(5_000), "\(name): \(lines)")
            let reopened = try StoreSpec.open(spec)
            for depth in stored {
                var value = try #require(try reopened.value(forKey: "deep-\(depth)"), "\(name) lost depth \(depth)")
                var levels = 0
                while case .array(let elements) = value, let inner = elements.first {
                    value = inner
                    levels += 1
                }
                #expect(levels == depth)
            }
            Reliability.report("bad-input deep \(name) deepest-stored=\(stored.max() ?? 0) reopened=ok")
        }
    }

    /// Paths a store cannot use: under a regular file, inside /proc, a directory where the file should be.
    @Test func unusablePathsGiveTypedErrors() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let regular = directory.path("regular")
        #expect(FileManager.default.createFile(atPath: regular, contents: Data("x".utf8)))
        // A folder where every store file name is taken by a directory: the final rename cannot succeed.
        let occupied = directory.path("occupied")
        for name in ["store.json", "suite.plist", "store.vault"] {
            try FileManager.default.createDirectory(atPath: occupied + "/" + name, withIntermediateDirectories: true)
        }
        let places = [regular, "/proc/prefs-test", "/proc/self", occupied]
        var refused = 0
        for place in places {
            let opens: [(String, () throws -> any KeyValueStore)] = [
                ("json", { try FileStore(url: URL(filePath: place + "/store.json")) }),
                ("plist", { try SuiteFileStore(suiteName: "suite", directory: URL(filePath: place)) }),
                (
                    "vault",
                    { try EncryptedFileStore(url: URL(filePath: place + "/store.vault"), key: .raw(Data(count: 32))) }
                ),
            ]
            for (kind, open) in opens {
                do {
                    let store = try open()
                    try store.set(1, for: PrefKey("k", default: 0))
                    Issue.record("\(kind) at \(place) accepted a write")
                } catch is PrefsError {
                    refused += 1
                } catch is VaultError {
                    refused += 1
                } catch {
                    Issue.record("\(kind) at \(place): untyped \(error)")
                }
            }
        }
        #expect(FileManager.default.contents(atPath: regular) == Data("x".utf8))
        Reliability.report("bad-input paths cases=\(places.count * 3) refused=\(refused) crashes=0")
    }

    /// A full disk, simulated with RLIMIT_FSIZE lowered in a child process: the big write fails with EFBIG, the
    /// file and the values in memory stay as they were, no temporary file is left, and small writes still work.
    @Test func fullDiskLosesNothing() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        for (name, spec, file) in directory.specs {
            try #require(try ChildProcess.run(["write-fixtures", spec], timeLimit: Reliability.timeLimit).succeeded)
            let before = FileManager.default.contents(atPath: file)
            let exit = try ChildProcess.run(
                ["fsize", spec, "big", String(2 << 20), String(1 << 20)], timeLimit: Reliability.timeLimit)
            #expect(exit.succeeded, "\(name): \(exit.description)")
            #expect(
                exit.lines == [
                    "refused write \(EFBIG)", "kept \(Fixtures.names.count)", "small ok", "SIGXFSZ untouched",
                ], "\(name)")
            #expect(directory.temporaryFiles() == [], "\(name)")
            let verify = try ChildProcess.run(["verify-fixtures", spec], timeLimit: Reliability.timeLimit)
            #expect(verify.lines == ["ok"], "\(name): \(verify.description)")
            #expect(FileManager.default.contents(atPath: file) != before, "\(name): the small write must land")
            Reliability.report("bad-input full-disk \(name) refused=EFBIG lost=0")
        }
    }
}
