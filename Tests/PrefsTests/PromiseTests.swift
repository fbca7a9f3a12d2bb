import Foundation
import PrefsTestSupport
import Synchronization
import Testing

@testable import Prefs

/// Promises of the README, docs/ and the DocC articles that no other suite checked; docs/PROMISES.md lists every
/// promise with the test that checks it.
struct PromiseTests {
    /// TOUR, GettingStarted: "Writes through a wrapper never throw; a failure keeps the old value and is reported."
    /// The disk is full in a child process (RLIMIT_FSIZE), so the write fails with EFBIG.
    @Test(arguments: Backend.persistent)
    func aWrapperWriteThatFailsKeepsTheOldValueAndReportsIt(_ backend: Backend) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let result = try ChildProcess.run(["promise-wrapper-write-fails", backend.spec(in: directory)])
        #expect(result.status == 0, "\(result.error)")
        #expect(result.lines == ["wrapper=kept", "fresh=kept", "report: write note"])
        let reopened = try backend.open(in: directory)
        #expect(try reopened.value(forKey: "note") == .string("kept"))
    }

    /// ObservingChanges: "`values` and `keys(_:)` buffer their elements, so a slow consumer never blocks a writer",
    /// and "until a consumer catches up, its stream holds every value it has not yet received".
    // A bound for a hang, with room for 200 durable writes under ThreadSanitizer on a busy machine.
    @Test(.timeLimit(.minutes(5)))
    func aConsumerThatHasNotReadYetNeverBlocksAWriter() async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try FileStore(url: directory.file("settings.json"))
        let key = uniqueKey("counter")
        let counter = StoredValue(key: key, default: 0, store: store)
        let values = counter.values
        let keys = store.changes.keys([key])
        let memory = InMemoryStore()
        let inMemory = StoredValue(key: key, default: 0, store: memory)
        let memoryValues = inMemory.values
        // Nobody reads any stream while the writes happen; every write returns.
        for n in 1...200 { counter.set(n) }
        for n in 1...5_000 { inMemory.set(n) }
        #expect(try await first(201, of: values) == Array(0...200))
        #expect(try await first(200, of: keys) == Array(repeating: key, count: 200))
        #expect(try await first(5_001, of: memoryValues) == Array(0...5_000))
    }

    /// StoresAndBackends: "Stores opened on the same file in one process share their state."
    @Test func storesOpenedOnOneFileShareTheirState() async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let url = directory.file("settings.json")
        let one = try FileStore(url: url)
        let other = try FileStore(url: url)
        let key = uniqueKey("theme")
        let announced = other.changes.keys([key])
        let theme = StoredValue(key: key, default: Theme.light, store: other)
        try one.set(Theme.dark, for: PrefKey(key, default: Theme.light))
        // Seen at once through the other store, without waiting for the file watcher.
        #expect(try other.value(forKey: key) == .string("dark"))
        #expect(theme.wrappedValue == .dark)
        #expect(try await first(1, of: announced) == [key])

        let suite = "promises.\(UUID().uuidString.prefix(8))"
        let suiteOne = try UserDefaultsStore(suiteName: suite, directory: directory.url)
        let suiteOther = try UserDefaultsStore(suiteName: suite, directory: directory.url)
        try suiteOne.setValue(.int(3), forKey: key)
        #expect(try suiteOther.value(forKey: key) == .int(3))
    }

    /// LayeredPreferences: "`EncryptedFileStore` has the user's values and registered defaults only: secrets never
    /// come from the command line or the environment" (the default vault of an app whose standard domain reads both).
    @Test func theDefaultVaultIgnoresArgumentsAndTheEnvironment() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let app = "promises.\(UUID().uuidString.prefix(8))"
        let environment = [
            "HOME": directory.url.path, "XDG_CONFIG_HOME": directory.file("config").path,
            "XDG_DATA_HOME": directory.file("data").path, "XDG_STATE_HOME": directory.file("state").path,
            "XDG_CONFIG_DIRS": directory.file("etc").path,
        ]
        let fromArguments = try ChildProcess.run(
            ["promise-vault-layers", app, "-authToken", "injected"], environment: environment)
        #expect(fromArguments.status == 0, "\(fromArguments.error)")
        #expect(fromArguments.lines == ["setting=injected layer=arguments", "secret=nil layer=none"])

        let fromEnvironment = try ChildProcess.run(
            ["promise-vault-layers", app], environment: environment.merging(["PROMISE_AUTH_TOKEN": "injected"]) { $1 })
        #expect(fromEnvironment.status == 0, "\(fromEnvironment.error)")
        #expect(fromEnvironment.lines == ["setting=injected layer=environment", "secret=nil layer=none"])
    }

    /// TOUR, ObservingChanges: "inotify notices other processes' writes, and only the keys that changed are
    /// announced."
    @Test(arguments: Backend.persistent)
    func anotherProcessesWriteAnnouncesOnlyTheKeysItChanged(_ backend: Backend) async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try backend.open(in: directory)
        try store.replaceAll(["a": .int(1), "b": .int(1), "c": .int(1)])
        let announced = store.changes.keys()
        let spec = backend.spec(in: directory)
        for (key, value) in [("b", "2"), ("a", "1"), ("c", "3")] {  // "a" is rewritten with the value it has
            let written = try ChildProcess.run(["set-int", spec, key, value])
            #expect(written.lines == ["ok"], "\(written.error)")
        }
        #expect(try await first(2, of: announced) == ["b", "c"])
        #expect(try store.value(forKey: "c") == .int(3))
    }

    /// LayeredPreferences: "`$XDG_CONFIG_DIRS` is a colon-separated list of folders, the first the most important,
    /// `/etc/xdg` when it is unset"; README: the state, data and config folders fall back to `$HOME`.
    @Test func systemFoldersComeFromXDGConfigDirsOrEtcXDG() {
        let paths = { (locations: Locations) in locations.configDirs.map { $0.path(percentEncoded: false) } }
        #expect(paths(Locations(environment: ["HOME": "/home/u"])) == ["/etc/xdg/"])
        #expect(paths(Locations(environment: ["HOME": "/home/u", "XDG_CONFIG_DIRS": ""])) == ["/etc/xdg/"])
        #expect(
            paths(Locations(environment: ["XDG_CONFIG_DIRS": "/opt/first:relative:/etc/second"]))
                == ["/opt/first/", "/etc/second/"])
        let home = Locations(environment: ["HOME": "/home/u"])
        #expect(home.configHome.path(percentEncoded: false) == "/home/u/.config/")
        #expect(home.dataHome.path(percentEncoded: false) == "/home/u/.local/share/")
        #expect(home.stateHome.path(percentEncoded: false) == "/home/u/.local/state/")
    }

    /// README: "`PrefsPostgres` is its own product, so apps that do not use it never link libpq"; GettingStarted:
    /// `PrefsTesting` "is the only part of Prefs that imports Swift Testing, so apps never link it".
    @Test func libpqAndSwiftTestingStayOutOfTheLibrariesAppsLink() throws {
        let root = URL(filePath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        func imports(under folder: String) throws -> Set<String> {
            let files = FileManager.default.enumerator(
                at: root.appending(path: folder), includingPropertiesForKeys: nil)
            var found: Set<String> = []
            for case let url as URL in files! where url.pathExtension == "swift" {
                for line in try String(contentsOf: url, encoding: .utf8).split(separator: "\n") {
                    let words = line.split(separator: " ")
                    if let index = words.firstIndex(of: "import"), index + 1 < words.count {
                        found.insert(String(words[index + 1]))
                    }
                }
            }
            return found
        }
        let core = try imports(under: "Sources/Prefs")
        #expect(core.isDisjoint(with: ["CLibPQ", "PrefsPostgres", "Testing", "XCTest"]), "\(core.sorted())")
        #expect(try imports(under: "Sources/PrefsPostgres").isDisjoint(with: ["Testing", "XCTest"]))
        #expect(try imports(under: "Sources/PrefsTesting").contains("Testing"))
        // The manifest: the Prefs target depends on libsodium only.
        let manifest = try String(contentsOf: root.appending(path: "Package.swift"), encoding: .utf8)
        let target = try #require(manifest.range(of: "name: \"Prefs\",\n            dependencies: ["))
        let dependencies = manifest[target.upperBound...].prefix { $0 != "]" }
        #expect(dependencies == "\"CSodium\"")
    }

    /// TOUR: "Reads are served from memory, and each wrapper decodes a value once per change."
    @Test func aValueIsDecodedOncePerChangeForEveryWrapperOfItsKey() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try FileStore(url: directory.file("settings.json"))
        let key = uniqueKey("release")
        let fallback = CountedDecodes(text: key + " none")
        let release = StoredValue(key: key, default: fallback, store: store)
        let again = StoredValue(key: key, default: fallback, store: store)
        for version in ["1.0", "2.0"] {
            try store.setValue(.string(key + " " + version), forKey: key)  // a direct write the wrappers decode
            for _ in 0..<100 {
                #expect(release.wrappedValue.text == key + " " + version)
                #expect(again.wrappedValue.text == key + " " + version)
            }
            // At most once per wrapper, however often each reads.
            #expect((1...2).contains(CountedDecodes.count(of: key + " " + version)))
        }
    }
}

/// A value that records every decode of its stored text.
struct CountedDecodes: Codable, Sendable, Equatable, PrefValueConvertible {
    private static let decoded = Mutex<[String]>([])
    static func count(of text: String) -> Int { decoded.withLock { $0.filter { $0 == text }.count } }

    var text: String

    init(text: String) { self.text = text }

    init(prefValue: PrefValue) throws {
        guard case .string(let text) = prefValue else {
            throw PrefsError.typeMismatch(key: "", expected: "string", found: prefValue.typeName)
        }
        self.text = text
        Self.decoded.withLock { $0.append(text) }
    }

    var prefValue: PrefValue { .string(text) }
}
