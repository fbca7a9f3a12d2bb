import Foundation
import PrefsTestSupport
import Synchronization
import TestThreads
import Testing

@testable import Prefs

/// A store of the app's own with the four required members, as <doc:WritingAStore> shows one: every write it is
/// given is logged, and a key named in `failing` makes a write throw before it changes anything.
final class MinimalStore: KeyValueStore {
    let hub = StoreHub()
    let values = Mutex<[String: PrefValue]>([:])
    /// Each call of `write`, in order.
    let writes = Mutex<[[String: PrefValue?]]>([])
    let failing = Mutex<Set<String>>([])

    struct WriteFailed: Error {}

    func read(_ key: String) throws -> PrefValue? { values.withLock { $0[key] } }
    func readAll() throws -> [String: PrefValue] { values.withLock { $0 } }
    func write(_ changes: [String: PrefValue?]) throws {
        if !failing.withLock({ $0.isDisjoint(with: changes.keys) }) { throw WriteFailed() }
        values.withLock { values in
            for (key, value) in changes { values[key] = value }
            writes.withLock { $0.append(changes) }
        }
    }
}

extension PrefKey where Value == String {
    fileprivate static let nickname = PrefKey("nickname", default: "anon")
}

extension PrefKey where Value == Int {
    fileprivate static let volume = PrefKey("volume", default: 5)
}

/// The members every `KeyValueStore` gets from the protocol's extension: `replaceAll`, `removeValues`, `reset`,
/// `removeAll` and the subscript, on every store Prefs ships and on a custom store with only the required members.
@Suite(.ownThreads) struct KeyValueStoreTests {
    static func stores(_ directory: TempDir) throws -> [(String, any KeyValueStore)] {
        [
            ("memory", InMemoryStore()), ("custom", MinimalStore()),
            ("json", try FileStore(url: directory.file("c.json"))),
            ("plist", try SuiteFileStore(suiteName: "conv", directory: directory.url)),
            ("vault", try EncryptedFileStore(url: directory.file("c.vault"), key: .keyFile(directory.file("c.key")))),
        ]
    }

    @Test func replaceAllRemoveValuesResetAndRemoveAllWorkOnEveryStore() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        for (name, store) in try Self.stores(directory) {
            try store.replaceAll(["a": .int(1), "b": .int(2), "volume": .int(9), "nickname": .string("x")])
            #expect(try store.allValues().count == 4, "\(name)")
            try store.replaceAll(["a": .int(1), "c": .int(3), "volume": .int(9), "nickname": .string("x")])
            #expect(try store.allValues() == ["a": .int(1), "c": .int(3), "volume": .int(9), "nickname": .string("x")])

            try store.reset(.volume, .nickname)
            #expect(try store.value(for: .volume) == 5, "\(name)")
            #expect(try store.value(for: .nickname) == "anon", "\(name)")

            try store.removeValues(forKeys: ["a", "missing"])
            #expect(try store.allValues() == ["c": .int(3)], "\(name)")
            try store.removeAll()
            #expect(try store.allValues().isEmpty, "\(name)")
        }
    }

    @Test func theSubscriptReadsWritesAndReportsWithoutTry() throws {
        Reports.install()
        let store = InMemoryStore()
        let key = PrefKey(uniqueKey("subscript"), default: 7)
        #expect(store[key] == 7)
        store[key] = 42
        #expect(store[key] == 42)
        #expect(try store.value(for: key) == 42)

        try store.setValue(.string("not a number"), forKey: key.name)
        #expect(store[key] == 7, "a value of the wrong type reads as the default")
        #expect(store[key] == 7)
        #expect(Reports.for(key.name).count == 1, "the same stored value is reported once")
        try store.setValue(.bool(true), forKey: key.name)
        try store.setValue(.string("still not a number"), forKey: key.name)
        #expect(store[key] == 7)
        #expect(Reports.for(key.name).count == 2, "a new stored value is reported afresh")
    }
}
