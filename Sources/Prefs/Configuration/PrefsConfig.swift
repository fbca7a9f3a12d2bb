import Foundation
import Synchronization

/// `PrefsConfig.appIdentifier = "com.example.notes"` and the other settings here configure Prefs for the whole
/// process, once at startup; `PrefsConfig.withDefaultStore(_:operation:)` scopes the default store to one task.
///
/// Property wrappers declared without a `store:` argument use ``defaultStore`` (secrets: ``secureStore``); errors
/// that a wrapper cannot throw go to ``errorHandler``.
public enum PrefsConfig {
    /// `PrefsConfig.defaultStore = InMemoryStore()` sets the store used by wrappers without a `store:` argument.
    ///
    /// Defaults to ``UserDefaultsStore/standard``. Outside a `withDefaultStore(_:operation:)` scope a wrapper keeps
    /// the store it was created with, so set it before creating any wrapper. Inside such a scope the getter returns
    /// that scope's store, and wrappers declared without `store:` use it.
    public static var defaultStore: any KeyValueStore {
        get { DefaultStores.defaultStore }
        set { DefaultStores.state.withLock { $0.defaultStore = newValue } }
    }

    /// `PrefsConfig.secureStore = try EncryptedFileStore(url: …, key: .passphrase(…))` sets the vault used by
    /// `@SecureStoredValue` without a `store:` argument.
    ///
    /// By default it is opened on first use at ``EncryptedFileStore/defaultLocation(appIdentifier:)``:
    /// `$XDG_DATA_HOME/<app>/secrets.vault` (or `$HOME/.local/share/…`), with its key file at
    /// `$XDG_CONFIG_HOME/<app>/secrets.key` (or `$HOME/.config/…`), both created on first write with private
    /// permissions. If it cannot be opened, the error is reported once, secrets read as nil, and writes throw it.
    public static var secureStore: any KeyValueStore {
        get { DefaultStores.secureStore }
        set { DefaultStores.state.withLock { $0.secureStore = newValue } }
    }

    /// `PrefsConfig.secureStoreKey = .keyring()` keeps the key of the default vault (``secureStore``) somewhere
    /// other than its key file: the desktop keyring (PrefsKeyring's `.keyring()`), a systemd service credential
    /// (``VaultKey/credential(_:)``), or any ``VaultKey``.
    ///
    /// Nil (the default) keeps the key in the key file beside the vault, `$XDG_CONFIG_HOME/<app>/secrets.key`. Set
    /// it at startup, before the first secret is read: the default vault is opened once, with the key set then; a
    /// later change is refused and reported as ``VaultError/invalidKey(reason:)``. When the vault is still under its
    /// key file it is moved to the new key as it opens, and the key file deleted
    /// (``EncryptedFileStore/init(url:key:movingFrom:)``); if the new key cannot be had (a locked keyring, no
    /// credential), that error is reported, secrets read as nil and writes throw it, and the key file is kept.
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

    /// `PrefsConfig.appIdentifier = "com.example.notes"` names the app's standard domain
    /// (`com.example.notes.plist`) and the folders of its default vault.
    ///
    /// Defaults to the process name, as Foundation's `UserDefaults.standard` does; setting it keeps settings when
    /// the executable is renamed. Set it first thing at startup: once ``UserDefaultsStore/standard`` or the default
    /// vault has been opened, a different identifier is refused and reported (the getter keeps returning the one in
    /// use). An identifier that cannot be a file name (empty, containing `/`, `..` or NUL, too long) is refused and
    /// reported too.
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

    /// `PrefsConfig.environmentPrefix = "MYAPP_"` lets environment variables set the preferences of the standard
    /// domain for this run, as a twelve-factor server is configured.
    ///
    /// A key's variable is the prefix, then the key in upper case, with `_` between words of a camel-case key and in
    /// place of any character other than an ASCII letter or digit: `fontSize` is read from `MYAPP_FONT_SIZE`. The
    /// variables apply to the keys the store knows a default of: every key declared by a wrapper, and every key
    /// given to ``KeyValueStore/register(defaults:)``. A variable that two keys map to (`fontSize` and `font_size`)
    /// is refused for both and reported. Values are text, converted to the declared type as command-line arguments
    /// are. Nil (the default) reads no variables; an empty prefix is ignored; the first prefix set is the one used.
    /// Other stores opt in with `store.addLayer(.environment(prefix:))`.
    public static var environmentPrefix: String? {
        get { DefaultStores.state.withLock { $0.environmentPrefix } }
        set { if let newValue { DefaultStores.setEnvironmentPrefix(newValue) } }
    }

    /// `PrefsConfig.errorHandler = { report in logger.error("\(report)") }` receives every error a wrapper
    /// could not throw.
    ///
    /// A read that fails (for example a stored value of the wrong type) returns the default and reports here;
    /// nothing stored is overwritten. A failed write leaves the old value in place and reports here; writes to one
    /// store that keep failing for the same cause (a read-only folder, a damaged file) are reported once, until a
    /// write reaches the store's file again (a write that changes nothing does not count). A store that cannot be read at all is reported once, not on every read; such a report has an
    /// empty ``PrefsReport/key`` and names the file in ``PrefsReport/file``. The default handler prints one line to
    /// standard error. The handler is called without any Prefs lock held, so it may itself use preferences.
    public static var errorHandler: @Sendable (PrefsReport) -> Void {
        get { ErrorReporter.current }
        set { ErrorReporter.current = newValue }
    }

