import Foundation
import Observation
import PrefsTestSupport
import Synchronization
import TestThreads
import Testing

@testable import Prefs

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The layers, in this process: the pure merge, the readers of each source, registered defaults, and
/// system-wide and managed files given as folders. Arguments and environment of a real process, and
/// `$XDG_CONFIG_DIRS`, are tested in child processes (LayerProcessTests).
@Suite(.ownThreads) struct LayerStackTests {
    @Test func theStrongestLayerWinsAndRemovingItRevealsTheNext() {
        var stack = LayerStack()
        #expect(stack.isEmpty && stack.resolve("volume", user: .int(9))! == (.int(9), .user))
        let order: [PreferenceLayer] = [.managed, .arguments, .environment, .user, .systemDefaults, .registered]
        var user: PrefValue?
        for (index, layer) in order.enumerated().reversed() {
            let value = PrefValue.int(Int64(index))
            if layer == .user { user = value } else { #expect(stack.setLayer(layer, ["volume": value]) == ["volume"]) }
            #expect(stack.value(forKey: "volume", user: user) == value)
            #expect(stack.resolve("volume", user: user)?.layer == layer)
        }
        for (index, layer) in order.enumerated().dropLast() {
            if layer == .user { user = nil } else { _ = stack.setLayer(layer, [:]) }
            #expect(stack.value(forKey: "volume", user: user) == .int(Int64(index + 1)))
            #expect(stack.resolve("volume", user: user)?.layer == order[index + 1])
        }
        _ = stack.setLayer(.registered, [:])
        #expect(stack.isEmpty && stack.resolve("volume", user: nil) == nil)
    }

    @Test func aChangeReportsOnlyTheKeysWhoseEffectiveValueOrOriginChanged() {
        let user: [String: PrefValue] = ["a": .int(1), "b": .int(2)]
        var stack = LayerStack()
        func change(_ body: (inout LayerStack) -> Set<String>) -> Set<String> {
            let old = stack
            let touched = body(&stack)
            return LayerStack.changes(from: old, to: stack, in: touched) { user[$0] }
        }
        #expect(change { $0.setLayer(.registered, ["a": .int(0), "c": .int(3)]) } == ["c"], "a is the user's")
        #expect(change { $0.setLayer(.managed, ["b": .int(2)]) } == ["b"], "same value, new origin: forced now")
        #expect(change { $0.merge(into: .registered, ["a": .int(5)]) } == [], "still under the user's a")
        #expect(stack.isForced("b") && !stack.isForced("a"))
        #expect(stack.valueBelowUser("a") == .int(5))
        #expect(stack.value(forKey: "c", user: nil) == .int(3))
    }
}

@Suite(.ownThreads) struct LayerSourceTests {
    @Test func argumentsAreReadAsFoundationReadsThem() {
        let values = LayerSources.arguments([
            "/usr/bin/app", "-volume", "3", "-flag", "YES", "-list", "(a, b)", "-dict", "{ a = 1; }",
            "-negative", "-5", "-name", "  padded  ", "-broken", "(unclosed", "-", "x", "positional", "-last",
        ])
        #expect(values["volume"] == .string("3"))
        #expect(values["flag"] == .string("YES"))
        #expect(values["list"] == .array([.string("a"), .string("b")]))
        #expect(values["dict"] == .dictionary(["a": .string("1")]))
        #expect(values["negative"] == nil, "a value that starts with - is not a value")
        #expect(values["name"] == .string("padded"))
        #expect(values["broken"] == .string("(unclosed"), "text that is not a property list stays text")
        #expect(values["last"] == nil && values[""] == nil)
    }

    @Test(arguments: [
        ("volume", "MYAPP_VOLUME"), ("fontSize", "MYAPP_FONT_SIZE"), ("ui.theme", "MYAPP_UI_THEME"),
        ("hasHapticsEnabled", "MYAPP_HAS_HAPTICS_ENABLED"), ("retry-after", "MYAPP_RETRY_AFTER"),
        ("v2Beta", "MYAPP_V2_BETA"),
    ])
    func environmentNames(key: String, variable: String) {
        #expect(LayerSources.environmentName(forKey: key, prefix: "MYAPP_") == variable)
    }

