public import Foundation

/// `UserDefaultsStore.standard` and `try UserDefaultsStore(suiteName: "group.example")` keep preferences in
/// Foundation's UserDefaults files, hardened for Linux.
///
/// The store reads and writes the same file Foundation uses (`$XDG_CONFIG_HOME/<suite>.plist`, or
/// `~/.config/…`), as a property list that `UserDefaults(suiteName:)` and other tools still read. Unlike
/// Foundation on Linux it:
/// - makes every write durable before `set` returns (Foundation saves only on `synchronize()`, not at exit);
/// - replaces the file atomically, so a crash never leaves a torn plist (Foundation rewrites it in place);
/// - locks the suite across processes, so concurrent updates are never lost;
/// - keeps every value exactly: fractional dates, full URLs, `Int.max`, `Float`s;
/// - refuses suite names that would write outside the preferences folder;
/// - never overwrites a file it cannot read, and notices other processes' changes.
public final class UserDefaultsStore: KeyValueStore {
    /// `UserDefaultsStore.standard` is the standard domain of this process: `<process name>.plist` in the
    /// preferences folder.
    ///
    /// If the file cannot be read (for example it is corrupt), reads report the error and return defaults, and
    /// writes throw rather than replace the file.
    public static let standard: UserDefaultsStore = {
        let name = ProcessInfo.processInfo.processName
        let storage = UserDefaultsStore.openStorage(url: preferencesDirectory().appending(path: name + ".plist"))
        return UserDefaultsStore(suiteName: nil, storage: storage)
    }()

    /// `store.suiteName` is the suite's name, or nil for ``standard``.
    public let suiteName: String?
    let storage: FileBackedStorage

    /// `store.url` is the property-list file behind this store.
    public var url: URL { storage.file.url }

    /// `store.changes` announces every change, including those made by other processes.
    public var changes: ChangeFeed { storage.changes }

    /// `try UserDefaultsStore(suiteName: "group.example")` opens a named suite.
    ///
    /// - Parameters:
    ///   - suiteName: The suite, as given to `UserDefaults(suiteName:)`.
    ///   - directory: The preferences folder; by default `$XDG_CONFIG_HOME`, or `~/.config` when it is unset.
    /// - Throws: ``PrefsError/invalidSuiteName(_:reason:)`` for a name that is empty, contains `/`, `..` or NUL, or
    ///   is longer than 255 bytes with `.plist`; ``PrefsError/corruptFile(path:reason:)`` when the suite's file
    ///   exists but is not a property list (it is left untouched).
    public convenience init(suiteName: String, directory: URL? = nil) throws {
        try Self.validate(suiteName: suiteName)
        let url = (directory ?? Self.preferencesDirectory()).appending(path: suiteName + ".plist")
        let storage = try StorageRegistry.storage(at: url, kind: "plist") {
            let storage = Self.makeStorage(url: url)
            try storage.open()
            return storage
        }
        self.init(suiteName: suiteName, storage: storage)
    }

    private init(suiteName: String?, storage: FileBackedStorage) {
        self.suiteName = suiteName
        self.storage = storage
    }

    /// Opens without throwing: a storage whose file cannot be read stays damaged and reports on access.
    private static func openStorage(url: URL) -> FileBackedStorage {
        let made = try? StorageRegistry.storage(at: url, kind: "plist") {
            let storage = makeStorage(url: url)
            do { try storage.open() } catch { PrefsConfig.report(error, key: "", operation: .read) }
            return storage
        }
        return made ?? makeStorage(url: url)
    }

    /// The lock file is `<suite>.lock`, so that it fits the file-name limit whenever `<suite>.plist` does.
    private static func makeStorage(url: URL) -> FileBackedStorage {
        let lockURL = url.deletingPathExtension().appendingPathExtension("lock")
        return FileBackedStorage(url: url, lockURL: lockURL, codec: PropertyListSnapshotCodec())
    }

    /// `UserDefaultsStore.preferencesDirectory()` returns the folder Foundation keeps UserDefaults files in:
    /// `$XDG_CONFIG_HOME`, or `~/.config`.
    public static func preferencesDirectory() -> URL {
        if let config = ProcessInfo.processInfo.environment["XDG_CONFIG_HOME"], config.hasPrefix("/") {
            return URL(filePath: config, directoryHint: .isDirectory)
        }
        return FileManager.default.homeDirectoryForCurrentUser.appending(path: ".config", directoryHint: .isDirectory)
    }

    /// `try UserDefaultsStore.validate(suiteName: name)` checks a suite name without opening or creating anything.
    ///
    /// - Throws: ``PrefsError/invalidSuiteName(_:reason:)`` for the names ``init(suiteName:directory:)`` refuses.
    public static func validate(suiteName: String) throws(PrefsError) {
        func refuse(_ reason: String) -> PrefsError { .invalidSuiteName(suiteName, reason: reason) }
        if suiteName.isEmpty { throw refuse("a suite name cannot be empty") }
        if suiteName.contains("/") { throw refuse("a suite name cannot contain '/'") }
        if suiteName.contains("..") { throw refuse("a suite name cannot contain '..'") }
        if suiteName.utf8.contains(0) { throw refuse("a suite name cannot contain NUL") }
        if suiteName.utf8.count + ".plist".utf8.count > 255 {
            throw refuse("a suite name must fit a 255-byte file name with '.plist'")
        }
    }

    /// The store behind a `UserDefaults` instance, for the `@StoredValue(key:storage:)` form.
    ///
    /// An invalid suite is refused: the wrapper then keeps its values in memory only and reports the error.
    static func store(for defaults: UserDefaults) -> any KeyValueStore {
        if defaults === UserDefaults.standard { return standard }
        let suite = Mirror(reflecting: defaults).children.first { $0.label == "suite" }?.value as? String
        guard let suite else { return standard }
        do {
            return try UserDefaultsStore(suiteName: suite)
        } catch {
            PrefsConfig.report(error, key: "", operation: .write)
            return InMemoryStore()
        }
    }

    /// `try store.value(forKey: "theme")` returns the stored value, served from memory.
    public func value(forKey key: String) throws -> PrefValue? { try storage.value(forKey: key) }

    /// `try store.setValue(.bool(true), forKey: "flag")` stores a value (nil removes it) durably before returning.
    public func setValue(_ value: PrefValue?, forKey key: String) throws {
        try storage.update(forKey: key) { _ in value }
    }

    /// `try store.updateValue(forKey: "count") { … }` reads, transforms and writes one value while holding the
    /// suite's cross-process lock.
    @discardableResult
    public func updateValue(forKey key: String, _ transform: (PrefValue?) throws -> PrefValue?) throws -> PrefValue? {
        try storage.update(forKey: key, transform)
    }

    /// `try store.allValues()` returns every key and value in the suite.
    public func allValues() throws -> [String: PrefValue] { try storage.allValues() }

    /// `try store.replaceAll(values)` replaces the suite's whole content in one atomic, durable write.
    public func replaceAll(_ values: [String: PrefValue]) throws { try storage.replaceAll(values) }
}
