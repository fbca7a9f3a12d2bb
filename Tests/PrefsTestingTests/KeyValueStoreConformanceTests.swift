import Foundation
import Prefs
import PrefsTestSupport
import PrefsTesting
import Synchronization
import TestThreads
import Testing

/// Every store Prefs ships keeps the store contract, checked by the kit users run against their own stores.
@Suite(.ownThreads)
struct KeyValueStoreConformanceTests {
    @Test func inMemoryStore() async throws {
        let report = try await KeyValueStoreConformance.verify(makeStore: { InMemoryStore() })
        #expect(Set(report.skipped.keys) == [.closedStoreThrows])
        #expect(report.checked.count == KeyValueStoreConformance.Rule.all.count - 1)
    }

    @Test func fileStore() async throws {
        try await verifyInFolder { folder, name in try FileStore(url: folder.file("\(name).json")) }
    }

    @Test func userDefaultsStore() async throws {
        try await verifyInFolder { folder, name in
            try SuiteFileStore(suiteName: "group.\(name.prefix(8))", directory: folder.url)
        }
    }

    @Test func encryptedFileStore() async throws {
        try await verifyInFolder { folder, name in
            try EncryptedFileStore(url: folder.file("\(name).vault"), key: .keyFile(folder.file("\(name).key")))
        }
    }

    /// The README's form for frequent writes.
    @Test func deferredWritesStore() async throws {
        try await verifyInFolder { folder, name in
            try FileStore(url: folder.file("\(name).json")).deferringWrites() as! FileBackedStore
        }
    }

    /// Verifies stores made in a temporary folder, each under a name of its own, closing each after its rule.
    private func verifyInFolder(_ make: (TempDir, String) throws -> FileBackedStore) async throws {
        let folder = try TempDir()
        defer { folder.cleanup() }
        let report = try await KeyValueStoreConformance.verify(
            close: { $0.close() }, makeStore: { try make(folder, UUID().uuidString) })
        #expect(report.skipped.isEmpty)
    }

    @Test func foundationUserDefaultsStore() async throws {
        let suites = Mutex<[String]>([])
        defer {
            for name in suites.withLock({ $0 }) {
                UserDefaults(suiteName: name)?.removePersistentDomain(forName: name)
                try? FileManager.default.removeItem(
                    at: SuiteFileStore.preferencesDirectory().appending(path: name + ".plist"))
            }
        }
        // Foundation keeps a Float NaN as a Double, a date with a fraction of a second as text, and hands out -0 as 0
        // in its dictionary representation: typed reads restore them, raw values differ.
        let report = try await KeyValueStoreConformance.verify(unsupported: [.exactValues]) {
            let name = "conformance.\(UUID().uuidString.prefix(8))"
            suites.withLock { $0.append(name) }
            return UserDefaultsBridgeStore(try #require(UserDefaults(suiteName: name)))
        }
        #expect(Set(report.skipped.keys) == [.valueRoundTrip, .closedStoreThrows])
    }
}
