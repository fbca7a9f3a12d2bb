import Foundation
import Prefs

/// How the costs grow with the number of keys in a suite or vault.
struct ScalingRow {
    let keys: Int
    let read: Stats
    let durableWrite: Stats
    let foundationSync: Stats
    let secureWrite: Stats
    let secureOpen: Stats
    let readAndDecrypt: Stats
}

/// Measures reads, durable writes and secure opens with 10, 100, 1 000 and 10 000 keys.
func measureScaling(folders: Folders, budget: Budget, sizes: [Int], log: (String) -> Void) async throws -> [ScalingRow]
{
    var rows: [ScalingRow] = []
    for size in sizes {
        log("scaling: \(size) keys")
        let store = try UserDefaultsStore(suiteName: "scaling-\(size)", directory: folders.config)
        try store.replaceAll(integerKeys(size))
        let value = StoredValue(key: "key-1", default: 0, store: store)
        let read = try await measure(
            { count in
                var sum = 0
                for _ in 0..<count { sum &+= value.wrappedValue }
                blackHole(sum)
            }, budget: budget)

        var next = 0
        let write = try await measure(
            { count in
                for _ in 0..<count {
                    next += 1
                    value.set(next)
                }
            }, budget: budget, limit: 5_000)

        let defaults = try foundationSuite("scaling-foundation-\(size)", keys: size, folders: folders)
        let sync = try await measure(
            { count in
                for _ in 0..<count {
                    next += 1
                    defaults.set(next, forKey: "key-1")
                    defaults.synchronize()
                }
            }, budget: budget, limit: 5_000)

        let vault = try EncryptedFileStore(
            url: folders.data.appending(path: "scaling/write-\(size).vault"), key: .raw(Data(randomKey())))
        try vault.replaceAll(secrets(size))
        let secret = SecureStoredValue<String>(key: "secret-1", store: vault)
        let secureWrite = try await measure(
            { count in
                for _ in 0..<count {
                    next += 1
                    try secret.set(token(next))
                }
            }, budget: budget, limit: 5_000)

        let opening = try await compareSecureOpen(secretCount: size, folders: folders, budget: budget)
        rows.append(
            ScalingRow(
                keys: size, read: read, durableWrite: write, foundationSync: sync, secureWrite: secureWrite,
                secureOpen: opening.ours, readAndDecrypt: opening.baseline))
    }
    return rows
}

/// The scaling table as Markdown, medians per operation.
func scalingTable(_ rows: [ScalingRow]) -> String {
    var lines = [
        "| keys | read | durable write | UserDefaults set + synchronize() | secure write | secure open + read"
            + " | read file + AEAD decrypt |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows {
        let cells = [
            row.read, row.durableWrite, row.foundationSync, row.secureWrite, row.secureOpen, row.readAndDecrypt,
        ].map { formatDuration($0.median) }
        lines.append("| \(row.keys) | " + cells.joined(separator: " | ") + " |")
    }
    return lines.joined(separator: "\n")
}
