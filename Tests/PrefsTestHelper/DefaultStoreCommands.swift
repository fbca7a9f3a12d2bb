import Foundation
import Observation
import Prefs
import Synchronization

/// A settings model declared the README way: wrappers without `store:`, so they use the default stores.
@Observable
final class AppSettings {
    @ObservationIgnored @StoredValue(key: "zoom") var zoom = 1.0
    @ObservationIgnored @StoredValue(key: "theme") var theme = "light"
    @ObservationIgnored @StoredValue(key: "lastExport") var lastExport: Date?
    @ObservationIgnored @SecureStoredValue<String>(key: "token") var token
}

/// Commands for DefaultStoresProcessTests: a fresh app process meeting damaged files, relocated homes and renamed
/// binaries through the default stores, printing what it saw.
enum DefaultStoreCommands {
    static let reports = Mutex<[String]>([])

    static func run(_ arguments: [String]) -> Bool {
        guard let command = arguments.first else { return false }
        switch command {
        case "launch":
            // launch [APP]: starts like an app (appIdentifier first when given), reads and writes through the
            // default stores, then prints each value and every report.
            installCountingHandler()
            // PREFS_TEST_DAMAGE=refuse: the app chose to leave a damaged standard domain where it is.
            let refuse = ProcessInfo.processInfo.environment["PREFS_TEST_DAMAGE"] == "refuse"
            PrefsConfig.configure(
                PrefsConfiguration(
                    appIdentifier: arguments.count > 1 ? arguments[1] : nil,
                    damagedStandardDomain: refuse ? .refuse : .keepAside))
            let settings = AppSettings()
            print("zoom=\(settings.zoom) theme=\(settings.theme) lastExport=\(String(describing: settings.lastExport))")
            print("token=\(settings.token ?? "nil")")
            settings.zoom = 2
            print("after-set zoom=\(settings.zoom)")
            print("standard=\(SuiteFileStore.standard.url.path)")
            finish()
        case "rename-late":
            // rename-late APP: opens the standard domain, then tries to rename the app.
            installCountingHandler()
            let before = SuiteFileStore.standard.url.lastPathComponent
            PrefsConfig.configure(PrefsConfiguration(appIdentifier: arguments[1]))
            print("before=\(before) identifier=\(PrefsConfig.configuration.appIdentifier)")
            print("standard=\(SuiteFileStore.standard.url.lastPathComponent)")
            finish()
        case "store-late":
            // store-late: configures a default store twice (the second before any use wins), uses it through a
            // wrapper, then tries to replace it, by configure and by the setter; prints what each wrapper reads.
            installCountingHandler()
            PrefsConfig.configure(PrefsConfiguration(defaultStore: InMemoryStore()))
            let chosen = InMemoryStore()
            PrefsConfig.configure(PrefsConfiguration(defaultStore: chosen))
            let first = StoredValue(key: "n", default: 0)
            first.wrappedValue = 5
            PrefsConfig.configure(PrefsConfiguration(defaultStore: InMemoryStore()))
            PrefsConfig.defaultStore = InMemoryStore()
            PrefsConfig.configure(PrefsConfiguration(defaultStore: chosen))  // the same store: nothing to refuse
            print("chosen=\((try? chosen.value(forKey: "n")).flatMap { $0 }.map { "\($0)" } ?? "nil")")
            print("first=\(first.wrappedValue) later=\(StoredValue(key: "n", default: 0).wrappedValue)")
            finish()
        case "move-xdg":
            // move-xdg DIR: opens the standard domain, then points the XDG variables elsewhere and opens a suite
            // and the default vault: every default store must stay where the first one was resolved.
            installCountingHandler()
            let standard = SuiteFileStore.standard.url.deletingLastPathComponent().path
            setenv("XDG_CONFIG_HOME", arguments[1], 1)
            setenv("XDG_DATA_HOME", arguments[1], 1)
            do {
                let suite = try SuiteFileStore(suiteName: "moved.suite")
                try SecureStoredValue<String>(key: "secret").set("s")
                print("standard=\(standard)")
                print("suite=\(suite.url.deletingLastPathComponent().path)")
            } catch {
                print("error=\(error)")
            }
            finish()
        default:
            return false
        }
        return true
    }

    private static func installCountingHandler() {
        PrefsConfig.errorHandler = { report in
            reports.withLock { $0.append("\(report)") }
        }
    }

    private static func finish() {
        let all = reports.withLock { $0 }
        for report in all { print("report: \(report)") }
        print("reports=\(all.count)")
    }
}
