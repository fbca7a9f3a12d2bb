import Foundation

extension SuiteFileStore {
    /// `SuiteFileStore.standard` is this app's standard domain: `<app identifier>.plist` in the preferences
    /// folder, where the app identifier is ``PrefsConfiguration/appIdentifier`` (by default the process name, the file
    /// Foundation's `UserDefaults.standard` uses).
    ///
    /// It is opened on first use. If the file cannot be read (empty, corrupt, not a property list, a folder),
    /// the app still starts: the error is reported once to ``PrefsConfig/errorHandler``, reads return defaults,
    /// writes throw rather than replace the file, and the file is left untouched.
    ///
    /// On Apple platforms, where the system owns these files, it is not the default store: wrappers without
    /// `store:` use a ``UserDefaultsBridgeStore`` over `UserDefaults.standard` there.
    public static var standard: SuiteFileStore { DefaultStores.standardFile }

    /// The store behind a `UserDefaults` instance, for the `@StoredValue(key:storage:)` form: the
    /// ``UserDefaultsBridgeStore`` over that very instance (one per instance, shared by every wrapper given
    /// it), or inside an isolated test (`.isolatedPreferences`) an in-memory stand-in for it.
    static func store(for defaults: UserDefaults) -> any KeyValueStore {
        if let standIns = DefaultStores.userDefaultsStandIns {
            // The standard domain (`.standard`, or an instance made without a suite name) is the test's store.
            let standardDomain = defaults === UserDefaults.standard || UserDefaultsStandIns.isStandardDomain(defaults)
            if standardDomain, let scoped = DefaultStores.scopedDefault?.store { return scoped }
            return standIns.store(for: defaults)
        }
        return UserDefaultsBridgeStore.shared(over: defaults)
    }
}
