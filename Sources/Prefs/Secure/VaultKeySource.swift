public import Foundation

/// `struct MyKeySource: VaultKeySource` keeps a vault's key somewhere Prefs itself does not reach; a vault uses it
/// through ``VaultKey/source(_:)``.
///
/// PrefsKeyring's `.keyring()` is one (the desktop keyring, through the Secret Service), and
/// ``VaultKey/credential(_:)`` another (a systemd service credential). A source of your own (a hardware token, a
/// cloud secret manager) is written the same way:
///
/// ```swift
/// struct TokenKey: VaultKeySource {
///     func key(forVault vault: URL, creating: Bool) throws -> SecureBytes? {
///         guard token.hasKey else { return creating ? try token.makeKey() : nil }
///         let key = SecureBytes(count: 32)
///         try key.withUnsafeMutableBytes { buffer in try token.readKey(into: buffer) }
///         return key
///     }
///     func removeKey(forVault vault: URL) throws { try token.eraseKey() }
/// }
/// let vault = try EncryptedFileStore(url: vaultURL, key: .source(TokenKey()))
/// ```
///
/// Errors a source throws reach the caller unchanged (opening the vault, a write, ``EncryptedFileStore/rekey(to:)``),
/// so they can say exactly what failed. Prefs asks while it holds the vault's write lock (across processes too when
/// creating), so a source must not use the vault it is asked for, and must give an answer in bounded time: a wait
/// with no end would hang the thread that opens or writes the vault. A source that conforms to
/// `CustomStringConvertible` is named by its description in messages, others by their type (never by their fields,
/// which may hold secrets).
public protocol VaultKeySource: Sendable {
    /// `try source.key(forVault: vaultURL, creating: false)` returns the 32-byte key of the vault at `vault`, or nil
    /// when the source keeps none for it.
    ///
    /// With `creating` true and no key kept for that vault yet, the source makes one
    /// (``SecureBytes/random(count:)``), keeps it, and returns it; with `creating` false it returns nil. Prefs
    /// asks with `creating` true only while it holds the vault's cross-process write lock, just before it seals the
    /// vault with the key, so two Prefs processes never create a key for the same vault at once. `vault` is the
    /// vault file's absolute path as the store was given it.
    func key(forVault vault: URL, creating: Bool) throws -> SecureBytes?

    /// `try source.removeKey(forVault: vaultURL)` forgets the key of the vault at `vault`; nothing kept is not an
    /// error.
    ///
    /// ``EncryptedFileStore/moveKey(to:)`` calls it once the vault opens with a new key kept elsewhere, and only
    /// when the key this source gives no longer opens the vault.
    func removeKey(forVault vault: URL) throws
}
