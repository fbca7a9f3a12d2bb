import Foundation

extension UserDefaultsStore {
    /// `UserDefaultsStore.standard` is this app's standard domain: `<app identifier>.plist` in the preferences
    /// folder, where the app identifier is ``PrefsConfig/appIdentifier`` (by default the process name, the file
    /// Foundation's `UserDefaults.standard` uses).
    ///
    /// It is opened on first use. If the file cannot be read (empty, corrupt, not a property list, a folder),
    /// the app still starts: the error is reported once to ``PrefsConfig/errorHandler``, reads return defaults,
    /// writes throw rather than replace the file, and the file is left untouched.
    public static var standard: UserDefaultsStore { DefaultStores.standard }

    /// The store behind a `UserDefaults` instance, for the `@StoredValue(key:storage:)` form.
    ///
    /// `UserDefaults.standard` (or any instance without a suite) maps to ``standard``; a suite maps to the
    /// ``UserDefaultsStore`` of that suite. What cannot be identified (an invalid suite name, or a Foundation whose
    /// `UserDefaults` no longer exposes its suite) is refused: the wrapper keeps its values in memory only and the
    /// error is reported, rather than writing another domain's file.
    static func store(for defaults: UserDefaults) -> any KeyValueStore {
        if defaults === UserDefaults.standard { return standard }
        return store(identifiedBy: Mirror(reflecting: defaults))
    }

    /// Finds Foundation's private `suite` field in `mirror` or the mirrors of its superclasses (so subclasses of
    /// `UserDefaults` are identified too).
    static func store(identifiedBy mirror: Mirror) -> any KeyValueStore {
        var current: Mirror? = mirror
        while let level = current {
            if let field = level.children.first(where: { $0.label == "suite" }), let suite = field.value as? String? {
                guard let suite else { return standard }
                do {
                    return try UserDefaultsStore(suiteName: suite)
                } catch {
                    ErrorReporter.report(error, key: "", operation: .write)
                    return InMemoryStore()
                }
            }
            current = level.superclassMirror
        }
        let error = PrefsError.unidentifiedUserDefaults(
            reason: "this Foundation's UserDefaults does not expose its suite name")
        ErrorReporter.report(error, key: "", operation: .write)
        return InMemoryStore()
    }
}
