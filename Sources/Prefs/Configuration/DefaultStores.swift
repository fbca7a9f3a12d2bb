import Foundation
import Synchronization

/// The process-wide state behind ``PrefsConfig``: the app identifier, the default stores once opened, the stores
/// set in their place, and the task-local scopes of `withDefaultStore`.
///
/// Stores are opened outside the lock and errors are reported after releasing it, so an error handler (user code)
/// may read preferences, or even the default stores, without deadlocking.
enum DefaultStores {
    struct State {
        var appIdentifier = ProcessInfo.processInfo.processName
        /// Set once a default store has been opened under `appIdentifier`; later changes are refused.
        var appIdentifierInUse = false
        var standard: SuiteFileStore?
        var vault: (any KeyValueStore)?
        /// The key of the default vault when it is not the key file (`PrefsConfiguration.secureStoreKey`).
        var secureStoreKey: VaultKey?
        var defaultStore: (any KeyValueStore)?
        var secureStore: (any KeyValueStore)?
        /// Set once a configured store has been given to a wrapper (or anyone asking); later changes are refused.
        var configuredStoreInUse = false
        /// The prefix of the environment variables the standard domain reads, once set.
        var environmentPrefix: String?
        /// Whether the standard domain has checked, once, that it is the domain `UserDefaults.standard` uses.
        var checkedFoundationDomain = false
        /// What the standard domain does with a file that does not decode (`PrefsConfiguration.damagedStandardDomain`).
        var damagedStandardDomain = DamagedFilePolicy.keepAside
        /// The notices of a test process using a real default store already given: each once per process.
        var noticesGiven: Set<TestNotice> = []
        /// The store over each `UserDefaults` instance given to wrappers, by instance.
        var foundationStores: [ObjectIdentifier: UserDefaultsBridgeStore.Registered] = [:]
    }

    enum TestNotice {
        case standardInsideIsolatedTest, unisolatedStandard, unisolatedVault
    }

    /// Whether `notice` is given for the first time; notes it.
    private static func firstTime(_ notice: TestNotice) -> Bool {
        state.withLock { $0.noticesGiven.insert(notice).inserted }
    }

    static let state = Mutex(State())

    /// One `withDefaultStore` (or `withDefaultSecureStore`) scope: its store, and the state that wrappers created
    /// outside the scope (globals, statics, models made before the test) use while they are read inside it.
    final class Scope: Sendable {
        let store: any KeyValueStore
        /// By the identity of a wrapper's own state: that wrapper's state on `store`. Kept for the scope's life.
        private let boxes = Mutex<
            [ObjectIdentifier: (declared: any AnyObject & Sendable, box: any AnyObject & Sendable)]
        >(
            [:])

        init(_ store: any KeyValueStore) { self.store = store }

        /// The state standing in for `declared` in this scope, made by `make` the first time (outside the lock:
        /// making it declares the key on the store, which can report to the error handler).
        func box<Box: AnyObject & Sendable>(standingInFor declared: some AnyObject & Sendable, make: () -> Box) -> Box {
            let id = ObjectIdentifier(declared)
            if let existing = boxes.withLock({ $0[id]?.box }) as? Box { return existing }
            let made = make()
            return boxes.withLock { boxes in
                if let existing = boxes[id]?.box as? Box { return existing }
                boxes[id] = (declared, made)
                return made
            }
        }
    }

    /// What the scopes this task runs in set, innermost first; nil outside every scope. One task-local for all of
    /// them, read once by a wrapper without `store:`.
    @TaskLocal static var scopes: Scopes?

    /// The scopes a task runs in: `withDefaultStore`, `withDefaultSecureStore`, an isolated test and its stand-ins.
    final class Scopes: Sendable {
        let defaultStore: Scope?
        let secureStore: Scope?
        /// True inside a test under `.isolatedPreferences` (see `PrefsConfig.withIsolatedTest`).
        let insideIsolatedTest: Bool
        /// Inside an isolated test: the stand-ins for the `UserDefaults` instances given to `storage:`.
        let userDefaultsStandIns: UserDefaultsStandIns?

        private init(
            defaultStore: Scope?, secureStore: Scope?, insideIsolatedTest: Bool,
            userDefaultsStandIns: UserDefaultsStandIns?
        ) {
            self.defaultStore = defaultStore
            self.secureStore = secureStore
            self.insideIsolatedTest = insideIsolatedTest
            self.userDefaultsStandIns = userDefaultsStandIns
        }

        /// This task's scopes with what a new scope sets: a default store, a default vault, an isolated test,
        /// in-memory `UserDefaults` stand-ins.
        static func entering(
            defaultStore: (any KeyValueStore)? = nil, secureStore: (any KeyValueStore)? = nil,
            isolatedTest: Bool = false, standIns: Bool = false
        ) -> Scopes {
            let now = DefaultStores.scopes
            return Scopes(
                defaultStore: defaultStore.map(Scope.init) ?? now?.defaultStore,
                secureStore: secureStore.map(Scope.init) ?? now?.secureStore,
                insideIsolatedTest: isolatedTest || (now?.insideIsolatedTest ?? false),
                userDefaultsStandIns: standIns ? UserDefaultsStandIns() : now?.userDefaultsStandIns)
        }
    }

