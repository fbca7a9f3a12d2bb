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
/// vault than the one last seen at this path (``VaultError/rollbackDetected(reason:)``). When the record that
/// catches an older copy cannot be kept, the vault opens and the store reports
/// ``VaultError/rollbackRecordUnavailable(path:reason:)`` once (see ``rollbackRecordProblem``).
public final class EncryptedFileStore: FileBackedStore, @unchecked Sendable {
    private let codec: VaultSnapshotCodec

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

    /// A vault on `fileSystem` and `clock` (for tests).
    package convenience init(url: URL, key: VaultKey, fileSystem: any FileSystem, clock: EngineClock) throws {
        try self.init(url: url, key: key, cost: KDFParameters.Cost.defaultCost, fileSystem: fileSystem, clock: clock)
    }

    init(
        url: URL, key: VaultKey, cost: KDFParameters.Cost, fileSystem: any FileSystem = POSIXFileSystem(),
        clock: EngineClock = .system
    ) throws {
        let codec = VaultSnapshotCodec(key: key, cost: cost, vaultPath: url.fileSystemPath)
        let engine = StoreEngine(path: url.fileSystemPath, codec: codec, fileSystem: fileSystem, clock: clock)
        try engine.open()
        self.codec = codec
        super.init(url: url, engine: engine, retained: engine.retain())
        codec.reportRecordProblem()
    }

    /// `EncryptedFileStore.rollbackRecordIsOptional = true`, set before opening vaults, is for environments that
    /// cannot keep state (a read-only home, a sandbox without `$XDG_STATE_HOME`): a rollback record that cannot be
    /// read or written is then not reported. Vaults open either way; without a record an older copy is not noticed.
    public static var rollbackRecordIsOptional: Bool {
        get { VaultRecord.isOptional }
        set { VaultRecord.isOptional = newValue }
    }

    /// `store.rollbackRecordProblem` is nil while the vault's rollback record (in `$XDG_STATE_HOME/prefs/vaults`) is
    /// read and written, or else ``VaultError/rollbackRecordUnavailable(path:reason:)`` saying why it is not; the
    /// same error is reported once per store when it opens, unless ``rollbackRecordIsOptional``.
    public var rollbackRecordProblem: VaultError? { codec.recordProblem() }

    /// `EncryptedFileStore.defaultLocation(appIdentifier: "com.example.notes")` gives where the default vault and
    /// its key file live: `$XDG_DATA_HOME/<app>/secrets.vault` and `$XDG_CONFIG_HOME/<app>/secrets.key`, falling
    /// back to `~/.local/share` and `~/.config`. Keeping them apart means a copy of the data folder (a backup, a
    /// synced folder) holds no key.
    public static func defaultLocation(appIdentifier: String) -> (vault: URL, keyFile: URL) {
        // PrefsConfig refuses unusable identifiers; this guard keeps a direct caller inside the XDG folders too.
        let app = Locations.fileNameProblem(appIdentifier, what: "an app identifier") == nil ? appIdentifier : "prefs"
        return (
            Locations.current.dataHome.appending(path: app).appending(path: "secrets.vault"),
            Locations.current.configHome.appending(path: app).appending(path: "secrets.key")
        )
    }

    /// `try vault.rekey(to: .passphrase(newPassphrase))` re-encrypts the vault under a new key.
    ///
    /// The vault is replaced in one atomic rename: at every instant the file opens with exactly one of the two
    /// keys. If anything fails before the rename the vault stays under the old key. If only syncing the folder
    /// fails after it, the vault and the store are under the new key and this throws
    /// ``PrefsError/durabilityNotConfirmed(path:operation:errno:message:)``: keep the new key.
    public func rekey(to newKey: VaultKey) throws {
        try open().rewrite { [codec] () throws -> () -> Void in try codec.replaceKey(with: newKey) }
    }
}