    @Test func anAmbiguousVariableSetsNoneOfItsKeys() {
        let found = LayerSources.environment(
            ["MYAPP_FONT_SIZE": "12", "MYAPP_VOLUME": "4"], prefix: "MYAPP_", keys: ["fontSize", "font_size", "volume"])
        #expect(found.values == ["volume": .string("4")])
        #expect(found.ambiguous == ["MYAPP_FONT_SIZE": ["fontSize", "font_size"]])
    }

    @Test func textBecomesTheDeclaredTypeAsFoundationConvertsIt() throws {
        let store = InMemoryStore()
        store.hub.layers.enableArguments([
            "count": .string("3"), "flag": .string("YES"), "off": .string("false"), "ratio": .string("0.5"),
            "theme": .string("dark"), "tags": .array([.string("a"), .string("b")]), "json": .string("[1, 2]"),
            "when": .string("2024-05-01T10:00:00Z"), "bad": .string("lots"),
        ])
        #expect(try store.value(for: PrefKey("count", default: 0)) == 3)
        #expect(try store.value(for: PrefKey("flag", default: false)) == true)
        #expect(try store.value(for: PrefKey("off", default: true)) == false)
        #expect(try store.value(for: PrefKey("ratio", default: 0.0)) == 0.5)
        #expect(try store.value(for: PrefKey("theme", default: Theme.light)) == .dark)
        #expect(try store.value(for: PrefKey("tags", default: [String]())) == ["a", "b"])
        #expect(try store.value(for: PrefKey("json", default: [Int]())) == [1, 2])
        #expect(
            try store.value(for: PrefKey("when", default: Date.distantPast))
                == Date(timeIntervalSince1970: 1_714_557_600))
        #expect(throws: PrefsError.self) { try store.value(for: PrefKey("bad", default: 0)) }
        // The same text stored by the user is not converted: the user's own values keep their strict types.
        try store.setValue(.string("3"), forKey: "userCount")
        #expect(throws: PrefsError.self) { try store.value(for: PrefKey("userCount", default: 0)) }
    }
}

@Suite(.ownThreads) struct RegisteredDefaultTests {
    @Test func registeredDefaultsReadThroughEveryAPIAndAreNeverWritten() throws {
        let store = InMemoryStore()
        store.register(defaults: ["volume": .int(5)])
        #expect(try store.value(forKey: "volume") == .int(5))
        #expect(try store.value(for: PrefKey("volume", default: 1)) == 5)
        #expect(try store.allValues().isEmpty, "the user's own values: what export writes")
        #expect(store.layer(ofKey: "volume") == .registered)
        let volume = StoredValue(key: "volume", default: 1, store: store)
        #expect(volume.wrappedValue == 5, "a registered default beats the declaration's own")
        volume.update { $0 += 1 }
        #expect(try store.allValues() == ["volume": .int(6)])
        volume.reset()
        #expect(volume.wrappedValue == 5 && volume.layer == .registered)
        store.register(defaults: ["volume": .int(8)])
        #expect(volume.wrappedValue == 8, "a later registration replaces an earlier one")
    }

    @Test func aChangeInAnotherLayerReachesObservationAndStreams() async throws {
        let store = InMemoryStore()
        let volume = StoredValue(key: "volume", default: 1, store: store)
        let values = volume.values
        let fired = Mutex(false)
        withObservationTracking {
            _ = volume.wrappedValue
        } onChange: {
            fired.withLock { $0 = true }
        }
        store.register(defaults: ["volume": .int(5)])
        #expect(fired.withLock { $0 })
        #expect(try await first(2, of: values) == [1, 5])
    }

