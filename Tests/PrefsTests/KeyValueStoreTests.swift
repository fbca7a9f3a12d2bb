import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

/// A custom store with only the five required members, to check the protocol's default implementations.
final class MinimalStore: KeyValueStore {
    let inner = InMemoryStore()
    var changes: ChangeFeed { inner.changes }
    func value(forKey key: String) throws -> PrefValue? { try inner.value(forKey: key) }
    func setValue(_ value: PrefValue?, forKey key: String) throws { try inner.setValue(value, forKey: key) }
    func allValues() throws -> [String: PrefValue] { try inner.allValues() }
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
            ("plist", try UserDefaultsStore(suiteName: "conv", directory: directory.url)),
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