    /// `PrefsConfig.damagedStandardDomain = .refuse`, set first thing at startup, says what the standard domain does
    /// when its file does not decode. By default it keeps the file aside and starts afresh
    /// (``DamagedFilePolicy/keepAside``), reporting where the file went, so an app that wrote no code for a damaged
    /// file can still save its settings; ``DamagedFilePolicy/refuse`` leaves the file and refuses writes until it is
    /// repaired or moved aside (``FileBackedStore/moveDamagedFileAside()``). Set after the standard domain opened,
    /// it changes nothing for it. The default vault never moves its file (a wrong key looks the same as damage).
    public static var damagedStandardDomain: DamagedFilePolicy {
        get { DefaultStores.state.withLock { $0.damagedStandardDomain } }
        set { DefaultStores.state.withLock { $0.damagedStandardDomain = newValue } }
    }

    /// `PrefsConfig.lockTimeout = .seconds(2)` bounds how long a write to a file store waits for the file's lock
    /// while another process holds it; past it the write throws ``PrefsError/lockTimedOut(path:holder:waited:)``
    /// and nothing is written. The default is 5 seconds.
    ///
    /// Writers in Prefs processes hold the lock for the length of one write (milliseconds), so the limit is only
    /// reached when the holder has stopped (Ctrl-Z, a debugger, a wedged tool). Reads never wait for the lock.
    /// Deferred writes committed when the app exits wait at most this long too, then report the error.
    public static var lockTimeout: Duration {
        get { LockWait.timeout }
        set { LockWait.timeout = newValue }
    }

    /// `PrefsConfig.withLockTimeout(.milliseconds(200)) { … }` runs `operation` with another lock timeout for the
    /// writes it makes on this thread or task (and the child tasks it creates), leaving others' as they are.
    public static func withLockTimeout<Result>(_ timeout: Duration, operation: () throws -> Result) rethrows -> Result {
        try LockWait.$scoped.withValue(max(.zero, timeout), operation: operation)
    }

    // MARK: Scoped default stores

    /// `PrefsConfig.withDefaultStore(InMemoryStore()) { … }` runs `operation` with `store` as the default store of
    /// every wrapper created inside it without `store:`, in this task and the child tasks it creates.
    ///
    /// The scope is task-local: other tasks and threads, such as tests running in parallel, keep their own
    /// default. A model declared the README way can so be tested without changing its declarations:
    ///
    /// ```swift
    /// PrefsConfig.withDefaultStore(InMemoryStore()) {
    ///     let settings = Settings()      // @StoredValue(key: "zoom") var zoom = 1.0
    ///     settings.zoom = 2
    /// }
    /// ```
    ///
    /// A wrapper declared without `store:` uses the store of the scope it is read or written in, wherever it was
    /// created: a global or `static` wrapper, or a model made before the scope, follows each scope. Outside every
    /// scope it keeps the store it was created with, also after the scope it was created in has ended.
    public static func withDefaultStore<Result>(
        _ store: any KeyValueStore, operation: () throws -> Result
    ) rethrows -> Result {
        try DefaultStores.$scopes.withValue(.entering(defaultStore: store), operation: operation)
    }

    /// `await PrefsConfig.withDefaultStore(InMemoryStore()) { await … }`: the same for asynchronous code.
    public static func withDefaultStore<Result>(
        _ store: any KeyValueStore, isolation: isolated (any Actor)? = #isolation,
        operation: () async throws -> Result
    ) async rethrows -> Result {
        try await DefaultStores.$scopes.withValue(.entering(defaultStore: store), operation: operation)
    }

    /// `PrefsConfig.withDefaultSecureStore(InMemoryStore()) { … }` runs `operation` with `store` as the vault of
    /// every `@SecureStoredValue` created inside it without `store:`, in this task and its child tasks.
    public static func withDefaultSecureStore<Result>(
        _ store: any KeyValueStore, operation: () throws -> Result
    ) rethrows -> Result {
        try DefaultStores.$scopes.withValue(.entering(secureStore: store), operation: operation)
    }

    /// Runs `operation` with in-memory stand-ins for the `UserDefaults` instances given to `@StoredValue(key:storage:)`
    /// inside it (`UserDefaults.standard` stands for the scope's default store): what `.isolatedPreferences` uses
    /// so such wrappers touch no file.
    package static func withUserDefaultsStandIns<Result>(
        isolation: isolated (any Actor)? = #isolation, operation: () async throws -> Result
    ) async rethrows -> Result {
        try await DefaultStores.$scopes.withValue(.entering(standIns: true), operation: operation)
    }

    /// `await PrefsConfig.withDefaultSecureStore(InMemoryStore()) { await … }`: the same for asynchronous code.
    public static func withDefaultSecureStore<Result>(
        _ store: any KeyValueStore, isolation: isolated (any Actor)? = #isolation,
        operation: () async throws -> Result
    ) async rethrows -> Result {
        try await DefaultStores.$scopes.withValue(.entering(secureStore: store), operation: operation)
    }

    /// Runs `operation` as (part of) a test under `.isolatedPreferences`: vaults opened inside it, in this task and
    /// its child tasks, keep their rollback records in the folder at path `stateFolder` instead of
    /// `$XDG_STATE_HOME/prefs/vaults`, and the real standard domain, if used, is reported as not isolated.
    package static func withIsolatedTest<Result>(
        stateFolder: String, isolation: isolated (any Actor)? = #isolation, operation: () async throws -> Result
    ) async rethrows -> Result {
        try await DefaultStores.$scopes.withValue(.entering(isolatedTest: true)) {
            try await VaultRecord.$scopedDirectory.withValue(stateFolder, operation: operation)
        }
    }
}
