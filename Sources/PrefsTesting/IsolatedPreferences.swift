public import Prefs
public import Testing

import class Foundation.FileManager
import struct Foundation.URL
import struct Foundation.UUID

/// `@Test(.isolatedPreferences)` or `@Suite(.isolatedPreferences)` gives every test, and every case of a
/// parameterized test, its own fresh preferences.
///
/// Inside the test, wrappers declared without `store:` use a new ``Prefs/InMemoryStore``, and `@SecureStoredValue`
/// without `store:` a second one, so a test touches no file and sees no other test's values, even when Swift Testing
/// runs tests in parallel. That holds for every form declared without `store:`: properties of models, typed keys
/// (`@StoredValue(.doTheThing)`), secrets, and global or `static` wrappers, which follow whichever test reads them:
///
/// ```swift
/// import PrefsTesting
///
/// let hasHapticsEnabled = StoredValue(key: "hasHapticsEnabled", default: false)
///
/// @Suite(.isolatedPreferences)
/// struct SettingsTests {
///     @Test func zoomIsRemembered() {
///         let settings = Settings()          // @StoredValue(key: "zoom") var zoom = 1.0
///         settings.zoom = 2
///         #expect(Settings().zoom == 2)      // same test, same store
///     }
///
///     @Test(arguments: [false, true])
///     func hapticsAreRemembered(_ enabled: Bool) {
///         #expect(hasHapticsEnabled.wrappedValue == false)   // every case starts fresh
///         hasHapticsEnabled.wrappedValue = enabled
///         #expect(hasHapticsEnabled.wrappedValue == enabled)
///     }
/// }
/// ```
///
/// A vault the test opens itself (`EncryptedFileStore(url:key:)` in a temporary folder) keeps its rollback record
/// in a temporary folder of the test, removed when the test ends, instead of `$XDG_STATE_HOME/prefs/vaults`.
/// A wrapper declared with `storage:` (`@StoredValue(key: "k", storage: UserDefaults(suiteName: "g")!)`) gets an
/// in-memory stand-in for its suite, one per suite name for the test (two instances of one suite share it, as real
/// ones share their values), and the instance is neither read nor written; `storage: .standard` (or an instance
/// made without a suite name) uses the test's default store, and so does `PrefsConfig.defaultStore.deferringWrites()`. Wrappers given a `store:` use that store,
/// inside the trait as anywhere; `SuiteFileStore.standard` named explicitly is the real file, and its first use
/// inside the trait is reported (``Prefs/PrefsIsolationWarning``).
///
/// The stores are task-local (see ``Prefs/PrefsConfig/withDefaultStore(_:operation:)``): child tasks of the test
/// inherit them, while other tests, and code that is not part of the test (a detached task), keep their own. Use
/// ``PrefsIsolation/current`` to reach the test's stores.
public struct IsolatedPreferencesTrait: TestTrait, SuiteTrait, TestScoping {
    /// `true`: on a suite, every test inside it (and inside nested suites) is isolated.
    public var isRecursive: Bool { true }

    /// `.isolatedPreferences` provides a scope for each test case; suites themselves get none.
    public func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
        testCase == nil ? nil : self
    }

    /// Runs one test case with fresh default stores and its own folder for vault records.
    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        let isolation = PrefsIsolation(
            defaultStore: InMemoryStore(), secureStore: InMemoryStore(), capture: ReportCapture())
        // Created only if a vault writes a record; removed after the test either way.
        let scratch = FileManager.default.temporaryDirectory.appending(path: "prefs-isolated-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let records = scratch.appending(path: "vaults").path(percentEncoded: false)
        try await PrefsIsolation.$scoped.withValue(isolation) {
            try await ErrorReporter.$capture.withValue(isolation.capture) {
                try await PrefsConfig.withIsolatedTest(stateFolder: records) {
                    try await PrefsConfig.withDefaultStore(isolation.defaultStore) {
                        try await PrefsConfig.withDefaultSecureStore(isolation.secureStore) {
                            // `storage:` wrappers: an in-memory stand-in per suite name, never the instance.
                            try await PrefsConfig.withUserDefaultsStandIns { try await function() }
                        }
                    }
                }
            }
        }
    }
}

extension Trait where Self == IsolatedPreferencesTrait {
    /// `@Test(.isolatedPreferences)`: a fresh in-memory default store and secure store for each test case.
    public static var isolatedPreferences: Self { Self() }
}

/// `PrefsIsolation.current?.defaultStore` is the store an isolated test's wrappers use, to seed or inspect it;
/// `PrefsIsolation.reports` is what the library reported during the test.
public struct PrefsIsolation: Sendable {
    /// `isolation.defaultStore` stands in for ``Prefs/PrefsConfig/defaultStore`` during the test.
    public let defaultStore: InMemoryStore
    /// `isolation.secureStore` stands in for ``Prefs/PrefsConfig/secureStore`` during the test.
    public let secureStore: InMemoryStore
    let capture: ReportCapture

    /// `PrefsIsolation.reports` is every report the library made in the running isolated test, oldest first: a
    /// stored value a read could not use, a write a wrapper could not make, a conflicting declaration (see
    /// ``Prefs/PrefsConfig/errorHandler``). Empty outside `.isolatedPreferences`.
    ///
    /// ```swift
    /// @Test(.isolatedPreferences) func anOutOfRangeSizeReadsAsTheDefault() throws {
    ///     try PrefsIsolation.current!.defaultStore.setValue(.int(300), forKey: "fontSize")
    ///     #expect(Settings().fontSize == 13)
    ///     #expect(PrefsIsolation.reports.map(\.key) == ["fontSize"])
    /// }
    /// ```
    ///
    /// The test keeps its reports instead of printing them, so they do not clutter its output; a handler the test or
    /// the app set (``Prefs/PrefsConfig/errorHandler``) still gets each, and a ``Prefs/PrefsIsolationWarning`` notice
    /// still prints. Reports are the test's when they are made in its task or a child task of it; those made on a
    /// thread of the library's own (a change another process made to a file the test opened) go to the handler.
    public static var reports: [PrefsReport] { current?.capture.all ?? [] }

    /// `PrefsIsolation.takeReports()` returns the reports made so far in the running isolated test and forgets them,
    /// so the next check sees only later ones. Empty outside `.isolatedPreferences`.
    public static func takeReports() -> [PrefsReport] { current?.capture.take() ?? [] }

    /// `PrefsIsolation.current` is the running isolated test's stores, or nil outside `.isolatedPreferences`.
    public static var current: PrefsIsolation? { scoped }

    /// The isolation of the running test, set by the trait for the test's task and its child tasks.
    @TaskLocal static var scoped: PrefsIsolation?
}
