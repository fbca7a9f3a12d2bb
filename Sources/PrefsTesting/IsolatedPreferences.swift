public import Prefs
public import Testing

/// `@Test(.isolatedPreferences)` or `@Suite(.isolatedPreferences)` gives every test, and every case of a
/// parameterized test, its own fresh preferences.
///
/// Inside the test, wrappers created without `store:` (the way models are usually declared) use a new
/// ``Prefs/InMemoryStore``, and `@SecureStoredValue` without `store:` a second one, so a test touches no file and
/// sees no other test's values, even when Swift Testing runs tests in parallel:
///
/// ```swift
/// import PrefsTesting
///
/// @Suite(.isolatedPreferences)
/// struct SettingsTests {
///     @Test func zoomIsRemembered() {
///         let settings = Settings()          // @StoredValue(key: "zoom") var zoom = 1.0
///         settings.zoom = 2
///         #expect(Settings().zoom == 2)      // same test, same store
///     }
/// }
/// ```
///
/// A wrapper declared with `storage:` (`@StoredValue(key: "k", storage: UserDefaults(suiteName: "g")!)`) gets an
/// in-memory stand-in for its `UserDefaults` instance, one per instance for the test, and the instance is neither
/// read nor written; `storage: .standard` uses the test's default store.
///
/// The stores are task-local (see ``Prefs/PrefsConfig/withDefaultStore(_:operation:)``): child tasks of the test
/// inherit them, while other tests, and code that is not part of the test, keep their own. A wrapper created
/// inside the test keeps its store after the test ends. Use ``PrefsIsolation/current`` to reach the test's stores.
public struct IsolatedPreferencesTrait: TestTrait, SuiteTrait, TestScoping {
    /// `true`: on a suite, every test inside it (and inside nested suites) is isolated.
    public var isRecursive: Bool { true }

    /// `.isolatedPreferences` provides a scope for each test case; suites themselves get none.
    public func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
        testCase == nil ? nil : self
    }

    /// Runs one test case with fresh default stores.
    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        let isolation = PrefsIsolation(defaultStore: InMemoryStore(), secureStore: InMemoryStore())
        try await PrefsIsolation.$current.withValue(isolation) {
            try await PrefsConfig.withDefaultStore(isolation.defaultStore) {
                try await PrefsConfig.withDefaultSecureStore(isolation.secureStore) {
                    // `storage:` wrappers: an in-memory stand-in per UserDefaults instance, never the instance.
                    try await PrefsConfig.withUserDefaultsStandIns { try await function() }
                }
            }
        }
    }
}

extension Trait where Self == IsolatedPreferencesTrait {
    /// `@Test(.isolatedPreferences)`: a fresh in-memory default store and secure store for each test case.
    public static var isolatedPreferences: Self { Self() }
}

/// `PrefsIsolation.current?.defaultStore` is the store an isolated test's wrappers use, to seed or inspect it.
public struct PrefsIsolation: Sendable {
    /// `isolation.defaultStore` stands in for ``Prefs/PrefsConfig/defaultStore`` during the test.
    public let defaultStore: InMemoryStore
    /// `isolation.secureStore` stands in for ``Prefs/PrefsConfig/secureStore`` during the test.
    public let secureStore: InMemoryStore

    /// `PrefsIsolation.current` is the running isolated test's stores, or nil outside `.isolatedPreferences`.
    @TaskLocal public static var current: PrefsIsolation?
}
