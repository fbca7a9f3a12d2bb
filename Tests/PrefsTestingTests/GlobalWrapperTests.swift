import Foundation
import Observation
import Prefs
import PrefsTesting
import Synchronization
import TestThreads
import Testing

/// Declared at top level, as the brief shows: created by whichever test reads it first, then read by all.
let hasHapticsEnabled = StoredValue(key: "hasHapticsEnabled", default: false)
let launchCount = StoredValue(key: "launchCount", default: 0)

extension PrefKey where Value == String {
    static let accentColor = PrefKey("accentColor", default: "blue")
}

/// Static wrappers: a typed key and a secret.
enum AppSettings {
    static let accent = StoredValue(.accentColor)
    static let token = SecureStoredValue<String>(key: "globalToken")
}

/// Every case of these parameterized tests reads and writes the same global and static wrappers; each must see
/// only its own test's store, in parallel.
@Suite(.isolatedPreferences, .ownThreads)
struct GlobalWrapperTests {
    @Test(arguments: 0..<8)
    func aGlobalWrapperFollowsEachTestCase(_ index: Int) async throws {
        #expect(hasHapticsEnabled.wrappedValue == false, "every case starts from the declared default")
        #expect(launchCount.wrappedValue == 0)
        hasHapticsEnabled.wrappedValue = index.isMultiple(of: 2)
        launchCount.wrappedValue = index + 1
        // Let other cases write their own values in between.
        await Task.yield()
        launchCount.update { $0 += 10 }
        hasHapticsEnabled.toggle()

        #expect(launchCount.wrappedValue == index + 11)
        #expect(hasHapticsEnabled.wrappedValue == !index.isMultiple(of: 2))
        let isolation = try #require(PrefsIsolation.current)
        #expect(launchCount.store === isolation.defaultStore)
        #expect(try isolation.defaultStore.value(forKey: "launchCount") == .int(Int64(index + 11)))
        #expect(await Task { launchCount.wrappedValue }.value == index + 11, "child tasks see the test's value")
    }

    @Test(arguments: ["red", "green", "teal", "plum", "gold"])
    func staticWrappersFollowEachTestCase(_ color: String) async throws {
        #expect(AppSettings.accent.wrappedValue == "blue")
        #expect(AppSettings.token.wrappedValue == nil)
        AppSettings.accent.wrappedValue = color
        try AppSettings.token.set("token-\(color)")
        await Task.yield()

        #expect(AppSettings.accent.wrappedValue == color)
        #expect(AppSettings.token.wrappedValue == "token-\(color)")
        let isolation = try #require(PrefsIsolation.current)
        #expect(try isolation.defaultStore.value(forKey: "accentColor") == .string(color))
        #expect(try isolation.secureStore.value(forKey: "globalToken") == .string("token-\(color)"))
        try AppSettings.token.reset()
        #expect(AppSettings.token.wrappedValue == nil)
    }

    @Test func aGlobalWrappersStreamAndObservationFollowTheTest() async {
        var values = launchCount.values.makeAsyncIterator()
        #expect(await values.next() == 0)

        let observed = ObservedFlag()
        withObservationTracking {
            _ = launchCount.wrappedValue
        } onChange: {
            observed.fire()
        }
        launchCount.wrappedValue = 5
        #expect(await values.next() == 5)
        #expect(observed.fired)
    }

    @Test func aWrapperMadeInOneTestFollowsTheNextOneItIsReadIn() async throws {
        let made = PrefsConfig.withDefaultStore(InMemoryStore()) { StoredValue(key: "madeElsewhere", default: 1) }
        made.wrappedValue = 2
        #expect(made.wrappedValue == 2)
        let isolation = try #require(PrefsIsolation.current)
        #expect(made.store === isolation.defaultStore, "read inside this test, it uses this test's store")
        #expect(try isolation.defaultStore.value(forKey: "madeElsewhere") == .int(2))
    }
}

/// Set by an observation's `onChange`, which may run on another thread.
final class ObservedFlag: Sendable {
    private let state = Mutex(false)
    func fire() { state.withLock { $0 = true } }
    var fired: Bool { state.withLock { $0 } }
}
