import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

/// The rule for mixing Foundation's `UserDefaults` and Prefs on one suite in one process, as the guides state it.
@Suite(.ownThreads)
struct FoundationInTheSameProcessTests {
    @Test func eachSeesTheOthersWritesOnlyAfterFoundationsSynchronize() async throws {
        let suite = "prefs-mixing-\(UUID().uuidString.prefix(8))"
        let defaults = try #require(UserDefaults(suiteName: suite))
        let store = try SuiteFileStore(suiteName: suite)
        defer { try? FileManager.default.removeItem(at: store.url) }
        #expect(defaults.object(forKey: "fromPrefs") == nil)
        try store.setValue(.int(1), forKey: "fromPrefs")
        // Foundation keeps serving its cache until its own synchronize() re-reads the file.
        #expect(defaults.object(forKey: "fromPrefs") == nil)
        defaults.synchronize()
        #expect(defaults.integer(forKey: "fromPrefs") == 1)

        defaults.set(2, forKey: "fromFoundation")
        #expect(try store.value(forKey: "fromFoundation") == nil, "not on disk before synchronize()")
        defaults.synchronize()
        // Foundation's synchronize() rewrote the file; the store's watcher notices and reloads it.
        try await eventually("the watcher to load Foundation's rewrite") {
            try store.value(forKey: "fromFoundation") != nil
        }
        #expect(try store.value(forKey: "fromFoundation") == .int(2))
        #expect(try store.value(forKey: "fromPrefs") == .int(1), "Foundation's rewrite kept Prefs' key")
    }
}
