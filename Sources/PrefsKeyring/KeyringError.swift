// The Secret Service is a D-Bus service of Linux desktops: on other platforms this module declares nothing.
#if os(Linux)
    public import Foundation

    /// `catch let error as KeyringError { … }` catches why the desktop keyring (the Secret Service) could not give or
    /// keep a vault's key.
    ///
    /// Each case says which part was missing or refused, so an app can tell its user what to do. None of them ever
    /// leads Prefs to keep the key anywhere else: the vault stays as it was.
    public enum KeyringError: Error, Sendable, Equatable {
        /// `.noSessionBus(reason:)`: there is no D-Bus session bus to reach a keyring through:
        /// `DBUS_SESSION_BUS_ADDRESS` is not set and `$XDG_RUNTIME_DIR/bus` does not exist (a service, an ssh login
        /// without a desktop session, a container), or the bus it names cannot be reached.
        case noSessionBus(reason: String)
        /// `.noSecretService(reason:)`: the session bus has no Secret Service: no keyring daemon (GNOME Keyring,
        /// KWallet, KeePassXC) runs or can be started on it.
        case noSecretService(reason: String)
        /// `.locked(collection:)`: the keyring holding (or to hold) the key is locked, and the key source was made with
        /// `prompting: false`, so no unlock prompt was shown.
        case locked(collection: String)
        /// `.unlockDismissed(collection:)`: the keyring is locked and its unlock prompt was dismissed: the person
        /// cancelled it, or the keyring daemon could not show one (no display).
        case unlockDismissed(collection: String)
        /// `.timedOut(operation:after:)`: the session bus, the Secret Service or the person at the unlock prompt gave no
        /// answer within the key source's bound (a stopped or wedged daemon, a prompt left open).
        case timedOut(operation: String, after: Duration)
        /// `.noDefaultCollection`: the Secret Service has no default keyring to create the key in; create one (for
        /// example with Seahorse) and set it as the default.
        case noDefaultCollection
        /// `.invalidItem(reason:)`: the keyring holds something for this vault that is not a Prefs vault key: a secret
        /// that is not 32 bytes in base64, or several items with different keys.
        case invalidItem(reason: String)
        /// `.serviceFailed(operation:message:)`: the Secret Service refused an operation for another reason; `message`
        /// is its own.
        case serviceFailed(operation: String, message: String)
    }

    extension KeyringError: LocalizedError, CustomStringConvertible {
        /// `print(error)` prints a one-line message that says what went wrong and what to do about it.
        public var description: String {
            switch self {
            case .noSessionBus(let reason):
                "no D-Bus session bus to reach the desktop keyring (\(reason)); run inside a desktop session, or keep "
                    + "the vault key elsewhere"
            case .noSecretService(let reason):
                "no Secret Service on the session bus (\(reason)); start a keyring daemon such as gnome-keyring-daemon, "
                    + "or keep the vault key elsewhere"
            case .locked(let collection):
                "the keyring \(collection) is locked; unlock it (for example in Seahorse) and try again"
            case .unlockDismissed(let collection):
                "the keyring \(collection) is locked and its unlock prompt was dismissed or could not be shown; "
                    + "unlock it and try again"
            case .timedOut(let operation, let after):
                "the desktop keyring gave no answer to \(operation) within \(after); check that the keyring daemon "
                    + "is running and not stopped"
            case .noDefaultCollection:
                "the Secret Service has no default keyring to keep the vault key in; create one and make it the default"
            case .invalidItem(let reason): "the keyring item of this vault is not a Prefs vault key: \(reason)"
            case .serviceFailed(let operation, let message): "the Secret Service refused to \(operation): \(message)"
            }
        }

        /// `error.localizedDescription` is the same text as ``description``.
        public var errorDescription: String? { description }
    }
#endif
