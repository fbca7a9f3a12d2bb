import Foundation
import Prefs
import PrefsTestSupport
import PrefsTesting
import Synchronization
import TestThreads
import Testing

// The store of the DocC article "Writing a store" (Sources/Prefs/Prefs.docc/WritingAStore.md), as the article shows it,
// and the article's test: the store passes the conformance kit. `theArticleShowsThisCode` keeps the two the same.
/// Preferences kept in a dictionary and saved, whole, to a JSON file of their own after every change.
final class DictionaryFileStore: KeyValueStore {
    let changes = ChangeFeed()
    private let url: URL
    private let values: Mutex<[String: PrefValue]>

    /// Opens the store, reading the file if it exists.
    init(url: URL) throws {
        self.url = url
        var saved: [String: PrefValue] = [:]
        if FileManager.default.fileExists(atPath: url.path) {
            saved = try PrefValue.values(fromJSONDocument: Data(contentsOf: url), source: url.path)
        }
        values = Mutex(saved)
    }

    func value(forKey key: String) throws -> PrefValue? {
        values.withLock { $0[key] }
    }

    func allValues() throws -> [String: PrefValue] {
        values.withLock { $0 }
    }

    func setValue(_ value: PrefValue?, forKey key: String) throws {
        try updateValue(forKey: key) { _ in value }
    }

    @discardableResult
    func updateValue(forKey key: String, _ transform: (PrefValue?) throws -> PrefValue?) throws -> PrefValue? {
        try validateKey(key)
        let new = try values.withLock { values in
            var changed = values
            changed[key] = try transform(values[key])
            if changed != values {
                // Save first: if saving fails, nothing changes and the error reaches the caller.
                try PrefValue.jsonDocument(changed).write(to: url, options: .atomic)
                values = changed
                // Announce under the lock, so the order of announcements is the order of changes.
                changes.announce([key: changed[key]])
            }
            return changed[key]
        }
        // Deliver after the lock is released: observers may read or write the store from their callbacks.
        changes.deliverAnnouncements()
        return new
    }
}

@Suite(.ownThreads)
struct WritingAStoreTests {
    @Test func dictionaryFileStoreKeepsTheContract() async throws {
        let folder = FileManager.default.temporaryDirectory.appending(path: UUID().uuidString)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }

        try await KeyValueStoreConformance.verify(
            unsupported: [.transactionalBatches],
            makeStore: {
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
