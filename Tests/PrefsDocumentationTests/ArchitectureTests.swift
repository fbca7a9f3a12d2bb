import Foundation
import PrefsTestSupport
import TestThreads
import Testing

/// The folders of `Sources/Prefs` are layers, listed here from the bottom up. A file may use what its own layer and
/// the layers below declare, never what a layer above declares: the folder list reads as the architecture, and no
/// cycle (like the one between configuration and the stores that once crashed apps at launch) can come back.
@Suite(.ownThreads) struct ArchitectureTests {
    static let layers: [(name: String, folders: [String])] = [
        ("values", ["Values"]),
        ("reporting", ["Reporting"]),
        ("platform", ["Platform"]),
        ("locations", ["Locations"]),
        ("formats", ["Formats"]),
        ("crypto", ["Secure"]),
        ("schema", ["Schema"]),
        ("stores", ["Stores"]),
        ("configuration", ["Configuration"]),
        ("wrappers", ["Wrappers"]),
    ]

    static let sources = URL(filePath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appending(path: "Sources/Prefs")

    /// Every Swift file under `folder`, with its text minus comments and string literals.
    static func files(in folder: String) throws -> [(path: String, code: String)] {
        let root = sources.appending(path: folder)
        guard let enumerator = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil) else {
            return []
        }
        return try enumerator.compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" }.map { url in
            let text = try String(contentsOf: url, encoding: .utf8)
            let code = text.split(separator: "\n", omittingEmptySubsequences: false).map { line -> Substring in
                let trimmed = line.drop { $0 == " " }
                if trimmed.hasPrefix("//") { return "" }
                return line.split(separator: "\"", omittingEmptySubsequences: false).enumerated()
                    .filter { $0.offset.isMultiple(of: 2) }.map(\.element).joined(separator: " ")[...]
            }.joined(separator: "\n")
            return (String(url.path.dropFirst(sources.path.count + 1)), code)
        }
    }

    /// The types, protocols and type aliases a file declares at top level.
    static func declarations(in code: String) -> Set<String> {
        let pattern =
            /^(?:public |package |internal |fileprivate |private |final |open )*(?:class|struct|enum|protocol|actor|typealias) ([A-Za-z_][A-Za-z0-9_]*)/
        var names: Set<String> = []
        for line in code.split(separator: "\n") {
            if let match = line.firstMatch(of: pattern) { names.insert(String(match.1)) }
        }
        return names
    }

    /// Every test runs on threads of its own (`.ownThreads`, see Tests/TestThreads), never on Swift's cooperative
    /// pool, so no test's blocking work can hold up another test's steps: each top-level type of a test file that
    /// holds tests carries the trait, and so does each test outside a type.
    @Test func everyTestSuiteRunsOnThreadsOfItsOwn() throws {
        let tests = Self.sources.deletingLastPathComponent().deletingLastPathComponent().appending(path: "Tests")
        let enumerator = try #require(FileManager.default.enumerator(at: tests, includingPropertiesForKeys: nil))
        let declaration =
            #/^(?:@[A-Za-z]+(?:\(.*\))? )*(?:(?:public|private|fileprivate|final) )*(?:struct|class|enum|actor) /#
        var missing: [String] = []
        for case let url as URL in enumerator where url.pathExtension == "swift" {
            let lines = try String(contentsOf: url, encoding: .utf8).split(
                separator: "\n", omittingEmptySubsequences: false)
            // Each top-level declaration with the attribute lines above it, up to the next one.
            var starts: [Int] = []
            for (index, line) in lines.enumerated() where line.firstMatch(of: declaration) != nil {
                starts.append(index)
            }
            for (position, start) in starts.enumerated() {
                let end = position + 1 < starts.count ? starts[position + 1] : lines.count
                guard lines[start..<end].contains(where: { $0.hasPrefix("    @Test") }) else { continue }
                // Its attributes: the lines above it up to a comment, a blank line or the end of what came before
                // (an attribute may be wrapped over several lines).
                var first = start
                while first > 0, !lines[first - 1].hasPrefix("//"), !lines[first - 1].hasPrefix("}"),
                    !lines[first - 1].hasPrefix("import"),
                    !lines[first - 1].trimmingCharacters(in: .whitespaces).isEmpty
                {
                    first -= 1
                }
                if !lines[first...start].contains(where: { $0.contains(".ownThreads") }) {
                    missing.append("\(url.lastPathComponent):\(start + 1)")
                }
            }
            for (index, line) in lines.enumerated() where line.hasPrefix("@Test") && !line.contains(".ownThreads") {
                missing.append("\(url.lastPathComponent):\(index + 1)")
            }
        }
        #expect(missing.isEmpty, "test suites without .ownThreads: \(missing)")
    }

    @Test func everyFolderOfTheLibraryIsALayer() throws {
        let folders = try FileManager.default.contentsOfDirectory(atPath: Self.sources.path)
            .filter { !$0.hasSuffix(".docc") && !$0.hasPrefix(".") }
        #expect(Set(folders) == Set(Self.layers.flatMap(\.folders)), "no file outside the layers")
    }

    @Test func noFileUsesALayerAboveIt() throws {
        let layered = try Self.layers.map { layer in try layer.folders.flatMap { try Self.files(in: $0) } }
        var violations: [String] = []
        for (index, files) in layered.enumerated() {
            let above = layered[(index + 1)...].flatMap { $0 }.reduce(into: Set<String>()) {
                $0.formUnion(Self.declarations(in: $1.code))
            }
            for file in files {
                let words = Set(file.code.split { !($0.isLetter || $0.isNumber || $0 == "_") }.map(String.init))
                for name in words.intersection(above).sorted() {
                    violations.append("\(file.path) (\(Self.layers[index].name)) uses \(name)")
                }
            }
        }
        #expect(violations.isEmpty, "\(violations.joined(separator: "\n"))")
    }

    /// Inside `Stores/`, one backend never reaches into another's types: a backend's files (a file of the folder's
    /// root and its `+` files) name no store type but their own and the base class they extend
    /// (`FileBackedStore`), and the engine and the change feed below them name none at all; the change feed names
    /// nothing of the engine or the layers. So listing `Stores/` is the list of backends, each replaceable alone.
    @Test func noStoreReachesIntoAnotherStore() throws {
        let all = try Self.files(in: "Stores")
        let root = all.filter { !$0.path.dropFirst("Stores/".count).contains("/") }
        func backend(of path: String) -> String {
            String(path.dropFirst("Stores/".count).prefix { $0 != "+" && $0 != "." })
        }
        // Each backend's types, by the backend that declares them; the protocol and shared values are no backend.
        var types: [String: Set<String>] = [:]
        for file in root { types[backend(of: file.path), default: []].formUnion(Self.declarations(in: file.code)) }
        for shared in ["KeyValueStore", "DamagedFilePolicy"] { types[shared] = nil }
        let storeTypes = types.values.reduce(into: Set<String>()) { $0.formUnion($1) }
        func words(_ code: String) -> Set<String> {
            Set(code.split { !($0.isLetter || $0.isNumber || $0 == "_") }.map(String.init))
        }
        var violations: [String] = []
        for file in root {
            let own = types[backend(of: file.path)] ?? []
            // A subclass may name the class it extends.
            let bases = Set(file.code.matches(of: /class [A-Za-z_]+: ([A-Za-z_]+)/).map { String($0.output.1) })
            for name in words(file.code).intersection(storeTypes).subtracting(own).subtracting(bases).sorted() {
                violations.append("\(file.path) uses \(name), another store's type")
            }
        }
        let engine = all.filter { $0.path.hasPrefix("Stores/Engine/") }
        let changes = all.filter { $0.path.hasPrefix("Stores/Changes/") }
        let layers = all.filter { $0.path.hasPrefix("Stores/Layers/") }
        for file in engine + changes {
            for name in words(file.code).intersection(storeTypes).sorted() {
                violations.append("\(file.path) uses \(name): the engine and the change feed serve every store alike")
            }
        }
        let above = (engine + layers).reduce(into: Set<String>()) { $0.formUnion(Self.declarations(in: $1.code)) }
        for file in changes {
            for name in words(file.code).intersection(above).sorted() {
                violations.append("\(file.path) uses \(name): the change feed sits below the engine and the layers")
            }
        }
        #expect(violations.isEmpty, "\(violations.joined(separator: "\n"))")
    }

    /// README: "`PrefsPostgres` is its own product, so apps that do not use it never link libpq"; GettingStarted:
    /// `PrefsTesting` "is the only part of Prefs that imports Swift Testing, so apps never link it"; SecureValues:
    /// the keyring lives in `PrefsKeyring`, so `Prefs` links no libsecret, GLib or D-Bus.
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
        #expect(
            core.isDisjoint(with: ["CLibPQ", "PrefsPostgres", "CLibSecret", "PrefsKeyring", "Testing", "XCTest"]),
            "\(core.sorted())")
        #expect(try imports(under: "Sources/PrefsPostgres").isDisjoint(with: ["Testing", "XCTest", "CLibSecret"]))
        #expect(try imports(under: "Sources/PrefsKeyring").isSuperset(of: ["CLibSecret"]))
        #expect(try imports(under: "Sources/PrefsKeyring").isDisjoint(with: ["CLibPQ", "Testing", "XCTest"]))
        #expect(try imports(under: "Sources/PrefsTesting").contains("Testing"))
        // The manifest: the Prefs target depends on libsodium only.
        let manifest = try String(contentsOf: root.appending(path: "Package.swift"), encoding: .utf8)
        let target = try #require(manifest.range(of: "name: \"Prefs\",\n            dependencies: ["))
        let dependencies = manifest[target.upperBound...].prefix { $0 != "]" }
        #expect(dependencies == "\"CSodium\"")
    }
}
