// The names of 0.x that 1.0 renamed, kept for one release so that an app written against them builds with warnings
// only (CHANGELOG lists each). `DeprecatedNamesTests` checks that each still does what it did.

import Synchronization

/// The store of a UserDefaults suite's file, kept by Prefs' own engine: renamed ``SuiteFileStore``, which says what
/// it is (it never calls Foundation's `UserDefaults`).
@available(*, deprecated, renamed: "SuiteFileStore")
public typealias UserDefaultsStore = SuiteFileStore

/// The store that calls a Foundation `UserDefaults` instance: renamed ``UserDefaultsBridgeStore``.
@available(*, deprecated, renamed: "UserDefaultsBridgeStore")
public typealias FoundationUserDefaultsStore = UserDefaultsBridgeStore

/// Renamed ``PrefsMigrationNotice``: a report that a migration ran, not an error state.
@available(*, deprecated, renamed: "PrefsMigrationNotice")
public typealias PrefsMigrated = PrefsMigrationNotice

/// Renamed ``PrefsIsolationWarning``.
@available(*, deprecated, renamed: "PrefsIsolationWarning")
public typealias PrefsNotIsolated = PrefsIsolationWarning

extension SecureStoredValue {
    /// `@SecureStoredValue<String>(key: "token", service: "api") var token` stored the secret as `"api.token"`.
    @available(*, deprecated, message: "write the whole name as the key: key: \"api.token\"")
    public init(key: String, service: String?, store: (any KeyValueStore)? = nil) {
        self.init(key: service.map { "\($0).\(key)" } ?? key, store: store)
    }

    /// `try $authToken.remove()` is ``reset()``, as on `StoredValue`.
    @available(*, deprecated, renamed: "reset()")
    public func remove() throws { try reset() }
}

extension FileBackedStore {
    /// `store.damageUpdates()` is the property ``damageValues``.
    @available(*, deprecated, renamed: "damageValues")
    public func damageUpdates() -> AsyncStream<(any Error)?> { damageValues }

    /// `store.values(in: .managed)` is ``KeyValueStore/allValues(in:)``, which throws what `allValues()` throws; this
    /// gives no values where it would throw.
    @available(*, deprecated, renamed: "allValues(in:)")
    public func values(in layer: PreferenceLayer) -> [String: PrefValue] { (try? allValues(in: layer)) ?? [:] }
}

extension PrefValue {
    /// `PrefValue.integer(n)` is `.int(Int64(n))`, or `.unsignedInt(n)` above `Int64.max`: one spelling per case.
    @available(*, deprecated, message: "write .int(Int64(value)), or .unsignedInt(value) above Int64.max")
    public static func integer<T: BinaryInteger>(_ value: T) -> PrefValue { exactInteger(value) }
}

extension KeyValueStore {
    /// `store.changes.keys(["theme"])` is ``changedKeys(_:)``.
    @available(*, deprecated, message: "use changedKeys(_:)")
    public var changes: ChangedKeysOf0x { ChangedKeysOf0x(store: self) }
}

/// What `store.changes` was in 0.x, for `store.changes.keys(…)`: use ``KeyValueStore/changedKeys(_:)``.
@available(*, deprecated, message: "use store.changedKeys(_:)")
public struct ChangedKeysOf0x: Sendable {
    let store: any KeyValueStore

    /// `store.changes.keys(["theme"])` is `store.changedKeys(["theme"])`.
    public func keys(_ keys: Set<String>? = nil) -> AsyncStream<String> { store.changedKeys(keys) }
}

extension PrefsConfig {
    /// `PrefsConfig.appIdentifier = "com.example.notes"` is ``PrefsConfiguration/appIdentifier``, given to
    /// ``configure(_:)`` with the other settings the default stores are made from.
    @available(*, deprecated, message: "set it in PrefsConfig.configure(PrefsConfiguration(appIdentifier:))")
    public static var appIdentifier: String {
        get { DefaultStores.state.withLock { $0.appIdentifier } }
        set {
            if let problem = Locations.fileNameProblem(newValue, what: "an app identifier", suffix: ".plist") {
                ErrorReporter.report(
                    PrefsError.invalidAppIdentifier(newValue, reason: problem), key: "", operation: .write)
                return
            }
            let refused = DefaultStores.state.withLock { state -> String? in
                if state.appIdentifier == newValue { return nil }
                if state.appIdentifierInUse { return state.appIdentifier }
                state.appIdentifier = newValue
                return nil
            }
            if let inUse = refused {
                let reason = "the default stores are already open under \(String(reflecting: inUse))"
                ErrorReporter.report(
                    PrefsError.invalidAppIdentifier(newValue, reason: reason + "; set it before first use"),
                    key: "", operation: .write)
            }
        }
    }

    /// `PrefsConfig.environmentPrefix = "MYAPP_"` is ``PrefsConfiguration/environmentPrefix``.
    @available(*, deprecated, message: "set it in PrefsConfig.configure(PrefsConfiguration(environmentPrefix:))")
    public static var environmentPrefix: String? {
        get { DefaultStores.state.withLock { $0.environmentPrefix } }
        set { if let newValue { DefaultStores.setEnvironmentPrefix(newValue) } }
    }

    /// `PrefsConfig.secureStoreKey = .keyring()` is ``PrefsConfiguration/secureStoreKey``.
    @available(*, deprecated, message: "set it in PrefsConfig.configure(PrefsConfiguration(secureStoreKey:))")
    public static var secureStoreKey: VaultKey? {
        get { DefaultStores.state.withLock { $0.secureStoreKey } }
        set {
            let opened = DefaultStores.state.withLock { state -> Bool in
                if state.vault != nil { return true }
                state.secureStoreKey = newValue
                return false
            }
            if opened {
                let reason =
                    "PrefsConfig.secureStoreKey was set after the default vault was opened; set it at startup, "
                    + "before the first secret is read"
                ErrorReporter.report(VaultError.invalidKey(reason: reason), key: "", operation: .write)
            }
        }
    }

    /// `PrefsConfig.damagedStandardDomain = .refuse` is ``PrefsConfiguration/damagedStandardDomain``.
    @available(*, deprecated, message: "set it in PrefsConfig.configure(PrefsConfiguration(damagedStandardDomain:))")
    public static var damagedStandardDomain: DamagedFilePolicy {
        get { DefaultStores.state.withLock { $0.damagedStandardDomain } }
        set { DefaultStores.state.withLock { $0.damagedStandardDomain = newValue } }
    }
}
