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
}
