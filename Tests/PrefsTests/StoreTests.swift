import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

@Suite(.ownThreads)
struct StoreTests {
    @Test(arguments: Backend.allCases)
    func everyHelperOnEveryBackend(_ backend: Backend) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try backend.open(in: directory)
        let model = SampleModel(store: store)
        model.$currentTheme.set(.dark)
        model.$hasHapticsEnabled.toggle()
        model.$preferences.set(\.fontScale, to: 1.5)
        model.$favoriteTags.append("swfit")
        model.$favoriteTags.replace("swfit", with: "swift")
        model.$favoriteTags.togglePresence("linux")
        model.$featureFlags.update(key: "beta", value: true)
        model.$lastOpenedDate.set(Date(timeIntervalSinceReferenceDate: 1.25))
        model.doTheThing = true

        let check = SampleModel(store: store)
        #expect(check.currentTheme == .dark)
        #expect(check.hasHapticsEnabled)
        #expect(check.preferences.fontScale == 1.5)
        #expect(check.favoriteTags == ["swift", "linux"])
        #expect(check.featureFlags == ["beta": true])
        #expect(check.lastOpenedDate == Date(timeIntervalSinceReferenceDate: 1.25))
        #expect(check.doTheThing)

        model.$currentTheme.reset()
        model.$lastOpenedDate.set(nil)
        #expect(check.currentTheme == .light)
        // The user's value is gone; a raw read shows the default the wrapper declared (registered, as Foundation's
        // register(defaults:) would), and an optional without a value has none.
        #expect(try store.allValues()["currentTheme"] == nil)
        #expect(try store.value(forKey: "currentTheme") == .string("light"))
        #expect(store.layer(ofKey: "currentTheme") == .registered)
        #expect(try store.value(forKey: "lastOpenedDate") == nil)
    }

    @Test(arguments: Backend.allCases)
    func everyValueTypeRoundTripsExactly(_ backend: Backend) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        do {
            let store = try backend.open(in: directory)
            try Fixtures.write(to: store)
            #expect(Fixtures.mismatches(in: store) == [])
        }
        guard backend != .memory else { return }
        // A second process opens the file from scratch.
        let result = try ChildProcess.run(["verify-fixtures", backend.spec(in: directory)])
        #expect(result.lines == ["ok"], "\(result.error)")
    }

    @Test(arguments: Backend.persistent)
    func filesArePrivate(_ backend: Backend) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let nested = try TempDir()
        defer { nested.cleanup() }
        let store = try backend.open(in: directory)
        try store.setValue(.bool(true), forKey: "flag")
        let attributes = try FileManager.default.attributesOfItem(atPath: backend.dataFile(in: directory)!.path)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        // A folder that does not exist yet is created private.
        let file = try FileStore(url: nested.url.appending(path: "a/b/prefs.json"))
        try file.setValue(.int(1), forKey: "x")
        let folder = try FileManager.default.attributesOfItem(atPath: nested.url.appending(path: "a/b").path)
        #expect((folder[.posixPermissions] as? Int) == 0o700)
    }

    @Test(arguments: Backend.allCases)
    func eightTasksUpdatingAtOnceLoseNothing(_ backend: Backend) async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try backend.open(in: directory)
        let tags = StoredValue(key: "tags", default: [Int](), store: store)
        let counter = StoredValue(key: "counter", default: 0, store: store)
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for index in 0..<10 {
                        tags.append(task * 100 + index)
                        counter.update { $0 += 1 }
                    }
                }
            }
        }
        // The long version (8 tasks sharing wrappers on every store, LoadTests) is in the reliability suite.
        #expect(Set(tags.wrappedValue).count == 80)
        #expect(counter.wrappedValue == 80)
    }

    @Test(arguments: [Backend.file, .userDefaults])
    func aCorruptFileIsRefusedAndLeftUntouched(_ backend: Backend) throws {
        Reports.install()
        let directory = try TempDir()
        defer { directory.cleanup() }
        let file = backend.dataFile(in: directory)!
        let garbage = Data("{ not a preferences file".utf8)
        try garbage.write(to: file)
        #expect(throws: PrefsError.self) { try backend.open(in: directory) }
        #expect(try Data(contentsOf: file) == garbage)
    }

    @Test func aFileCorruptedWhileOpenIsNeverOverwritten() async throws {
        Reports.install()
        let directory = try TempDir()
        defer { directory.cleanup() }
        let url = directory.file("prefs.json")
        let store = try FileStore(url: url)
        let key = uniqueKey()
        try store.setValue(.int(1), forKey: key)
        let garbage = Data("garbage".utf8)
        try garbage.write(to: url)  // another program breaks the file
        #expect(throws: PrefsError.self) { try store.setValue(.int(2), forKey: key) }
        StoredValue(key: key, default: 0, store: store).set(3)
        #expect(Reports.for(key).count == 1)
        #expect(try Data(contentsOf: url) == garbage)
    }

    @Test(arguments: [Backend.file, .userDefaults])
    func aFileDamagedForGoodIsReportedOnceAndNeverOverwritten(_ backend: Backend) async throws {
        Reports.install()
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try backend.open(in: directory)
        let key = uniqueKey("damaged")
        try store.setValue(.int(1), forKey: key)
        let file = backend.dataFile(in: directory)!
        let garbage = Data("garbage".utf8)
        try garbage.write(to: file, options: .atomic)
        // Once the grace period is over, reads throw; until then they keep the last good value.
        try await eventually("reads to stop serving the last good value") { (try? store.value(forKey: key)) != .int(1) }
        #expect(throws: PrefsError.self) { try store.value(forKey: key) }
        #expect(throws: PrefsError.self) { try store.setValue(.int(2), forKey: key) }
        // The reload that finds the file damaged for good reports it just after reads start to throw.
        try await eventually("the damaged file to be reported") { !Reports.naming(directory).isEmpty }
        #expect(Reports.naming(directory).count == 1)
        #expect(try Data(contentsOf: file) == garbage)
    }

    /// StoresAndBackends: "Stores opened on the same file in one process share their state."
    @Test func storesOpenedOnOneFileShareTheirState() async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let url = directory.file("settings.json")
        let one = try FileStore(url: url)
        let other = try FileStore(url: url)
        let key = uniqueKey("theme")
        let announced = other.changedKeys([key])
        let theme = StoredValue(key: key, default: Theme.light, store: other)
        try one.set(Theme.dark, for: PrefKey(key, default: Theme.light))
        // Seen at once through the other store, without waiting for the file watcher.
        #expect(try other.value(forKey: key) == .string("dark"))
        #expect(theme.wrappedValue == .dark)
        #expect(try await first(1, of: announced) == [key])

        let suite = "promises.\(UUID().uuidString.prefix(8))"
        let suiteOne = try SuiteFileStore(suiteName: suite, directory: directory.url)
        let suiteOther = try SuiteFileStore(suiteName: suite, directory: directory.url)
        try suiteOne.setValue(.int(3), forKey: key)
        #expect(try suiteOther.value(forKey: key) == .int(3))
    }

    @Test func fileStoreReplaceAllIsOneDurableWrite() async throws {
        let folder = try TempDir()
        defer { folder.cleanup() }
        let store = try FileStore(url: folder.file("settings.json"))
        try store.set(true, for: .doTheThing)
        let observed = store.changedKeys()
        try store.replaceAll(["theme": .string("dark"), "fontSize": .int(16)])
        #expect(try store.allValues() == ["theme": .string("dark"), "fontSize": .int(16)])
        #expect(try store.value(for: .doTheThing) == false)
        let changed = try await first(3, of: observed)
        #expect(Set(changed) == ["doTheThing", "theme", "fontSize"])
        let text = try String(contentsOf: folder.file("settings.json"), encoding: .utf8)
        #expect(text.contains("\"fontSize\"") && !text.contains("doTheThing"))
    }
}

