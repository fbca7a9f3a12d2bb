import Foundation
import Prefs
import PrefsTestSupport
import PrefsTesting
import Synchronization
import TestThreads
import Testing

// The store of the DocC article "Writing a store" (Sources/Prefs/Prefs.docc/WritingAStore.md), as the article shows it,
// and the article's test: the store passes the conformance kit. `theArticleShowsThisCode` keeps the two the same.
/// Preferences kept in a dictionary and saved, whole, to a JSON file of their own after every change, or once for
/// a whole batch.
final class DictionaryFileStore: KeyValueStore {
    let changes = ChangeFeed()
    private let url: URL
    /// What readers see, and how many batches are open (0: none).
    private let state: Mutex<(values: [String: PrefValue], openBatches: Int)>
    /// Held by every write, and by a batch for its whole body, through `changes.apply`: one writer at a time.
    /// Recursive, so that a batch's body can write.
    private let writer = NSRecursiveLock()

    /// Opens the store, reading the file if it exists.
    init(url: URL) throws {
        self.url = url
        var saved: [String: PrefValue] = [:]
        if FileManager.default.fileExists(atPath: url.path) {
            saved = try PrefValue.values(fromJSONDocument: Data(contentsOf: url), source: url.path)
        }
        state = Mutex((saved, 0))
    }

    func value(forKey key: String) throws -> PrefValue? {
        state.withLock { $0.values[key] }
    }

    func allValues() throws -> [String: PrefValue] {
        state.withLock { $0.values }
    }

    func setValue(_ value: PrefValue?, forKey key: String) throws {
        try updateValue(forKey: key) { _ in value }
    }

    @discardableResult
    func updateValue(forKey key: String, _ transform: (PrefValue?) throws -> PrefValue?) throws -> PrefValue? {
        try validateKey(key)
        return try edit { values in
            values[key] = try transform(values[key])
            return values[key]
        }
    }

    func replaceAll(_ values: [String: PrefValue]) throws {
        for key in values.keys { try validateKey(key) }
        try edit { $0 = values }
    }

    func batch<T>(_ body: () throws -> T) throws -> T {
        try edit { values in
            state.withLock { $0.openBatches += 1 }
            defer { state.withLock { $0.openBatches -= 1 } }
            let result = try body()  // its writes are kept in memory until the outermost batch ends
            values = state.withLock { $0.values }
            return result
        }
    }

    /// Applies `change` to a copy of the values through `changes.apply`, which holds the writer lock for it and
    /// runs the observers of what it announced once the lock is released. Outside a batch the new values are saved,
    /// then shown to readers and announced; inside one they are only kept in memory, for the outermost batch to
    /// save and announce when it ends. If `change` or the save throws, the values go back to what they were.
    private func edit<T>(_ change: (inout [String: PrefValue]) throws -> T) throws -> T {
        try changes.apply(locking: writer) { changes in
            let (old, inBatch) = state.withLock { ($0.values, $0.openBatches > 0) }
            do {
                var new = old
                let result = try change(&new)
                // Save first: if saving fails, nothing changes and the error reaches the caller.
                if !inBatch, new != old { try PrefValue.jsonDocument(new).write(to: url, options: .atomic) }
                state.withLock { $0.values = new }
                // Inside a batch, only make wrappers read the keys again: the outermost batch announces them.
                let changed = Self.difference(old, new)
                if inBatch { changes.invalidate(Set(changed.keys)) } else { changes.announce(changed) }
                return result
            } catch {
                // A batch's body may have written: take its writes back, and make wrappers that read them read again.
                let current = state.withLock { state in
                    defer { state.values = old }
                    return state.values
                }
                changes.invalidate(Set(Self.difference(old, current).keys))
                throw error
            }
        }
    }

    /// The keys whose values differ, with their new values (nil: removed).
    private static func difference(_ old: [String: PrefValue], _ new: [String: PrefValue]) -> [String: PrefValue?] {
        var changed: [String: PrefValue?] = [:]
        for key in Set(old.keys).union(new.keys) where old[key] != new[key] {
            changed.updateValue(new[key], forKey: key)
        }
        return changed
    }
}

@Suite(.ownThreads)
struct WritingAStoreTests {
    @Test func dictionaryFileStoreKeepsTheContract() async throws {
        let folder = FileManager.default.temporaryDirectory.appending(path: UUID().uuidString)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }

        try await KeyValueStoreConformance.verify(makeStore: {
            try DictionaryFileStore(url: folder.appending(path: "\(UUID().uuidString).json"))
        })
    }

    /// The article's store and test are the code of this file, line for line (indentation and imports aside).
    @Test func theArticleShowsThisCode() throws {
        let source = try String(contentsOf: URL(filePath: #filePath), encoding: .utf8)
        let blocks = try DocumentationSnippetTests.swiftBlocks(in: "Sources/Prefs/Prefs.docc/WritingAStore.md")
        try #require(blocks.count == 3)
        for block in [blocks[0], blocks[2]] {
            #expect(Self.lines(of: source).contains(Self.lines(of: block)), "\(block)")
        }
        // The wrapper example compiles as written (in a main.swift, with the store beside it).
        try DocumentationSnippetTests.typecheck(blocks[0] + "\n" + blocks[1])
    }

    /// The docs' custom store of StoresAndBackends passes the kit too, batching through the default implementation.
    @Test func theRemoteConfigStoreKeepsTheContract() async throws {
        let report = try await KeyValueStoreConformance.verify(
            unsupported: [.transactionalBatches], makeStore: { RemoteConfigStore() })
        #expect(report.brokenRules.isEmpty)
    }

    /// The non-empty lines of `text` without their indentation or imports, joined by newlines.
    static func lines(of text: String) -> String {
        text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && !$0.hasPrefix("import ") }.joined(separator: "\n")
    }
}
