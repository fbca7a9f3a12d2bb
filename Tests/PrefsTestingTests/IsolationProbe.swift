import Foundation
import Prefs
import PrefsTestSupport
import PrefsTesting
import TestThreads
import Testing

/// A new user's test suite using only documented forms, run by ``NothingOutsideTheTestTests`` in a child process
/// with a private, read-only `HOME` and empty XDG folders (skipped in the normal run).
@Suite(
    .isolatedPreferences, .enabled(if: ProcessInfo.processInfo.environment["PREFS_ISOLATION_PROBE"] != nil), .ownThreads
)
struct IsolationProbe {
    @Test(arguments: 0..<6)
    func everyDocumentedForm(_ index: Int) async throws {
        let settings = ReaderSettings()
        #expect(settings.zoom == 1.0)
        settings.zoom = Double(index)
        try settings.$syncToken.set("token-\(index)")
        #expect(launchCount.wrappedValue == 0)
        launchCount.wrappedValue = index
        AppSettings.accent.wrappedValue = "color-\(index)"
        try AppSettings.token.set("secret-\(index)")
        await Task.yield()
        #expect(ReaderSettings().zoom == Double(index))
        #expect(launchCount.wrappedValue == index)
        #expect(AppSettings.accent.wrappedValue == "color-\(index)")
        #expect(AppSettings.token.wrappedValue == "secret-\(index)")
        #expect(PrefsConfig.defaultStore === PrefsIsolation.current?.defaultStore)
        // A described key, and one declared on a real suite of the preferences folder (opening and declaring write
        // nothing): publishing inside the trait writes no schema anywhere.
        let fontSize = StoredValue(key: "fontSize", default: 13, schema: .init("Font size", range: 8...72))
        fontSize.wrappedValue = 300
        #expect(fontSize.wrappedValue == 13)
        _ = StoredValue(
            key: "shared", default: 1, schema: "Declared on a real suite",
            store: try SuiteFileStore(suiteName: "probe"))
        #expect(PrefsConfig.publishSchema().isEmpty)
    }

    /// A vault the test opens in its own folder: its rollback record must not reach `$XDG_STATE_HOME`.
    @Test func aVaultInATemporaryFolder() throws {
        let folder = try TempDir("prefs-probe-vault")
        defer { folder.cleanup() }
        let url = folder.file("secrets.vault")
        let vault = try EncryptedFileStore(url: url, key: .keyFile(folder.file("secrets.key")))
        try vault.set("s3cret", for: PrefKey<String?>("token", default: nil))
        try vault.set("again", for: PrefKey<String?>("token", default: nil))
        let reopened = try EncryptedFileStore(url: url, key: .keyFile(folder.file("secrets.key")))
        #expect(try reopened.value(for: PrefKey<String?>("token", default: nil)) == "again")
    }
}
