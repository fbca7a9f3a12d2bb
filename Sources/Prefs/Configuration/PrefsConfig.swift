import Foundation
import Synchronization

/// `PrefsConfig.configure(PrefsConfiguration(appIdentifier: "com.example.notes"))` configures Prefs for the whole
/// process, once at startup; `PrefsConfig.withDefaultStore(_:operation:)` scopes the default store to one task.
///
/// Property wrappers declared without a `store:` argument use ``defaultStore`` (secrets: ``secureStore``); errors
/// that a wrapper cannot throw go to ``errorHandler``.
public enum PrefsConfig {
    /// `PrefsConfig.defaultStore.value(forKey: "theme")` is the store of wrappers without a `store:` argument.
    ///
    /// Inside a `withDefaultStore(_:operation:)` scope it is that scope's store; else the one configured
    /// (``PrefsConfiguration/defaultStore``), else ``SuiteFileStore/standard``. Setting it is
    /// `PrefsConfig.configure` with only the store changed: before any default store is used, or refused and
    /// reported after. A wrapper keeps the store it was created with.
    public static var defaultStore: any KeyValueStore {
        get { DefaultStores.defaultStore }
        set {
            var configuration = DefaultStores.configuration
            configuration.defaultStore = newValue
            DefaultStores.configure(configuration)
        }
    }

    /// `PrefsConfig.secureStore` is the vault of `@SecureStoredValue` without a `store:` argument.
    ///
    /// Inside a `withDefaultSecureStore(_:operation:)` scope it is that scope's store; else the one configured
    /// (``PrefsConfiguration/secureStore``); else the default vault, opened on first use at
    /// `$XDG_DATA_HOME/<app>/secrets.vault` (or `$HOME/.local/share/…`), with its key file at
    /// `$XDG_CONFIG_HOME/<app>/secrets.key` (or `$HOME/.config/…`), both created on first write with private
    /// permissions. If it cannot be opened, the error is reported once, secrets read as nil, and writes throw it.
    /// Setting it is `PrefsConfig.configure` with only the vault changed.
    public static var secureStore: any KeyValueStore {
        get { DefaultStores.secureStore }
        set {
            var configuration = DefaultStores.configuration
            configuration.secureStore = newValue
            DefaultStores.configure(configuration)
        }
    }

    /// `PrefsConfig.configure(PrefsConfiguration(appIdentifier: "com.example.notes", secureStoreKey: .keyring()))`
    /// sets, in one call at startup, what the default stores are made from: the app's identifier, the environment
    /// prefix, the default vault's key, what the standard domain does with a damaged file, and the stores used in
    /// place of the default ones (see ``PrefsConfiguration``).
    ///
    /// Call it first thing, before any preference is read: ``SuiteFileStore/standard`` and the default vault are
    /// made once, from the configuration of that moment, so every setting applies at once and their order does not
    /// matter. A later call replaces an earlier one as long as no default store has opened and no configured store
    /// was given to a wrapper; after that, a call that would change anything changes nothing and reports
    /// ``PrefsError/configuredAfterUse(settings:)`` naming the settings it left. An identifier that cannot be a file name is refused and reported as
    /// ``PrefsError/invalidAppIdentifier(_:reason:)``, and nothing is changed.
    public static func configure(_ configuration: PrefsConfiguration) {
        DefaultStores.configure(configuration)
    }

    /// `PrefsConfig.configuration.appIdentifier` is the configuration the default stores are made from: the last
    /// one given to ``configure(_:)``, with the app identifier in use (the process's name unless configured).
    public static var configuration: PrefsConfiguration { DefaultStores.configuration }

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
