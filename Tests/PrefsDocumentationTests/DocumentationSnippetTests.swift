import Foundation
import PrefsTestSupport
import TestThreads
import Testing

/// Snippets of the README and the articles that a reader copies into a `main.swift`, type-checked exactly as written
/// with `swiftc` against the modules this build made (DocumentationExamplesTests runs the articles' declarations;
/// this checks that the text itself compiles as top-level code).
@Suite(.ownThreads) struct DocumentationSnippetTests {
    static let root = URL(filePath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The model a reader copies first, and the lines that say what throws and what is reported, as one
    /// `main.swift`, warnings being errors: a `try` before a wrapper's `set` would warn that nothing throws there,
    /// and the store's typed `set` must be in `try`.
    @Test func theReadmesOpeningExamplesCompileAsWritten() throws {
        try Self.typecheck(
            blocks(in: "README.md", containing: ["final class Preferences", "PrefsConfig.errorHandler = {"]))
    }

    /// The README is a front door: under 200 lines, opening with the two commands, its testing sample importing the
    /// app's module as a test target must.
    @Test func theReadmeIsShortOpensWithItsTwoCommandsAndShowsTheTestableImport() throws {
        let text = try String(contentsOf: Self.root.appending(path: "README.md"), encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        #expect(lines.count < 200, "README.md is \(lines.count) lines")
        let opening = Array(lines.prefix(8))
        #expect(opening.first == "# Prefs" && opening.dropFirst().first(where: { !$0.isEmpty }) == "```sh")
        let commands = opening.drop { $0 != "```sh" }.dropFirst().prefix { $0 != "```" }
            .filter { !$0.hasPrefix(" ") }.map { $0.split(separator: "#")[0].trimmingCharacters(in: .whitespaces) }
        #expect(commands == ["make demo", "make test"], "\(commands)")
        let testing = try #require(Self.swiftBlocks(in: "README.md").first { $0.contains(".isolatedPreferences") })
        #expect(testing.hasPrefix("@testable import MyApp\nimport PrefsTesting\n"), "\(testing)")
    }

    /// The README's install table names, for each product, the system package its targets link: Package.swift's
    /// providers for libsodium and libpq, the keyring's module map for libsecret (which the install script installs),
    /// and all three for `prefs`, whose core depends on the three libraries.
    @Test func theReadmesInstallTableNamesWhatEachProductLinks() throws {
        func text(_ path: String) throws -> String {
            try String(contentsOf: Self.root.appending(path: path), encoding: .utf8)
        }
        let rows = try text("README.md").split(separator: "\n").filter { $0.hasPrefix("| ") }
        func row(_ start: String) throws -> Substring { try #require(rows.first { $0.hasPrefix("| \(start)") }) }
        #expect(try row("`Prefs`").contains("libsodium-dev") && row("`Prefs`").contains("pkg-config"))
        #expect(try row("`PrefsPostgres`").contains("`libpq-dev`"))
        #expect(try row("`PrefsKeyring`").contains("`libsecret-1-dev`"))
        #expect(try row("the `prefs` command-line tool").contains("all three"))
        let manifest = try text("Package.swift")
        #expect(manifest.contains(#"pkgConfig: "libsodium","#) && manifest.contains(#".apt(["libsodium-dev"])"#))
        #expect(manifest.contains(#"pkgConfig: "libpq","#) && manifest.contains(#".apt(["libpq-dev"])"#))
        #expect(try text("Sources/CLibSecret/module.modulemap").contains(#"link "secret-1""#))
        #expect(try text("scripts/install-deps.sh").contains("libsecret-1-dev"))
        #expect(
            manifest.contains(
                #"name: "PrefsCLICore",\#n            dependencies: [\#n                "Prefs", "PrefsPostgres", .target(name: "PrefsKeyring""#
            ))
    }

    @Test func theReadmesPostgreSQLSnippetCompilesAsWritten() throws {
        try Self.typecheck(blocks(in: "README.md", containing: ["PostgresStore(connection:"]))
    }

    /// The PrefsPostgres module page's example (reference pages are built for every library product).
    @Test func thePostgresModulePagesSnippetCompilesAsWritten() throws {
        try Self.typecheck(
            blocks(in: "Sources/Prefs/Prefs.docc/PrefsPostgres.md", containing: ["PostgresStore(connection:"]))
    }

    /// SecureValues: the one line that keeps the default vault's key in the keyring or a service credential.
    @Test func theVaultKeyConfigurationCompilesAsWritten() throws {
        try Self.typecheck(
            blocks(
                in: "Sources/Prefs/Prefs.docc/SecureValues.md", containing: ["secureStoreKey: .keyring()"])
        )
    }

    /// DescribingYourPreferences: the declarations with a schema, and the call that publishes it.
    @Test func theDescribedSettingsCompileAsWritten() throws {
        try Self.typecheck(
            blocks(
                in: "Sources/Prefs/Prefs.docc/DescribingYourPreferences.md",
                containing: ["PrefsConfig.publishSchema()   // once at launch"]))
    }

    /// For each of `markers`, the one ```swift block of `document` that contains it, joined into one source.
    func blocks(in document: String, containing markers: [String]) throws -> String {
        let blocks = try Self.swiftBlocks(in: document)
        return try markers.map { marker in
            let matching = blocks.filter { $0.contains(marker) }
            try #require(matching.count == 1, "one block of \(document) contains \(marker)")
            return matching[0]
        }.joined(separator: "\n")
    }

    /// The ```swift blocks of a document of this repository.
    static func swiftBlocks(in document: String) throws -> [String] {
        let text = try String(contentsOf: root.appending(path: document), encoding: .utf8)
        var blocks: [String] = []
        var current: [Substring]?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil, line.hasPrefix("```swift") {
                current = []
            } else if current != nil, line.hasPrefix("```") {
                blocks.append(current!.joined(separator: "\n"))
                current = nil
            } else {
                current?.append(line)
            }
        }
        return blocks
    }

    /// Type-checks `source` as a `main.swift` against the built `Prefs`, `PrefsPostgres` and `PrefsKeyring` modules,
    /// warnings being errors: a sample a reader copies must compile cleanly (a `try await` that calls a synchronous
    /// overload warns).
    static func typecheck(_ source: String) throws {
        let (status, output) = try compile(source)
        #expect(status == 0, "\(source)\n\(output)")
    }

    /// A type Prefs cannot store (neither `Codable` nor `PrefValueConvertible`) gets an error at its declaration that
    /// names what it lacks (`Codable` is reported as its two halves, `Encodable` and `Decodable`), for each form of
    /// declaration: never "no exact matches" with a list of every initialiser Prefs has.
    @Test func aTypePrefsCannotStoreGetsAnErrorNamingTheRequirement() throws {
        for declaration in [
            "@StoredValue(key: \"spot\") var spot = Spot(x: 1)",
            "let spot = StoredValue(key: \"spot\", default: Spot(x: 1))",
            "static let spot = PrefKey(\"spot\", default: Spot(x: 1))",
        ] {
            let (status, output) = try Self.compile(
                "import Prefs\nstruct Spot: Equatable, Sendable { var x: Int }\nfinal class Model {\n    \(declaration)\n}\n"
            )
            let errors = output.split(separator: "\n").filter { $0.contains("error:") && !$0.hasPrefix(" ") }
            #expect(status != 0, "\(declaration) compiled")
            #expect((1...2).contains(errors.count), "\(declaration):\n\(output)")
            for error in errors {
                #expect(error.contains("main.swift:4:"), "not at the declaration: \(error)")
                #expect(
                    error.contains("'Spot' conform to")
                        && ["Encodable", "Decodable", "PrefValueConvertible"].contains { error.contains("'\($0)'") },
                    "\(declaration): \(error)")
            }
            #expect(!output.contains("no exact matches") && !output.contains("candidate"), "\(output)")
        }
    }