    static var scopedDefault: Scope? { scopes?.defaultStore }
    static var scopedSecure: Scope? { scopes?.secureStore }
    static var insideIsolatedTest: Bool { scopes?.insideIsolatedTest ?? false }
    static var userDefaultsStandIns: UserDefaultsStandIns? { scopes?.userDefaultsStandIns }

    /// The store of wrappers without `store:`: the innermost `withDefaultStore` scope, else the store set through
    /// `PrefsConfig.defaultStore`, else the standard domain.
    static var defaultStore: any KeyValueStore {
        if let scoped = scopedDefault?.store { return scoped }
        if let configured = state.withLock({ state in
            state.configuredStoreInUse = state.configuredStoreInUse || state.defaultStore != nil
            return state.defaultStore
        }) {
            return configured
        }
        return standard
    }

    /// The vault of secure wrappers without `store:`, resolved like ``defaultStore``.
    static var secureStore: any KeyValueStore {
        if let scoped = scopedSecure?.store { return scoped }
        if let configured = state.withLock({ state in
            state.configuredStoreInUse = state.configuredStoreInUse || state.secureStore != nil
            return state.secureStore ?? state.vault
        }) {
            return configured
        }
        return openOnce(\.vault) { app in
            // The folders resolved once for the whole process, like the standard domain's.
            let location = EncryptedFileStore.defaultLocation(appIdentifier: app)
            // A secure wrapper of a test that has no isolation: its secrets go to the test process's real vault.
            if isTestProcess, !insideIsolatedTest, firstTime(.unisolatedVault) {
                reportUnisolatedTest(
                    what: "the default vault", path: location.vault.path(percentEncoded: false),
                    isolatedBy: "PrefsConfig.withDefaultSecureStore(InMemoryStore())")
            }
            let keyFile = VaultKey.keyFile(location.keyFile)
            do {
                guard let key = state.withLock({ $0.secureStoreKey }) else {
                    return (try EncryptedFileStore(url: location.vault, key: keyFile), nil, nil)
                }
                return (try EncryptedFileStore(url: location.vault, key: key, movingFrom: keyFile), nil, nil)
            } catch {
                return (UnavailableStore(error), error, location.vault.path(percentEncoded: false))
            }
        }
    }

    /// The standard domain of wrappers without `store:`. On Linux Prefs' own hardened file store; on Apple
    /// platforms, where cfprefsd owns and caches the files (writing them directly is unsupported), the store over
    /// `UserDefaults.standard`.
    static var standard: any KeyValueStore {
        #if canImport(Darwin)
            return UserDefaultsBridgeStore.shared(over: UserDefaults.standard)
        #else
            return standardFile
        #endif
    }

    /// The standard domain's file, `<app identifier>.plist` in the preferences folder, opened on first use.
    static var standardFile: SuiteFileStore {
        if insideIsolatedTest {
            reportNotIsolated()
        } else if isTestProcess, firstTime(.unisolatedStandard) {
            reportUnisolatedTest(what: "the standard domain", path: standardPath())
        }
        if let standard = state.withLock({ $0.standard }) { return standard }
        let standard = openOnce(\.standard) { app in
            let url = Locations.current.configHome.appending(path: app + ".plist")
            let opened = SuiteFileStore.openDomain(
                url: url, onDamage: state.withLock { $0.damagedStandardDomain })
            return (opened.store, opened.error, url.path(percentEncoded: false))
        }
        if let prefix = state.withLock({ $0.environmentPrefix }) { standard.addLayer(.environment(prefix: prefix)) }
        reportSeparateFoundationDomain()
        return standard
    }

    /// Inside a test under `.isolatedPreferences`, the standard
    /// domain is the real file: said once, at its first use there, rather than left to fail a later run.
    private static func reportNotIsolated() {
        guard firstTime(.standardInsideIsolatedTest) else { return }
        ErrorReporter.report(
            PrefsIsolationWarning(path: standardPath(), what: "SuiteFileStore.standard"), key: "", operation: .read)
    }

    /// The standard domain's file under the app identifier.
    private static func standardPath() -> String {
        let app = state.withLock { $0.appIdentifier }
        return Locations.current.configHome.appending(path: app + ".plist").path(percentEncoded: false)
    }

    /// Whether this process runs tests: the bundle SwiftPM builds for XCTest and Swift Testing
    /// (`<Package>PackageTests.xctest` on Linux), Xcode's and SwiftPM's runners on Apple platforms (`xctest`,
    /// `swiftpm-testing-helper`), or a process XCTest was configured for. Its default stores are files shared by
    /// every run of the tests.
    static let isTestProcess: Bool = {
        let name = ProcessInfo.processInfo.processName
        let environment = ProcessInfo.processInfo.environment
        return name.hasSuffix(".xctest") || name == "xctest" || name == "swiftpm-testing-helper"
            || environment["XCTestConfigurationFilePath"] != nil || environment["XCTestBundlePath"] != nil
    }()

