public import Foundation
import Synchronization

extension PrefsConfig {
    /// `PrefsConfig.publishSchema()` writes the schema of the keys this app declared, so that `prefs list-keys`,
    /// `prefs describe`, `prefs check` and a checked `prefs write` know them without running the app.
    ///
    /// Call it once at launch, after the app's settings are declared (its settings model made, its typed keys
    /// registered with `store.register(.key)`). Every key declared by a wrapper or a registration on the standard
    /// domain, or on a suite of the preferences folder, is published: its type, its default, and what its
    /// ``PrefKey/Schema`` says. The schema of each domain goes to `<folder>/<domain>.json`, merged with what is
    /// already there (a key declared in this process replaces its entry; others stay, so processes of one app that
    /// declare different keys build one schema). A file that would not change is not written, so the call costs a
    /// read of each file at a launch that changed nothing.
    ///
    /// Nothing here stops the app: a file that cannot be written, or that a later version of Prefs wrote (it is left
    /// alone), is reported to ``errorHandler``; a damaged one is replaced and reported. Inside a test under
    /// `.isolatedPreferences` nothing is published. See <doc:DescribingYourPreferences>.
    ///
    /// - Parameter folder: Where to write; by default the user's `$XDG_DATA_HOME/prefs/schemas`. A packager passes
    ///   the system folder the package installs (`/usr/share/prefs/schemas`).
    /// - Returns: The files written.
    @discardableResult
    public static func publishSchema(into folder: URL? = nil) -> [URL] {
        if DefaultStores.insideIsolatedTest { return [] }
        let standard = DefaultStores.state.withLock { $0.standard }?.schemaDomain
        let prefix = DefaultStores.state.withLock { $0.environmentPrefix }
        return DeclaredKeys.publish(into: folder ?? SchemaFiles.userFolder) { $0 == standard ? prefix : nil }
    }
}
