// The code samples of the DocC articles (Sources/Prefs/Prefs.docc), compiled and run so they cannot rot.
// Each section names its article; the article shows the same declarations, without the enclosing namespace enum.
// Samples use the public API only (no `@testable` member is touched here).

import Foundation
import Observation
import PrefsTestSupport
import Synchronization
import TestThreads
import Testing

@testable import Prefs

// MARK: - GettingStarted.md

enum GettingStarted {
    @Observable
    final class Preferences {
        @ObservationIgnored @StoredValue(key: "hasHapticsEnabled") var hasHapticsEnabled = false
        @ObservationIgnored @StoredValue(key: "lastOpenedDate") var lastOpenedDate: Date? = nil
        @ObservationIgnored @StoredValue(key: "currentTheme") var currentTheme: Theme = .light
        @ObservationIgnored @StoredValue(key: "favoriteTags") var favoriteTags: [String] = []
        @ObservationIgnored @StoredValue(.doTheThing) var doTheThing
    }

    final class Session {
        @SecureStoredValue<String>(key: "authToken") var authToken
    }
}

// MARK: - TypedKeys.md

extension PrefKey where Value == Theme {
    static let theme = PrefKey("theme", default: .light)
}

extension PrefKey where Value == Int {
    static let fontSize = PrefKey("fontSize", default: 14)
}

extension PrefKey where Value == Date? {
    static let lastSync = PrefKey("lastSync", default: nil)
}

extension PrefKey where Value == Int {
    static let columns = PrefKey("columns", default: { ProcessInfo.processInfo.activeProcessorCount > 8 ? 3 : 2 })
}

enum TypedKeys {
    struct SettingsScreen {
        @StoredValue(.theme) var theme
        @StoredValue(.fontSize) var fontSize
    }

    struct Renderer {
        @StoredValue(.theme) var theme
    }

    struct Version: Codable, Sendable, Equatable, PrefValueConvertible {
        var major: Int
        var minor: Int

        init(major: Int, minor: Int) {
            self.major = major
            self.minor = minor
        }

        init(prefValue: PrefValue) throws {
            guard case .string(let text) = prefValue else {
                throw PrefsError.typeMismatch(key: "", expected: "version string", found: "\(prefValue)")
            }
            let parts = text.split(separator: ".").compactMap { Int($0) }
            guard parts.count == 2 else {
                throw PrefsError.typeMismatch(key: "", expected: "major.minor", found: text)
            }
            self.init(major: parts[0], minor: parts[1])
        }

        var prefValue: PrefValue { .string("\(major).\(minor)") }
    }
}

// MARK: - TestingWithInMemoryStore.md

enum TestingExample {
    @Observable
    final class ReaderSettings {
        @ObservationIgnored @StoredValue(key: "fontSize") var fontSize = 14
        @ObservationIgnored @StoredValue(key: "theme") var theme: Theme = .light
        @ObservationIgnored @SecureStoredValue<String>(key: "syncToken") var syncToken

        func enlarge() { $fontSize.update { $0 = min($0 + 2, 32) } }
    }

    final class InjectedSettings {
        @StoredValue var fontSize: Int

        init(store: any KeyValueStore = PrefsConfig.defaultStore) {
            _fontSize = StoredValue(.fontSize, store: store)
        }
    }
}

// MARK: - Concurrency.md

extension PrefKey where Value == Bool {
    static let syncEnabled = PrefKey("syncEnabled", default: true)
}

enum ConcurrencyExample {
    @MainActor @Observable
    final class AppearanceModel {
        @ObservationIgnored @StoredValue(key: "fontSize") var fontSize = 14
        @ObservationIgnored @StoredValue(key: "theme") var theme: Theme = .light
    }

    @MainActor
    static func startSync(model: AppearanceModel) -> Task<Void, Never> {
        let fontSize = model.$fontSize  // Sendable
        return Task.detached {
            fontSize.set(18)  // runs off the main actor
        }
    }

