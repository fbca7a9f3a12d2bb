import Foundation
import Prefs

/// How the costs grow with the number of keys in a suite or vault.
struct ScalingRow {
    let keys: Int
    let read: Stats
    /// Our durable `set` against Foundation's `set` + `synchronize()`.
    let write: Comparison
    /// A secure `set` against a plain durable write of the same plaintext.
    let secureWrite: Comparison
    /// Opening the vault and reading one secret against reading the file and one AEAD decryption.
    let secureOpen: Comparison
    /// Ten sets in one batch against ten separate durable sets.
    let batch: Comparison
    /// A fresh process's open and first read against Foundation's.
    let coldOpen: Comparison
}

/// Measures reads, durable writes, secure opens, batches and cold opens with 10, 100, 1 000 and 10 000 keys; every
/// write and open is measured interleaved with its baseline, as in the main table.
func measureScaling(folders: Folders, budget: Budget, sizes: [Int], log: (String) -> Void) async throws -> [ScalingRow]
{
    var rows: [ScalingRow] = []
    for size in sizes {
        log("scaling: \(size) keys")
        let store = try SuiteFileStore(suiteName: "scaling-\(size)", directory: folders.config)
        try store.replaceAll(integerKeys(size))
        let value = StoredValue(key: "key-1", default: 0, store: store)
        let read = try await measure(
            reading { value.wrappedValue }, budget: budget)

        let defaults = try foundationSuite("scaling-foundation-\(size)", keys: size, folders: folders)
        let write = try await compareDurableWrites(value, defaults, key: "key-1", budget: budget)

        let vault = try EncryptedFileStore(
            url: folders.data.appending(path: "scaling/write-\(size).vault"), key: .raw(Data(randomKey())))
        try vault.replaceAll(secrets(size))
        let secret = SecureStoredValue<String>(key: "secret-1", store: vault)
        let plaintext = try vaultPlaintext(secrets(size), scratch: folders.data)
        let plain = PlainDurableWriter(path: folders.data.appending(path: "scaling/plain-\(size).json").path)
        let secureWrite = try await compareSecureWrites(secret, plain, plaintext: plaintext, budget: budget)

        let secureOpen = try await compareSecureOpen(secretCount: size, folders: folders, budget: budget)
        let batch = try await compareBatchedSets(keyCount: max(size, 10), folders: folders, budget: budget)
        let coldOpen = try await compareColdOpen(keyCount: size, budget: budget)
        rows.append(
            ScalingRow(
                keys: size, read: read, write: write, secureWrite: secureWrite, secureOpen: secureOpen, batch: batch,
                coldOpen: coldOpen))
    }
    return rows
}

/// The scaling table as Markdown: medians per operation, and the median paired ratio.
func scalingTable(_ rows: [ScalingRow]) -> String {
    var lines = [
        "| keys | read | durable write | UserDefaults set + synchronize() | ratio | secure write"
            + " | plain durable write | ratio | secure open + read | read file + AEAD decrypt | ratio |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    func cells(_ comparison: Comparison) -> [String] {
        [
            formatDuration(comparison.ours.median), formatDuration(comparison.baseline.median),
            String(format: "%.2f", comparison.ratio),
        ]
    }
    for row in rows {
        let all = [formatDuration(row.read.median)] + cells(row.write) + cells(row.secureWrite) + cells(row.secureOpen)
        lines.append("| \(row.keys) | " + all.joined(separator: " | ") + " |")
    }
    lines += [
        "",
        "| keys | ten sets in a batch | ten durable sets | ratio | cold open + read | Foundation's | ratio |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows {
        lines.append("| \(row.keys) | " + (cells(row.batch) + cells(row.coldOpen)).joined(separator: " | ") + " |")
    }
    return lines.joined(separator: "\n")
}
