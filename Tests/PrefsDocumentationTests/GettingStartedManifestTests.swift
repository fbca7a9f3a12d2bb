import Foundation
import PrefsTestSupport
import TestThreads
import Testing

/// The manifest Getting Started tells users to write, taken from the article itself, resolves against this checkout
/// whatever its folder is called.
@Suite(.ownThreads) struct GettingStartedManifestTests {
    static let root = URL(filePath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The `dependencies: … targets: …` snippet of GettingStarted.md.
    static func snippet() throws -> String {
        let article = try String(
            contentsOf: root.appending(path: "Sources/Prefs/Prefs.docc/GettingStarted.md"), encoding: .utf8)
        let blocks = article.components(separatedBy: "```swift\n").dropFirst().map {
            $0.components(separatedBy: "```").first ?? ""
        }
        return try #require(blocks.first { $0.hasPrefix("dependencies: [") })
    }

    /// SwiftPM leaves a lock file in `$TMPDIR` for each build folder it meets: the child's `TMPDIR` is a folder
    /// inside `scratch`, so nothing stays behind in the system's.
    static func privateTemporaryFolder(in scratch: URL) throws -> [String: String] {
        let folder = scratch.appending(path: "tmp")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return ["TMPDIR": folder.path]
    }

    @Test(arguments: ["Prefs", "prefs-main"])
    func theDocumentedManifestResolves(checkoutFolder: String) throws {
        let scratch = FileManager.default.temporaryDirectory.appending(path: "prefs-manifest-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let app = scratch.appending(path: "MyApp")
        for target in ["Sources/MyApp", "Tests/MyAppTests"] {
            try FileManager.default.createDirectory(at: app.appending(path: target), withIntermediateDirectories: true)
        }
        try FileManager.default.createSymbolicLink(
            at: scratch.appending(path: checkoutFolder), withDestinationURL: Self.root)
        try "import Prefs\n".write(
            to: app.appending(path: "Sources/MyApp/main.swift"), atomically: true, encoding: .utf8)
        try "import PrefsTesting\n".write(
            to: app.appending(path: "Tests/MyAppTests/T.swift"), atomically: true, encoding: .utf8)
        // The article's checkout is called Prefs; `package:` follows the folder, as the article says.
        let dependencies = try Self.snippet().replacingOccurrences(of: "\"../Prefs\"", with: "\"../\(checkoutFolder)\"")
            .replacingOccurrences(of: "package: \"Prefs\"", with: "package: \"\(checkoutFolder)\"")
        let manifest = """
            // swift-tools-version: 6.0
            import PackageDescription

            let package = Package(
                name: "MyApp",
            \(dependencies.split(separator: "\n").map { "    " + $0 }.joined(separator: "\n"))
            )
            """
        try manifest.write(to: app.appending(path: "Package.swift"), atomically: true, encoding: .utf8)

        let described = try ChildProcess.run(
            URL(filePath: "/usr/bin/env"),
            ["swift", "package", "--package-path", app.path, "describe", "--type", "json"],
            environment: try Self.privateTemporaryFolder(in: scratch), mergingErrors: true)
        let text = described.output
        #expect(described.status == 0, "\(manifest)\n\(text)")
        #expect(text.contains("\"product_dependencies\""), "\(text)")
    }

    /// A package depending on Prefs sees the four libraries and the `prefs` command; the demo, the test helpers
    /// and the benchmarks (a package of their own) are not products.
    @Test func aDependentSeesOnlyTheLibrariesAndTheCommand() throws {
        // A scratch folder of its own: the running `swift test` holds the lock of the checkout's `.build`.
        let scratch = FileManager.default.temporaryDirectory.appending(path: "prefs-products-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let dumped = try ChildProcess.run(
            URL(filePath: "/usr/bin/env"),
            ["swift", "package", "--package-path", Self.root.path, "--scratch-path", scratch.path, "dump-package"],
            environment: try Self.privateTemporaryFolder(in: scratch))
        #expect(dumped.status == 0, "\(dumped.error)")
        struct Manifest: Decodable {
            struct Product: Decodable { let name: String }
            let products: [Product]
        }
        let manifest = try JSONDecoder().decode(Manifest.self, from: Data(dumped.output.utf8))
        #expect(
            Set(manifest.products.map(\.name)) == ["Prefs", "PrefsTesting", "PrefsPostgres", "PrefsKeyring", "prefs"])
    }

    /// The toolchain and platforms the manifest declares are the ones the code needs (`weak let` is Swift 6.2's,
    /// Synchronization's `Mutex` sets each Apple minimum), the docs name the same, and libsecret, a Linux desktop's,
    /// is linked on Linux only.
    @Test func theManifestNeedsSwift62AndDeclaresEachPlatformItIsWrittenFor() throws {
        let scratch = FileManager.default.temporaryDirectory.appending(path: "prefs-platforms-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let dumped = try ChildProcess.run(
            URL(filePath: "/usr/bin/env"),
            ["swift", "package", "--package-path", Self.root.path, "--scratch-path", scratch.path, "dump-package"],
            environment: try Self.privateTemporaryFolder(in: scratch))
        #expect(dumped.status == 0, "\(dumped.error)")
        let manifest = try #require(
            try JSONSerialization.jsonObject(with: Data(dumped.output.utf8)) as? [String: Any])
        let tools = (manifest["toolsVersion"] as? [String: Any])?["_version"] as? String
        #expect(tools == "6.2.0")
        let platforms = (manifest["platforms"] as? [[String: Any]] ?? []).map {
            "\($0["platformName"] ?? "") \($0["version"] ?? "")"
        }
        #expect(
            platforms == [
                "macos 15.0", "ios 18.0", "maccatalyst 18.0", "tvos 18.0", "watchos 11.0", "visionos 2.0",
            ])
        // Each Linux-only dependency, as `dependent -> dependency`.
        var linuxOnly: [String] = []
        for target in manifest["targets"] as? [[String: Any]] ?? [] {
            for dependency in target["dependencies"] as? [[String: Any]] ?? [] {
                guard let target = target["name"] as? String,
                    let named = (dependency["target"] ?? dependency["byName"]) as? [Any],
                    let condition = named.last as? [String: Any]
                else { continue }
                #expect(condition["platformNames"] as? [String] == ["linux"], "\(target) -> \(named)")
                linuxOnly.append("\(target) -> \(named.first ?? "")")
            }
        }
        #expect(
            linuxOnly.sorted() == [
                "PrefsCLICore -> PrefsKeyring", "PrefsKeyring -> CLibSecret", "PrefsKeyringTests -> CLibSecret",
            ])
        // The docs: the same version and, in the platform table, the same minimums.
        let benchmarks = try String(contentsOf: Self.root.appending(path: "Benchmarks/Package.swift"), encoding: .utf8)
        #expect(benchmarks.hasPrefix("// swift-tools-version: 6.2\n"))
        // A Homebrew step is in the platform table only, beside "written for, untested".
        for document in [
            "README.md", "Sources/Prefs/Prefs.docc/Prefs.md", "Sources/Prefs/Prefs.docc/GettingStarted.md",
        ] {
            let text = try String(contentsOf: Self.root.appending(path: document), encoding: .utf8)
            #expect(text.contains("Swift 6.2 or later"), "\(document)")
            let table = try Self.platformTable(in: document)
            let outside = text.split(separator: "\n").filter { !table.contains($0) }
            #expect(!outside.contains { $0.contains("brew install") || $0.contains("Swift 6 ") }, "\(document)")
        }
        let header = try #require(try Self.platformTable(in: "README.md").first)
        #expect(header == "| product | Linux | macOS 15 | iOS 18, Mac Catalyst 18, tvOS 18, watchOS 11, visionOS 2 |")
    }

    /// The lines of the platform table of `document`: one row per product, one column per platform.
    static func platformTable(in document: String) throws -> [Substring] {
        let text = try String(contentsOf: root.appending(path: document), encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard let start = lines.firstIndex(where: { $0.hasPrefix("| product | Linux |") }) else { return [] }
        return Array(lines[start...].prefix { $0.hasPrefix("|") })
    }

    /// README and the catalog's landing page show one platform table, word for word, with a row for each product
    /// and the vault.
    @Test func thePlatformTableIsTheSameInTheReadmeAndTheCatalog() throws {
        let readme = try Self.platformTable(in: "README.md")
        #expect(readme == (try Self.platformTable(in: "Sources/Prefs/Prefs.docc/Prefs.md")))
        let products = readme.dropFirst(2).map { $0.split(separator: "|").first?.trimmingCharacters(in: .whitespaces) }
        #expect(
            products == [
                "`Prefs`, `PrefsTesting`", "the vault: `EncryptedFileStore`, `@SecureStoredValue`", "`PrefsPostgres`",
                "`PrefsKeyring`", "`prefs`",
            ])
    }
}
