public import Foundation

/// `try EncryptedFileStore(url: vaultURL, key: .keyFile(keyURL))` keeps secrets in an encrypted, tamper-evident
/// file.
///
/// The whole store (key names included) is sealed with XChaCha20-Poly1305 under a fresh random nonce on every
/// save; the file's header (format version, key-derivation parameters, salt and nonce) is authenticated too, so
/// any change to the file is detected. Writes are durable and atomic, locked across processes, and other
/// processes' changes are noticed and announced, exactly as for ``FileStore``. The vault is created with mode 0600
/// in a folder with mode 0700.
///
/// ```swift
/// let vault = try EncryptedFileStore(url: dataFolder.appending(path: "secrets.vault"), key: .keyFile(keyURL))
/// @SecureStoredValue<String>(key: "authToken", store: vault) var authToken
/// ```
///
/// Opening fails with a ``VaultError`` and leaves the file untouched when the key is wrong or the file was
/// modified (``VaultError/authenticationFailed``, indistinguishable by design), when it was written by a newer
/// version (``VaultError/unsupportedFormatVersion(_:)``), when it is truncated, when a key file is readable
/// by others (``VaultError/insecureKeyFile(path:mode:)``), or when it is an older copy of this vault or another
/// vault than the one last seen at this path (``VaultError/rollbackDetected(reason:)``).
public final class EncryptedFileStore: KeyValueStore {
    /// `vault.url` is the vault file.
    public let url: URL
    let storage: FileBackedStorage
    private let codec: VaultSnapshotCodec

    /// `store.changes` announces every change, including those made by other processes.
    public var changes: ChangeFeed { storage.changes }

    /// `try EncryptedFileStore(url: url, key: .passphrase(text))` opens the vault at `url`, or prepares a new one
    /// that is created on the first write.
    ///
    /// - Parameters:
    ///   - url: The vault file.
    ///   - key: Where the key comes from: a key file, a passphrase (Argon2id) or 32 raw bytes.
    /// - Throws: ``VaultError`` when the vault exists but cannot be opened with `key`; the file is left untouched.
    public convenience init(url: URL, key: VaultKey) throws {
        try self.init(url: url, key: key, cost: KDFParameters.Cost.defaultCost)
    }

    init(url: URL, key: VaultKey, cost: KDFParameters.Cost) throws {
        self.url = url
        codec = VaultSnapshotCodec(key: key, cost: cost, vaultPath: url.path(percentEncoded: false))
        storage = FileBackedStorage(url: url, codec: codec)
        try storage.open()
    }

    /// `EncryptedFileStore.defaultLocation(appIdentifier: "com.example.notes")` gives where the default vault and
    /// its key file live: `$XDG_DATA_HOME/<app>/secrets.vault` and `$XDG_CONFIG_HOME/<app>/secrets.key`, falling
    /// back to `~/.local/share` and `~/.config`. Keeping them apart means a copy of the data folder (a backup, a
    /// synced folder) holds no key.
    public static func defaultLocation(appIdentifier: String) -> (vault: URL, keyFile: URL) {
        let environment = ProcessInfo.processInfo.environment
        let home = FileManager.default.homeDirectoryForCurrentUser
        func folder(_ variable: String, _ fallback: String) -> URL {
            if let value = environment[variable], value.hasPrefix("/") {
                return URL(filePath: value, directoryHint: .isDirectory)
            }
            return home.appending(path: fallback, directoryHint: .isDirectory)
        }
        // PrefsConfig refuses unusable identifiers; this guard keeps a direct caller inside the XDG folders too.
        let app = (try? UserDefaultsStore.validate(suiteName: appIdentifier)) == nil ? "prefs" : appIdentifier
        return (
            folder("XDG_DATA_HOME", ".local/share").appending(path: app).appending(path: "secrets.vault"),
            folder("XDG_CONFIG_HOME", ".config").appending(path: app).appending(path: "secrets.key")
        )
    }

    /// `try vault.value(forKey: "authToken")` returns the stored value, served from memory once the vault is open.
    public func value(forKey key: String) throws -> PrefValue? { try storage.value(forKey: key) }

    /// `try vault.setValue(.string(token), forKey: "authToken")` seals the vault with the new value (nil removes
    /// it), durably, before returning.
    public func setValue(_ value: PrefValue?, forKey key: String) throws {
        try storage.update(forKey: key) { _ in value }
    }

    /// `try vault.updateValue(forKey: "devices") { … }` reads, transforms and re-seals one value while holding the
    /// vault's cross-process lock.
    @discardableResult
    public func updateValue(forKey key: String, _ transform: (PrefValue?) throws -> PrefValue?) throws -> PrefValue? {
        try storage.update(forKey: key, transform)
    }

    /// `try vault.allValues()` returns every secret's name and value.
    public func allValues() throws -> [String: PrefValue] { try storage.allValues() }

    /// `try vault.replaceAll(secrets)` replaces every secret at once (an import, a migration) in one atomic,
    /// durable seal, announcing exactly the keys whose values changed.
    public func replaceAll(_ values: [String: PrefValue]) throws { try storage.replaceAll(values) }

    /// `try vault.rekey(to: .passphrase(newPassphrase))` re-encrypts the vault under a new key.
    ///
    /// The vault is replaced in one atomic rename: at every instant the file opens with exactly one of the two
    /// keys. If anything fails before the rename the vault stays under the old key. If only syncing the folder
    /// fails after it, the vault and the store are under the new key and this throws
    /// ``PrefsError/durabilityNotConfirmed(path:operation:errno:message:)``: keep the new key.
    public func rekey(to newKey: VaultKey) throws {
        try storage.rewrite { [codec] () throws -> () -> Void in try codec.replaceKey(with: newKey) }
    }
}
