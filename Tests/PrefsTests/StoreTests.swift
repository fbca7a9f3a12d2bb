import Foundation
import Observation
import PrefsTestSupport
import Testing

@testable import Prefs

/// Every backend, each test in its own temporary folder.
enum Backend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case memory, file, userDefaults, vault

    static let persistent: [Backend] = [.file, .userDefaults, .vault]

    var testDescription: String { rawValue }

    /// The spec a child process uses to open the same store.
    func spec(in directory: TempDir) -> String {
        switch self {
        case .memory: "memory"
        case .file: "json:" + directory.file("prefs.json").path
        case .userDefaults: "plist:" + directory.url.path + ":group.example"
        case .vault: "vault:" + directory.file("secrets.vault").path + ":" + directory.file("secrets.key").path
        }
    }

    func open(in directory: TempDir) throws -> any KeyValueStore { try StoreSpec.open(spec(in: directory)) }

    /// The file the store keeps its values in.
    func dataFile(in directory: TempDir) -> URL? {
        switch self {
        case .memory: nil
        case .file: directory.file("prefs.json")
        case .userDefaults: directory.file("group.example.plist")
        case .vault: directory.file("secrets.vault")
        }
    }
}

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
    func valuesWrittenByAnotherProcessReadBackExactly(_ backend: Backend) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let written = try ChildProcess.run(["write-fixtures", backend.spec(in: directory)])
        #expect(written.lines == ["ok"], "\(written.error)")
        let store = try backend.open(in: directory)
        #expect(Fixtures.mismatches(in: store) == [])
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

    @Test(arguments: Backend.persistent)
    func processesAppendingAtOnceLoseNothing(_ backend: Backend) async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let spec = backend.spec(in: directory)
        let children = try (0..<4).map { index in
            // The long version (4 processes × 250 updates per store, LoadTests) is in the reliability suite.
            try ChildProcess.start(["append", spec, "tags", "25", "p\(index)"])
        }
        for child in children {
            let ended = child.wait()
            #expect(ended.status == 0, "\(ended)")
        }
        let store = try backend.open(in: directory)
        let tags = try store.value(for: PrefKey("tags", default: [String]()))
        #expect(tags.count == 100)
        #expect(Set(tags).count == 100)
    }

    @Test(.timeLimit(.minutes(5)), arguments: Backend.persistent)
    func aSetThatReturnedSurvivesKillDashNine(_ backend: Backend) async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let spec = backend.spec(in: directory)
        let child = try ChildProcess.start(["count-up", spec, "n"])
        var acknowledged = 0
        let target = Int.random(in: 3...40)
        var lines = child.lines().makeAsyncIterator()
        while acknowledged < target, let line = await lines.next() {
            acknowledged = Int(line) ?? acknowledged
        }
        child.kill()
        // Lines still in the pipe are sets that returned before the kill.
        while let line = await lines.next() {
            acknowledged = Int(line) ?? acknowledged
        }
        let after = try ChildProcess.run(["get-int", spec, "n"])
        let stored = Int(after.lines.first ?? "") ?? -1
        #expect(after.status == 0, "the file must still open: \(after.error)")
        #expect(stored >= acknowledged, "acknowledged \(acknowledged) but found \(stored)")
        #expect(stored <= acknowledged + 1)
    }

    @Test(arguments: Backend.persistent)
    func anotherProcessesWriteReachesObservers(_ backend: Backend) async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try backend.open(in: directory)
        let value = StoredValue(key: "n", default: 0, store: store)
        let stream = value.values
        let written = try ChildProcess.run(["set-int", backend.spec(in: directory), "n", "42"])
        #expect(written.lines == ["ok"], "\(written.error)")
        try await waitUntil(stream) { $0 == 42 }
        #expect(value.wrappedValue == 42)
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
}

