import Foundation
import Prefs
import PrefsCLICore
import PrefsTestSupport
import TestThreads
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `prefs` over a domain whose app (PrefsTestHelper's `schema-app`, a real process) published its schema: a person
/// who never saw the app's code lists, describes, checks, resets and safely edits its preferences.
@Suite(.ownThreads) struct SchemaCommandTests {
    /// A sandbox, the app's domain in it with its published schema, and a system folder (`$XDG_CONFIG_DIRS`).
    struct Described {
        let sandbox: Sandbox
        let domain = "com.example.described-\(UUID().uuidString.prefix(6))"
        var system: URL { sandbox.file("etc") }
        var schemaFile: URL { sandbox.data.appending(path: "prefs/schemas/\(domain).json") }

        init(prefix: String? = nil) throws {
            sandbox = try Sandbox()
            try FileManager.default.createDirectory(at: system, withIntermediateDirectories: true)
            var environment = sandbox.environment
            environment["SCHEMA_PREFIX"] = prefix
            let published = try ChildProcess.run(["schema-app", domain, "publish"], environment: environment)
            #expect(published.lines == ["wrote \(schemaFile.path(percentEncoded: false))"], "\(published)")
        }

        @discardableResult
        func prefs(_ arguments: String..., environment: [String: String] = [:]) throws -> PrefsResult {
            try sandbox.prefs(
                arguments,
                environment: ["XDG_CONFIG_DIRS": system.path(percentEncoded: false)].merging(environment) {
                    $1
                })
        }

        func writeSystem(_ values: [String: Any]) throws {
            let data = try PropertyListSerialization.data(fromPropertyList: values, format: .xml, options: 0)
            try data.write(to: system.appending(path: domain + ".plist"), options: .atomic)
        }

        func userFile() throws -> Data { try Data(contentsOf: sandbox.plist(domain)) }

        /// Edits the published schema's entries by hand, as a packager or a person might.
        func editSchema(_ edit: (inout [String: [String: Any]]) -> Void) throws {
            var document = try #require(
                try JSONSerialization.jsonObject(with: Data(contentsOf: schemaFile)) as? [String: Any])
            var keys = try #require(document["keys"] as? [String: [String: Any]])
            edit(&keys)
            document["keys"] = keys
            try JSONSerialization.data(withJSONObject: document).write(to: schemaFile)
        }
    }

    @Test func listKeysAndDescribeShowWhatTheAppDeclaredAndWhereEachValueComesFrom() throws {
        let app = try Described(prefix: "DESCRIBED_")
        defer { app.sandbox.cleanup() }
        #expect(
            try app.prefs("list-keys", app.domain).output == """
                accent      string  blue
                fontSize    int     13
                hasHaptics  bool    false
                lastOpened  date    (none)
                theme       string  light
                zoom        double  1.0

                """)
        #expect(
            try app.prefs("describe", app.domain, "fontSize").output == """
                key: fontSize
                type: int
                default: 13
                allowed: from 8 to 72
                description: Editor font size, in points
                value: 13
                set by: default (the app's declaration)

                """)
        try app.prefs("write", app.domain, "fontSize", "15").expectSuccess()
        let user = try app.prefs("describe", app.domain, "fontSize").output
        #expect(
            user.hasSuffix("value: 15\nset by: user (\(app.sandbox.plist(app.domain).path(percentEncoded: false)))\n"))
        #expect(
            try app.prefs("describe", app.domain, "theme").output.contains(
                "allowed: one of \"light\", \"dark\", \"system\"\ndescription: Colour scheme of the windows\n"))

        try app.writeSystem(["accent": "green"])
        #expect(
            try app.prefs("describe", app.domain, "accent").output.hasSuffix(
                "value: green\nset by: system-wide default ($XDG_CONFIG_DIRS)\n"))
        #expect(
            try app.prefs("describe", app.domain, "zoom", environment: ["DESCRIBED_ZOOM": "2"]).output.hasSuffix(
                "value: 2.0\nset by: environment (DESCRIBED_ZOOM)\n"))
        #expect(
            try app.prefs("describe", app.domain, "zoom", "--", "-zoom", "3").output.hasSuffix(
                "value: 3.0\nset by: argument (the command line after --)\n"))

        // A value the app does not allow: the default it reads in its place.
        try app.prefs("write", app.domain, "fontSize", "-int", "300", "--ignore-schema").expectSuccess()
        #expect(
            try app.prefs("describe", app.domain, "fontSize").output.hasSuffix(
                "value: 13 (the default, read in place of 300, which is not allowed (from 8 to 72))\nset by: user ("
                    + app.sandbox.plist(app.domain).path(percentEncoded: false) + ")\n"))

        let missing = try app.prefs("describe", app.domain, "fontsize")
        #expect(missing.status == 1 && missing.isOneLineFailure && missing.error.contains("did you mean \"fontSize\"?"))
        let none = try app.prefs("list-keys", "com.example.nothing")
        #expect(none.status == 1 && none.error.contains("no schema for domain \"com.example.nothing\""), "\(none)")
    }

    @Test func rangePrintsTheAllowedValuesAsGsettingsDoes() throws {
        let app = try Described()
        defer { app.sandbox.cleanup() }
        #expect(try app.prefs("range", app.domain, "fontSize").output == "range int 8 72\n")
        #expect(try app.prefs("range", app.domain, "zoom").output == "range double 0.5 4.0\n")
        #expect(try app.prefs("range", app.domain, "theme").output == "enum\n'light'\n'dark'\n'system'\n")
        #expect(try app.prefs("range", app.domain, "hasHaptics").output == "type bool\n")
        #expect(try app.prefs("range", app.domain, "lastOpened").output == "type date\n")
    }

    @Test func writesAreRefusedOutsideTheSchemaAndTypedByIt() throws {
        let app = try Described()
        defer { app.sandbox.cleanup() }
        try app.prefs("write", app.domain, "theme", "dark").expectSuccess()
        let before = try app.userFile()

        let range = try app.prefs("write", app.domain, "fontSize", "300")
        #expect(range.status == 2 && range.isOneLineFailure, "\(range)")
        #expect(
            range.error
                == "prefs write: 300 for \"fontSize\" is not allowed (from 8 to 72) in the app's schema; nothing was "
                + "changed (--ignore-schema writes it anyway, and the app then reads the default 13 in its place)\n")
        let choice = try app.prefs("write", app.domain, "theme", "purple")
        #expect(
            choice.status == 2
                && choice.error.contains(
                    "\"purple\" for \"theme\" is not allowed (one of \"light\", \"dark\", \"system\")")
        )
        let flagged = try app.prefs("write", app.domain, "fontSize", "-int", "0")
        #expect(flagged.status == 2 && flagged.error.contains("from 8 to 72"), "type flags are checked too")
        let typed = try app.prefs("write", app.domain, "fontSize", "big")
        #expect(typed.status == 2 && typed.error.contains("the type the app's schema declares"), "\(typed)")
        #expect(try app.userFile() == before, "nothing was written")

        // Without -int: an integer, because the schema says so; a real, a bool and a date likewise.
        try app.prefs("write", app.domain, "fontSize", "14").expectSuccess()
        try app.prefs("write", app.domain, "zoom", "2").expectSuccess()
        try app.prefs("write", app.domain, "hasHaptics", "yes").expectSuccess()
        try app.prefs("write", app.domain, "lastOpened", "2024-05-01T12:00:00Z").expectSuccess()
        #expect(try app.prefs("read-type", app.domain, "fontSize").output == "Type is integer\n")
        #expect(try app.prefs("read-type", app.domain, "zoom").output == "Type is float\n")
        #expect(try app.prefs("read-type", app.domain, "hasHaptics").output == "Type is boolean\n")
        #expect(try app.prefs("read-type", app.domain, "lastOpened").output == "Type is date\n")
        // A key the schema does not declare is written as before: a new key is a string.
        try app.prefs("write", app.domain, "note", "14").expectSuccess()
        #expect(try app.prefs("read-type", app.domain, "note").output == "Type is string\n")
        try app.prefs("write", app.domain, "fontSize", "500", "--ignore-schema").expectSuccess()
        #expect(try app.prefs("read-type", app.domain, "fontSize").output == "Type is integer\n")
        // What the app reads for it: the default, the stored value marked.
        #expect(try app.prefs("read", app.domain, "fontSize").output == "13\n")
        #expect(
            try app.prefs("read", app.domain, "fontSize", "--types").output
                == "fontSize  int  500  (is not allowed (from 8 to 72): the app reads the default 13)\n")
    }

    /// Each hint names a command that does what it says: `--ignore-schema` stores the declared type (the app could
    /// not read another), and a value of the wrong type is not sent to `--type`, which the schema refuses as well.
    @Test func everyHintOfAWriteNamesACommandThatWorks() throws {
        let app = try Described()
        defer { app.sandbox.cleanup() }
        let real = try app.prefs("write", app.domain, "fontSize", "14.5")
        #expect(real.status == 2 && real.isOneLineFailure && !real.error.contains("--type"), "\(real)")
        // A real where the app reads an integer: as in Foundation, a typed read in a domain takes its whole part, so
        // the app reads 14 and the write is allowed.
        try app.prefs("write", app.domain, "fontSize", "14.5", "--type", "float").expectSuccess()
        #expect(try app.prefs("read", app.domain, "fontSize").output == "14\n")
        #expect(
            try ChildProcess.run(["schema-app", app.domain, "read"], environment: app.sandbox.environment).lines.first
                == "fontSize=14 theme=light accent=blue zoom=1.0")
        let text = try app.prefs("write", app.domain, "hasHaptics", "maybe", "--type", "string")
        #expect(text.status == 2 && text.error.contains("give true, false"), "\(text)")
        #expect(!text.error.contains("--ignore-schema"), "\(text)")
        try app.prefs("delete", app.domain, "fontSize").expectSuccess()

        let outside = try app.prefs("write", app.domain, "zoom", "9")
        #expect(outside.status == 2 && outside.error.contains("--ignore-schema writes it anyway"), "\(outside)")
        try app.prefs("write", app.domain, "zoom", "9", "--ignore-schema").expectSuccess()
        #expect(try app.prefs("read-type", app.domain, "zoom").output == "Type is float\n")
        // The app reads it as the type it declared, and finds it outside the range: the default, reported.
        let read = try ChildProcess.run(["schema-app", app.domain, "read"], environment: app.sandbox.environment)
        #expect(read.lines.first == "fontSize=13 theme=light accent=blue zoom=1.0", "\(read)")
        #expect(
            read.lines.contains {
                $0.contains("read of \"zoom\" failed: 9.0 in ") && $0.contains(": outside 0.5...4.0;")
                    && !$0.contains("wrong type")
            }, "\(read)")
    }

    /// The declared default is allowed wherever the schema is checked, even outside its own range or choices, as the
    /// library allows it; a schema file whose entry contradicts itself is reported as a bad schema file.
    @Test func theDeclaredDefaultIsAlwaysAllowedAndAnInvertedRangeIsABadSchema() throws {
        let app = try Described()
        defer { app.sandbox.cleanup() }
        // The hand-edited schema: a default outside its range and choices, as an app may declare them.
        try app.editSchema { keys in
            keys["fontSize"]?["default"] = 0
            keys["accent"]?["default"] = "system"
        }
        try app.prefs("write", app.domain, "fontSize", "0").expectSuccess()
        try app.prefs("write", app.domain, "accent", "system").expectSuccess()
        let check = try app.prefs("check", app.domain)
        #expect(check.status == 0 && check.output.isEmpty && check.error.isEmpty, "\(check)")
        let described = try app.prefs("describe", app.domain, "fontSize")
        #expect(described.output.contains("value: 0\n") && !described.output.contains("in place of"), "\(described)")

        // An inverted range allows nothing: the file is refused as a bad schema, naming the entry.
        try app.editSchema { keys in keys["fontSize"]?["range"] = [72, 8] }
        let inverted = try app.prefs("check", app.domain)
        #expect(inverted.status == 3 && inverted.output.isEmpty && inverted.isOneLineFailure, "\(inverted)")
        #expect(
            inverted.error.contains(
                "the entry of \"fontSize\" contradicts itself: its range from 72 to 8 allows no value"),
            "\(inverted)")
    }

    /// `read DOMAIN KEY` of a declared key answers as `gsettings get`: the value the app reads, wherever it comes
    /// from; `--explain` says where, `--types` marks what is not the user's own. Other keys read as `defaults read`.
    @Test func readOfADeclaredKeyPrintsWhatTheAppReads() throws {
        let app = try Described()
        defer { app.sandbox.cleanup() }
        try app.prefs("write", app.domain, "theme", "dark").expectSuccess()
        try app.writeSystem(["zoom": 2.0])
        #expect(try app.prefs("read", app.domain, "fontSize").output == "13\n")
        #expect(
            try app.prefs("read", app.domain, "fontSize", "--explain").output
                == "13\nlayer: default (the app's declaration)\n")
        #expect(try app.prefs("read", app.domain, "fontSize", "--types").output == "fontSize  int  13  (default)\n")
        #expect(try app.prefs("read", app.domain, "zoom").output == "2.0\n")
        #expect(
            try app.prefs("read", app.domain, "zoom", "--types").output == "zoom  double  2.0  (system default)\n")
        #expect(try app.prefs("read", app.domain, "theme").output == "dark\n")
        let optional = try app.prefs("read", app.domain, "lastOpened")
        #expect(optional.status == 0 && optional.output == "nil\n", "what the app reads: \(optional)")
        // What the app itself reads, for the same keys.
        let read = try ChildProcess.run(
            ["schema-app", app.domain, "read"],
            environment: app.sandbox.environment.merging(["XDG_CONFIG_DIRS": app.system.path(percentEncoded: false)]) {
                $1
            })
        #expect(read.lines.first == "fontSize=13 theme=dark accent=blue zoom=2.0", "\(read)")
        // An undeclared key: as `defaults read`, absent is status 1.
        #expect(try app.prefs("read", app.domain, "note").status == 1)

        // A stored value the key does not allow: the app reads the default, and is told how to find and remove it.
        try app.prefs("write", app.domain, "fontSize", "300", "--ignore-schema").expectSuccess()
        #expect(try app.prefs("read", app.domain, "fontSize").output == "13\n")
        let reported = try ChildProcess.run(["schema-app", app.domain, "read"], environment: app.sandbox.environment)
        #expect(
            reported.lines.contains(
                "report: read of \"fontSize\" failed: 300 in "
                    + "\(app.sandbox.plist(app.domain).path(percentEncoded: false)): outside 8...72; the default 13 is "
                    + "read in its place (`prefs reset \(app.domain) fontSize` removes it)"), "\(reported)")
    }

    /// `domains` lists an app that published its schema before it stored anything, as `gsettings list-schemas` does.
    @Test func domainsListsAnAppWithASchemaAndNoFileYet() throws {
        let app = try Described()
        defer { app.sandbox.cleanup() }
        #expect(!FileManager.default.fileExists(atPath: app.sandbox.plist(app.domain).path(percentEncoded: false)))
        #expect(try app.prefs("domains").output == "\(app.domain)\n")
        try app.prefs("write", "com.example.other", "theme", "dark").expectSuccess()
        #expect(
            try app.prefs("domains").output == ["com.example.other", app.domain].sorted().joined(separator: "\n") + "\n"
        )
        #expect(try app.prefs("domains", "--json").output.contains("\"\(app.domain)\""))
    }

    /// `describe` prints nothing until it has every line: a damaged domain fails with standard output empty.
    @Test func describeOfADamagedDomainPrintsOnlyTheFailure() throws {
        let app = try Described()
        defer { app.sandbox.cleanup() }
        try FileManager.default.createDirectory(at: app.sandbox.config, withIntermediateDirectories: true)
        try Data("<?xml version=\"1.0\"?><plist><dict><key>x".utf8).write(to: app.sandbox.plist(app.domain))
        let described = try app.prefs("describe", app.domain, "fontSize")
        #expect(described.status == 3 && described.output.isEmpty && described.isOneLineFailure, "\(described)")
        #expect(described.error.contains("run `prefs repair \(app.domain)`"), "\(described)")
    }

    /// A mistyped key in `reset` gets the closest declared one, and the command that lists them.
    @Test func resetOfAMistypedKeySuggestsTheDeclaredOne() throws {
        let app = try Described()
        defer { app.sandbox.cleanup() }
        let reset = try app.prefs("reset", app.domain, "fontsize")
        #expect(reset.status == 1 && reset.isOneLineFailure, "\(reset)")
        #expect(
            reset.error
                == "prefs reset: domain \"\(app.domain)\" neither stores nor declares a key \"fontsize\" (did you mean "
                + "\"fontSize\"?); run `prefs list-keys \(app.domain)` to list the keys the app declares\n", "\(reset)")
    }

    @Test func checkPrintsOneLinePerValueOutsideTheSchemaAndFailsWhenThereIsAny() throws {
        let app = try Described()
        defer { app.sandbox.cleanup() }
        try app.prefs("write", app.domain, "fontSize", "20").expectSuccess()
        try app.writeSystem(["zoom": 2.0])
        let clean = try app.prefs("check", app.domain)
        #expect(clean.status == 0 && clean.output.isEmpty && clean.error.isEmpty, "\(clean)")

        try app.prefs("write", app.domain, "fontSize", "-int", "300", "--ignore-schema").expectSuccess()
        try app.prefs("write", app.domain, "theme", "-int", "2", "--ignore-schema").expectSuccess()
        try app.writeSystem(["accent": "purple", "zoom": 2.0])
        let found = try app.prefs("check", app.domain)
        #expect(found.status == 1, "\(found)")
        #expect(
            found.output == """
                user: fontSize = 300 is not allowed (from 8 to 72)
                user: theme = 2 is an int, not text
                system-wide: accent = purple is not allowed (one of "blue", "green")

                """)
        #expect(found.error.contains("3 values of domain"), "\(found.error)")
    }

    @Test func resetRemovesTheUsersValueOfOneKeyOrOfEvery() throws {
        let app = try Described()
        defer { app.sandbox.cleanup() }
        try app.prefs("write", app.domain, "fontSize", "20").expectSuccess()
        try app.prefs("write", app.domain, "theme", "dark").expectSuccess()
        try app.prefs("write", app.domain, "note", "kept until --all").expectSuccess()
        try app.prefs("reset", app.domain, "fontSize").expectSuccess()
        #expect(
            try app.prefs("describe", app.domain, "fontSize").output.hasSuffix(
                "set by: default (the app's declaration)\n"))
        try app.prefs("reset", app.domain, "accent").expectSuccess()  // declared, not set: nothing to do
        let unknown = try app.prefs("reset", app.domain, "nothing")
        #expect(unknown.status == 1 && unknown.isOneLineFailure, "\(unknown)")
        #expect(try app.prefs("reset", app.domain).status == 2)
        #expect(try app.prefs("reset", app.domain, "theme", "--all").status == 2)
        #expect(try app.prefs("read", app.domain, "theme").output == "dark\n")
        try app.prefs("reset", app.domain, "--all").expectSuccess()
        #expect(try app.prefs("read", app.domain, "--json").output == "{}\n")
    }

    @Test func exportNonDefaultLeavesOutWhatEqualsTheDefaults() throws {
        let app = try Described()
        defer { app.sandbox.cleanup() }
        for (key, value) in [("fontSize", "13"), ("theme", "dark"), ("zoom", "1"), ("note", "mine")] {
            try app.prefs("write", app.domain, key, value).expectSuccess()
        }
        let exported = try app.prefs("export", app.domain, "--non-default")
        exported.expectSuccess()
        #expect(exported.output == "{\n  \"note\": \"mine\",\n  \"theme\": \"dark\"\n}\n", "\(exported.output)")
        try app.prefs("write", "com.example.undescribed", "a", "1").expectSuccess()
        let undescribed = try app.prefs("export", "com.example.undescribed", "--non-default")
        #expect(undescribed.status == 1 && undescribed.error.contains("no schema"), "\(undescribed)")
    }

    /// Python's `jsonschema` (which `make deps` installs) checks the schema and validates `prefs export` with it.
    @Test func theJSONSchemaIsValidAndValidatesWhatExportWrites() throws {
        let app = try Described()
        defer { app.sandbox.cleanup() }
        for (key, value) in [
            ("fontSize", "20"), ("theme", "dark"), ("zoom", "2.5"), ("lastOpened", "2024-05-01T12:00:00Z"),
        ] {
            try app.prefs("write", app.domain, key, value).expectSuccess()
        }
        try app.prefs("write", app.domain, "note", "-data", "cafe").expectSuccess()
        let valid = try validateExport(app.domain, in: app.sandbox)
        #expect(valid.succeeded, "\(valid)")
        try app.prefs("write", app.domain, "fontSize", "-int", "300", "--ignore-schema").expectSuccess()
        try app.prefs("write", app.domain, "theme", "purple", "--ignore-schema").expectSuccess()
        let invalid = try validateExport(app.domain, in: app.sandbox)
        #expect(invalid.status == 1 && invalid.lines.count == 2, "\(invalid)")
        #expect(invalid.output.contains("300 is greater than the maximum of 72"), "\(invalid)")
    }

    @Test func aSchemaInstalledWithTheAppIsFoundAndBadSchemaFilesNeverStopACommand() throws {
        let app = try Described()
        defer { app.sandbox.cleanup() }
        let share = app.sandbox.file("usr/share")
        let installed = try app.prefs("schema", app.domain, "--install", share.path(percentEncoded: false))
        let systemSchema = share.appending(path: "prefs/schemas/\(app.domain).json")
        #expect(installed.output == "installed \(systemSchema.path(percentEncoded: false))\n", "\(installed)")
        try FileManager.default.removeItem(at: app.schemaFile)
        let dataDirs = ["XDG_DATA_DIRS": share.path(percentEncoded: false)]
        #expect(try app.prefs("range", app.domain, "fontSize", environment: dataDirs).output == "range int 8 72\n")

        // A damaged user schema: one warning, the installed one still applies, the values are read and written.
        try Data("{ damaged".utf8).write(to: app.schemaFile)
        let ranged = try app.prefs("range", app.domain, "fontSize", environment: dataDirs)
        #expect(ranged.output == "range int 8 72\n")
        #expect(
            ranged.error.hasPrefix(
                "prefs: warning: the schema \(app.schemaFile.path(percentEncoded: false)) is ignored")
                && ranged.error.split(separator: "\n").count == 1, "\(ranged)")
        #expect(try app.prefs("write", app.domain, "fontSize", "300", environment: dataDirs).status == 2)

        // A later version's schema, and no other: reported, and `prefs` works as without a schema.
        try Data(#"{"format": "prefs-schema", "version": 2, "domain": "x", "keys": {}}"#.utf8).write(to: app.schemaFile)
        let written = try app.prefs("write", app.domain, "fontSize", "300")
        #expect(
            written.status == 0 && written.error.contains("of version 2, newer than this Prefs reads"), "\(written)")
        #expect(try app.prefs("read", app.domain, "fontSize").output == "300\n")
        #expect(try app.prefs("list-keys", app.domain).status == 1)
    }

    /// In this process, through the package's test hook for forced values (a `prefs` child cannot be pointed
    /// elsewhere, as no user can point an app elsewhere), with the schema in this process's own XDG_DATA_HOME.
    @Test(.enabled(if: schemaFolderIsPrivate, "writes a schema into this process's XDG_DATA_HOME"))
    func aForcedValueIsDescribedCheckedAndNotReset() async throws {
        ManagedHook.turn.wait()
        defer { ManagedHook.turn.signal() }
        let folder = try TempDir()
        defer { folder.cleanup() }
        let managed = folder.file("managed-preferences")
        try FileManager.default.createDirectory(at: managed, withIntermediateDirectories: true)
        for path in [folder.path, managed.path] { chmod(path, 0o755) }
        ManagedLocation.useForTesting(folder: managed.path, checkedFrom: folder.path, owner: getuid())
        let domain = "forced-schema-\(UUID().uuidString)"
        let forced = managed.appending(path: domain + ".plist")
        try PropertyListSerialization.data(fromPropertyList: ["zoom": 9.0], format: .xml, options: 0).write(to: forced)
        chmod(forced.path, 0o644)
        let schemaFile = SchemaFiles.userFolder.appending(path: domain + ".json")
        try FileManager.default.createDirectory(at: SchemaFiles.userFolder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: schemaFile) }
        let zoom = KeyDescription(
            type: "double", defaultValue: .double(1), summary: "", allowed: .range(.double(0.5), .double(4)))
        try DomainSchema(domain: domain, keys: ["zoom": zoom]).jsonDocument().write(to: schemaFile)

        func run(_ arguments: String...) async -> (status: Int32, output: String, error: String) {
            let console = CapturedConsole()
            let status = await PrefsTool.run(arguments, console: console.console)
            return (status, console.output, console.error)
        }
        let described = await run("describe", domain, "zoom")
        #expect(
            described.output.hasSuffix(
                "value: 1.0 (the default, read in place of 9.0, which is not allowed (from 0.5 to 4.0))\n"
                    + "set by: managed (forced by the administrator)\n"), "\(described)")
        let checked = await run("check", domain)
        #expect(checked.status == 1 && checked.output == "managed: zoom = 9.0 is not allowed (from 0.5 to 4.0)\n")
        #expect(await run("reset", domain, "zoom").status == 5)
        #expect(await run("reset", domain, "--all").status == 0, "--all leaves forced keys alone")
    }
}

