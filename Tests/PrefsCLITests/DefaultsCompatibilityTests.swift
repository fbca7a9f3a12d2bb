import Foundation
import Prefs
import PrefsTestSupport
import TestThreads
import Testing

/// What a `defaults` user types first, run through the real `prefs`.
@Suite(.ownThreads) struct DefaultsCompatibilityTests {
    func stored(_ sandbox: Sandbox, _ domain: String, _ key: String) throws -> PrefValue? {
        try SuiteFileStore(suiteName: domain, directory: sandbox.config).value(forKey: key)
    }

    static let mayFirst = Date(timeIntervalSinceReferenceDate: 736_257_600)  // 2024-05-01 12:00:00 +0000

    @Test(arguments: [
        (["-int", "5"], PrefValue.int(5)), (["-integer", "-3"], .int(-3)), (["-float", "0.5"], .double(0.5)),
        (["-bool", "YES"], .bool(true)), (["-bool", "NO"], .bool(false)), (["-boolean", "true"], .bool(true)),
        (["-bool", "false"], .bool(false)), (["-string", "12"], .string("12")),
        (["-date", "2024-05-01 12:00:00 +0000"], .date(mayFirst)),
        (["-data", "cafe01"], .data(Data([0xCA, 0xFE, 1]))),
        (["-array", "a", "b", "c"], .array([.string("a"), .string("b"), .string("c")])), (["-array"], .array([])),
        (["-array", "-int", "1", "-bool", "YES", "x"], .array([.int(1), .bool(true), .string("x")])),
        (["-dict", "k", "v", "n", "-int", "2"], .dictionary(["k": .string("v"), "n": .int(2)])),
    ])
    func typeFlagsStoreTypedValues(flags: [String], value: PrefValue) throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        let result = try sandbox.prefs(["write", "app", "key"] + flags)
        #expect(result.status == 0 && result.output.isEmpty && result.error.isEmpty, "\(result)")
        #expect(try stored(sandbox, "app", "key") == value)
    }

    @Test func arrayAddAppendsAndDictAddMerges() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try sandbox.prefs("write", "app", "tags", "-array-add", "swift")  // a missing key starts empty
        try sandbox.prefs("write", "app", "tags", "-array-add", "linux", "-int", "3")
        #expect(try stored(sandbox, "app", "tags") == .array([.string("swift"), .string("linux"), .int(3)]))
        try sandbox.prefs("write", "app", "flags", "-dict", "a", "-bool", "YES", "b", "x")
        try sandbox.prefs("write", "app", "flags", "-dict-add", "b", "y", "c", "-int", "1")
        #expect(
            try stored(sandbox, "app", "flags")
                == .dictionary(["a": .bool(true), "b": .string("y"), "c": .int(1)]))
        try sandbox.prefs("write", "app", "name", "-string", "x")
        let before = try Data(contentsOf: sandbox.plist("app"))
        for flags in [["-array-add", "y"], ["-dict-add", "k", "v"]] {
            let refused = try sandbox.prefs(["write", "app", "name"] + flags)
            #expect(refused.status == 2 && refused.isOneLineFailure && refused.error.contains("a string"), "\(refused)")
        }
        #expect(try Data(contentsOf: sandbox.plist("app")) == before)
    }

    @Test(arguments: [
        ["-int", "x"], ["-int"], ["-int", "1", "2"], ["-bool", "maybe"], ["-date", "2024-05-01 12:00:00"],
        ["-dict", "k"], ["-array", "-array"], ["-int", "5", "--type", "int"], ["plain", "extra"],
    ])
    func flagMistakesChangeNothing(flags: [String]) throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try sandbox.prefs("write", "app", "key", "kept")
        let before = try Data(contentsOf: sandbox.plist("app"))
        let result = try sandbox.prefs(["write", "app", "key"] + flags)
        #expect(result.status == 2 && result.isOneLineFailure, "\(result)")
        #expect(try Data(contentsOf: sandbox.plist("app")) == before)
    }

    @Test func readPrintsTheDomainAsAnOldStylePropertyList() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try SuiteFileStore(suiteName: "app", directory: sandbox.config).replaceAll([
            "theme": .string("dark"), "fontSize": .double(13.5), "count": .int(3), "haptics": .bool(true),
            "opened": .date(Self.mayFirst + 0.25), "blob": .data(Data([0xCA, 0xFE])), "empty": .array([]),
            "tags": .array([.string("swift"), .string("two words")]), "note": .string("say \"hi\"\n"),
            "nested": .dictionary(["on": .bool(false), "list": .array([.int(1)])]),
        ])
        let result = try sandbox.prefs("read", "app")
        #expect(result.status == 0 && result.error.isEmpty, "\(result)")
        #expect(
            result.output == """
                {
                    blob = <cafe>;
                    count = 3;
                    empty = ();
                    fontSize = "13.5";
                    haptics = 1;
                    nested = {
                        list = (
                            1
                        );
                        on = 0;
                    };
                    note = "say \\"hi\\"\\n";
                    opened = "2024-05-01 12:00:00.25 +0000";
                    tags = (
                        swift,
                        "two words"
                    );
                    theme = dark;
                }

                """)
        // The date text `read` prints is what `write -date` reads back as the same date.
        try sandbox.prefs("write", "app", "copy", "-date", "2024-05-01 12:00:00.25 +0000")
        #expect(try stored(sandbox, "app", "copy") == .date(Self.mayFirst + 0.25))
    }

    @Test func readTypeNamesTheTypeAsDefaultsDoes() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try SuiteFileStore(suiteName: "app", directory: sandbox.config).replaceAll([
            "b": .bool(true), "i": .unsignedInt(.max), "d": .double(1), "f": .float(1), "s": .string("x"),
            "t": .date(Self.mayFirst), "x": .data(Data()), "a": .array([]), "o": .dictionary([:]),
        ])
        let expected = [
            "b": "boolean", "i": "integer", "d": "float", "f": "float (single precision)", "s": "string",
            "t": "date", "x": "data", "a": "array", "o": "dictionary",
        ]
        for (key, type) in expected {
            #expect(try sandbox.prefs("read-type", "app", key).output == "Type is \(type)\n", "\(key)")
        }
        let missing = try sandbox.prefs("read-type", "app", "nope")
        #expect(missing.status == 1 && missing.isOneLineFailure)
    }

    @Test func renameMovesTheValue() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try sandbox.prefs("write", "app", "old", "-int", "7")
        try sandbox.prefs("write", "app", "other", "x")
        try sandbox.prefs("rename", "app", "old", "new").expectSuccess()
        #expect(try stored(sandbox, "app", "new") == .int(7))
        #expect(try stored(sandbox, "app", "old") == nil)
        #expect(try stored(sandbox, "app", "other") == .string("x"))
        let missing = try sandbox.prefs("rename", "app", "old", "again")
        #expect(missing.status == 1 && missing.isOneLineFailure, "\(missing)")
        #expect(try sandbox.prefs("rename", "app", "new", "").status == 2)
        #expect(try stored(sandbox, "app", "new") == .int(7))
        // A value already under the new name is replaced.
        try sandbox.prefs("rename", "app", "new", "other").expectSuccess()
        #expect(try SuiteFileStore(suiteName: "app", directory: sandbox.config).allValues() == ["other": .int(7)])
    }

    @Test func findSearchesKeysValuesAndDomainNames() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try sandbox.prefs("write", "com.example.notes", "theme", "Solarized Dark")
        try sandbox.prefs("write", "com.example.notes", "size", "-int", "3")
        try sandbox.prefs("write", "other", "darkMode", "-bool", "YES")
        try sandbox.prefs("write", "other", "tags", "-array", "a", "b")
        try sandbox.prefs("write", "other", "nested", "-dict", "k", "-array-add", "x")
        try sandbox.prefs("write", "other", "nested", "-dict", "colors", "darker")
        let found = try sandbox.prefs("find", "DARK")
        #expect(
            found.output == """
                Found 1 key in domain com.example.notes: {
                    theme = "Solarized Dark";
                }
                Found 2 keys in domain other: {
                    darkMode = 1;
                    nested = {
                        colors = darker;
                    };
                }

                """, "\(found)")
        #expect(try sandbox.prefs("find", "notes").output.contains("size = 3;"), "a domain name matches whole")
        let none = try sandbox.prefs("find", "absent")
        #expect(none.status == 1 && none.isOneLineFailure, "\(none)")
    }

    @Test func propertyListExportAndImport() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        let values: [String: PrefValue] = [
            "flag": .bool(true), "count": .int(-3), "big": .unsignedInt(.max), "ratio": .double(0.1),
            "name": .string("ünïcødé"), "blob": .data(Data([0, 255])), "when": .date(Self.mayFirst),
            "nested": .dictionary(["list": .array([.int(1), .string("x")])]),
        ]
        try SuiteFileStore(suiteName: "source", directory: sandbox.config).replaceAll(values)

        // XML to a file, as `defaults export DOMAIN PATH`: Foundation reads it.
        try sandbox.prefs("export", "source", sandbox.path("source.plist")).expectSuccess()
        let xml = try Data(contentsOf: sandbox.file("source.plist"))
        #expect(String(decoding: xml, as: UTF8.self).hasPrefix("<?xml"))
        let foundation = try PropertyListSerialization.propertyList(from: xml, format: nil) as? [String: Any]
        #expect(foundation?["name"] as? String == "ünïcødé" && foundation?.count == values.count)
        try sandbox.prefs("import", "fromXML", sandbox.path("source.plist")).expectSuccess()
        #expect(try SuiteFileStore(suiteName: "fromXML", directory: sandbox.config).allValues() == values)

        // XML and binary on standard output.
        let stdoutXML = try sandbox.prefs("export", "source", "-")
        #expect(stdoutXML.output == String(decoding: xml, as: UTF8.self))
        let binary = try sandbox.prefs("export", "source", "-", "--format", "binary")
        #expect(binary.output.hasPrefix("bplist00"))

        // The domain's own file imports as it is, and a float and a fraction of a second stay exact in binary.
        // (XML keeps 0.1 as a float, read back from its shorter text, but 0.5 reads back as a double.)
        try sandbox.prefs("write", "source", "single", "-array", "x")
        try SuiteFileStore(suiteName: "source", directory: sandbox.config).setValue(.float(0.5), forKey: "single")
        try SuiteFileStore(suiteName: "source", directory: sandbox.config)
            .setValue(.date(Self.mayFirst + 0.5), forKey: "when")
        let exact = try SuiteFileStore(suiteName: "source", directory: sandbox.config).allValues()
        try sandbox.prefs("import", "copy", sandbox.plist("source").path).expectSuccess()
        #expect(try SuiteFileStore(suiteName: "copy", directory: sandbox.config).allValues() == exact)
        try sandbox.prefs("export", "source", sandbox.path("s.bin"), "--format", "binary").expectSuccess()
        try sandbox.prefs("import", "fromBinary", sandbox.path("s.bin")).expectSuccess()
        #expect(try SuiteFileStore(suiteName: "fromBinary", directory: sandbox.config).allValues() == exact)

        // XML cannot hold them: `defaults export`'s form writes a binary property list instead, says so and names
        // the values; the file imports back exactly.
        let fallback = try sandbox.prefs("export", "source", sandbox.path("lossy.plist"))
        #expect(fallback.status == 0 && fallback.error.contains("wrote a binary property list"), "\(fallback)")
        #expect(fallback.error.contains(#""single", "when""#), "the values XML cannot hold are named: \(fallback)")
        #expect(try Data(contentsOf: sandbox.file("lossy.plist")).starts(with: Data("bplist00".utf8)))
        try sandbox.prefs("import", "fromFallback", sandbox.path("lossy.plist")).expectSuccess()
        #expect(try SuiteFileStore(suiteName: "fromFallback", directory: sandbox.config).allValues() == exact)
        // Strict XML only when asked: refused, nothing written, and the message says what to use.
        let refused = try sandbox.prefs("export", "source", sandbox.path("strict.plist"), "--format", "xml")
        #expect(refused.status == 2 && refused.isOneLineFailure && refused.error.contains("--format binary"))
        #expect(refused.error.contains(#""single""#), "the first key XML cannot hold is named: \(refused)")
        #expect(!FileManager.default.fileExists(atPath: sandbox.path("strict.plist")))
        // A path ending in .json gets prefs' JSON.
        try sandbox.prefs("export", "source", sandbox.path("s.json")).expectSuccess()
        #expect(try Data(contentsOf: sandbox.file("s.json")) == Data(try sandbox.prefs("export", "source").output.utf8))
    }

    @Test func aDamagedPropertyListImportChangesNothing() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try sandbox.prefs("write", "app", "theme", "dark")
        let before = try Data(contentsOf: sandbox.plist("app"))
        for content in ["<?xml version=\"1.0\"?><plist><dict><key>a", "bplist00garbage"] {
            try Data(content.utf8).write(to: sandbox.file("bad.plist"))
            let result = try sandbox.prefs("import", "app", sandbox.path("bad.plist"))
            #expect(result.status == 2 && result.isOneLineFailure, "\(result)")
            #expect(try Data(contentsOf: sandbox.plist("app")) == before)
        }
    }

    @Test(arguments: ["-g", "NSGlobalDomain", "-globalDomain", "-currentHost", "-host", "-app"])
    func domainsLinuxDoesNotHaveAreUsageErrorsWithAHint(domain: String) throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        let result = try sandbox.prefs("read", domain)
        #expect(result.status == 2 && result.isOneLineFailure && result.error.contains("name the domain"), "\(result)")
    }

    /// `defaults -currentHost read DOMAIN` and `defaults -host NAME read DOMAIN` put the host option first.
    @Test(arguments: [["-currentHost", "read", "com.example.notes"], ["-host", "box", "read", "com.example.notes"]])
    func hostOptionsBeforeTheCommandAreUsageErrorsWithAHint(arguments: [String]) throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        let result = try sandbox.prefs(arguments)
        #expect(result.status == 2 && result.isOneLineFailure && result.error.contains("host domains"), "\(result)")
    }

    /// Prefs writes `mode` twice, then Foundation's `UserDefaults` (another process, no lock) sets it back on purpose:
    /// every command that only reads prints Foundation's value and leaves its file byte for byte, and creates nothing.
    @Test func commandsThatReadLeaveAFoundationWriteAsItIs() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try sandbox.prefs("write", "shared", "mode", "-int", "1").expectSuccess()
        try sandbox.prefs("write", "shared", "mode", "-int", "2").expectSuccess()
        let foundation = try ChildProcess.run(
            ["foundation-write", "shared", "mode", "1"], environment: ["XDG_CONFIG_HOME": sandbox.config.path])
        #expect(foundation.lines == ["ok"], "\(foundation.error)")
        let written = try Data(contentsOf: sandbox.plist("shared"))
        let folder = try FileManager.default.contentsOfDirectory(atPath: sandbox.config.path).sorted()

        let read = try sandbox.prefs("read", "shared", "mode")
        #expect(read.status == 0 && read.output == "1\n", "\(read)")
        for command in [
            ["read", "shared"], ["read-type", "shared", "mode"], ["list-keys", "shared"], ["export", "shared"],
            ["find", "mode"], ["domains"], ["describe", "shared"], ["check", "shared"],
        ] {
            _ = try sandbox.prefs(command)
            #expect(try Data(contentsOf: sandbox.plist("shared")) == written, "prefs \(command.joined(separator: " "))")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: sandbox.config.path).sorted() == folder)
    }
}