@Suite(.ownThreads)
struct SuiteFileStoreTests {
    @Test(arguments: [
        ("", "a suite name cannot be empty"),
        ("../escape", "a suite name cannot contain '/'"),
        ("a/b", "a suite name cannot contain '/'"),
        ("..hidden", "a suite name cannot contain '..'"),
        ("nul\u{0}name", "a suite name cannot contain NUL"),
        (String(repeating: "x", count: 250), "a suite name must fit a 255-byte file name with '.plist'"),
    ])
    func invalidSuiteNamesAreRefused(_ name: String, _ reason: String) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        #expect(throws: PrefsError.invalidSuiteName(name, reason: reason)) {
            try SuiteFileStore(suiteName: name, directory: directory.url)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.url.path) == [])
    }

    @Test func theLongestValidSuiteNameWorks() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try SuiteFileStore(suiteName: String(repeating: "x", count: 249), directory: directory.url)
        try store.setValue(.bool(true), forKey: "k")
        #expect(try store.value(forKey: "k") == .bool(true))
    }

    @Test func storageFormUsesTheUserDefaultsInstanceItIsGiven() throws {
        let name = "group.storage-form-\(UUID().uuidString.prefix(6))"
        let defaults = UserDefaults(suiteName: name)!
        @StoredValue(key: "sharedSetting", storage: defaults) var shared = false
        shared = true
        #expect(defaults.bool(forKey: "sharedSetting"))
        #expect(UserDefaults(suiteName: name)!.bool(forKey: "sharedSetting"), "another instance of the suite too")
        defaults.set(false, forKey: "sharedSetting")
        #expect(shared == false)
        defaults.removeObject(forKey: "sharedSetting")
        defaults.synchronize()
        try? FileManager.default.removeItem(
            at: SuiteFileStore.preferencesDirectory().appending(path: name + ".plist"))
    }

    /// A suite is `<suite>.plist` beside the standard domain: in `$XDG_CONFIG_HOME` (else `~/.config`), the folder
    /// `DefaultStoresProcessTests` finds the standard domain in, as a property list Foundation reads.
    @Test func suiteContentsAndDeclaredDefault() throws {
        let name = "group.example.docs-\(UUID().uuidString.prefix(8))"
        let environment = ProcessInfo.processInfo.environment
        let configHome =
            environment["XDG_CONFIG_HOME"].map { URL(filePath: $0, directoryHint: .isDirectory) }
            ?? URL(filePath: environment["HOME"] ?? NSHomeDirectory()).appending(path: ".config")
        let file = configHome.appending(path: name + ".plist")
        defer { try? FileManager.default.removeItem(at: file) }
        let suite = try SuiteFileStore(suiteName: name)
        defer { suite.close() }
        @StoredValue(key: "fontScale", store: suite) var fontScale: Double = 1.0
        #expect($fontScale.defaultValue == 1.0)
        fontScale = 1.5
        #expect(try suite.allValues() == ["fontScale": .double(1.5)])
        #expect(suite.url.standardizedFileURL == file.standardizedFileURL)
        let stored = try PropertyListSerialization.propertyList(from: Data(contentsOf: file), format: nil)
        #expect((stored as? [String: Any])?["fontScale"] as? Double == 1.5, "\(stored)")
    }

    @Test func userDefaultsInstancesMapToOneStoreEach() {
        let suite = UserDefaults(suiteName: "conv.instance")!
        let store = SuiteFileStore.store(for: suite)
        #expect(store is UserDefaultsBridgeStore)
        #expect(SuiteFileStore.store(for: suite) === store, "wrappers given one instance share its store")
        #expect(SuiteFileStore.store(for: CustomDefaults(suiteName: "conv.instance")!) !== store)
        #expect(SuiteFileStore.store(for: .standard) is UserDefaultsBridgeStore)
    }
}

final class CustomDefaults: UserDefaults {}