    actor SyncService {
        let store: any KeyValueStore
        init(store: any KeyValueStore) { self.store = store }

        func recordSync(at date: Date) {
            if store[.syncEnabled] { store[.lastSync] = date }
        }
    }
}

// MARK: - MigratingFromUserDefaultsPersistor.md

extension PrefKey where Value == Bool {
    static let isOmnibarVisible = PrefKey("new-tab-page.omnibar.is-visible", default: true)
}

extension PrefKey where Value == [String: String] {
    static let userPreferences = PrefKey("user.preferences", default: [:])
}

extension PrefKey where Value == Date {
    static let lastUpdateCheck = PrefKey("last.update.check", default: .distantPast)
}

extension PrefKey where Value == Theme? {
    static let selectedTheme = PrefKey("app.theme", default: nil)
}

enum PersistorMigration {
    protocol AppearancePreferencesPersistor {
        var isOmnibarVisible: Bool { get set }
        var userPreferences: [String: String] { get set }
        var lastUpdateCheck: Date { get set }
        var selectedTheme: Theme? { get set }
    }

    struct AppearancePreferencesPersistorImpl: AppearancePreferencesPersistor {
        @StoredValue var isOmnibarVisible: Bool
        @StoredValue var userPreferences: [String: String]
        @StoredValue var lastUpdateCheck: Date
        @StoredValue var selectedTheme: Theme?

        init(store: any KeyValueStore = PrefsConfig.defaultStore) {
            _isOmnibarVisible = StoredValue(.isOmnibarVisible, store: store)
            _userPreferences = StoredValue(.userPreferences, store: store)
            _lastUpdateCheck = StoredValue(.lastUpdateCheck, store: store)
            _selectedTheme = StoredValue(.selectedTheme, store: store)
        }
    }

    /// The same persistor for callers that want to handle storage errors themselves.
    struct ThrowingAppearancePersistor {
        let store: any KeyValueStore

        func isOmnibarVisible() throws -> Bool { try store.value(for: .isOmnibarVisible) }
        func setOmnibarVisible(_ visible: Bool) throws { try store.set(visible, for: .isOmnibarVisible) }
        func selectedTheme() throws -> Theme? { try store.value(for: .selectedTheme) }
        func setSelectedTheme(_ theme: Theme?) throws { try store.set(theme, for: .selectedTheme) }
    }
}

// MARK: - MigratingFromBoutique.md

enum BoutiqueMigration {
    @Observable
    final class Preferences {
        @ObservationIgnored @StoredValue var hasHapticsEnabled: Bool
        @ObservationIgnored @StoredValue var currentTheme: Theme

        init(store: any KeyValueStore = PrefsConfig.defaultStore) {
            _hasHapticsEnabled = StoredValue(key: "hasHapticsEnabled", default: false, store: store)
            _currentTheme = StoredValue(key: "currentTheme", default: .light, store: store)
        }
    }

    @Observable
    final class SecurityManager {
        @ObservationIgnored @SecureStoredValue<String> var authToken: String?
        @ObservationIgnored @SecureStoredValue<[String]> var trustedDevices: [String]?

        init(vault: any KeyValueStore = PrefsConfig.secureStore) {
            _authToken = SecureStoredValue(key: "com.example.auth.authToken", store: vault)
            _trustedDevices = SecureStoredValue(key: "trustedDevices", store: vault)
        }
    }
}

// MARK: - MigratingFromAppStorage.md

func importFromUserDefaults<Value: Codable & Sendable & Equatable>(
    _ key: PrefKey<Value>, from defaults: UserDefaults = .standard, into store: any KeyValueStore
) throws {
    guard try store.allValues()[key.name] == nil,  // the user has no value yet
        let old = defaults.object(forKey: key.name) as? Value
    else { return }
    try store.set(old, for: key)
}

// MARK: - MigratingFromDefaults.md

