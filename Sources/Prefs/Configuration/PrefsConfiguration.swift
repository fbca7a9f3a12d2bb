import Foundation

/// `PrefsConfiguration(appIdentifier: "com.example.notes", environmentPrefix: "NOTES_")` is what the default stores
/// of a process are made from, given once to ``PrefsConfig/configure(_:)`` at startup.
///
/// ```swift
/// PrefsConfig.configure(
///     PrefsConfiguration(appIdentifier: "com.example.notes", secureStoreKey: .keyring(), damagedStandardDomain: .refuse))
/// ```
public struct PrefsConfiguration: Sendable {
    /// `appIdentifier` names the app's standard domain (`com.example.notes.plist`) and the folders of its default
    /// vault. The process's name unless given, as for Foundation's `UserDefaults.standard`; giving it keeps settings
    /// when the executable is renamed.
    public var appIdentifier: String

    /// `environmentPrefix: "MYAPP_"` lets environment variables set the preferences of the standard domain for this
    /// run, as a twelve-factor server is configured.
    ///
    /// A key's variable is the prefix, then the key in upper case, with `_` between words of a camel-case key and in
    /// place of any character other than an ASCII letter or digit: `fontSize` is read from `MYAPP_FONT_SIZE`. The
    /// variables apply to the keys the store knows a default of: every key declared by a wrapper, and every key
    /// given to ``KeyValueStore/register(defaults:)``. A variable that two keys map to (`fontSize` and `font_size`)
    /// is refused for both and reported. Values are text, converted to the declared type as command-line arguments
    /// are. Nil (the default) reads no variables; an empty prefix is ignored. Other stores opt in with
    /// `store.addLayer(.environment(prefix:))`.
    public var environmentPrefix: String?

    /// `secureStoreKey: .keyring()` keeps the key of the default vault (``PrefsConfig/secureStore``) somewhere
    /// other than its key file: the desktop keyring (PrefsKeyring's `.keyring()`), a systemd service credential
    /// (``VaultKey/credential(_:)``), or any ``VaultKey``.
    ///
    /// Nil (the default) keeps the key in the key file beside the vault, `$XDG_CONFIG_HOME/<app>/secrets.key`. When
    /// the vault is still under its key file it is moved to the new key as it opens, and the key file deleted
    /// (``EncryptedFileStore/init(url:key:movingFrom:)``); if the new key cannot be had (a locked keyring, no
    /// credential), that error is reported, secrets read as nil and writes throw it, and the key file is kept.
    public var secureStoreKey: VaultKey?

    /// `damagedStandardDomain: .refuse` says what the standard domain does when its file does not decode. By default
    /// it keeps the file aside at its first write and starts afresh (``DamagedFilePolicy/keepAside``), reporting
    /// where the file went, so an app that wrote no code for a damaged file can still save its settings;
    /// ``DamagedFilePolicy/refuse`` leaves the file and refuses writes until it is repaired or moved aside
    /// (``FileBackedStore/moveDamagedFileAside()``). The default vault never moves its file (a wrong key looks the
    /// same as damage).
    public var damagedStandardDomain: DamagedFilePolicy

    /// `defaultStore: try FileStore(url: settingsURL)` is the store of wrappers declared without `store:`, in place
    /// of the standard domain (``SuiteFileStore/standard``, when nil). Inside a
    /// ``PrefsConfig/withDefaultStore(_:operation:)`` scope that scope's store is used instead.
    public var defaultStore: (any KeyValueStore)?

    /// `secureStore: try EncryptedFileStore(url: vaultURL, key: .passphrase(p))` is the vault of `@SecureStoredValue`
    /// wrappers declared without `store:`, in place of the default vault (made from ``appIdentifier`` and
    /// ``secureStoreKey``, when nil).
    public var secureStore: (any KeyValueStore)?

    /// `PrefsConfiguration(appIdentifier: "com.example.notes")`: every setting not given keeps its default.
    public init(
        appIdentifier: String? = nil, environmentPrefix: String? = nil, secureStoreKey: VaultKey? = nil,
        damagedStandardDomain: DamagedFilePolicy = .keepAside, defaultStore: (any KeyValueStore)? = nil,
        secureStore: (any KeyValueStore)? = nil
    ) {
        self.appIdentifier = appIdentifier ?? ProcessInfo.processInfo.processName
        self.environmentPrefix = environmentPrefix
        self.secureStoreKey = secureStoreKey
        self.damagedStandardDomain = damagedStandardDomain
        self.defaultStore = defaultStore
        self.secureStore = secureStore
    }
}
