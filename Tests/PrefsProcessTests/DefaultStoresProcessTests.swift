import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

/// The default stores (the standard domain and the default vault) as a new app meets them: where they are (`HOME`,
/// the XDG variables, the app identifier), when that is decided, and a damaged file at launch. Each runs in a fresh
/// child process, as an app would.
@Suite(.ownThreads) struct DefaultStoresProcessTests {
    /// The damaged standard plists an app can find at launch. (An empty one is no values: see
    /// ``anEmptyStandardPlistIsNoValuesAndNothingIsKeptAside()``.)
    enum Damage: String, CaseIterable, Sendable {
        case garbage, json, directory

        func make(at url: URL) throws {
            switch self {
            case .garbage: try Data([0x00, 0xFF, 0x13, 0x37, 0x62, 0x70]).write(to: url)
            case .json: try Data(#"{"zoom": 3}"#.utf8).write(to: url)
            case .directory: try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
            }
        }

        func snapshot(_ url: URL) -> Data? {
            self == .directory ? nil : FileManager.default.contents(atPath: url.path)
        }
    }

    static func environment(_ directory: TempDir) -> [String: String] {
        ["XDG_CONFIG_HOME": directory.file("config").path, "XDG_DATA_HOME": directory.file("data").path]
    }

    /// By default a standard domain that does not decode is kept aside at the app's first write, byte for byte and
    /// private (launching only reads it: the app reads its defaults), and the app saves again; the report says where
    /// the file went, once. A file that cannot be read
    /// at all (a folder in its place) is never moved: reads give defaults, writes are refused, reported once.
    @Test(arguments: Damage.allCases)
    func aDamagedStandardPlistIsKeptAsideAndTheAppSavesAgain(_ damage: Damage) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let plist = directory.file("config/PrefsTestHelper.plist")
        try directory.createFolders(["config"])
        try damage.make(at: plist)
        let before = damage.snapshot(plist)

        let result = try ChildProcess.run(["launch"], environment: Self.environment(directory))

