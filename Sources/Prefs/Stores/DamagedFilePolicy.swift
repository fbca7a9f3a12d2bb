/// `SuiteFileStore(suiteName: "group.example", onDamage: .keepAside)` says what a file store does when its file
/// cannot be decoded.
///
/// A file that cannot be decoded is never overwritten. With ``refuse`` it stays where it is: reads give defaults,
/// writes throw its error (``PrefsError/corruptFile(path:reason:)``), ``FileBackedStore/damage`` says so, and the app
/// decides (``FileBackedStore/moveDamagedFileAside()``, `prefs repair`). With ``keepAside`` the store moves it aside
/// itself, byte for byte, as `<name>.damaged-<UTC date and time>` beside it (mode 0600, never deleted by Prefs),
/// goes on from no values, and reports ``PrefsError/damagedFileKeptAside(path:keptAt:reason:)`` once, naming where
/// the file went: an app that wrote no code for a damaged file can still save its settings.
///
/// Only a file that does not decode is moved: one that cannot be read at all (no permission, a folder in its
/// place) is an error of the system, and a vault that does not open (a wrong key looks the same as a damaged vault)
/// is never moved. A UserDefaults suite is moved only once it has stayed unreadable for its grace (another writer
/// may be rewriting it in place). Stores opened on the same file in one process share the policy of the first.
public enum DamagedFilePolicy: Sendable, Equatable {
    /// `.refuse`: the damaged file stays; writes throw until it is repaired or moved aside.
    case refuse
    /// `.keepAside`: the damaged file is kept aside and the store starts afresh.
    case keepAside
}