    /// A test process used a default store's real file with no isolation: said once per store, naming the file.
    private static func reportUnisolatedTest(
        what: String, path: String, isolatedBy: String = "PrefsConfig.withDefaultStore(InMemoryStore())"
    ) {
        ErrorReporter.report(
            PrefsIsolationWarning(path: path, what: what, insideIsolatedTest: false, isolatedBy: isolatedBy), key: "",
            operation: .read)
    }

    /// Reports once when the app identifier moved the standard domain away from the file `UserDefaults.standard`
    /// uses (the process name on Linux) while that file exists: a migrating app's old values are there.
    private static func reportSeparateFoundationDomain() {
        let foundation = ProcessInfo.processInfo.processName
        let app = state.withLock { state -> String? in
            guard !state.checkedFoundationDomain else { return nil }
            state.checkedFoundationDomain = true
            return state.appIdentifier
        }
        guard let app, app != foundation else { return }
        let file = Locations.current.configHome.appending(path: foundation + ".plist")
        guard FileManager.default.fileExists(atPath: file.path(percentEncoded: false)) else { return }
        ErrorReporter.report(
            PrefsError.separateStandardDomain(appIdentifier: app, foundationDomain: foundation), key: "",
            operation: .read)
    }

    /// Sets the environment prefix and gives the standard domain its environment layer, now if it is open, else
    /// when it opens. The store is changed outside the lock.
    /// The configuration the default stores are made from now.
    static var configuration: PrefsConfiguration {
        state.withLock { state in
            PrefsConfiguration(
                appIdentifier: state.appIdentifier, environmentPrefix: state.environmentPrefix,
                secureStoreKey: state.secureStoreKey, damagedStandardDomain: state.damagedStandardDomain,
                defaultStore: state.defaultStore, secureStore: state.secureStore)
        }
    }

    /// ``PrefsConfig/configure(_:)``: applies the whole configuration in one step while no default store is open;
    /// after, changes nothing and reports the settings it would have changed.
    static func configure(_ configuration: PrefsConfiguration) {
        let identifier = configuration.appIdentifier
        if let problem = Locations.fileNameProblem(identifier, what: "an app identifier", suffix: ".plist") {
            ErrorReporter.report(
                PrefsError.invalidAppIdentifier(identifier, reason: problem), key: "", operation: .write)
            return
        }
        let prefix = configuration.environmentPrefix.flatMap { $0.isEmpty ? nil : $0 }
        let left = state.withLock { state -> [String] in
            guard state.appIdentifierInUse || state.standard != nil || state.vault != nil || state.configuredStoreInUse
            else {
                state.appIdentifier = identifier
                state.environmentPrefix = prefix
                state.secureStoreKey = configuration.secureStoreKey
                state.damagedStandardDomain = configuration.damagedStandardDomain
                state.defaultStore = configuration.defaultStore
                state.secureStore = configuration.secureStore
                return []
            }
            var left: [String] = []
            if state.appIdentifier != identifier { left.append("appIdentifier") }
            if state.environmentPrefix != prefix { left.append("environmentPrefix") }
            // Keys are not compared: any key given, or one taken away, is a change.
            if state.secureStoreKey != nil || configuration.secureStoreKey != nil { left.append("secureStoreKey") }
            if state.damagedStandardDomain != configuration.damagedStandardDomain {
                left.append("damagedStandardDomain")
            }
            // Stores are the same store when they share their hub.
            if state.defaultStore?.hub !== configuration.defaultStore?.hub { left.append("defaultStore") }
            if state.secureStore?.hub !== configuration.secureStore?.hub { left.append("secureStore") }
            return left
        }
        if !left.isEmpty {
            ErrorReporter.report(PrefsError.configuredAfterUse(settings: left), key: "", operation: .write)
        }
    }

    static func setEnvironmentPrefix(_ prefix: String) {
        guard !prefix.isEmpty else { return }
        let open = state.withLock { state -> SuiteFileStore? in
            guard state.environmentPrefix == nil else { return nil }
            state.environmentPrefix = prefix
            return state.standard
        }
        open?.addLayer(.environment(prefix: prefix))
    }

    /// Opens a default store with the app identifier (which this freezes), without holding the lock, then keeps
    /// the first one opened. The opening error, if any, is reported once the lock is released.
    private static func openOnce<Store>(
        _ slot: WritableKeyPath<State, Store?>, open: (String) -> (store: Store, error: (any Error)?, file: String?)
    ) -> Store where Store: Sendable {
        let app = state.withLock { state in
            state.appIdentifierInUse = true
            return state.appIdentifier
        }
        let opened = open(app)
        let (store, isFirst) = state.withLock { state in
            if let existing = state[keyPath: slot] { return (existing, false) }
            state[keyPath: slot] = opened.store
            return (opened.store, true)
        }
        if isFirst, let error = opened.error, let source = store as? any KeyValueStore {
            source.hub.feed.reported.reportOnce(error, key: "", operation: .read, file: opened.file)
        }
        return store
    }
}
