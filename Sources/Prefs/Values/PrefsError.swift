public import Foundation

/// `catch let error as PrefsError { … }` catches the errors Prefs throws.
///
/// Every case says what went wrong and carries enough context to act on it. Reads through a property wrapper
/// never throw: they fall back to the default and report the error to ``PrefsConfig/errorHandler``.
public enum PrefsError: Error, Sendable, Equatable {
    /// `.invalidSuiteName(_:reason:)`: a suite name that Prefs refuses because Foundation would write outside the
    /// preferences folder: empty, containing `/`, `..` or NUL, or longer than 255 bytes once `.plist` is added.
    case invalidSuiteName(String, reason: String)
    /// `.invalidAppIdentifier(_:reason:)`: a ``PrefsConfiguration/appIdentifier`` that was refused, because it cannot be a
    /// file name or because the default stores are already open under another identifier. The previous one stays.
    case invalidAppIdentifier(String, reason: String)
    /// `.unidentifiedUserDefaults(reason:)`: a `UserDefaults` instance whose domain Prefs cannot tell. No longer
    /// raised: `@StoredValue(key:storage:)` now uses the instance itself; kept so existing `switch`es compile.
    case unidentifiedUserDefaults(reason: String)
    /// `.separateStandardDomain(appIdentifier:foundationDomain:)`: reported once when the standard domain opens
    /// under a ``PrefsConfiguration/appIdentifier`` while Foundation's `UserDefaults.standard` keeps the process's own
    /// domain, whose file exists: neither sees the other's values. Move the old values once and give old code
    /// `UserDefaults(suiteName: appIdentifier)` (see <doc:StoresAndBackends>).
    case separateStandardDomain(appIdentifier: String, foundationDomain: String)
    /// `.conflictingDeclarations(key:first:second:)`: two wrappers of one key on one store declared with different
    /// types or defaults. Both still work: with different defaults the first declaration's default applies to both;
    /// with different types each decodes the stored value as its own type. Reported once; fix the declarations.
    case conflictingDeclarations(key: String, first: String, second: String)
    /// `.invalidKey(_:reason:)`: a key that no store can hold: empty or containing NUL.
    case invalidKey(String, reason: String)
    /// `.typeMismatch(key:expected:found:)`: a stored value that does not have the shape the declared type expects.
    /// Nothing was overwritten.
    case typeMismatch(key: String, expected: String, found: String)
    /// `.notAllowed(key:value:allowed:)`: a value the key's declaration does not allow (outside its range, not one of
    /// its choices: see ``PrefKey/Schema``). A write of it is refused and nothing is written; read from a file, it
    /// reads as the declared default and is left as it is.
    case notAllowed(key: String, value: String, allowed: String)
    /// `.encodingFailed(key:reason:)`: a value that could not be encoded for storage (for example a date at infinity
    /// inside JSON).
    case encodingFailed(key: String, reason: String)
    /// `.decodingFailed(key:reason:)`: a value stored under `key` that could not be decoded as the declared type.
    /// Nothing was overwritten.
    case decodingFailed(key: String, reason: String)
    /// `.corruptFile(path:reason:)`: a store file that is not in the expected format. The file was left untouched.
    case corruptFile(path: String, reason: String)
    /// `.io(path:operation:errno:message:)`: a file-system operation that failed, with the `errno` text: permission
    /// denied, disk full, …
    case io(path: String, operation: String, errno: Int32, message: String)
    /// `.forced(key:)`: a write of a key whose value an administrator forced (see <doc:LayeredPreferences>). The
    /// forced value stays; grey the setting out where `$setting.isForced` is true.
    case forced(key: String)
    /// `.ambiguousEnvironmentVariable(_:keys:)`: an environment variable that several keys of one store map to, so
    /// it sets none of them. Rename one of the keys, or set the value another way.
    case ambiguousEnvironmentVariable(String, keys: [String])
    /// `.durabilityNotConfirmed(path:operation:errno:message:)`: the change **was made** (the new file is in place
    /// and every reader sees it) but a step after that commit point failed, usually syncing the folder, so it may
    /// not survive a power loss or system crash. Do not undo or retry the change as if it had failed.
    case durabilityNotConfirmed(path: String, operation: String, errno: Int32, message: String)
    /// `.storeClosed(path:)`: an operation on a file store after ``FileBackedStore/close()``. Open a new store on
    /// the file to use it again.
    case storeClosed(path: String)
    /// `.tooLarge(path:size:limit:)`: a write refused because the file would be `size` bytes, more than the `limit`
    /// a store file may have (the same limit every open applies), or because what `path` names (a database store's
    /// value, or a key's index entry) would be more than its limit. Nothing was written; the stored values are as
    /// they were.
    case tooLarge(path: String, size: Int, limit: Int)
    /// `.lockTimedOut(path:holder:waited:)`: a write that gave up after waiting `waited` for the lock of the file at
    /// `path`, which another process held all along (`holder`, its process id, where the system can tell): a stopped
    /// process (Ctrl-Z, a debugger) or a wedged one. Nothing was written; the stored values are as they were. The
    /// limit is ``PrefsConfig/lockTimeout``.
    case lockTimedOut(path: String, holder: Int32?, waited: Duration)
    /// `.damagedFileKeptAside(path:keptAt:reason:)`: a store file that could not be decoded was moved, byte for byte,
    /// to `keptAt` (mode 0600, never deleted by Prefs), and the store went on from no values, as its
    /// ``DamagedFilePolicy`` says. Reported once, when it happens.
    case damagedFileKeptAside(path: String, keptAt: String, reason: String)
    /// `.configuredAfterUse(settings: ["appIdentifier"])`: ``PrefsConfig/configure(_:)`` (or a setter of
    /// ``PrefsConfig/defaultStore`` or ``PrefsConfig/secureStore``) was called after a default store had opened or a
    /// configured one had been used, with these settings different from the ones in use; nothing was changed.
    /// Reported, since `configure` does not throw.
    case configuredAfterUse(settings: [String])
}

