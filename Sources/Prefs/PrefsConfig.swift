import Foundation
import Synchronization

/// `PrefsConfig.defaultStore = try FileStore(url: …)` configures Prefs for the whole process, once at startup.
///
/// Property wrappers declared without a `store:` argument use ``defaultStore``; read failures that a wrapper
/// cannot throw (a stored value of the wrong type, an I/O error on write) go to ``errorHandler``.
public enum PrefsConfig {
    private struct State {
        var defaultStore: (any KeyValueStore)?
        var secureStore: (any KeyValueStore)?
        var appIdentifier: String = ProcessInfo.processInfo.processName
        var errorHandler: @Sendable (PrefsReport) -> Void = PrefsConfig.logToStandardError
    }

    private static let state = Mutex(State())

    /// `PrefsConfig.defaultStore = InMemoryStore()` sets the store used by wrappers without a `store:` argument.
    ///
    /// Defaults to ``UserDefaultsStore/standard``. Set it before creating any wrapper: a wrapper keeps the store
    /// it was created with.
    public static var defaultStore: any KeyValueStore {
        get {
            state.withLock { state in
                if let store = state.defaultStore { return store }
                let store = UserDefaultsStore.standard
                state.defaultStore = store
                return store
            }
        }
        set { state.withLock { $0.defaultStore = newValue } }
    }

    /// `PrefsConfig.appIdentifier = "com.example.notes"` names the folders of the default vault.
    ///
    /// Defaults to the process name. Set it once at startup, before the first `@SecureStoredValue` without a
    /// `store:` is created; the default vault is opened with the identifier in force at that moment.
    ///
    /// An identifier that cannot be a folder name (empty, containing `/`, `..` or NUL) is refused: the previous
    /// one stays in force and the error goes to ``errorHandler``.
    public static var appIdentifier: String {
        get { state.withLock { $0.appIdentifier } }
        set {
            do {
                try UserDefaultsStore.validate(suiteName: newValue)
                state.withLock { $0.appIdentifier = newValue }
            } catch {
                report(error, key: "", operation: .write)
            }
        }
    }

    /// `PrefsConfig.secureStore = try EncryptedFileStore(url: …, key: .passphrase(…))` sets the vault used by
    /// `@SecureStoredValue` without a `store:` argument.
    ///
    /// By default it is opened on first use at ``EncryptedFileStore/defaultLocation(appIdentifier:)``:
    /// `$XDG_DATA_HOME/<app>/secrets.vault` (or `~/.local/share/…`), with its key file at
    /// `$XDG_CONFIG_HOME/<app>/secrets.key` (or `~/.config/…`), both created on first use with private
    /// permissions. If it cannot be opened, secrets read as nil, the error is reported, and writes throw it.
    public static var secureStore: any KeyValueStore {
        get {
            state.withLock { state in
                if let store = state.secureStore { return store }
                let location = EncryptedFileStore.defaultLocation(appIdentifier: state.appIdentifier)
                let store: any KeyValueStore
                do {
                    store = try EncryptedFileStore(url: location.vault, key: .keyFile(location.keyFile))
                } catch {
                    store = UnavailableStore(error)
                }
                state.secureStore = store
                return store
            }
        }
        set { state.withLock { $0.secureStore = newValue } }
    }

    /// `PrefsConfig.errorHandler = { report in logger.error("\(report)") }` receives every error a wrapper
    /// could not throw.
    ///
    /// A read that fails (for example a stored value of the wrong type) returns the default and reports here;
    /// nothing stored is overwritten. A failed write leaves the old value in place and reports here. The default
    /// handler prints one line to standard error.
    public static var errorHandler: @Sendable (PrefsReport) -> Void {
        get { state.withLock { $0.errorHandler } }
        set { state.withLock { $0.errorHandler = newValue } }
    }

    package static func report(_ error: any Error, key: String, operation: PrefsReport.Operation) {
        errorHandler(PrefsReport(key: key, operation: operation, error: error))
    }

    @Sendable private static func logToStandardError(_ report: PrefsReport) {
        FileHandle.standardError.write(Data("Prefs: \(report)\n".utf8))
    }
}

/// `PrefsConfig.errorHandler = { (report: PrefsReport) in … }` receives one of these for each reported error.
public struct PrefsReport: Sendable, CustomStringConvertible {
    /// `report.operation == .read` tells what was being done when the error happened: `.read` or `.write`.
    public enum Operation: String, Sendable {
        /// `.read`: a read, which returned the default value instead.
        case read
        /// `.write`: a write, which left the stored value as it was.
        case write
    }

    /// `report.key` is the key of the preference involved.
    public let key: String
    /// `report.operation` tells whether a read or a write failed.
    public let operation: Operation
    /// `report.error` is the error, usually a ``PrefsError`` or ``VaultError``.
    public let error: any Error

    /// `"read of \"theme\" failed: …"`.
    public var description: String {
        "\(operation.rawValue) of \(String(reflecting: key)) failed: \(error)"
    }
}
