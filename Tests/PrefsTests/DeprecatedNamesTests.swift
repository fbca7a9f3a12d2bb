import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

/// The names an app written against 0.x uses still do what they did, for one release, with a deprecation warning.
///
/// Each check is a deprecated witness of a requirement that is not deprecated: the old names are used without a
/// warning here (the tests build with warnings as errors), and called through the requirement.
private protocol OldNamesCheck {
    static func run() throws
}

@Suite(.ownThreads)
struct DeprecatedNamesTests {
    private static func check(_ check: any OldNamesCheck.Type) throws { try check.run() }

    @Test func aSecretsServicePrefixesItsKey() throws { try Self.check(ServicePrefix.self) }

    @Test func theOldStoreNamesAreTheNewStores() throws { try Self.check(StoreNames.self) }

    @Test func removeDamageUpdatesValuesInIntegerAndChangesKeysDoWhatTheyDid() async throws {
        try Self.check(MemberNames.self)
        // `store.changes.keys(…)` is a stream, taken through a check of its own, which is not async.
        let store = InMemoryStore()
        let keys = (OldChangesKeys.self as any OldChangesStream.Type).stream(of: store, ["theme"])
        try store.setValue(.string("dark"), forKey: "theme")
        var iterator = keys.makeAsyncIterator()
        #expect(await iterator.next() == "theme")
    }
}

/// The 0.x store and report types are the 1.0 ones under their old names.
private enum StoreNames: OldNamesCheck {
    @available(*, deprecated)
    static func run() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let suite: UserDefaultsStore = try SuiteFileStore(suiteName: "old", directory: directory.url)
        #expect(type(of: suite) == SuiteFileStore.self)
        let bridge: FoundationUserDefaultsStore = UserDefaultsBridgeStore(UserDefaults(suiteName: "old.bridge")!)
        #expect(type(of: bridge) == UserDefaultsBridgeStore.self)
        #expect(PrefsMigrated.self == PrefsMigrationNotice.self && PrefsNotIsolated.self == PrefsIsolationWarning.self)
    }
}

/// `SecureStoredValue.remove()`, `FileBackedStore.damageUpdates()` and `values(in:)`, `PrefValue.integer(_:)`.
private enum MemberNames: OldNamesCheck {
    @available(*, deprecated)
    static func run() throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        let token = SecureStoredValue<String>(key: "token", store: vault.store)
        try token.set("t")
        try token.remove()
        #expect(token.wrappedValue == nil)
        #expect(try vault.store.allValues().isEmpty)

        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try FileStore(url: directory.file("old.json"))
        try store.setValue(.int(1), forKey: "k")
        #expect(store.values(in: .user) == ["k": .int(1)] && store.values(in: .managed).isEmpty)
        _ = store.damageUpdates()

        #expect(PrefValue.integer(UInt64.max) == .unsignedInt(.max) && PrefValue.integer(UInt8(3)) == .int(3))
    }
}

/// `store.changes.keys(…)`, the stream of 0.x's `ChangeFeed`.
private protocol OldChangesStream {
    static func stream(of store: any KeyValueStore, _ keys: Set<String>) -> AsyncStream<String>
}

private enum OldChangesKeys: OldChangesStream {
    @available(*, deprecated)
    static func stream(of store: any KeyValueStore, _ keys: Set<String>) -> AsyncStream<String> {
        store.changes.keys(keys)
    }
}

/// `SecureStoredValue(key:service:store:)` stored the secret under `service.key`.
private enum ServicePrefix: OldNamesCheck {
    @available(*, deprecated)
    static func run() throws {
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        let work = SecureStoredValue<String>(key: "token", service: "work", store: vault.store)
        let plain = SecureStoredValue<String>(key: "token", service: nil, store: vault.store)
        try work.set("w")
        try plain.set("p")
        #expect(work.key == "work.token" && plain.key == "token")
        #expect(try vault.store.allValues() == ["work.token": .string("w"), "token": .string("p")])
    }
}
