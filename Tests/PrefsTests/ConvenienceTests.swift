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

@Suite(.ownThreads) struct ConvenienceTests {
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

    @Test func anOptionalWrapperNeedsNoInitialValue() throws {
        let store = InMemoryStore()
        @StoredValue(key: "c", store: store) var c: Int?
        #expect(c == nil)
        c = 3
        #expect(c == 3)
        #expect(try store.value(forKey: "c") == .int(3))
        $c.reset()
        #expect(c == nil)
        #expect(try store.value(forKey: "c") == nil)
    }

    @Test func changesYieldOldAndNewValues() async throws {
        let store = InMemoryStore()
        let theme = StoredValue(key: "theme", default: "light", store: store)
        let changes = theme.changes
        theme.wrappedValue = "dark"
        theme.wrappedValue = "dark"
        try store.set("system", for: PrefKey("theme", default: "light"))
        let pairs = try await first(2, of: changes)
        #expect(pairs.map(\.old) == ["light", "dark"])
        #expect(pairs.map(\.new) == ["dark", "system"])
    }

    @Test func secureChangesYieldOldAndNewSecrets() async throws {
        let vault = InMemoryStore()
        let token = SecureStoredValue<String>(key: "token", store: vault)
        let changes = token.changes
        try token.set("a")
        try token.remove()
        let pairs = try await first(2, of: changes)
        #expect(pairs.map(\.old) == [nil, "a"])
        #expect(pairs.map(\.new) == ["a", nil])
    }

    @Test func secureArraysAppendContentsOf() throws {
        let devices = SecureStoredValue<[String]>(key: "devices", store: InMemoryStore())
        try devices.append(contentsOf: ["a", "b"])
        try devices.append(contentsOf: ["c"])
        #expect(devices.wrappedValue == ["a", "b", "c"])
    }

    @Test func aKeyDeclaredWithTwoTypesIsReportedOnceNamingBoth() {
        Reports.install()
        let store = InMemoryStore()
        let key = uniqueKey("conflict")
        let first = StoredValue(key: key, default: 1, store: store)
        let second = StoredValue(key: key, default: "one", store: store)
        _ = StoredValue(key: key, default: "one", store: store)
        _ = (first, second)
        let reports = Reports.for(key)
        #expect(reports.count == 1)
        let text = reports.first.map { "\($0)" } ?? ""
        #expect(text.contains("Swift.Int") && text.contains("Swift.String"), "\(text)")
    }

    @Test func aKeyDeclaredWithTwoDefaultsIsReportedOnceNamingBoth() {
        Reports.install()
        let store = InMemoryStore()
        let key = uniqueKey("defaults")
        _ = StoredValue(key: key, default: 10, store: store)
        _ = StoredValue(key: key, default: 10, store: store)
        #expect(Reports.for(key).isEmpty, "identical declarations agree")
        _ = StoredValue(key: key, default: 20, store: store)
        _ = StoredValue(key: key, default: 20, store: store)
        let reports = Reports.for(key)
        #expect(reports.count == 1)
        let text = reports.first.map { "\($0)" } ?? ""
        #expect(text.contains("= 10") && text.contains("= 20"), "\(text)")
        _ = StoredValue(key: key, default: 10, store: InMemoryStore())
        #expect(Reports.for(key).count == 1, "another store is another declaration space")
    }

    @Test func userDefaultsInstancesMapToOneStoreEach() {
        let suite = UserDefaults(suiteName: "conv.instance")!
        let store = UserDefaultsStore.store(for: suite)
        #expect(store is FoundationUserDefaultsStore)
        #expect(UserDefaultsStore.store(for: suite) === store, "wrappers given one instance share its store")
        #expect(UserDefaultsStore.store(for: CustomDefaults(suiteName: "conv.instance")!) !== store)
        #expect(UserDefaultsStore.store(for: .standard) is FoundationUserDefaultsStore)
    }
}

final class CustomDefaults: UserDefaults {}