        #expect(result.status == 0, "stderr: \(result.error)")
        #expect(result.lines.contains("zoom=1.0 theme=light lastExport=nil"))
        let reports = result.lines.filter { $0.hasPrefix("report: ") }
        guard damage != .directory else {
            #expect(reports.filter { $0.hasPrefix("report: read") }.count == 1, "reported once: \(result.lines)")
            #expect(result.lines.contains("after-set zoom=1.0"), "a folder in place of the file is never moved")
            return
        }
        #expect(reports.count == 1, "reported once: \(result.lines)")
        #expect(result.lines.contains("after-set zoom=2.0"), "the app saves again: \(result.lines)")
        let kept = try #require(
            try FileManager.default.contentsOfDirectory(atPath: directory.path("config")).first {
                $0.hasPrefix("PrefsTestHelper.plist.damaged-")
            })
        #expect(reports.first?.contains(kept) == true, "the report names where the file went: \(reports)")
        let keptURL = directory.file("config/" + kept)
        #expect(try Data(contentsOf: keptURL) == before, "kept byte for byte")
        let mode = try FileManager.default.attributesOfItem(atPath: keptURL.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        #expect(
            try SuiteFileStore(suiteName: "PrefsTestHelper", directory: directory.file("config"))
                .value(forKey: "zoom") == .double(2))
    }

    /// An empty standard plist (a torn Foundation write, `touch`) holds no values: the app starts from its defaults
    /// and saves, nothing is kept aside and nothing is reported.
    @Test func anEmptyStandardPlistIsNoValuesAndNothingIsKeptAside() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let plist = directory.file("config/PrefsTestHelper.plist")
        try directory.createFolders(["config"])
        try Data().write(to: plist)
        let result = try ChildProcess.run(["launch"], environment: Self.environment(directory))
        #expect(result.status == 0, "stderr: \(result.error)")
        #expect(result.lines.contains("zoom=1.0 theme=light lastExport=nil"))
        #expect(result.lines.contains("after-set zoom=2.0"), "\(result.lines)")
        #expect(result.lines.filter { $0.hasPrefix("report: ") }.isEmpty, "\(result.lines)")
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path("config"))
        #expect(!names.contains { $0.contains(".damaged-") }, "\(names)")
    }

    /// With `PrefsConfig.damagedStandardDomain = .refuse` the damaged file stays where it is and writes are refused.
    @Test(arguments: Damage.allCases)
    func aDamagedStandardPlistIsLeftAloneWhenTheAppSaysSo(_ damage: Damage) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let plist = directory.file("config/PrefsTestHelper.plist")
        try directory.createFolders(["config"])
        try damage.make(at: plist)
        let before = damage.snapshot(plist)

        var environment = Self.environment(directory)
        environment["PREFS_TEST_DAMAGE"] = "refuse"
        let result = try ChildProcess.run(["launch"], environment: environment)

        #expect(result.status == 0, "stderr: \(result.error)")
        #expect(result.lines.contains("zoom=1.0 theme=light lastExport=nil"))
        #expect(result.lines.contains("after-set zoom=1.0"), "a write must not replace the damaged file")
        let readReports = result.lines.filter { $0.hasPrefix("report: read") }
        #expect(readReports.count == 1, "the damage is reported once: \(result.lines)")
        #expect(readReports.first?.contains("PrefsTestHelper.plist") == true)
        #expect(damage.snapshot(plist) == before)
        var isDirectory: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: plist.path, isDirectory: &isDirectory))
        #expect(isDirectory.boolValue == (damage == .directory))
    }

    /// A test that forgot `.isolatedPreferences` reads and writes the test process's real standard domain and
    /// vault: each is reported once, naming its file. The helper plays the test process, under the name SwiftPM
    /// gives a test bundle, so this test itself writes no real file.
    @Test func aTestProcessUsingTheRealDefaultStoresIsToldOncePerFile() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        try directory.createFolders(["bin"])
        let runner = directory.file("bin/MyAppPackageTests.xctest")
        try FileManager.default.copyItem(at: ChildProcess.helperURL, to: runner)

        let result = try ChildProcess(runner, ["launch"], environment: Self.environment(directory)).wait()

        #expect(result.status == 0, "stderr: \(result.error)")
        let notices = result.lines.filter { $0.hasPrefix("report: notice about ") }
        let plist = directory.file("config/MyAppPackageTests.xctest.plist").path(percentEncoded: false)
        let vault = directory.file("data/MyAppPackageTests.xctest/secrets.vault").path(percentEncoded: false)
        #expect(notices.count == 2, "one notice per file, however often it is used: \(result.lines)")
        #expect(
            notices.contains {
                $0.hasPrefix(
                    "report: notice about \(plist): the standard domain is the real file \(plist), used by a "
                        + "test outside .isolatedPreferences")
            }, "\(notices)")
        #expect(notices.contains { $0.hasPrefix("report: notice about \(vault): the default vault is the real file") })
        // Each names the call that isolates it: secrets are not isolated by the default store's.
        #expect(
            notices.contains {
                $0.hasPrefix("report: notice about \(vault)")
                    && $0.hasSuffix("or run them inside PrefsConfig.withDefaultSecureStore(InMemoryStore())")
            }, "\(notices)")
        #expect(
            notices.contains {
                $0.hasPrefix("report: notice about \(plist)")
                    && $0.hasSuffix("or run them inside PrefsConfig.withDefaultStore(InMemoryStore())")
            }, "\(notices)")
        #expect(!result.lines.contains { $0.contains("failed") }, "a notice is no failure: \(result.lines)")

        // The same program under its own name is an app, not a test process: nothing to say.
        let app = try ChildProcess.run(["launch"], environment: Self.environment(directory))
        #expect(app.status == 0 && !app.lines.contains { $0.hasPrefix("report:") }, "\(app.lines)")
    }

    @Test func aDamagedDefaultVaultIsReportedOnceAndLeftUntouched() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let vault = directory.file("data/PrefsTestHelper/secrets.vault")
        try FileManager.default.createDirectory(
            at: vault.deletingLastPathComponent(), withIntermediateDirectories: true)
        let garbage = Data("not a vault at all".utf8)
        try garbage.write(to: vault)

        let result = try ChildProcess.run(["launch"], environment: Self.environment(directory))

        #expect(result.status == 0, "stderr: \(result.error)")
        #expect(result.lines.contains("token=nil"))
        #expect(result.lines.contains("after-set zoom=2.0"), "the plain preferences still work")
        let vaultReports = result.lines.filter { $0.hasPrefix("report: read") && $0.contains("vault") }
        #expect(vaultReports.count == 1, "\(result.lines)")
        #expect(FileManager.default.contents(atPath: vault.path) == garbage)
    }

    @Test func withoutXDGVariablesFilesFollowHOME() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_CONFIG_HOME"] = nil
        environment["XDG_DATA_HOME"] = nil
        environment["XDG_STATE_HOME"] = nil
        environment["HOME"] = directory.url.path
        let result = try ChildProcess.run(["launch"], environment: environment, inheritingEnvironment: false)

        #expect(result.status == 0, "stderr: \(result.error)")
        let plist = directory.file(".config/PrefsTestHelper.plist")
        #expect(result.lines.contains("standard=\(plist.path)"))
        #expect(FileManager.default.fileExists(atPath: plist.path))
    }

    @Test func theAppIdentifierNamesTheStandardDomain() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let result = try ChildProcess.run(["launch", "com.example.renamed"], environment: Self.environment(directory))

        #expect(result.status == 0, "stderr: \(result.error)")
        let plist = directory.file("config/com.example.renamed.plist")
        #expect(result.lines.contains("standard=\(plist.path)"))
        let stored = try SuiteFileStore(suiteName: "com.example.renamed", directory: directory.file("config"))
        #expect(try stored.value(forKey: "zoom") == .double(2))
    }

    @Test func configuringTheAppAfterTheDefaultStoresOpenedIsRefusedAndReported() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let result = try ChildProcess.run(
            ["rename-late", "com.example.late"], environment: Self.environment(directory))

        #expect(result.status == 0, "stderr: \(result.error)")
        #expect(result.lines.contains("before=PrefsTestHelper.plist identifier=PrefsTestHelper"))
        #expect(result.lines.contains("standard=PrefsTestHelper.plist"))
        #expect(result.lines.contains("reports=1"))
        #expect(
            result.lines.contains {
                $0.contains("PrefsConfig.configure was called after the default stores were in use")
                    && $0.contains("appIdentifier left as they were")
            }, "\(result.lines)")
    }

    @Test func replacingTheConfiguredDefaultStoreAfterAWrapperUsedItIsRefusedAndReported() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let result = try ChildProcess.run(["store-late"], environment: Self.environment(directory))

        #expect(result.status == 0, "stderr: \(result.error)")
        #expect(result.lines.contains("chosen=5"), "\(result.lines)")
        #expect(result.lines.contains("first=5 later=5"), "\(result.lines)")
        #expect(result.lines.contains("reports=2"), "\(result.lines)")
        let refusals = result.lines.filter {
            $0.contains("PrefsConfig.configure was called after the default stores were in use")
                && $0.contains("defaultStore left as they were")
        }
        #expect(refusals.count == 2, "\(result.lines)")
        // Nothing was opened in place of the configured store.
        #expect(!FileManager.default.fileExists(atPath: directory.file("config/PrefsTestHelper.plist").path))
    }

    @Test func everyDefaultStoreKeepsTheFoldersResolvedAtFirstUse() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let elsewhere = directory.file("elsewhere")
        let result = try ChildProcess.run(["move-xdg", elsewhere.path], environment: Self.environment(directory))

        #expect(result.status == 0, "stderr: \(result.error)")
        let config = directory.file("config").path
        #expect(result.lines.contains("standard=\(config)"))
        #expect(result.lines.contains("suite=\(config)"))
        #expect(FileManager.default.fileExists(atPath: directory.file("data/PrefsTestHelper/secrets.vault").path))
        #expect(!FileManager.default.fileExists(atPath: elsewhere.path))
    }
}