/// True when this process's XDG_DATA_HOME is not the real one (as `make test` runs it).
private let schemaFolderIsPrivate: Bool = {
    guard let data = ProcessInfo.processInfo.environment["XDG_DATA_HOME"] else { return false }
    let home = FileManager.default.homeDirectoryForCurrentUser.path(percentEncoded: false)
    return !data.hasPrefix(home + "/.local")
}()

/// `prefs schema DOMAIN --json-schema`, checked as a JSON Schema by Python's `jsonschema`, validating `prefs export
/// DOMAIN`: status 0 when the export is valid, else 1 with one line per error. A value stored as JSON text is
/// validated against its property's `contentSchema` too, which validators only annotate. A missing `jsonschema`
/// (which `make deps` installs) fails the calling test, saying so.
func validateExport(
    _ domain: String, in sandbox: Sandbox, environment: [String: String] = [:],
    sourceLocation: SourceLocation = #_sourceLocation
) throws -> ChildProcess.Exit {
    let available = try ChildProcess.run(
        URL(filePath: "/usr/bin/env"), ["python3", "-c", "import jsonschema.validators"], timeLimit: .seconds(60))
    try #require(
        available.succeeded,
        "Python's jsonschema is missing: `make deps` installs it (python3-jsonschema): \(available.error)",
        sourceLocation: sourceLocation)
    let schema = try sandbox.prefs(["schema", domain, "--json-schema"], environment: environment)
    try #require(schema.status == 0, "\(schema)", sourceLocation: sourceLocation)
    try Data(schema.output.utf8).write(to: sandbox.file("schema.json"))
    let exported = try sandbox.prefs(["export", domain], environment: environment)
    try #require(exported.status == 0, "\(exported)", sourceLocation: sourceLocation)
    try Data(exported.output.utf8).write(to: sandbox.file("export.json"))
    let script = """
        import json, sys
        from jsonschema import Draft202012Validator
        schema = json.load(open(sys.argv[1]))
        Draft202012Validator.check_schema(schema)
        document = json.load(open(sys.argv[2]))
        errors = sorted(e.message for e in Draft202012Validator(schema).iter_errors(document))
        for key, value in document.items():
            content = schema["properties"].get(key, {}).get("contentSchema")
            if content is not None and isinstance(value, str):
                try:
                    parsed = json.loads(value)
                except ValueError:
                    errors.append(key + ": not JSON")
                    continue
                errors += sorted(key + ": " + e.message for e in Draft202012Validator(content).iter_errors(parsed))
        print("\\n".join(errors))
        sys.exit(1 if errors else 0)
        """
    return try ChildProcess.run(
        URL(filePath: "/usr/bin/env"),
        ["python3", "-c", script, sandbox.path("schema.json"), sandbox.path("export.json")])
}
