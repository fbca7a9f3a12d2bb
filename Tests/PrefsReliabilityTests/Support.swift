import Foundation
import PrefsTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Sizes and switches of the reliability suite, from the environment.
enum Reliability {
    static let environment = ProcessInfo.processInfo.environment
    /// `PREFS_SOAK=1` runs every loop ten times longer.
    static let soak = environment["PREFS_SOAK"] == "1"
    /// The suite runs only when asked for (`make reliability`, `make soak`), so `make test` stays quick.
    static let enabled = soak || environment["PREFS_RELIABILITY"] == "1"
    static func scaled(_ count: Int) -> Int { soak ? count * 10 : count }
    /// How long one child process may run before it is killed and its test fails.
    static let timeLimit: Duration = .seconds(soak ? 36_000 : 3_600)

    /// The seed of this run's random choices: `PREFS_SEED`, or a fresh one that the summaries print.
    static let seed: UInt64 = environment["PREFS_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...999_999)

    /// Prints one figure line; `make reliability` collects these into the summary.
    static func report(_ line: String) {
        print("RELIABILITY \(line)")
    }
}

/// The shared temporary folder of the test targets (PrefsTestSupport).
typealias TempDir = PrefsTestSupport.TempDir

extension TempDir {
    /// The specs of one store of each file-backed kind inside this folder.
    var specs: [(name: String, spec: String, file: String)] {
        [
            ("SuiteFileStore", "plist:\(path):suite", path("suite.plist")),
            ("FileStore", "json:\(path("store.json"))", path("store.json")),
            ("EncryptedFileStore", "vault:\(path("secrets.vault")):\(path("secrets.key"))", path("secrets.vault")),
        ]
    }

    /// Names of leftover temporary files of the atomic writes.
    func temporaryFiles() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).filter { $0.contains(".tmp-") }
    }
}

/// Runs blocking work (child processes, pipes) on its own thread so the test runner's pool stays free.
func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread {
            continuation.resume(with: Result { try body() })
        }
        thread.stackSize = 8 << 20
        thread.start()
    }
}
