import Foundation
import Prefs
import PrefsTesting
import Synchronization
import TestThreads
import Testing

// The store of the DocC article "Writing a store" (Sources/Prefs/Prefs.docc/WritingAStore.md), as the article shows it,
// and the article's test: the store passes the conformance kit. `theArticleShowsThisCode` keeps the two the same.
/// Feature flags a server sends as a whole, with local overrides written through Prefs.
final class RemoteConfigStore: KeyValueStore {
    let hub = StoreHub()
    private let state = Mutex<(values: [String: PrefValue], closed: Bool)>(([:], false))

    func read(_ key: String) throws -> PrefValue? {
        try state.withLock { state in
            guard !state.closed else { throw PrefsError.storeClosed(path: "remote config") }
            return state.values[key]
        }
    }

    func readAll() throws -> [String: PrefValue] {
        try state.withLock { state in
            guard !state.closed else { throw PrefsError.storeClosed(path: "remote config") }
            return state.values
        }
    }

    func write(_ changes: [String: PrefValue?]) throws {
        try state.withLock { state in
            guard !state.closed else { throw PrefsError.storeClosed(path: "remote config") }
            for (key, value) in changes { state.values[key] = value }
        }
    }

    /// Replaces every value with a fresh download, and tells Prefs which keys changed.
    func apply(download: [String: PrefValue]) {
        let changed = state.withLock { state in
            let old = state.values
            state.values = download
            return Set(old.keys).union(download.keys).filter { old[$0] != download[$0] }
        }
        hub.keysChanged(changed)  // after releasing the lock: observers read the store
    }

    func close() {
        state.withLock { $0.closed = true }
    }
}

@Suite(.ownThreads)
struct WritingAStoreTests {
    @Test func remoteConfigStoreKeepsTheContract() async throws {
        try await KeyValueStoreConformance.verify(close: { $0.close() }, makeStore: { RemoteConfigStore() })
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

    /// The article's store is under 80 lines: four members are all a store needs.
    @Test func theArticlesStoreIsUnder80Lines() throws {
        let blocks = try DocumentationSnippetTests.swiftBlocks(in: "Sources/Prefs/Prefs.docc/WritingAStore.md")
        #expect(blocks[0].split(separator: "\n").count < 80)
    }

    /// A download reaches wrappers and `values` streams; a local override is written and announced.
    @Test func aDownloadAndALocalOverrideReachObservers() async throws {
        let flags = RemoteConfigStore()
        let newEditor = StoredValue(key: "newEditor", default: false, store: flags)
        let stream = newEditor.values
        flags.apply(download: ["newEditor": .bool(true), "maxUploads": .int(3)])
        #expect(newEditor.wrappedValue)
        newEditor.toggle()
        #expect(try flags.allValues() == ["newEditor": .bool(false), "maxUploads": .int(3)])
        var iterator = stream.makeAsyncIterator()
        #expect(await iterator.next() == false)
        #expect(await iterator.next() == true)
        #expect(await iterator.next() == false)
    }

    /// The non-empty lines of `text` without their indentation or imports, joined by newlines.
    static func lines(of text: String) -> String {
        text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && !$0.hasPrefix("import ") }.joined(separator: "\n")
    }
}
