import Foundation
import TestThreads
import Testing

/// docs/PROMISES.md names the test of every promise as `` `File.swift` › `testA`, `testB` ``: each file it names is
/// one file under Tests/, and each test it names (or, for a whole suite, the suite) is declared there, so a test
/// moved, renamed or deleted cannot leave the list pointing at nothing.
@Suite(.ownThreads) struct PromisesDocumentTests {
    static let root = URL(filePath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// One `` `File.swift` › `a`, `b` `` of the document: the file as written (a name, or a path ending in one)
    /// and the tests named after it.
    struct Reference: CustomStringConvertible {
        let file: String
        let tests: [String]
        var description: String { "\(file) › \(tests.joined(separator: ", "))" }
    }

    /// Every reference of `text`, and how many `›` are not part of one (a reference written some other way).
    static func references(in text: String) throws -> (found: [Reference], unparsed: Int) {
        let name = "[A-Za-z_][A-Za-z0-9_]*"
        let pattern = try Regex("`((?:\(name)/)*\(name)\\.swift)` › (`\(name)`(?:, `\(name)`)*)")
        var found: [Reference] = []
        var covered = 0
        for match in text.matches(of: pattern) {
            let file = String(try #require(match.output[1].substring))
            let list = try #require(match.output[2].substring)
            let tests = list.split(separator: ", ").map { String($0.dropFirst().dropLast()) }
            found.append(Reference(file: file, tests: tests))
            covered += text[match.range].count { $0 == "›" }
        }
        return (found, text.count { $0 == "›" } - covered)
    }

    /// The paths, relative to the package, of every Swift file under Tests/.
    static func testFiles() throws -> [String] {
        let tests = root.appending(path: "Tests")
        let enumerator = try #require(FileManager.default.enumerator(at: tests, includingPropertiesForKeys: nil))
        let prefix = root.path(percentEncoded: false)
        return enumerator.compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" }.map {
            String($0.standardizedFileURL.path(percentEncoded: false).dropFirst(prefix.count))
        }
    }

    /// Whether `source` declares a function `name` (`func name(` or `func name<`) or a suite `struct name`.
    static func declares(_ source: String, _ name: String) throws -> Bool {
        try source.contains(Regex("\\bfunc \(name)\\s*[(<]|\\bstruct \(name)\\b"))
    }

    @Test func everyTestNamedInPromisesExists() throws {
        // The parser, on references it must and must not find.
        let sample = """
            | a | `StoreTests.swift` › `one`, `two`; `PrefsTestingTests/DemoTests.swift` › `three` |
            | b | `Odd.swift` (CLI) › `four` |
            """
        let parsed = try Self.references(in: sample)
        #expect(parsed.found.map(\.file) == ["StoreTests.swift", "PrefsTestingTests/DemoTests.swift"])
        #expect(parsed.found.map(\.tests) == [["one", "two"], ["three"]])
        #expect(parsed.unparsed == 1)
        #expect(try Self.declares("    @Test func one() {}\n    func two<T>(_: T) {}", "two"))
        #expect(try !Self.declares("    @Test func oneMore() {}", "one"))
        #expect(try Self.declares("@Suite struct OneTests {", "OneTests"))

        let document = try String(contentsOf: Self.root.appending(path: "docs/PROMISES.md"), encoding: .utf8)
        let (references, unparsed) = try Self.references(in: document)
        #expect(unparsed == 0, "a test named in a form other than `File.swift` › `testName`")
        #expect(references.count > 100, "the document names the tests of every promise")
        let files = try Self.testFiles()
        // The introduction shows the form itself: `File.swift` › `testName`.
        for reference in references where reference.file != "File.swift" {
            let matching = files.filter { $0 == "Tests/" + reference.file || $0.hasSuffix("/" + reference.file) }
            guard matching.count == 1, let path = matching.first else {
                Issue.record("\(reference): \(matching.count) files under Tests/ are named \(reference.file)")
                continue
            }
            let source = try String(contentsOf: Self.root.appending(path: path), encoding: .utf8)
            for test in reference.tests {
                #expect(
                    try Self.declares(source, test), "\(reference): \(path) declares neither func nor suite \(test)")
            }
        }
    }
}