struct UserDefaultsStoreTests {
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
            try UserDefaultsStore(suiteName: name, directory: directory.url)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.url.path) == [])
    }

    @Test func theLongestValidSuiteNameWorks() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try UserDefaultsStore(suiteName: String(repeating: "x", count: 249), directory: directory.url)
        try store.setValue(.bool(true), forKey: "k")
        #expect(try store.value(forKey: "k") == .bool(true))
    }

    @Test func foundationReadsWhatPrefsWrites() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try UserDefaultsStore(suiteName: "group.interop", directory: directory.url)
        try store.set(true, for: PrefKey("flag", default: false))
        try store.set(URL(string: "https://example.com/a?b=c")!, for: PrefKey("url", default: URL(string: "x:")!))
        try store.set(Theme.dark, for: PrefKey("theme", default: Theme.light))
        let environment = ["XDG_CONFIG_HOME": directory.url.path]
        let flag = try ChildProcess.run(["foundation-read", "group.interop", "flag"], environment: environment)
        #expect(flag.lines == ["Bool true"])
        let url = try ChildProcess.run(["foundation-read", "group.interop", "url"], environment: environment)
        #expect(url.lines == ["String https://example.com/a?b=c"])
        let theme = try ChildProcess.run(["foundation-read", "group.interop", "theme"], environment: environment)
        #expect(theme.lines == ["String dark"])
        // Non-ASCII text is written as UTF-16, counts of 15 and more with an extended length, big integers wide.
        let text = "héllo wörld, 👋🏽 中文"
        try store.set(text, for: PrefKey("text", default: ""))
        try store.set(Array(0..<20), for: PrefKey("list", default: [Int]()))
        try store.set(70_000, for: PrefKey("number", default: 0))
        let read = try ChildProcess.run(["foundation-read", "group.interop", "text"], environment: environment)
        #expect(read.lines == ["String \(text)"])
        let number = try ChildProcess.run(["foundation-read", "group.interop", "number"], environment: environment)
        #expect(number.lines.first?.hasSuffix(" 70000") == true, "\(number.lines)")
        let list = try ChildProcess.run(["foundation-read", "group.interop", "list"], environment: environment)
        // All 20 elements, the last one 19.
        #expect(list.lines.first.map { $0.hasSuffix("19]") || $0.hasSuffix("19)]") } == true, "\(list.lines)")
    }

    @Test func prefsReadsWhatFoundationWrites() async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try UserDefaultsStore(suiteName: "group.interop", directory: directory.url)
        let count = StoredValue(key: "count", default: 0, store: store)
        let stream = count.values
        let environment = ["XDG_CONFIG_HOME": directory.url.path]
        let result = try ChildProcess.run(
            ["foundation-write", "group.interop", "count", "7"], environment: environment)
        #expect(result.lines == ["ok"])
        try await waitUntil(stream) { $0 == 7 }
    }

    @Test func theStandardStoreIsFoundationsStandardDomain() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let environment = ["XDG_CONFIG_HOME": directory.url.path]
        let written = try ChildProcess.run(["standard-set", "launches", "3"], environment: environment)
        #expect(written.lines == ["ok"])
        #expect(FileManager.default.fileExists(atPath: directory.file("PrefsTestHelper.plist").path))
        let read = try ChildProcess.run(["standard-get", "launches"], environment: environment)
        #expect(read.lines == ["3"], "\(read.error)")
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
            at: UserDefaultsStore.preferencesDirectory().appending(path: name + ".plist"))
    }
}

/// A plain (not `@Observable`) class: wrappers still take part in Observation tracking.
final class PlainSettings: Sendable {
    let count: StoredValue<Int>
    init(store: any KeyValueStore) { count = StoredValue(key: "n", default: 0, store: store) }
}

struct CrossProcessObservationTests {
    @Test(arguments: Backend.persistent)
    func observationTrackingSeesAnotherProcessesWrite(_ backend: Backend) async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let settings = PlainSettings(store: try backend.open(in: directory))
        let (fired, signal) = AsyncStream.makeStream(of: Int.self)
        withObservationTracking {
            _ = settings.count.wrappedValue
        } onChange: {
            signal.yield(1)
        }
        let written = try ChildProcess.run(["set-int", backend.spec(in: directory), "n", "5"])
        #expect(written.lines == ["ok"], "\(written.error)")
        #expect(try await first(1, of: fired) == [1])
        #expect(settings.count.wrappedValue == 5)
    }

    @Test(.timeLimit(.minutes(5))) func aWatchingChildSeesThisProcessesWrites() async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try Backend.file.open(in: directory)
        let child = try ChildProcess.start(["watch", Backend.file.spec(in: directory), "n", "3"])
        var lines = child.lines().makeAsyncIterator()
        #expect(await lines.next() == "ready")
        #expect(await lines.next() == "0")
        try store.set(1, for: PrefKey("n", default: 0))
        #expect(await lines.next() == "1")
        try store.set(2, for: PrefKey("n", default: 0))
        #expect(await lines.next() == "2")
        let ended = child.wait()
        #expect(ended.status == 0, "\(ended)")
    }
}
