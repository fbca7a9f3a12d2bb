import Foundation
import Observation
import Prefs
import PrefsTesting
import TestThreads
import Testing

/// A model declared exactly as the README shows: no `store:` anywhere.
@Observable
final class ReaderSettings {
    @ObservationIgnored @StoredValue(key: "zoom") var zoom = 1.0
    @ObservationIgnored @StoredValue(key: "fontName") var fontName = "Serif"
    @ObservationIgnored @StoredValue(key: "recent") var recent: [String] = []
    @ObservationIgnored @SecureStoredValue<String>(key: "syncToken") var syncToken
}

/// Dozens of tests that run in parallel, each writing its own values into models declared inline; none may see
/// another's values, and nothing may reach the real default stores.
@Suite(.isolatedPreferences, .ownThreads)
struct IsolatedPreferencesTests {
    @Test(arguments: 0..<48)
    func eachTestCaseHasItsOwnPreferences(_ index: Int) async throws {
        let settings = ReaderSettings()
        #expect(settings.zoom == 1.0, "a fresh test starts from the declared defaults")
        #expect(settings.recent.isEmpty)
        #expect(settings.syncToken == nil)

        settings.zoom = Double(index)
        settings.fontName = "Font \(index)"
        settings.$recent.append("file-\(index)")
        try settings.$syncToken.set("token-\(index)")
        // Let other test cases run and write their own values in between.
        await Task.yield()

        let again = ReaderSettings()
        #expect(again.zoom == Double(index))
        #expect(again.fontName == "Font \(index)")
        #expect(again.recent == ["file-\(index)"])
        #expect(again.syncToken == "token-\(index)")

        // A child task inherits the test's stores.
        let fromChild = await Task { ReaderSettings().zoom }.value
        #expect(fromChild == Double(index))

        let isolation = try #require(PrefsIsolation.current)
        #expect(settings.$zoom.store === isolation.defaultStore)
        #expect(try isolation.defaultStore.value(forKey: "zoom") == .double(Double(index)))
        #expect(try isolation.secureStore.value(forKey: "syncToken") == .string("token-\(index)"))
    }

    /// The testing article's example: `PrefsIsolation.current`'s `defaultStore` and `secureStore` are the stores
    /// wrappers without `store:` use in the test, to seed before a model reads and to check after it wrote.
    @Test func aSeededZoomIsReadAndTheTokenStored() throws {
        let isolation = try #require(PrefsIsolation.current)
        try isolation.defaultStore.setValue(.double(2), forKey: "zoom")
        let settings = ReaderSettings()
        #expect(settings.zoom == 2)
        try settings.$syncToken.set("t")
        #expect(try isolation.secureStore.value(forKey: "syncToken") == .string("t"))
    }

    @Test func nothingReachesTheProcessDefaults() async throws {
        let key = "isolated-\(UUID().uuidString)"
        let flag = StoredValue(key: key, default: false)
        flag.wrappedValue = true
        #expect(flag.wrappedValue)
        let outside = await Task.detached { PrefsConfig.defaultStore }.value
        #expect(outside !== flag.store, "a detached task is not part of the test's scope")
        #expect(try outside.value(forKey: key) == nil)
    }
}

@Test(.ownThreads) func outsideTheTraitTheProcessDefaultsApply() {
    #expect(PrefsIsolation.current == nil)
    #expect(PrefsConfig.defaultStore === SuiteFileStore.standard)
}

/// A model with the `storage:` form, as Boutique and `@AppStorage` users declare it.
final class SharedSettings {
    @StoredValue(key: "sharedSetting", storage: UserDefaults(suiteName: "group.prefs-isolation-test")!)
    var sharedSetting = false
}

