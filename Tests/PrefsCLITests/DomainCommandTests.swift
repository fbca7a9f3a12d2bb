import Foundation
import Prefs
import TestThreads
import Testing

/// `prefs` as a user runs it: real processes, real suites in a temporary `XDG_CONFIG_HOME`.
@Suite(.ownThreads) struct DomainCommandTests {
    /// The stored value, read back through the library from the suite file `prefs` wrote.
    func stored(_ sandbox: Sandbox, _ domain: String, _ key: String) throws -> PrefValue? {
        try SuiteFileStore(suiteName: domain, directory: sandbox.config).value(forKey: key)
    }

    @Test func domainsListsSuitesOnly() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        var result = try sandbox.prefs("domains")
        #expect(result.status == 0 && result.output.isEmpty && result.error.isEmpty, "\(result)")
        try sandbox.prefs("write", "zeta", "k", "v")
        try sandbox.prefs("write", "com.example.app", "k", "v")
        try Data("not a suite".utf8).write(to: sandbox.config.appending(path: "notes.txt"))
        result = try sandbox.prefs("domains")
        result.expectSuccess()
        #expect(result.output == "com.example.app\nzeta\n")  // no .lock, no other files
        result = try sandbox.prefs("domains", "--json")
        #expect(result.output == #"["com.example.app", "zeta"]"# + "\n")
    }

    /// Every `--type`: what is stored (exactly), what `read` prints, and the type it lists.
    @Test(arguments: [
        ("bool", "yes", PrefValue.bool(true), "true", "bool"),
        ("bool", "0", .bool(false), "false", "bool"),
        ("int", "-42", .int(-42), "-42", "int"),
        ("int", "18446744073709551615", .unsignedInt(.max), "18446744073709551615", "int"),
        ("float", "0.5", .double(0.5), "0.5", "double"),
        ("double", "1e-07", .double(1e-07), "1e-07", "double"),
        ("string", "two words", .string("two words"), "two words", "string"),
        (
            "date", "2024-05-01T14:30:00.123456789+02:00",
            .date(Date(timeIntervalSinceReferenceDate: 736_259_400 + 0.123456789)),
            "2024-05-01T12:30:00.1234568Z", "date"
        ),  // the shortest exact fraction
        (
            "date", "2001-01-01 00:00:00Z", .date(Date(timeIntervalSinceReferenceDate: 0)), "2001-01-01T00:00:00Z",
            "date"
        ),
        ("data", "CAFE01", .data(Data([0xCA, 0xFE, 0x01])), "cafe01", "data"),
        (
            "json", #"[1, "two", {"three": true}]"#,
            .array([.int(1), .string("two"), .dictionary(["three": .bool(true)])]),
            #"[1, "two", {"three": true}]"#, "array"
        ),
        (
            "json", #"{"darkMode": false}"#, .dictionary(["darkMode": .bool(false)]), #"{"darkMode": false}"#,
            "dictionary"
        ),
    ])
    func writeAndReadEveryType(type: String, input: String, value: PrefValue, printed: String, typeName: String)
        throws
    {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        let write = try sandbox.prefs("write", "app", "key", input, "--type", type)
        #expect(write.status == 0 && write.output.isEmpty && write.error.isEmpty, "\(write)")
        #expect(try stored(sandbox, "app", "key") == value)
        let read = try sandbox.prefs("read", "app", "key")
        #expect(read.status == 0 && read.output == printed + "\n", "\(read)")
        let list = try sandbox.prefs("read", "app", "--types")
        #expect(list.output == "key  \(typeName)  \(printed)\n")
        // What `read` prints, `write` with the same type reads back as the same value.
        let again = try sandbox.prefs("write", "app", "copy", printed, "--type", type)
        again.expectSuccess()
        #expect(try stored(sandbox, "app", "copy") == value)
        let json = try sandbox.prefs("read", "app", "key", "--json")
        #expect(try PrefValue(jsonText: json.output) == value)
    }

    @Test(arguments: [
        ("bool", "maybe"), ("int", "4.5"), ("int", "99999999999999999999"), ("float", "half"),
        ("date", "2024-02-30T00:00:00Z"), ("date", "2024-05-01"), ("date", "2024-05-01T12:00:00"),
        ("data", "abc"), ("data", "zz"), ("json", "[1,"), ("json", "null"),
    ])
    func aValueThatDoesNotParseChangesNothing(type: String, input: String) throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try sandbox.prefs("write", "app", "key", "kept")
        let before = try Data(contentsOf: sandbox.plist("app"))
        let result = try sandbox.prefs("write", "app", "key", input, "--type", type)
        #expect(result.status == 2 && result.isOneLineFailure, "\(result)")
        #expect(result.error.contains("nothing was changed"))
        #expect(try Data(contentsOf: sandbox.plist("app")) == before)
        let fresh = try sandbox.prefs("write", "new-domain", "key", input, "--type", type)
        #expect(fresh.status == 2)
        #expect(!FileManager.default.fileExists(atPath: sandbox.plist("new-domain").path))
    }

    @Test func withoutTypeTheStoredTypeIsKept() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try sandbox.prefs("write", "app", "count", "1", "--type", "int")
        try sandbox.prefs("write", "app", "flag", "true", "--type", "bool")
        try sandbox.prefs("write", "app", "tags", "[]", "--type", "json")
        try sandbox.prefs("write", "app", "count", "12").expectSuccess()
        #expect(try stored(sandbox, "app", "count") == .int(12))
        try sandbox.prefs("write", "app", "flag", "no").expectSuccess()
        #expect(try stored(sandbox, "app", "flag") == .bool(false))
        try sandbox.prefs("write", "app", "tags", #"["a"]"#).expectSuccess()
        #expect(try stored(sandbox, "app", "tags") == .array([.string("a")]))
        // A new key without --type is a string, even when it looks like a number.
        try sandbox.prefs("write", "app", "version", "12").expectSuccess()
        #expect(try stored(sandbox, "app", "version") == .string("12"))

        let before = try Data(contentsOf: sandbox.plist("app"))
        let refused = try sandbox.prefs("write", "app", "count", "twelve")
        #expect(refused.status == 2 && refused.isOneLineFailure, "\(refused)")
        #expect(refused.error.contains("--type"))
        let shape = try sandbox.prefs("write", "app", "tags", #"{"a": 1}"#)
        #expect(shape.status == 2 && shape.isOneLineFailure)
        #expect(try Data(contentsOf: sandbox.plist("app")) == before)
        // --type changes the type on purpose.
        try sandbox.prefs("write", "app", "count", "twelve", "--type", "string").expectSuccess()
        #expect(try stored(sandbox, "app", "count") == .string("twelve"))
    }

    @Test func aValueThatLooksLikeAnOption() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try sandbox.prefs("write", "app", "n", "-5", "--type=int").expectSuccess()
        #expect(try stored(sandbox, "app", "n") == .int(-5))
        try sandbox.prefs("write", "app", "s", "--", "--json").expectSuccess()
        #expect(try stored(sandbox, "app", "s") == .string("--json"))
    }

    @Test func readPrintsBareValuesAndListsKeys() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try sandbox.prefs("write", "app", "theme", "dark")
        try sandbox.prefs("write", "app", "fontSize", "0.5", "--type", "float")
        try sandbox.prefs("write", "app", "note", "line one\nline two")
        #expect(try sandbox.prefs("read", "app", "theme").output == "dark\n")
        #expect(try sandbox.prefs("read", "app", "note").output == "line one\nline two\n")
        let list = try sandbox.prefs("read", "app", "--types")
        #expect(
            list.output == """
                fontSize  double  0.5
                note      string  line one\\nline two
                theme     string  dark

                """)
        let document = try sandbox.prefs("read", "app", "--json")
        #expect(document.output == (try sandbox.prefs("export", "app")).output)
    }

    @Test func missingKeysAndDomainsAreNotFound() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try sandbox.prefs("write", "app", "theme", "dark")
        for arguments in [
            ["read", "app", "nope"], ["read", "ghost"], ["read", "ghost", "k"], ["export", "ghost"],
            ["delete", "ghost"], ["delete", "app", "nope"],
        ] {
            let result = try sandbox.prefs(arguments)
            #expect(result.status == 1 && result.isOneLineFailure, "\(arguments): \(result)")
        }
        // Looking for a domain does not create it.
        #expect(try sandbox.prefs("domains").output == "app\n")
        #expect(!FileManager.default.fileExists(atPath: sandbox.config.appending(path: "ghost.lock").path))
    }

    @Test func deleteRemovesAKeyOrTheDomain() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try sandbox.prefs("write", "app", "a", "1")
        try sandbox.prefs("write", "app", "b", "2")
        try sandbox.prefs("delete", "app", "a").expectSuccess()
        #expect(try stored(sandbox, "app", "a") == nil)
        #expect(try stored(sandbox, "app", "b") == .string("2"))
        try sandbox.prefs("delete", "app").expectSuccess()
        #expect(!FileManager.default.fileExists(atPath: sandbox.plist("app").path))
        // Its commit file goes with it (first), so nothing of it is restored into a file made under that name.
        let commitFile = sandbox.plist("app").deletingLastPathComponent().appending(path: ".app.plist.commit")
        #expect(!FileManager.default.fileExists(atPath: commitFile.path))
        #expect(try sandbox.prefs("domains").output.isEmpty)
        #expect(try sandbox.prefs("read", "app").status == 1)
    }

    @Test func exportThenImportIsExact() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        let values: [String: PrefValue] = [
            "flag": .bool(true), "count": .int(-3), "big": .unsignedInt(.max), "ratio": .double(0.1),
            "single": .float(0.1), "name": .string("ünïcødé \"quoted\""), "blob": .data(Data([0, 255])),
            "when": .date(Date(timeIntervalSinceReferenceDate: 123_456.789)),
            "nested": .dictionary(["list": .array([.int(1), .dictionary(["$odd": .bool(false)])])]),
        ]
        try SuiteFileStore(suiteName: "source", directory: sandbox.config).replaceAll(values)
        let export = try sandbox.prefs("export", "source")
        #expect(export.status == 0 && export.error.isEmpty)
        let file = sandbox.file("source.json")
        try Data(export.output.utf8).write(to: file)
        try sandbox.prefs("write", "target", "stale", "gone")
        let result = try sandbox.prefs("import", "target", file.path)
        #expect(result.status == 0 && result.output.isEmpty && result.error.isEmpty, "\(result)")
        // Import replaces: the stale key is gone, every value is exact.
        #expect(try SuiteFileStore(suiteName: "target", directory: sandbox.config).allValues() == values)
        #expect(try sandbox.prefs("export", "target").output == export.output)
        // Standard input works too.
        try sandbox.prefs("import", "piped", "-", stdin: export.output).expectSuccess()
        #expect(try sandbox.prefs("export", "piped").output == export.output)
    }

    @Test(arguments: [
        "", "{", #"{"a": 1,}"#, #"{"a": null}"#, #"{"a": 1, "a": 2}"#, #"["not", "an", "object"]"#,
        #"{"a": 1} trailing"#, #"{"ok": 1, "bad": {"$date": "yesterday"}}"#, #"{"ok": 1, "bad": {"$date": "never"}}"#,
        // One rule in every format: a key twice and a number beyond its range are refused.
        #"<plist version="1.0"><dict><key>v</key><true/><key>v</key><false/></dict></plist>"#,
        #"<plist version="1.0"><dict><key>r</key><real>1e999</real></dict></plist>"#, #"{"a": 1e400}"#,
    ])
    func importOfAMalformedFileChangesNothing(content: String) throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try sandbox.prefs("write", "app", "theme", "dark")
        try sandbox.prefs("write", "app", "count", "7", "--type", "int")
        let before = try Data(contentsOf: sandbox.plist("app"))
        let file = sandbox.file("bad.json")
        try Data(content.utf8).write(to: file)
        let result = try sandbox.prefs("import", "app", file.path)
        #expect(result.status == 2 && result.isOneLineFailure, "\(result)")
        #expect(try Data(contentsOf: sandbox.plist("app")) == before)
        #expect(try sandbox.prefs("read", "app", "theme").output == "dark\n")
    }

    @Test func importOfAMissingFileIsNotFound() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        let result = try sandbox.prefs("import", "app", sandbox.path("absent.json"))
        #expect(result.status == 1 && result.isOneLineFailure)
        #expect(!FileManager.default.fileExists(atPath: sandbox.plist("app").path))
    }

    @Test func aCorruptSuiteIsAnIntegrityFailureAndLeftAlone() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try FileManager.default.createDirectory(at: sandbox.config, withIntermediateDirectories: true)
        let garbage = Data("<?xml version=\"1.0\"?><plist><dict><key>a".utf8)
        try garbage.write(to: sandbox.plist("broken"))
        for arguments in [["read", "broken"], ["write", "broken", "k", "v"], ["export", "broken"]] {
            let result = try sandbox.prefs(arguments)
            #expect(result.status == 3 && result.isOneLineFailure, "\(arguments): \(result)")
        }
        #expect(try Data(contentsOf: sandbox.plist("broken")) == garbage)
    }

    @Test(arguments: [
        [], ["frobnicate"], ["read"], ["read", "a", "b", "c"], ["write", "app", "key"], ["read", "app", "--jsn"],
        ["write", "app", "k", "v", "--type"], ["write", "app", "k", "v", "--type", "color"],
        ["write", "app", "k", "v", "--type", "int", "--type", "string"], ["domains", "--json=yes"],
        ["write", "../escape", "k", "v"], ["write", "a/b", "k", "v"], ["write", "app", "", "v"], ["watch"],
        ["secure"], ["secure", "open"],
    ])
    func usageErrors(arguments: [String]) throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        let result = try sandbox.prefs(arguments)
        #expect(result.status == 2 && result.isOneLineFailure, "\(result)")
        #expect(result.error.contains("prefs"))
        #expect(!FileManager.default.fileExists(atPath: sandbox.config.path))
    }

    @Test func helpForTheToolAndEveryCommand() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        let top = try sandbox.prefs("--help")
        #expect(top.status == 0 && top.error.isEmpty)
        #expect(top.output.hasPrefix("usage: prefs COMMAND"))
        let commands = [
            "domains", "read", "read-type", "write", "rename", "delete", "find", "export", "import", "watch", "secure",
        ]
        for command in commands {
            #expect(top.output.contains("\n  \(command) "), "\(command) missing from prefs --help")
            for form in [[command, "--help"], [command, "-h"], ["help", command]] {
                let help = try sandbox.prefs(form)
                #expect(help.status == 0 && help.error.isEmpty, "\(form)")
                #expect(help.output.hasPrefix("usage: prefs \(command)"), "\(form): \(help.output)")
            }
        }
        #expect(try sandbox.prefs("help").output == top.output)
        let secure = try sandbox.prefs("secure", "--help")
        for command in ["init", "set", "get", "delete", "list", "rekey", "verify"] {
            #expect(secure.output.contains("\n  \(command) "), "\(command) missing from prefs secure --help")
            let help = try sandbox.prefs("secure", command, "--help")
            #expect(help.status == 0 && help.output.hasPrefix("usage: prefs secure \(command)"), "\(help)")
            #expect(help.output.contains("--passphrase-env NAME"))
        }
        #expect(try sandbox.prefs("write", "--help").output.contains("json"))
        #expect(!FileManager.default.fileExists(atPath: sandbox.config.path))
    }

    /// "`prefs delete com.example.backup`: the whole domain, damaged or not": nothing of it stays in the folder.
    @Test func deletingADomainRemovesEverythingOfIt() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try sandbox.prefs("write", "app", "theme", "dark").expectSuccess()
        try sandbox.prefs("write", "other", "theme", "light").expectSuccess()
        try sandbox.prefs("delete", "app").expectSuccess()
        let left = try FileManager.default.contentsOfDirectory(atPath: sandbox.config.path)
        #expect(left.filter { $0.contains("app") } == [], "\(left)")
        #expect(try sandbox.prefs("read", "other", "theme").output == "light\n")
        try Data("not a property list".utf8).write(to: sandbox.plist("other"))
        try sandbox.prefs("delete", "other").expectSuccess()
        #expect(!FileManager.default.fileExists(atPath: sandbox.plist("other").path))
    }

    /// Exit status 1: "the file system refused the operation" (the preferences folder is a regular file).
    @Test func aFolderTheFileSystemRefusesIsStatus1() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try Data("not a folder".utf8).write(to: sandbox.config)
        let result = try sandbox.prefs("write", "app", "theme", "dark")
        #expect(result.status == 1 && result.isOneLineFailure, "\(result)")
        #expect(try Data(contentsOf: sandbox.config) == Data("not a folder".utf8))
    }
}