    @Test(arguments: ["memory", "file"])
    func aDeclarationRegistersItsDefault(kind: String) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store: any KeyValueStore = kind == "memory" ? InMemoryStore() : try FileStore(url: directory.file("s.json"))
        #expect(try store.value(forKey: "zoom") == nil)
        let zoom = StoredValue(key: "zoom", default: 1.5, store: store)
        #expect(try store.value(forKey: "zoom") == .double(1.5))
        _ = StoredValue(key: "zoom", default: 3.0, store: store)
        #expect(try store.value(forKey: "zoom") == .double(1.5), "the first declaration wins")
        _ = StoredValue(key: "lastExport", default: Date?.none, store: store)
        #expect(try store.value(forKey: "lastExport") == nil, "an optional's nil registers nothing")
        #expect(zoom.wrappedValue == 1.5)
        #expect(!FileManager.default.fileExists(atPath: directory.file("s.json").path), "nothing written")
    }

    @Test func aDeclarationOfAnotherTypeReadsItsOwnDefaultWithoutADecodeError() throws {
        Reports.install()
        let key = uniqueKey("mixed")
        let store = InMemoryStore()
        _ = StoredValue(key: key, default: 4, store: store)
        let text = StoredValue(key: key, default: "four", store: store)
        #expect(text.wrappedValue == "four")
        #expect(Reports.for(key).allSatisfy { report in !"\(report.error)".contains("expected") })
    }

    @Test func aCustomStoreGetsRegisteredDefaultsThroughTypedReadsAndWrappers() throws {
        let store = MinimalStore()
        store.register(defaults: ["volume": .int(5)])
        #expect(try store.value(for: PrefKey("volume", default: 1)) == 5)
        #expect(StoredValue(key: "volume", default: 1, store: store).wrappedValue == 5)
        #expect(store.layer(ofKey: "volume") == .registered)
        try store.set(2, for: PrefKey("volume", default: 1))
        #expect(store.layer(ofKey: "volume") == .user)
    }
}

/// System-wide defaults and managed values, with folders given to the store (the standard domain reads them from
/// `$XDG_CONFIG_DIRS`; see LayerProcessTests).
@Suite(.ownThreads) struct SystemLayerTests {
    struct System {
        let directory: TempDir
        var first: URL { directory.file("etc-first") }
        var second: URL { directory.file("etc-second") }
        var folders: [URL] { [first, second] }

        /// The test's stand-in for `/etc/xdg/managed-preferences`, in a chain of 0755 folders from the test's folder.
        var managedFolder: URL { directory.file("etc/xdg/managed-preferences") }
        var managedFile: URL { managedFolder.appending(path: "app.plist") }

        init() throws {
            directory = try TempDir()
            try FileManager.default.createDirectory(at: first, withIntermediateDirectories: true)
            try FileManager.default.createDirectory(at: second, withIntermediateDirectories: true)
            try FileManager.default.createDirectory(at: managedFolder, withIntermediateDirectories: true)
            for folder in [directory.url, directory.file("etc"), directory.file("etc/xdg"), managedFolder] {
                try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: folder.path)
            }
        }

        /// Where the store takes forced values from: the managed folder, checked from the test's folder down, owned
        /// by `owner` (the user running the tests unless a test asks for root).
        func managedLocation(owner: uid_t = getuid()) -> ManagedLocation {
            ManagedLocation(folder: managedFolder, checkedFrom: directory.path, owner: owner)
        }

        /// Writes `values` as `<folder>/<domain>.plist`, in `managed-preferences` below it when `managed`.
        func write(_ values: [String: PrefValue], to folder: URL, managed: Bool = false, domain: String = "app") throws
        {
            let target = managed ? folder.appending(path: "managed-preferences") : folder
            try FileManager.default.createDirectory(at: target, withIntermediateDirectories: true)
            try writeFile(values, at: target.appending(path: domain + ".plist"))
        }

        /// Writes `values` as a forced file in the managed folder, mode 0644.
        func writeManaged(_ values: [String: PrefValue]) throws { try writeFile(values, at: managedFile) }

