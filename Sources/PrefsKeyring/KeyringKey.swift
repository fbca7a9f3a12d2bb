// The Secret Service is a D-Bus service of Linux desktops: on other platforms this module declares nothing.
#if os(Linux)
    public import Foundation
    public import Prefs

    extension VaultKey {
        /// `.keyring()` keeps the vault's key in the desktop keyring (GNOME Keyring, KWallet, KeePassXC: any Secret
        /// Service), where the person's login unlocks it, instead of in a key file.
        ///
        /// ```swift
        /// import PrefsKeyring
        /// PrefsConfig.configure(PrefsConfiguration(secureStoreKey: .keyring()))  // the default vault
        /// let vault = try EncryptedFileStore(url: vaultURL, key: .keyring())
        /// ```
        ///
        /// See ``KeyringKey`` for where the key is kept, how it is found again and every bound.
        public static func keyring(
            appIdentifier: String? = nil, prompting: Bool = true, timeout: Duration = .seconds(5),
            promptTimeout: Duration = .seconds(120)
        ) -> VaultKey {
            .source(
                KeyringKey(
                    appIdentifier: appIdentifier, prompting: prompting, timeout: timeout, promptTimeout: promptTimeout))
        }
    }

    /// `KeyringKey()` keeps a vault's key in the desktop keyring through the freedesktop Secret Service (libsecret); a
    /// vault uses it as `.keyring()` (``Prefs/VaultKey/keyring(appIdentifier:prompting:timeout:promptTimeout:)``).
    ///
    /// The key (32 random bytes, kept as base64 text) is created in the user's default keyring the first time the vault
    /// is written, as an item labelled `<app> secrets vault key (<vault path>)` so a person recognises it in Seahorse or
    /// KWallet, with the attributes `application` (the app identifier) and `vault` (the vault file's absolute path), by
    /// which it is found again. `secret-tool search application com.example.notes` shows it;
    /// `secret-tool search --all xdg:schema org.prefs.VaultKey` shows every vault key Prefs made.
    ///
    /// Each call to the session bus and the Secret Service waits at most `timeout`, and an unlock prompt at most
    /// `promptTimeout`; past them it throws ``KeyringError/timedOut(operation:after:)``. No session bus, no Secret
    /// Service, a locked keyring and a dismissed prompt each throw their own ``KeyringError``, and none of them makes
    /// Prefs keep the key anywhere else. Prefs reaches the keyring when it opens a vault that exists, when it writes a
    /// new vault, and when the key moves; never on a read of a vault already open.
    public struct KeyringKey: VaultKeySource, VaultKeyKindTelling, CustomStringConvertible {
        /// The `application` attribute of the key's item; nil uses ``Prefs/PrefsConfiguration/appIdentifier`` at the time the
        /// key is needed.
        public let appIdentifier: String?
        /// Whether a locked keyring is unlocked with the keyring's own prompt (true), or refused at once with
        /// ``KeyringError/locked(collection:)`` (false: services, scripts, anything without a person at the screen).
        public let prompting: Bool
        /// The longest wait for the session bus or the Secret Service, per call.
        public let timeout: Duration
        /// The longest wait for a person to answer the unlock prompt.
        public let promptTimeout: Duration

        /// `KeyringKey(appIdentifier: "com.example.notes")` makes the source; the defaults prompt to unlock, wait 5 s for
        /// each call and 2 minutes for a person at the prompt.
        public init(
            appIdentifier: String? = nil, prompting: Bool = true, timeout: Duration = .seconds(5),
            promptTimeout: Duration = .seconds(120)
        ) {
            self.appIdentifier = appIdentifier
            self.prompting = prompting
            self.timeout = timeout
            self.promptTimeout = promptTimeout
        }

        /// `"the desktop keyring (application com.example.notes)"`: how messages name this source.
        public var description: String { "the desktop keyring (application \(application))" }

        /// `try KeyringKey().key(forVault: vaultURL, creating: true)` returns the vault's key from the keyring, creating
        /// it there when `creating` and there is none yet; nil when there is none and not `creating`.
        ///
        /// - Throws: ``KeyringError``.
        public func key(forVault vault: URL, creating: Bool) throws -> SecureBytes? {
            let attributes = attributes(of: vault)
            let connection = try SecretServiceConnection(timeout: timeout, promptTimeout: promptTimeout)
            if let key = try connection.findKey(attributes, prompting: prompting) { return key }
            guard creating else { return nil }
            return try connection.createKey(attributes, label: label(of: attributes), prompting: prompting)
        }

        /// `try KeyringKey().removeKey(forVault: vaultURL)` deletes the vault's key from the keyring; none is not an
        /// error.
        ///
        /// - Throws: ``KeyringError``.
        public func removeKey(forVault vault: URL) throws {
            let connection = try SecretServiceConnection(timeout: timeout, promptTimeout: promptTimeout)
            try connection.deleteKey(attributes(of: vault), prompting: prompting)
        }

        /// `KeyringKey.label(application:vault:)`: the label of the item that keeps a vault's key, as Seahorse and KWallet
        /// show it.
        public static func label(application: String, vault: String) -> String {
            "\(application) secrets vault key (\(vault))"
        }

        private var application: String { appIdentifier ?? PrefsConfig.configuration.appIdentifier }

        /// A vault whose key is here records it, so that opening it with a key file can name the keyring.
        package var vaultKeyKind: VaultKeyKind { .keyring }

        private func attributes(of vault: URL) -> KeyAttributes {
            KeyAttributes(application: application, vault: vault.standardizedFileURL.path(percentEncoded: false))
        }

        private func label(of attributes: KeyAttributes) -> String {
            Self.label(application: attributes.application, vault: attributes.vault)
        }
    }
#endif