extension PrefsError {
    /// What a store adds to the reason of a file it cannot decode: the one step that lets the app write again.
    package static let damagedFileWayOut =
        "; moveDamagedFileAside() keeps it aside and starts afresh (as `prefs repair DOMAIN` does)"

    /// The reason of a ``corruptFile(path:reason:)`` without the way out a store added to it: for a message that
    /// names its own next step (the tool's), or none because the step was taken (the file was kept aside).
    package static func reasonAlone(_ reason: String) -> String {
        reason.hasSuffix(damagedFileWayOut) ? String(reason.dropLast(damagedFileWayOut.count)) : reason
    }
}

extension PrefsError: LocalizedError, CustomStringConvertible {
    /// `print(error)` prints a one-line message that says what went wrong and where.
    public var description: String {
        switch self {
        case .invalidSuiteName(let name, let reason): "invalid suite name \(String(reflecting: name)): \(reason)"
        case .invalidAppIdentifier(let name, let reason):
            "app identifier \(String(reflecting: name)) refused: \(reason)"
        case .unidentifiedUserDefaults(let reason):
            "cannot tell which domain this UserDefaults instance uses (\(reason)); its values are kept in memory only"
        case .separateStandardDomain(let app, let foundation):
            "the standard domain is \(app).plist (the configured appIdentifier), but UserDefaults.standard keeps using "
                + "\(foundation).plist, which exists: values written through one are not seen by the other; move the "
                + "old values once (SuiteFileStore.standard.importValues(from: "
                + "try SuiteFileStore(suiteName: \(String(reflecting: foundation))))) and give code that still "
                + "calls UserDefaults the instance UserDefaults(suiteName: \(String(reflecting: app)))"
        case .conflictingDeclarations(let key, let first, let second):
            Self.conflictDescription(key: key, first: first, second: second)
        case .invalidKey(let key, let reason): "invalid key \(String(reflecting: key)): \(reason)"
        case .typeMismatch(let key, let expected, let found):
            "value for \(String(reflecting: key)) is \(found), expected \(expected); left unchanged"
        case .notAllowed(let key, let value, let allowed):
            "\(value) is not an allowed value of \(String(reflecting: key)) (allowed: \(allowed)); left unchanged"
        case .encodingFailed(let key, let reason): "cannot encode value for \(String(reflecting: key)): \(reason)"
        case .decodingFailed(let key, let reason):
            "cannot decode value for \(String(reflecting: key)): \(reason); left unchanged"
        case .corruptFile(let path, let reason): "\(path) is not a valid preferences file (\(reason)); left untouched"
        case .io(let path, let operation, _, let message): "\(operation) \(path): \(message)"
        case .forced(let key):
            "\(String(reflecting: key)) is forced by the system administrator (managed preferences); not changed"
        case .ambiguousEnvironmentVariable(let name, let keys):
            "environment variable \(name) maps to several keys ("
                + keys.map { String(reflecting: $0) }.joined(separator: ", ") + "); it sets none of them"
        case .durabilityNotConfirmed(let path, let operation, _, let message):
            "the change to \(path) was made, but its durability is not confirmed (\(operation): \(message)); "
                + "it is in effect now but might not survive a power loss"
        case .storeClosed(let path): "the store of \(path) is closed; open a new one to use the file"
        case .lockTimedOut(let path, let holder, let waited):
            "writing \(path.hasSuffix(".lock") ? String(path.dropLast(5)) : path) gave up after waiting "
                + "\(Self.seconds(waited)) for its lock "
                + (holder.map { "(held by process \($0))" } ?? "(held by another process)") + "; nothing was written"
        case .tooLarge(let path, let size, let limit):
            "writing \(path) refused: it would be \(size) bytes, more than the "
                + (limit > 0 && limit.isMultiple(of: 1 << 20) ? "\(limit >> 20) MiB" : "\(limit) bytes")
                + " it may have; nothing was written"
        case .damagedFileKeptAside(let path, let kept, let reason):
            "\(path) could not be read (\(reason)); it was kept as \(kept) and the preferences start afresh"
        case .configuredAfterUse(let settings):
            "PrefsConfig.configure was called after the default stores were in use; "
                + settings.joined(separator: ", ") + " left as they were: configure Prefs first thing at startup, "
                + "before any preference is read"
        }
    }

    /// `1.5 s`, `0.2 s`: a wait, to a tenth of a second.
    private static func seconds(_ duration: Duration) -> String {
        let (whole, fraction) = duration.components
        return "\(whole).\(fraction / 100_000_000_000_000_000) s"
    }

    /// A conflict of defaults names both as `Type = default`; a conflict of types names the types alone.
    private static func conflictDescription(key: String, first: String, second: String) -> String {
        let name = String(reflecting: key)
        if first.contains(" = ") && second.contains(" = ") {
            return "\(name) is declared on one store first as \(first), then as \(second); the first declaration's "
                + "default wins: while nothing is stored both read it, so they agree; give both the same default"
        }
        return "\(name) is declared on one store first as \(first), then as \(second); each reads the stored value "
            + "as its own type, and the \(second) one reads its own default while a value it cannot decode is stored; "
            + "declare one type"
    }

    /// `error.localizedDescription` is the same text as ``description``.
    public var errorDescription: String? { description }
}
