import Foundation
import PrefsTestSupport
import TestThreads
import Testing

/// The public API check of `make test` (scripts/api.sh): it reads a module's public interface from the compiled
/// module and fails on any difference from the baseline in api/. Here it runs on a module of two versions, compiled
/// for the test, the second changing what a user's code depends on.
@Suite(.ownThreads) struct APIBaselineTests {
    static let script = DocumentationSnippetTests.root.appending(path: "scripts/api.sh").path(percentEncoded: false)

    static let first = """
        public func greet(name: String, times: Int = 1) -> String { name }
        public struct Greeting {
            public var text: String
            public init(text: String) { self.text = text }
        }
        """
    /// The default of `times` is gone (the compiled name stays the same) and `text` became read-only.
    static let second = """
        public func greet(name: String, times: Int) -> String { name }
        public struct Greeting {
            public let text: String
            public init(text: String) { self.text = text }
        }
        """

    @Test func aChangedPublicSignatureFailsTheCheckNamingIt() throws {
        let folder = try TempDir("prefs-api-check")
        defer { folder.cleanup() }
        let baseline = try Self.surface(of: Self.first, in: folder.file("first"))
        let current = try Self.surface(of: Self.second, in: folder.file("second"))

        let same = try DocumentationSnippetTests.run(["bash", Self.script, "compare", baseline, baseline])
        #expect(same.status == 0, "\(same.output)")
        #expect(same.output.isEmpty)

        let changed = try DocumentationSnippetTests.run(["bash", Self.script, "compare", baseline, current])
        #expect(changed.status == 1, "\(changed.output)")
        let lines = changed.output.split(separator: "\n").map(String.init)
        #expect(
            lines.contains(
                "-func Fixture.greet(name: Swift.String, times: Swift.Int) -> Swift.String [default arguments 2]"),
            "\(changed.output)")
        #expect(
            lines.contains("+func Fixture.greet(name: Swift.String, times: Swift.Int) -> Swift.String"),
            "\(changed.output)")
        #expect(lines.contains("-var Fixture.Greeting.text : Swift.String [{ get set }]"), "\(changed.output)")
        #expect(lines.contains("+var Fixture.Greeting.text : Swift.String [{ get }]"), "\(changed.output)")
    }

    /// Compiles `source` as module `Fixture` into `folder` and writes the interface `scripts/api.sh` reads from it;
    /// returns that file's path.
    static func surface(of source: String, in folder: URL) throws -> String {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let file = folder.appending(path: "Fixture.swift")
        try source.write(to: file, atomically: true, encoding: .utf8)
        let module = folder.appending(path: "Fixture.swiftmodule").path(percentEncoded: false)
        let compiled = try DocumentationSnippetTests.run(
            ["swiftc", "-emit-module", "-module-name", "Fixture", "-parse-as-library", "-emit-module-path", module]
                + [file.path(percentEncoded: false)])
        try #require(compiled.status == 0, "\(compiled.output)")
        let interface = try DocumentationSnippetTests.run(
            ["bash", script, "surface", folder.path(percentEncoded: false), "Fixture"])
        try #require(interface.status == 0, "\(interface.output)")
        let path = folder.appending(path: "Fixture.txt")
        try (interface.output + "\n").write(to: path, atomically: true, encoding: .utf8)
        return path.path(percentEncoded: false)
    }
}
