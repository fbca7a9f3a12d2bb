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
        var standard: UserDefaultsStore?
        var vault: (any KeyValueStore)?
        var defaultStore: (any KeyValueStore)?
        var secureStore: (any KeyValueStore)?
        /// The prefix of the environment variables the standard domain reads, once set.
        var environmentPrefix: String?
        /// Whether the standard domain has checked, once, that it is the domain `UserDefaults.standard` uses.
        var checkedFoundationDomain = false
    }

    static let state = Mutex(State())

    @TaskLocal static var scopedDefaultStore: (any KeyValueStore)?
    @TaskLocal static var scopedSecureStore: (any KeyValueStore)?
    /// Inside an isolated test: the stand-ins for the `UserDefaults` instances given to `storage:`.
    @TaskLocal static var userDefaultsStandIns: UserDefaultsStandIns?

    /// The store of wrappers without `store:`: the innermost `withDefaultStore` scope, else the store set through
    /// `PrefsConfig.defaultStore`, else the standard domain.
    static var defaultStore: any KeyValueStore {
        if let scoped = scopedDefaultStore { return scoped }
        if let configured = state.withLock({ $0.defaultStore }) { return configured }
        return standard
    }

    /// The vault of secure wrappers without `store:`, resolved like ``defaultStore``.
    static var secureStore: any KeyValueStore {
        if let scoped = scopedSecureStore { return scoped }
        if let configured = state.withLock({ $0.secureStore ?? $0.vault }) { return configured }
        return openOnce(\.vault) { app in
            // The folders resolved once for the whole process, like the standard domain's.
            let location = EncryptedFileStore.defaultLocation(appIdentifier: app)
            do {
                return (try EncryptedFileStore(url: location.vault, key: .keyFile(location.keyFile)), nil)
            } catch {
                return (UnavailableStore(error), error)
            }
        }
    }

    /// The standard domain of wrappers without `store:`. On Linux Prefs' own hardened file store; on Apple
    /// platforms, where cfprefsd owns and caches the files (writing them directly is unsupported), the store over
    /// `UserDefaults.standard`.
    static var standard: any KeyValueStore {
        #if canImport(Darwin)
            return FoundationUserDefaultsStore.shared(over: UserDefaults.standard)
        #else
            return standardFile
        #endif
    }

    /// The standard domain's file, `<app identifier>.plist` in the preferences folder, opened on first use.
    static var standardFile: UserDefaultsStore {
        if let standard = state.withLock({ $0.standard }) { return standard }
        let standard = openOnce(\.standard) { app in
            UserDefaultsStore.openDomain(url: Locations.current.configHome.appending(path: app + ".plist"))
        }
        if let prefix = state.withLock({ $0.environmentPrefix }) { standard.addLayer(.environment(prefix: prefix)) }
        reportSeparateFoundationDomain()
        return standard
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
    static func setEnvironmentPrefix(_ prefix: String) {
        guard !prefix.isEmpty else { return }
        let open = state.withLock { state -> UserDefaultsStore? in
            guard state.environmentPrefix == nil else { return nil }
            state.environmentPrefix = prefix
            return state.standard
        }
        open?.addLayer(.environment(prefix: prefix))
    }

    /// Opens a default store with the app identifier (which this freezes), without holding the lock, then keeps
    /// the first one opened. The opening error, if any, is reported once the lock is released.
    private static func openOnce<Store>(
        _ slot: WritableKeyPath<State, Store?>, open: (String) -> (store: Store, error: (any Error)?)
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
            ErrorReporter.reportOnce(error, key: "", operation: .read, source: source.changes)
        }
        return store
    }
}
