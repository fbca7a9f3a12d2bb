public import Foundation
import Synchronization

/// `SuiteFileStore.standard` and `try SuiteFileStore(suiteName: "group.example")` keep preferences in
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
///
/// Like Foundation's, it resolves keys through layers (see <doc:LayeredPreferences>): `-key value` arguments of the
/// command line, then the user's own values (the file), then system-wide defaults from `$XDG_CONFIG_DIRS`, then
/// registered defaults; values an administrator forced there win over all of them.
public final class SuiteFileStore: FileBackedStore, @unchecked Sendable {
    /// `store.suiteName` is the suite's name, or nil for ``standard``.
    public let suiteName: String?

    /// `try SuiteFileStore(suiteName: "group.example")` opens a named suite.
    ///
    /// Stores opened on the same suite in one process share their state, and the `onDamage` policy of the first of
    /// them while any is open (the standard domain's is ``PrefsConfiguration/damagedStandardDomain``).
    ///
    /// - Parameters:
    ///   - suiteName: The suite, as given to `UserDefaults(suiteName:)`.
    ///   - directory: The preferences folder; by default Foundation's: `$XDG_CONFIG_HOME`, or `$HOME/.config`.
    ///   - onDamage: What the store does when the suite's file does not decode: ``DamagedFilePolicy/refuse`` (leave it
    ///     and refuse writes) unless told ``DamagedFilePolicy/keepAside``.
    /// - Throws: ``PrefsError/invalidSuiteName(_:reason:)`` for a name that is empty, contains `/`, `..` or NUL, or
    ///   is longer than 255 bytes with `.plist`; ``PrefsError/corruptFile(path:reason:)`` when the suite's file
    ///   exists but is not a property list (it is left untouched).
    public convenience init(suiteName: String, directory: URL? = nil, onDamage: DamagedFilePolicy = .refuse) throws {
        try Self.validate(suiteName: suiteName)
        let url = (directory ?? Self.preferencesDirectory()).appending(path: suiteName + ".plist")
        let engine = try EngineRegistry.retainedEngine(at: url.fileSystemPath, kind: "plist") {
            let engine = Self.makeEngine(url: url, onDamage: onDamage)
            try engine.open()
            return engine
        }
        self.init(suiteName: suiteName, url: url, engine: engine, retained: true)
    }

    /// A suite with an engine of its own, on `fileSystem` and `clock` (for tests: two of them on one file exclude
    /// each other as two processes do).
    package convenience init(
        suiteName: String, directory: URL, fileSystem: any FileSystem, clock: EngineClock,
        onDamage: DamagedFilePolicy = .refuse
    ) throws {
        try Self.validate(suiteName: suiteName)
        let url = directory.appending(path: suiteName + ".plist")
        let engine = Self.makeEngine(url: url, fileSystem: fileSystem, clock: clock, onDamage: onDamage)
        try engine.open()
        self.init(suiteName: suiteName, url: url, engine: engine, retained: engine.retain())
    }

    private init(suiteName: String?, url: URL, engine: StoreEngine, retained: Bool) {
        self.suiteName = suiteName
        let folder = url.deletingLastPathComponent().standardizedFileURL.path(percentEncoded: false)
        let preferences = Self.preferencesDirectory().standardizedFileURL.path(percentEncoded: false)
        let domain = url.deletingPathExtension().lastPathComponent
        let published = folder.trimmingSuffix("/") == preferences.trimmingSuffix("/")
        super.init(
            url: url, engine: engine, retained: retained, domainName: domain,
            schemaDomain: published ? domain : nil)
        // Layers hook: a domain resolves keys as Foundation's UserDefaults does, through the command line's
        // arguments, and through the system-wide defaults and managed values of `$XDG_CONFIG_DIRS`.
        addLayer(.arguments)
        addLayer(.systemFiles(domain: url.deletingPathExtension().lastPathComponent))
    }

    /// Opens the domain file at `url` without throwing, for the standard domain: a file that cannot be read leaves
    /// the store damaged (reads throw, writes are refused, the file is untouched) and the error is returned for the
    /// caller to report once it holds no lock.
    package static func openDomain(url: URL, onDamage: DamagedFilePolicy = .refuse) -> (
        store: SuiteFileStore, error: (any Error)?
    ) {
        let engine = EngineRegistry.retainedEngine(at: url.fileSystemPath, kind: "plist") {
            let engine = makeEngine(url: url, onDamage: onDamage)
            try? engine.open()  // a damaged file stays damaged (and watched); its error is returned below
            return engine
        }
        // A file kept aside at the first write is reported then, with where it went.
        let error = engine.guarded.withLock { $0.store.damage }
        return (SuiteFileStore(suiteName: nil, url: url, engine: engine, retained: true), error)
    }

    /// `try SuiteFileStore.moveDamagedFileAside(suiteName: "group.example")` keeps a suite file that cannot be
    /// read as `<suite>.plist.damaged-<UTC date and time>` and leaves the suite empty, so it can be opened and saved
    /// again; it returns where the damaged file went, or nil when the file reads fine (nothing is moved).
    ///
    /// Stores of the suite already open in this process recover at once. See
    /// ``FileBackedStore/moveDamagedFileAside()`` for a store you hold.
    @discardableResult
    package static func moveDamagedFileAside(suiteName: String, directory: URL? = nil) throws -> URL? {
        try validate(suiteName: suiteName)
        let url = (directory ?? preferencesDirectory()).appending(path: suiteName + ".plist")
        let (store, _) = openDomain(url: url)
        defer { store.close() }
        return try store.moveDamagedFileAside()
    }

    /// How long a suite may stay unreadable before it counts as damaged. Foundation's `synchronize()` rewrites a
    /// property list in place (truncate, write, close), so a reader can meet an empty or half-written file for the
    /// few milliseconds the rewrite takes; only a file that stays unreadable this long is damaged.
    static let inPlaceRewriteGrace: Duration = .milliseconds(500)

    private static func makeEngine(
        url: URL, fileSystem: any FileSystem = POSIXFileSystem(), clock: EngineClock = .system,
        onDamage: DamagedFilePolicy = .refuse
    ) -> StoreEngine {
        StoreEngine(
            path: url.fileSystemPath, codec: PropertyListSnapshotCodec(), fileSystem: fileSystem, clock: clock,
            grace: inPlaceRewriteGrace, onDamage: onDamage)
    }

    /// `SuiteFileStore.preferencesDirectory()` returns the folder Foundation keeps UserDefaults files in:
    /// `$XDG_CONFIG_HOME`, or `$HOME/.config` when it is unset, read once when Prefs first needs it.
    package static func preferencesDirectory() -> URL { Locations.current.configHome }

    /// Checks a suite name without opening or creating anything: the names ``init(suiteName:directory:)`` refuses
    /// throw ``PrefsError/invalidSuiteName(_:reason:)``.
    package static func validate(suiteName: String) throws(PrefsError) {
        if let problem = Locations.fileNameProblem(suiteName, what: "a suite name", suffix: ".plist") {
            throw .invalidSuiteName(suiteName, reason: problem)
        }
    }
}

extension String {
    /// The string without one trailing `suffix`.
    fileprivate func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
    }
}