    /// Type-checks `source` as a program that imports the library products; returns the compiler's status and output.
    /// An app written against 0.x, with the names 1.0 renamed (`Tests/Fixtures/AppWrittenFor0x.swift`), builds, and
    /// every warning it gets is a deprecation that names what to write instead.
    @Test func anAppWrittenFor0xBuildsWithDeprecationWarningsOnly() throws {
        let source = try String(
            contentsOf: Self.root.appending(path: "Tests/Fixtures/AppWrittenFor0x.swift"), encoding: .utf8)
        let (status, output) = try Self.compile(source, warningsAsErrors: false)
        #expect(status == 0, "\(output)")
        let warnings = output.split(separator: "\n").filter { $0.contains("warning:") && !$0.hasPrefix(" ") }
        #expect(warnings.count >= 10, "\(output)")
        for warning in warnings {
            #expect(warning.contains("deprecated"), "\(warning)")
        }
    }

    static func compile(_ source: String, warningsAsErrors: Bool = true) throws -> (status: Int32, output: String) {
        let folder = try TempDir("prefs-snippet")
        defer { folder.cleanup() }
        try source.write(to: folder.file("main.swift"), atomically: true, encoding: .utf8)
        let modules = builtExecutable(named: "Modules").path(percentEncoded: false)
        // The system libraries' headers, where SwiftPM finds them.
        let (_, flags) = try run(["pkg-config", "--cflags", "libpq", "libsodium", "libsecret-1"])
        let includes = flags.split(separator: " ").filter { $0.hasPrefix("-I") }.flatMap { ["-Xcc", String($0)] }
        let maps = ["CSodium", "CLibPQ", "CLibSecret"].flatMap {
            ["-Xcc", "-fmodule-map-file=" + root.appending(path: "Sources/\($0)/module.modulemap").path()]
        }
        return try run(
            ["swiftc", "-typecheck", "-swift-version", "6"] + (warningsAsErrors ? ["-warnings-as-errors"] : [])
                + ["-I", modules] + maps + includes
                + [folder.path("main.swift")])
    }

    /// Runs a tool found on `PATH` to completion.
    static func run(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let exit = try ChildProcess.run(URL(filePath: "/usr/bin/env"), arguments, mergingErrors: true)
        return (exit.status, exit.output.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