@Suite(.isolatedPreferences, .ownThreads)
struct IsolatedStorageFormTests {
    /// Run twice (two cases, and every run of the suite): a value left behind by an earlier case or run fails it.
    @Test(arguments: 0..<2)
    func storageFormTouchesNoFileAndStartsFresh(_ run: Int) {
        let config =
            ProcessInfo.processInfo.environment["XDG_CONFIG_HOME"].map { URL(filePath: $0) }
            ?? FileManager.default.homeDirectoryForCurrentUser.appending(path: ".config")
        let file = config.appending(path: "group.prefs-isolation-test.plist")
        let settings = SharedSettings()
        #expect(settings.sharedSetting == false, "run \(run) starts from the declared default")
        settings.sharedSetting = true
        #expect(settings.sharedSetting)
        #expect(!FileManager.default.fileExists(atPath: file.path), "no file under the XDG config folder")
        #expect(
            UserDefaults(suiteName: "group.prefs-isolation-test")!.object(forKey: "sharedSetting") == nil,
            "the real instance is neither read nor written")
    }

    @Test func wrappersGivenOneInstanceShareTheirValue() {
        let defaults = UserDefaults(suiteName: "group.prefs-isolation-shared")!
        let first = StoredValue(PrefKey("k", default: 0), storage: defaults)
        let second = StoredValue(PrefKey("k", default: 0), storage: defaults)
        first.set(3)
        #expect(second.wrappedValue == 3)
        @StoredValue(key: "k", storage: .standard) var standard = 0
        standard = 4
        #expect(PrefsIsolation.current?.defaultStore[PrefKey("k", default: 0)] == 4, "standard is the test's store")
    }

    /// Real `UserDefaults` instances of one suite share their values: a model made again with a new instance reads
    /// what the first one wrote. Run twice: each case starts fresh.
    @Test(arguments: 0..<2)
    func instancesOfOneSuiteShareTheirStandIn(_ run: Int) {
        let first = SharedSettings()
        #expect(first.sharedSetting == false, "run \(run) starts from the declared default")
        first.sharedSetting = true
        #expect(SharedSettings().sharedSetting, "a second instance of the suite reads the first one's write")
        let other = StoredValue(
            PrefKey("sharedSetting", default: false), storage: UserDefaults(suiteName: "group.other")!)
        #expect(other.wrappedValue == false, "another suite has a stand-in of its own")
        @StoredValue(key: "unnamed", storage: UserDefaults()) var unnamed = 0
        unnamed = 5
        #expect(
            PrefsIsolation.current?.defaultStore[PrefKey("unnamed", default: 0)] == 5,
            "an instance without a suite name is the standard domain: the test's store")
    }

    /// The README's form for frequent writes follows the test's store: nothing reaches the real standard domain.
    @Test func aDeferringStoreMadeFromTheDefaultStoreIsTheTestsStore() throws {
        let quick = PrefsConfig.defaultStore.deferringWrites()
        let volume = StoredValue(key: "volume", default: 0.5, store: quick)
        volume.set(0.7)
        try quick.flush()
        let isolated = try #require(PrefsIsolation.current?.defaultStore)
        #expect(quick === isolated)
        #expect(isolated[PrefKey("volume", default: 0.5)] == 0.7)
    }
}

/// A model whose font size allows 8 to 72, for the report tests.
final class ReportedSettings {
    @StoredValue(key: "fontSize", schema: .init("Font size, in points", range: 8...72)) var fontSize = 13
}

/// What the library reports inside `.isolatedPreferences` stays with the test that caused it, for it to check.
@Suite(.isolatedPreferences, .ownThreads)
struct IsolatedReportTests {
    @Test(arguments: 0..<8)
    func aValueTheKeyDoesNotAllowIsReportedToItsOwnTest(_ index: Int) throws {
        #expect(PrefsIsolation.reports.isEmpty, "every test case starts with no report")
        try PrefsIsolation.current!.defaultStore.setValue(.int(Int64(300 + index)), forKey: "fontSize")
        #expect(ReportedSettings().fontSize == 13)
        let reports = PrefsIsolation.reports
        #expect(reports.count == 1, "\(reports)")
        #expect(reports.first?.key == "fontSize" && reports.first?.operation == .read)
        let text = reports.map { "\($0.error)" }.joined()
        #expect(text.contains("\(300 + index) is not an allowed value"), "\(reports)")
        #expect(PrefsIsolation.takeReports().count == 1)
        #expect(PrefsIsolation.reports.isEmpty, "taken")
        // A write the wrapper cannot make is reported too, and the value stays.
        let settings = ReportedSettings()
        settings.fontSize = 99
        #expect(settings.fontSize == 13)
        #expect(PrefsIsolation.takeReports().contains { $0.operation == .write && $0.key == "fontSize" })
    }

    @Test func outsideTheTraitThereAreNoReportsToRead() async {
        let reports = await Task.detached { PrefsIsolation.reports }.value
        #expect(reports.isEmpty)
    }
}