extension PrefKey where Value == Bool {
    static let isUnicornMode = PrefKey("isUnicornMode", default: false)
}

// MARK: - LayeredPreferences.md

extension PrefKey where Value == Int {
    static let volume = PrefKey("volume", default: 5)
}

enum LayeredPreferences {
    @Observable
    final class Settings {
        @ObservationIgnored @StoredValue(key: "volume") var volume = 5
        @ObservationIgnored @StoredValue(key: "verbose") var verbose = false
    }

    /// The managed-values sample; returns what it printed.
    static func writeVolume(settings: Settings, store: any KeyValueStore) -> (isEditable: Bool, printed: String?) {
        var printed: String?
        let isEditable = !settings.$volume.isForced

        do {
            try store.set(7, for: .volume)
        } catch PrefsError.forced(let key) {
            printed = "\(key) is managed by the administrator"
        } catch {
            printed = "\(error)"
        }
        return (isEditable, printed)
    }

    static func argumentsStore(url: URL) throws -> FileStore {
        let store = try FileStore(url: url)
        store.addLayer(.arguments)
        return store
    }

    /// Compiled, not run here: the prefix is process-wide (LayerProcessTests runs it in a child process).
    static func configureEnvironment() {
        PrefsConfig.configure(PrefsConfiguration(environmentPrefix: "MYAPP_"))
    }

    static func userValues(settings: Settings) {
        settings.volume = 6  // the user's value, durable once set returns
        settings.$volume.reset()  // removed: the next layer shows through
    }

    static func systemStore(_ store: FileStore) {
        store.addLayer(.systemFiles(domain: "com.example.server"))
    }

    static func register(_ store: any KeyValueStore) {
        store.register(defaults: ["volume": .int(5), "theme": .string("light")])
        store.register(.fontSize)
    }
}

// MARK: - Tests

/// True when the test process runs with private XDG folders (as `make test` and `make coverage` run it), so tests
/// may use the default stores without touching the real ~/.config or ~/.local/share.
private let privateXDGFolders: Bool = {
    let environment = ProcessInfo.processInfo.environment
    guard let config = environment["XDG_CONFIG_HOME"], let data = environment["XDG_DATA_HOME"] else { return false }
    let home = FileManager.default.homeDirectoryForCurrentUser.path(percentEncoded: false)
    return !config.hasPrefix(home + "/.config") && !data.hasPrefix(home + "/.local")
}()