        private func writeFile(_ values: [String: PrefValue], at url: URL) throws {
            try PropertyListFormat.encode(values).write(to: url, options: .atomic)
            try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: url.path)
        }

        func store(managedOwner owner: uid_t = getuid()) throws -> FileStore {
            let store = try FileStore(url: directory.file("user-\(UUID().uuidString).json"))
            store.hub.layers.enableSystem(domain: "app", folders: folders, managed: managedLocation(owner: owner))
            return store
        }

        /// The reports naming `url`.
        func reports(about url: URL) -> [String] {
            Reports.for("").map { "\($0.error)" }.filter { $0.contains(url.path(percentEncoded: false)) }
        }
    }

    @Test func systemDefaultsSitBelowTheUsersValuesAndTheFirstFolderWins() throws {
        let system = try System()
        defer { system.directory.cleanup() }
        try system.write(["volume": .int(2), "theme": .string("dark")], to: system.first)
        try system.write(["volume": .int(9), "zoom": .double(1.25)], to: system.second)
        let store = try system.store()
        let volume = StoredValue(key: "volume", default: 1, store: store)
        #expect(volume.wrappedValue == 2 && volume.layer == .systemDefaults)
        #expect(try store.value(for: PrefKey("zoom", default: 1.0)) == 1.25)
        #expect(try store.value(for: PrefKey("theme", default: Theme.light)) == .dark)
        volume.wrappedValue = 4
        #expect(volume.wrappedValue == 4 && volume.layer == .user)
        #expect(try store.allValues() == ["volume": .int(4)])
        volume.reset()
        #expect(volume.wrappedValue == 2, "reset reveals the system-wide default")
    }

    @Test func managedValuesAreForced() throws {
        Reports.install()
        let system = try System()
        defer { system.directory.cleanup() }
        let key = uniqueKey("locked")
        try system.writeManaged([key: .int(9)])
        let store = try system.store()
        try store.replaceAll([key: .int(3)])  // a value the user had before the administrator forced the key
        let locked = StoredValue(key: key, default: 1, store: store)
        #expect(locked.wrappedValue == 9 && locked.isForced && store.isForced(key))
        locked.wrappedValue = 5
        locked.reset()
        #expect(locked.wrappedValue == 9)
        #expect(Reports.for(key).map { $0.error as? PrefsError } == [.forced(key: key), .forced(key: key)])
        #expect(throws: PrefsError.forced(key: key)) { try store.set(5, for: PrefKey(key, default: 1)) }
        #expect(try store.allValues() == [key: .int(3)], "the user's own value is kept, and hidden")
    }

    @Test func anAdministratorsEditIsAnnouncedEvenWhenTheFolderAppearsLater() async throws {
        let system = try System()
        defer { system.directory.cleanup() }
        try FileManager.default.removeItem(at: system.managedFolder)
        let store = try system.store()
        let volume = StoredValue(key: "volume", default: 1, store: store)
        let values = volume.values
        try system.write(["volume": .int(6)], to: system.second)
        try await waitUntil(values, within: 60) { $0 == 6 }
        let forcedChanged = Mutex(false)
        withObservationTracking {
            _ = volume.isForced
        } onChange: {
            forcedChanged.withLock { $0 = true }
        }
        // Generous deadlines: a folder that does not exist yet is polled, which ThreadSanitizer builds slow down.
        // The managed folder does not exist when the store opens: its creation is watched too.
        try FileManager.default.createDirectory(at: system.managedFolder, withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: system.managedFolder.path)
        try system.writeManaged(["volume": .int(8)])
        try await waitUntil(values, within: 60) { $0 == 8 }
        #expect(volume.isForced && forcedChanged.withLock { $0 }, "Observation sees isForced change")
        try FileManager.default.removeItem(at: system.managedFile)
        try await waitUntil(values, within: 60) { $0 == 6 }
        #expect(!volume.isForced)
    }

    @Test func aDamagedSystemFileIsReportedAndSkippedAndNeverHidesTheUsersValues() throws {
        Reports.install()
        let system = try System()
        defer { system.directory.cleanup() }
        let damaged = system.first.appending(path: "app.plist")
        try Data("not a property list".utf8).write(to: damaged)
        try system.write(["zoom": .double(2), "volume": .int(7)], to: system.second)
        let key = uniqueKey("probe")
        let store = try FileStore(url: system.directory.file("user.json"))
        try store.set(3, for: PrefKey("volume", default: 1))
        store.addLayer(.systemFiles(domain: "app", folders: system.folders))
        #expect(try store.value(for: PrefKey("volume", default: 1)) == 3, "the user's value stays")
        #expect(try store.value(for: PrefKey("zoom", default: 1.0)) == 2, "the good file still applies")
        #expect(StoredValue(key: key, default: 0, store: store).wrappedValue == 0)
        #expect(Reports.for("").filter { "\($0.error)".contains(damaged.path) }.count == 1)
        #expect(try Data(contentsOf: damaged) == Data("not a property list".utf8), "left untouched")
    }

    // MARK: Forced values come only from files the administrator controls

    @Test func aManagedFileFoundThroughXDGConfigDirsIsADefaultNotAForcedValue() throws {
        let system = try System()
        defer { system.directory.cleanup() }
        try system.write(["volume": .int(2)], to: system.first, managed: true)
        try system.write(["volume": .int(4), "zoom": .double(2)], to: system.first)
        let store = try system.store()
        let volume = StoredValue(key: "volume", default: 1, store: store)
        #expect(volume.wrappedValue == 2 && volume.layer == .systemDefaults && !volume.isForced)
        #expect(try store.allValues(in: .managed).isEmpty)
        try store.set(7, for: PrefKey("volume", default: 1))
        #expect(volume.wrappedValue == 7, "the user's value is above it")
    }

    @Test(arguments: [0o620, 0o602] as [Int])
    func aManagedFileGroupOrOthersCanWriteIsNotForcedAndIsReported(_ mode: Int) throws {
        Reports.install()
        let system = try System()
        defer { system.directory.cleanup() }
        let key = uniqueKey("locked")
        try system.writeManaged([key: .int(9)])
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: system.managedFile.path)
        let store = try system.store()
        let locked = StoredValue(key: key, default: 1, store: store)
        #expect(locked.wrappedValue == 1 && !locked.isForced, "a file another user can write forces nothing")
        try store.set(5, for: PrefKey(key, default: 1))
        #expect(locked.wrappedValue == 5)
        let reports = system.reports(about: system.managedFile)
        let shown = "writable by group or others (mode \(String(mode, radix: 8)))"
        #expect(reports.count == 1 && reports.allSatisfy { $0.contains(shown) }, "\(reports)")
    }

    @Test func aManagedFileInAFolderOthersCanWriteOrBehindALinkIsNotForced() throws {
        Reports.install()
        let system = try System()
        defer { system.directory.cleanup() }
        try system.writeManaged(["volume": .int(9)])
        let xdg = system.directory.file("etc/xdg")
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: xdg.path)
        let store = try system.store()
        #expect(try !store.isForced("volume") && store.allValues(in: .managed).isEmpty)
        #expect(
            system.reports(about: system.managedFile).contains {
                $0.contains("folder \(xdg.path) is writable by group or others")
            })

        // A link planted in the managed folder is refused even when its target would pass.
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: xdg.path)
        let target = system.managedFolder.appending(path: "target.plist")
        try FileManager.default.moveItem(at: system.managedFile, to: target)
        try FileManager.default.createSymbolicLink(at: system.managedFile, withDestinationURL: target)
        let linked = try system.store()
        #expect(!linked.isForced("volume"))
        #expect(system.reports(about: system.managedFile).contains { $0.contains("is a symbolic link") })
    }

    @Test(.enabled(if: getuid() == 0, "needs root to give a file to another user"))
    func aManagedFileOwnedByAnotherUserIsNotForced() throws {
        Reports.install()
        let system = try System()
        defer { system.directory.cleanup() }
        try system.writeManaged(["volume": .int(9)])
        #expect(chown(system.managedFile.path, 65534, 65534) == 0)
        let store = try system.store(managedOwner: 0)
        #expect(!store.isForced("volume"))
        #expect(system.reports(about: system.managedFile).contains { $0.contains("owned by uid 65534, not root") })
    }

    @Test(.enabled(if: getuid() == 0, "needs root: forced values must be in files root owns"))
    func aRootOwnedFileInRootOwnedFoldersIsForced() throws {
        let system = try System()
        defer { system.directory.cleanup() }
        try system.writeManaged(["volume": .int(9)])
        let store = try system.store(managedOwner: 0)
        #expect(store.isForced("volume") && store.layer(ofKey: "volume") == .managed)
        #expect(throws: PrefsError.forced(key: "volume")) { try store.set(5, for: PrefKey("volume", default: 1)) }
    }

    @Test func theManagedFolderIsFixedAndOwnedByRoot() {
        let location = ManagedLocation.system
        #expect(location.folder.path(percentEncoded: false) == "/etc/xdg/managed-preferences/")
        #expect(location.checkedFrom == "/" && location.owner == 0)
        // With $XDG_CONFIG_DIRS unset (/etc/xdg), the forced file is not read a second time as a default.
        let files = LayerSources.SystemFiles(
            domain: "app", folders: [URL(filePath: "/etc/xdg", directoryHint: .isDirectory)], managed: location)
        #expect(files.managed.path(percentEncoded: false) == "/etc/xdg/managed-preferences/app.plist")
        #expect(files.defaults.map { $0.path(percentEncoded: false) } == ["/etc/xdg/app.plist"])
        let elsewhere = LayerSources.SystemFiles(
            domain: "app", folders: [URL(filePath: "/opt/etc", directoryHint: .isDirectory)], managed: location)
        #expect(
            elsewhere.defaults.map { $0.path(percentEncoded: false) } == [
                "/opt/etc/managed-preferences/app.plist", "/opt/etc/app.plist",
            ])
    }

    // MARK: System-wide files get the stores' file checks

    @Test(.timeLimit(.minutes(5))) func aFIFOAsASystemFileIsReportedAndNeverBlocks() throws {
        Reports.install()
        let system = try System()
        defer { system.directory.cleanup() }
        let fifo = system.first.appending(path: "app.plist")
        #expect(mkfifo(fifo.path, 0o644) == 0)
        #expect(mkfifo(system.managedFile.path, 0o644) == 0)
        try system.write(["zoom": .double(2)], to: system.second)
        let store = try system.store()
        #expect(try store.value(for: PrefKey("zoom", default: 1.0)) == 2, "the other file still applies")
        for path in [fifo, system.managedFile] {
            #expect(system.reports(about: path).contains { $0.contains("is a FIFO, not a regular file") })
        }
    }

    @Test func aSystemFileOverTheReadLimitIsRefusedBeforeItIsRead() throws {
        Reports.install()
        let system = try System()
        defer { system.directory.cleanup() }
        let huge = system.first.appending(path: "app.plist")
        let size = 300 << 20
        for url in [huge, system.managedFile] {
            // Sparse: 300 MB long, no data blocks written.
            let fd = open(url.path, O_CREAT | O_WRONLY, 0o644)
            #expect(fd >= 0 && ftruncate(fd, off_t(size)) == 0)
            close(fd)
        }
        try system.write(["zoom": .double(2)], to: system.second)
        let store = try system.store()
        #expect(try store.value(for: PrefKey("zoom", default: 1.0)) == 2)
        for url in [huge, system.managedFile] {
            #expect(
                system.reports(about: url).contains {
                    $0.contains("is \(size) bytes, more than the 64 MiB a store file may have")
                })
        }
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
}
