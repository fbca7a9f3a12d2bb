import Foundation
import Prefs

/// The scratch folders the benchmark runs in (set up by the parent process, see `main.swift`).
struct Folders {
    let config: URL
    let data: URL

    static func fromEnvironment() throws -> Folders {
        let environment = ProcessInfo.processInfo.environment
        guard let scratch = environment["PREFS_BENCH_SCRATCH"], let config = environment["XDG_CONFIG_HOME"],
            let data = environment["XDG_DATA_HOME"], config.hasPrefix(scratch), data.hasPrefix(scratch)
        else { throw BenchError.failed("not running inside the benchmark's scratch folders") }
        return Folders(
            config: URL(filePath: config, directoryHint: .isDirectory),
            data: URL(filePath: data, directoryHint: .isDirectory))
    }
}

/// A Codable preference of a realistic shape, for the Codable read scenario.
struct Appearance: Codable, Sendable, Equatable {
    var theme: String
    var fontSize: Int
    var accentColor: String
    var showsSidebar: Bool
    var recentFiles: [String]

    static let sample = Appearance(
        theme: "solarized-dark", fontSize: 14, accentColor: "#268bd2", showsSidebar: true,
        recentFiles: ["/home/user/notes/today.md", "/home/user/notes/ideas.md", "/home/user/src/main.swift"])
}

/// `count` integer preferences named `key-0`, `key-1`, …
func integerKeys(_ count: Int) -> [String: PrefValue] {
    Dictionary(uniqueKeysWithValues: (0..<count).map { ("key-\($0)", PrefValue.int(Int64($0))) })
}

/// `count` secrets named `secret-0`, … holding 40-character tokens, like API tokens.
func secrets(_ count: Int) -> [String: PrefValue] {
    Dictionary(
        uniqueKeysWithValues: (0..<count).map { index in
            ("secret-\(index)", PrefValue.string(token(index)))
        })
}

/// A 40-character token that differs for every `seed`.
func token(_ seed: Int) -> String {
    let digits = String(seed, radix: 16)
    return String(repeating: "x", count: 40 - digits.count) + digits
}

/// 32 random bytes for `.raw` vault keys and the baseline's AEAD key.
func randomKey() -> [UInt8] {
    var generator = SystemRandomNumberGenerator()
    return (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
}

/// The exact plaintext a vault seals for `values`: the same JSON a ``FileStore`` writes.
func vaultPlaintext(_ values: [String: PrefValue], scratch: URL) throws -> [UInt8] {
    let url = scratch.appending(path: "plaintext-\(values.count).json")
    let store = try FileStore(url: url)
    try store.replaceAll(values)
    return try readWholeFile(url.path(percentEncoded: false))
}

/// A Foundation suite holding `count` integer keys, saved to its file.
func foundationSuite(_ name: String, keys count: Int, folders: Folders) throws -> UserDefaults {
    guard let defaults = UserDefaults(suiteName: name) else { throw BenchError.failed("UserDefaults(\(name))") }
    for (key, value) in integerKeys(count) {
        if case .int(let number) = value { defaults.set(Int(number), forKey: key) }
    }
    defaults.synchronize()
    let file = folders.config.appending(path: name + ".plist").path(percentEncoded: false)
    guard FileManager.default.fileExists(atPath: file) else {
        throw BenchError.failed("Foundation did not write \(file): is XDG_CONFIG_HOME honoured?")
    }
    return defaults
}
