public import Foundation
import Synchronization

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
    /// Where the vault's current key is kept apart from it (a key file, a source), so a move can remove it there;
    /// nil for a passphrase or raw key.
    private let keptKey: Mutex<VaultKeyMaterial?>

    /// `try EncryptedFileStore(url: url, key: .passphrase(text))` opens the vault at `url`, or prepares a new one
    /// that is created on the first write.
    ///
    /// - Parameters:
    ///   - url: The vault file.
    ///   - key: Where the key comes from: a key file, a passphrase (Argon2id) or 32 raw bytes.
    /// - Throws: ``VaultError`` when the vault exists but cannot be opened with `key`; the file is left untouched.
    public convenience init(url: URL, key: VaultKey) throws {
        try self.init(url: url, key: key, cost: KDFParameters.Cost.interactive)
    }

    /// A vault on `fileSystem` and `clock` (for tests).
    package convenience init(url: URL, key: VaultKey, fileSystem: any FileSystem, clock: EngineClock) throws {
        try self.init(url: url, key: key, cost: KDFParameters.Cost.interactive, fileSystem: fileSystem, clock: clock)
    }

    init(
        url: URL, key: VaultKey, cost: KDFParameters.Cost, fileSystem: any FileSystem = POSIXFileSystem(),
        clock: EngineClock = .system, changes: ChangeFeed = ChangeFeed()
    ) throws {
        let path = url.fileSystemPath
        let codec = VaultSnapshotCodec(key: key, cost: cost, vaultPath: path)
        let engine = StoreEngine(path: path, codec: codec, fileSystem: fileSystem, clock: clock, changes: changes)
        try engine.open()
        self.codec = codec
        keptKey = Mutex(VaultKeyMaterial(key, vaultPath: path).keptApart)
        super.init(url: url, engine: engine, retained: engine.retain())
        codec.reportRecordProblem()
    }

    /// The vault's bytes as they are on disk now; nil when there is no vault.
    private static func currentBytes(at url: URL) throws -> Data? {
        try POSIXFileSystem().read(url.fileSystemPath, through: nil)?.data
    }

    /// `try EncryptedFileStore(url: vaultURL, key: .keyring(), movingFrom: .keyFile(keyURL))` opens the vault
    /// under `key`, first moving it there from `previous` while the vault is still under that.
    ///
    /// When the vault opens with `previous`, its key is moved as ``moveKey(to:)`` moves it: the vault is
    /// re-encrypted under `key` and `previous` removed (the key file deleted). When it already opens with `key`
    /// and `previous` still keeps a key that no longer opens it (a move that was cut short after the vault changed
    /// keys), that key is removed. Without a vault file the store simply opens under `key` and `previous` is left
    /// alone. Run by two processes at once, the vault moves once and both end up under `key`.
    ///
    /// - Throws: what opening under either key throws (a ``VaultError``, or the source's error such as a locked
    ///   keyring), or what ``moveKey(to:)`` throws. Nothing is removed unless the vault opens with `key`; a left-behind
    ///   key that cannot be removed is reported to ``PrefsConfig/errorHandler`` and the store opens all the same.
    public convenience init(url: URL, key: VaultKey, movingFrom previous: VaultKey) throws {
        let previousKey = VaultKeyMaterial(previous, vaultPath: url.path(percentEncoded: false))
        let vault = try Self.currentBytes(at: url)
        // Whether the vault is still under `previous`; when that cannot be told (a keyring out of reach), the vault
        // may well be under `key` already, which opening says.
        var lookError: (any Error)?
        var underPrevious = false
        if let vault {
            do { underPrevious = try previousKey.opens(vault) == true } catch { lookError = error }
        }
        var moved = false
        var moveError: (any Error)?
        if underPrevious {
            // Another process may move the vault between our look and our move (then this move fails, and the vault
            // opens under `key` below): the store that had it open under the old key meeting it changing keys is
            // no failure to report.
            do {
                let mover = try EncryptedFileStore(
                    url: url, key: previous, cost: KDFParameters.Cost.interactive,
                    changes: ChangeFeed(reportingNothing: ()))
                defer { mover.close() }
                try mover.moveKey(to: key)
                moved = true
            } catch {
                // Moved but not known durable: the old key must stay, as moveKey(to:) leaves it.
                if case .durabilityNotConfirmed? = error as? PrefsError { throw error }
                moveError = error
            }
        }
        do {
            try self.init(url: url, key: key)
        } catch {
            throw moveError ?? lookError ?? error
        }
        // The end of a move cut short: `previous` still keeps a key that no longer opens the vault. The store is
        // open and works either way, so a key that cannot be removed now is reported, not thrown.
        guard !moved, lookError == nil, previousKey.keptApart != nil else { return }
        do {
            if let current = try Self.currentBytes(at: url), try previousKey.opens(current) == false {
                try previousKey.removeKey()
            }
        } catch {
            ErrorReporter.report(error, key: "", operation: .write)
        }
    }

    /// `store.rollbackRecordProblem` is nil while the vault's rollback record (in `$XDG_STATE_HOME/prefs/vaults`) is
    /// read and written, or else ``VaultError/rollbackRecordUnavailable(path:reason:)`` saying why it is not; the
    /// same error is reported once per store when it opens. Where no state can be kept (a read-only home, a sandbox without
    /// `$XDG_STATE_HOME`), let ``PrefsConfig/errorHandler`` pass over that report.
    public var rollbackRecordProblem: VaultError? { codec.recordProblem() }

    /// `EncryptedFileStore.defaultLocation(appIdentifier: "com.example.notes")` gives where the default vault and
    /// its key file live: `$XDG_DATA_HOME/<app>/secrets.vault` and `$XDG_CONFIG_HOME/<app>/secrets.key`, falling
    /// back to `~/.local/share` and `~/.config`. Keeping them apart means a copy of the data folder (a backup, a
    /// synced folder) holds no key.
    package static func defaultLocation(appIdentifier: String) -> (vault: URL, keyFile: URL) {
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
        let material = VaultKeyMaterial(newKey, vaultPath: url.path(percentEncoded: false))
        do {
            try open().rewrite { [codec] () throws -> () -> Void in try codec.replaceKey(with: newKey) }
        } catch  where error.isCommitted {
            keptKey.withLock { $0 = material.keptApart }
            throw error
        }
        keptKey.withLock { $0 = material.keptApart }
    }

    /// `try vault.moveKey(to: .keyring())` re-encrypts the vault under a new key kept elsewhere, then removes the
    /// old key from where it was kept: a key file is deleted, a key source's key removed.
    ///
    /// The steps come in the one order that loses nothing whenever the process stops:
    /// 1. the new key is made where it is kept (or found there, when a move was cut short before);
    /// 2. the vault is re-encrypted under it in one atomic rename, as ``rekey(to:)`` does, its rollback record moving
    ///    on with it;
    /// 3. the vault file is opened again with the new key, fetched anew from where it is kept;
    /// 4. only then is the old key removed, and only if it no longer opens the vault.
    ///
    /// Stopped before step 2 the vault opens with the old key, after it with the new one; a key left behind by a
    /// stop before step 4 opens no current vault, and ``init(url:key:movingFrom:)`` removes it. A new key does not
    /// reopen older copies of the vault (backups), which the old key still opens. A passphrase or raw key leaves
    /// nothing to remove.
    ///
    /// - Throws: what ``rekey(to:)`` throws, with the vault still under the old key (unless it is
    ///   ``PrefsError/durabilityNotConfirmed(path:operation:errno:message:)``: then it is under the new one and the
    ///   old key is kept); ``VaultError/invalidKey(reason:)`` when the old key still opens the vault (the new key is
    ///   the same key: nothing is removed); or what removing the old key throws, with the vault already under the new
    ///   key.
    public func moveKey(to newKey: VaultKey) throws {
        let old = keptKey.withLock { $0 }
        try rekey(to: newKey)
        guard let data = try Self.currentBytes(at: url) else { return }
        let path = url.path(percentEncoded: false)
        guard try VaultKeyMaterial(newKey, vaultPath: path).opens(data) == true else {
            throw VaultError.authenticationFailed
        }
        guard let old, let opens = try old.opens(data) else { return }
        if opens {
            throw VaultError.invalidKey(
                reason: "the vault's new key is the key it already had, so the old one was not removed")
        }
        try old.removeKey()
    }
}

extension EncryptedFileStore {
    /// The kind of place the key of the vault at `path` was kept in when it was last written, as its header records
    /// it; nil when the file cannot be read or is not a vault. No key is needed.
    package static func recordedKeyKind(ofVaultAt path: String) -> VaultKeyKind? {
        guard let bytes = try? Data(contentsOf: URL(filePath: path), options: .mappedIfSafe) else { return nil }
        return VaultFormat.keyKind(of: bytes)
    }
}