@Suite(.ownThreads)
struct DocumentationExamplesTests {
    @Test func layeredPreferencesSamplesBehaveAsTheArticleSays() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        // The article's /etc/xdg/managed-preferences, moved into the test's folder (owned by this user, mode 0755).
        let managed = directory.file("etc/xdg/managed-preferences")
        try FileManager.default.createDirectory(at: managed, withIntermediateDirectories: true)
        for folder in ["", "etc", "etc/xdg", "etc/xdg/managed-preferences"] {
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory.path(folder))
        }
        let forced = managed.appending(path: "com.example.server.plist")
        try PropertyListFormat.encode(["volume": .int(2)]).write(to: forced)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: forced.path)
        let store = try LayeredPreferences.argumentsStore(url: directory.file("server.json"))
        store.hub.layers.enableSystem(
            domain: "com.example.server", folders: [],
            managed: ManagedLocation(folder: managed, checkedFrom: directory.path, owner: getuid()))
        let settings = PrefsConfig.withDefaultStore(store) { LayeredPreferences.Settings() }
        #expect(settings.volume == 2)
        let written = LayeredPreferences.writeVolume(settings: settings, store: store)
        #expect(!written.isEditable && written.printed == "volume is managed by the administrator")

        let plain = InMemoryStore()
        let other = PrefsConfig.withDefaultStore(plain) { LayeredPreferences.Settings() }
        #expect(try plain.value(forKey: "volume") == .int(5), "the declaration registered its default")
        LayeredPreferences.userValues(settings: other)
        #expect(other.volume == 5 && other.$volume.layer == .registered)
        LayeredPreferences.register(plain)
        #expect(try plain.value(forKey: "theme") == .string("light"))
        #expect(try plain.value(for: .fontSize) == 14 && plain.layer(ofKey: "fontSize") == .registered)
        #expect(try plain.allValues().isEmpty)
    }

    @Test(.enabled(if: privateXDGFolders, "needs private XDG folders: run through make test or make coverage"))
    func gettingStartedWithTheDefaultStores() async throws {
        let prefs = GettingStarted.Preferences()
        prefs.$currentTheme.reset()
        prefs.$favoriteTags.set([])

        prefs.currentTheme = .dark
        prefs.$lastOpenedDate.set(.now)
        prefs.$hasHapticsEnabled.toggle()
        prefs.$favoriteTags.append("swift")
        #expect(prefs.currentTheme == .dark)
        #expect(prefs.favoriteTags == ["swift"])

        // The default store is the standard UserDefaults domain, in Foundation's folder and format.
        let standard = try #require(prefs.$currentTheme.store as? SuiteFileStore)
        #expect(standard === SuiteFileStore.standard)
        #expect(standard.url.deletingLastPathComponent() == SuiteFileStore.preferencesDirectory())
        #expect(FileManager.default.fileExists(atPath: standard.url.path(percentEncoded: false)))
        #expect(try standard.value(forKey: "currentTheme") == .string("dark"))

        let seen = prefs.$currentTheme.values
        prefs.$currentTheme.reset()
        #expect(try await first(2, of: seen) == [.dark, .light])

        // A secret goes to the default vault; its key file lives in the config folder, apart from the data.
        let session = GettingStarted.Session()
        try session.$authToken.set("eyJhbGciOiJIUzI1NiJ9")
        #expect(session.authToken == "eyJhbGciOiJIUzI1NiJ9")
        let location = EncryptedFileStore.defaultLocation(appIdentifier: PrefsConfig.configuration.appIdentifier)
        let vaultBytes = try Data(contentsOf: location.vault)
        #expect(vaultBytes.range(of: Data("eyJhbGciOiJIUzI1NiJ9".utf8)) == nil)
        #expect(vaultBytes.range(of: Data("authToken".utf8)) == nil)
        #expect(FileManager.default.fileExists(atPath: location.keyFile.path(percentEncoded: false)))
        try session.$authToken.reset()
        #expect(session.authToken == nil)
    }

    @Test func typedKeysAgreeEverywhere() throws {
        let store = InMemoryStore()
        let screen = TypedKeys.SettingsScreen(
            theme: StoredValue(.theme, store: store), fontSize: .init(.fontSize, store: store))
        let renderer = TypedKeys.Renderer(theme: StoredValue(.theme, store: store))
        #expect(renderer.theme == .light)
        screen.theme = .dark
        #expect(renderer.theme == .dark)

        #expect(try store.value(for: .fontSize) == 14)
        try store.set(18, for: .fontSize)
        #expect(screen.fontSize == 18)
        try store.removeValue(for: .fontSize)
        #expect(screen.fontSize == 14)

        #expect(try store.value(for: .lastSync) == nil)
        let now = Date.now
        try store.set(now, for: .lastSync)
        #expect(try store.value(forKey: "lastSync") == .date(now))
        try store.set(nil, for: .lastSync)
        #expect(try store.value(forKey: "lastSync") == nil)

        // Enums with a raw value store the raw value.
        #expect(try store.value(forKey: "theme") == .string("dark"))

        // A computed default: the closure's answer while nothing is stored, never registered or stored.
        let expected = ProcessInfo.processInfo.activeProcessorCount > 8 ? 3 : 2
        let columns = StoredValue(.columns, store: store)
        #expect(columns.wrappedValue == expected && store.registeredDefault(forKey: "columns") == nil)
        columns.set(5)
        #expect(try store.value(for: .columns) == 5)
        columns.reset()
        #expect(try store.value(for: .columns) == expected && store.value(forKey: "columns") == nil)
    }

    @Test func customRepresentation() throws {
        let store = InMemoryStore()
        let key = PrefKey("minimumVersion", default: TypedKeys.Version(major: 1, minor: 0))
        try store.set(TypedKeys.Version(major: 2, minor: 1), for: key)
        #expect(try store.value(forKey: "minimumVersion") == .string("2.1"))
        #expect(try store.value(for: key) == TypedKeys.Version(major: 2, minor: 1))

        try store.setValue(.string("two"), forKey: "minimumVersion")
        #expect(throws: PrefsError.typeMismatch(key: "minimumVersion", expected: "major.minor", found: "two")) {
            try store.value(for: key)
        }
    }

    @Test func customStoreWorksWithWrappersAndObservers() async throws {
        let store = RemoteConfigStore()
        @StoredValue(key: "newEditor", store: store) var newEditor: Bool = false
        @StoredValue(key: "maxUploads", store: store) var maxUploads: Int = 3

        let editorValues = $newEditor.values
        let changedKeys = store.changedKeys()
        store.apply(download: ["newEditor": .bool(true), "maxUploads": .int(3)])
        #expect(newEditor)
        #expect(maxUploads == 3)
        // Only the keys whose values changed were announced: maxUploads still reads 3.
        #expect(try await first(2, of: editorValues) == [false, true])
        #expect(try await first(2, of: changedKeys).sorted() == ["maxUploads", "newEditor"])

        // Local overrides go through the same protocol, including atomic updates.
        $maxUploads.update { $0 += 2 }
        #expect(maxUploads == 5)
        #expect(try store.allValues() == ["newEditor": .bool(true), "maxUploads": .int(5)])
    }

    @Test func anUpdateOfAStoreOfTheAppsOwnIsAtomicWithinTheProcess() async throws {
        let store = RemoteConfigStore()
        let counter = StoredValue(key: "counter", default: 0, store: store)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask { for _ in 0..<50 { counter.update { $0 += 1 } } }
            }
        }
        #expect(counter.wrappedValue == 400)
        try store.removeValue(forKey: "counter")
        #expect(counter.wrappedValue == 0)
    }

    @Test func observingChanges() async throws {
        let store = InMemoryStore()
        let theme = StoredValue(.theme, store: store)
        let fontSize = StoredValue(.fontSize, store: store)

        let themes = theme.values
        let keys = store.changedKeys(["theme", "fontSize"])
        theme.set(.dark)
        theme.set(.dark)  // not repeated: values yields distinct changes only
        try store.set(.system, for: .theme)
        fontSize.set(16)
        #expect(try await first(3, of: themes) == [.light, .dark, .system])
        #expect(try await first(3, of: keys) == ["theme", "theme", "fontSize"])

        let changed = Mutex(false)
        withObservationTracking {
            _ = theme.wrappedValue
        } onChange: {
            changed.withLock { $0 = true }
        }
        try store.set(.light, for: .theme)
        #expect(changed.withLock { $0 })
    }

    @Test func secureValuesWithEveryKeySource() throws {
        let folder = try TempDir()
        defer { folder.cleanup() }
        let vaultURL = folder.file("data/secrets.vault")
        let keyURL = folder.file("config/secrets.key")

        let vault = try EncryptedFileStore(url: vaultURL, key: .keyFile(keyURL))
        @SecureStoredValue<String>(key: "authToken", store: vault) var authToken
        @SecureStoredValue<Credentials>(key: "api.example.com.credentials", store: vault) var credentials
        try $authToken.set("eyJhbGciOi")
        try $credentials.set(Credentials(accessToken: "a1", refreshToken: "r1"))
        try $credentials.set(\.accessToken, to: "a2")
        #expect(credentials?.accessToken == "a2")
        #expect($credentials.key == "api.example.com.credentials")
        #expect("\($authToken)" == "authToken = <redacted>")

        let keyMode = try FileManager.default.attributesOfItem(atPath: keyURL.path(percentEncoded: false))[
            .posixPermissions]
        #expect((keyMode as? NSNumber)?.intValue == 0o600)

        // Rekey to a passphrase; the key file no longer opens the vault.
        try vault.rekey(to: .passphrase("correct horse battery staple"))
        let reopened = try EncryptedFileStore(url: vaultURL, key: .passphrase("correct horse battery staple"))
        #expect(try reopened.value(forKey: "authToken") == .string("eyJhbGciOi"))
        #expect(throws: VaultError.authenticationFailed) {
            try EncryptedFileStore(url: vaultURL, key: .passphrase("wrong horse"))
        }

        // A raw key from your own secret manager: exactly 32 bytes.
        let raw = Data((0..<32).map { UInt8($0) })
        let rawVault = try EncryptedFileStore(url: folder.file("data/raw.vault"), key: .raw(raw))
        try rawVault.setValue(.string("s3cret"), forKey: "apiKey")
        #expect(
            try EncryptedFileStore(url: folder.file("data/raw.vault"), key: .raw(raw)).value(forKey: "apiKey")
                == .string("s3cret"))
    }

    @Test func testingWithTheDefaultStoreScoped() throws {
        let store = InMemoryStore(["fontSize": .int(30)])
        let vault = InMemoryStore()
        try PrefsConfig.withDefaultStore(store) {
            try PrefsConfig.withDefaultSecureStore(vault) {
                let settings = TestingExample.ReaderSettings()
                settings.enlarge()
                #expect(settings.fontSize == 32)
                settings.enlarge()
                try settings.$syncToken.set("t")
            }
        }
        #expect(try store.value(for: .fontSize) == 32)
        #expect(try vault.value(forKey: "syncToken") == .string("t"))
        #expect(try store.value(forKey: "syncToken") == nil, "each scope replaces one kind of store")
    }

    @Test func testingWithAnInjectedStore() throws {
        Reports.install()
        let store = InMemoryStore(["fontSize": .int(30)])
        let settings = TestingExample.InjectedSettings(store: store)
        #expect(settings.fontSize == 30)

        // A value of the wrong type reads as the default, is reported, and is never overwritten.
        let broken = InMemoryStore(["fontSize": .string("large")])
        let fallback = TestingExample.InjectedSettings(store: broken)
        #expect(fallback.fontSize == 14)
        #expect(Reports.for("fontSize").contains { $0.operation == .read && $0.error is PrefsError })
        #expect(try broken.value(forKey: "fontSize") == .string("large"))
    }

    @Test func concurrencyShapesCompileAndShareState() async throws {
        let store = InMemoryStore()
        let model = await MainActor.run {
            PrefsConfig.withDefaultStore(store) { ConcurrencyExample.AppearanceModel() }
        }
        await ConcurrencyExample.startSync(model: model).value
        #expect(await model.fontSize == 18)
        #expect(try store.value(forKey: "fontSize") == .int(18))

        let service = ConcurrencyExample.SyncService(store: store)
        let now = Date(timeIntervalSinceReferenceDate: 1234.5)
        await service.recordSync(at: now)
        #expect(try store.value(for: .lastSync) == now)
        try store.set(false, for: .syncEnabled)
        await service.recordSync(at: .distantFuture)
        #expect(try store.value(for: .lastSync) == now)
    }

    @Test func persistorMigrationKeepsKeyNamesAndData() throws {
        let folder = try TempDir()
        defer { folder.cleanup() }
        // What the old persistor left in the UserDefaults suite it used.
        let suite = "group.example.migration"
        let store = try SuiteFileStore(suiteName: suite, directory: folder.url)
        try store.replaceAll([
            "new-tab-page.omnibar.is-visible": .bool(false),
            "user.preferences": .dictionary(["layout": .string("compact")]),
        ])

        var persistor: any PersistorMigration.AppearancePreferencesPersistor =
            PersistorMigration.AppearancePreferencesPersistorImpl(store: store)
        #expect(persistor.isOmnibarVisible == false)
        #expect(persistor.userPreferences == ["layout": "compact"])
        #expect(persistor.lastUpdateCheck == .distantPast)
        persistor.selectedTheme = .dark
        #expect(try store.value(forKey: "app.theme") == .string("dark"))
        persistor.selectedTheme = nil
        #expect(try store.value(forKey: "app.theme") == nil)

        let throwing = PersistorMigration.ThrowingAppearancePersistor(store: store)
        try throwing.setOmnibarVisible(true)
        #expect(try throwing.isOmnibarVisible())
        try throwing.setSelectedTheme(.system)
        #expect(try throwing.selectedTheme() == .system)
    }

    @Test func boutiqueValuesAreReadAsTheyAreAndRewrittenNatively() throws {
        // What Boutique's @StoredValue leaves in UserDefaults: JSON data of {"value": …}.
        let store = InMemoryStore([
            "hasHapticsEnabled": .data(Data(#"{"value":true}"#.utf8)),
            "currentTheme": .data(Data(#"{"value":"dark"}"#.utf8)),
        ])
        let prefs = BoutiqueMigration.Preferences(store: store)
        #expect(prefs.hasHapticsEnabled)
        #expect(prefs.currentTheme == .dark)
        prefs.$hasHapticsEnabled.toggle()
        prefs.$currentTheme.set(.system)
        #expect(try store.allValues() == ["hasHapticsEnabled": .bool(false), "currentTheme": .string("system")])

        let folder = try TempDir()
        defer { folder.cleanup() }
        let vault = try EncryptedFileStore(url: folder.file("secrets.vault"), key: .keyFile(folder.file("secrets.key")))
        let security = BoutiqueMigration.SecurityManager(vault: vault)
        try security.$authToken.set("eyJhbGciOi")
        try security.$trustedDevices.append("device-abc")
        try security.$trustedDevices.replace("device-abc", with: "device-xyz")
        #expect(security.authToken == "eyJhbGciOi")
        #expect(security.trustedDevices == ["device-xyz"])
        #expect(try vault.value(forKey: "com.example.auth.authToken") == .string("eyJhbGciOi"))
    }

    @Test func appStorageValuesAreImportedOnce() throws {
        // In-memory UserDefaults state only: the suite is never synchronised, so nothing reaches the disk.
        let defaults = try #require(UserDefaults(suiteName: "doc-import-\(UUID().uuidString.prefix(8))"))
        defaults.set(true, forKey: "doTheThing")
        let store = InMemoryStore()
        try importFromUserDefaults(.doTheThing, from: defaults, into: store)
        #expect(try store.value(for: .doTheThing) == true)

        // Once imported, the new store wins: a later import does not overwrite it.
        try store.set(false, for: .doTheThing)
        try importFromUserDefaults(.doTheThing, from: defaults, into: store)
        #expect(try store.value(for: .doTheThing) == false)
    }

    @Test func defaultsStyleAccess() throws {
        let store = InMemoryStore()
        @StoredValue(.isUnicornMode, store: store) var isUnicornMode
        #expect(!isUnicornMode)
        try store.set(true, for: .isUnicornMode)
        #expect(isUnicornMode)
        $isUnicornMode.reset()
        #expect(try store.value(for: .isUnicornMode) == false)

        // Codable values that Defaults stored as JSON text read as they are.
        try store.setValue(
            .string(#"{"fontScale":1.5,"hasHapticsEnabled":false,"prefersDarkMode":true}"#), forKey: "prefs")
        let prefs = StoredValue(key: "prefs", default: UserPreferences(), store: store)
        #expect(prefs.wrappedValue == UserPreferences(hasHapticsEnabled: false, prefersDarkMode: true, fontScale: 1.5))
    }
}
