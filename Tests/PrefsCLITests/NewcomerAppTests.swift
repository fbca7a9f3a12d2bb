import Foundation
import Prefs
import PrefsTestSupport
import TestThreads
import Testing

/// The app a newcomer writes from the README (`newcomer-app` in PrefsTestHelper: an enum, a list, a `Codable` struct,
/// a number in a range, an optional date, a secret, a colour that decodes itself and a computed default), run as a
/// real process over its own folders, beside the real `prefs`: the tool accepts what the app reads and refuses what it
/// cannot, with the place that fails; the app's reports name where a refused value came from; `prefs read` answers
/// for every declared key before anything is stored.
@Suite(.ownThreads) struct NewcomerAppTests {
    struct App {
        let sandbox: Sandbox
        let domain = "com.example.newcomer-\(UUID().uuidString.prefix(6))"
        var system: URL { sandbox.file("etc") }
        var managed: URL { sandbox.file("managed") }

        init() throws {
            sandbox = try Sandbox()
            for folder in [system, managed] {
                try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            }
            for folder in [sandbox.root, managed] {
                try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: folder.path)
            }
            #expect(try run("publish").first?.hasPrefix("wrote ") == true)
        }

        var environment: [String: String] {
            sandbox.environment.merging([
                "XDG_CONFIG_DIRS": system.path(percentEncoded: false),
                "SCHEMA_MANAGED_FOLDER": managed.path(percentEncoded: false),
                "SCHEMA_MANAGED_TOP": sandbox.root.path(percentEncoded: false),
            ]) { $1 }
        }

        /// Runs the app: `newcomer-app DOMAIN ACTION ARGUMENTS…`; its lines.
        func run(_ action: String, _ arguments: [String] = [], environment extra: [String: String] = [:]) throws
            -> [String]
        {
            let result = try ChildProcess.run(
                ["newcomer-app", domain, action] + arguments, environment: environment.merging(extra) { $1 })
            #expect(result.status == 0, "\(result)")
            return result.lines
        }

        @discardableResult
        func prefs(_ arguments: String...) throws -> PrefsResult {
            try sandbox.prefs(arguments, environment: ["XDG_CONFIG_DIRS": system.path(percentEncoded: false)])
        }

        /// The app's reports about `key`.
        func reports(about key: String, _ arguments: [String] = [], environment: [String: String] = [:]) throws
            -> [String]
        {
            try run("read", arguments, environment: environment).filter {
                $0.hasPrefix("report: read of \(String(reflecting: key))")
            }
        }

        func writePlist(_ values: [String: Any], in folder: URL) throws {
            let file = folder.appending(path: domain + ".plist")
            try PropertyListSerialization.data(fromPropertyList: values, format: .xml, options: 0).write(to: file)
            try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file.path)
        }
    }

    /// For each value, written past the schema: the app refuses it (reports it and reads the default) exactly when
    /// `prefs check` flags it, and `prefs write` refuses exactly those, naming the place that fails.
    @Test func theToolRefusesExactlyWhatTheAppCannotRead() throws {
        let app = try App()
        defer { app.sandbox.cleanup() }
        let listed = try app.prefs("list-keys", app.domain)
        #expect(
            listed.output.contains("windowFrame  JSON {x: Int, y: Int, width: Int, height: Int, title?: String}  "),
            "\(listed)")
        #expect(listed.output.contains("recentFiles  [String]  "), "\(listed)")
        let cases: [(key: String, value: String, reads: Bool)] = [
            ("windowFrame", #"{"x":1,"y":2,"width":1024,"height":768}"#, true),
            ("windowFrame", #"{"width":1024}"#, true),  // the app fills the missing members from the default
            ("windowFrame", #"{"x":1,"y":2,"width":1024,"height":768,"title":null,"extra":[1]}"#, true),
            ("windowFrame", "garbage", false),
            ("windowFrame", #"{"x":0,"y":0,"width":"wide","height":600}"#, false),
            ("windowFrame", #"{"x":0,"y":0,"width":1024.5,"height":600}"#, false),
            ("windowFrame", #"{"x":0,"y":0,"width":1,"height":600,"title":5}"#, false),
            ("windowFrame", "[1, 2]", false),
            ("recentFiles", #"["a", "b"]"#, true),
            ("recentFiles", #"["a", 1]"#, false),
            ("accent", "green", true),
            ("accent", "purple", false),
            ("fontSize", "72", true),
            ("fontSize", "73", false),
            ("lastExport", "2024-05-01T12:00:00Z", true),
        ]
        for (key, value, reads) in cases {
            try app.prefs("write", app.domain, key, value, "--ignore-schema").expectSuccess()
            let refusedByApp = try !app.reports(about: key).isEmpty
            let checked = try app.prefs("check", app.domain)
            let flagged = checked.output.contains("user: \(key) = ")
            #expect(refusedByApp == !reads && flagged == !reads, "\(key) = \(value): the app and check disagree")
            try app.prefs("delete", app.domain, key).expectSuccess()
            let written = try app.prefs("write", app.domain, key, value)
            #expect((written.status == 0) == reads, "\(key) = \(value): \(written)")
            if written.status == 0 { try app.prefs("delete", app.domain, key).expectSuccess() }
        }
        // The place that fails, as the app's read finds it.
        let wide = try app.prefs("write", app.domain, "windowFrame", #"{"x":0,"y":0,"width":"wide","height":600}"#)
        #expect(wide.status == 2 && wide.error.hasPrefix("prefs write: windowFrame.width: expected an integer;"))
        let garbage = try app.prefs("write", app.domain, "windowFrame", "garbage")
        #expect(garbage.error.hasPrefix("prefs write: windowFrame: not valid JSON;"), "\(garbage)")
        let list = try app.prefs("write", app.domain, "recentFiles", #"["a", 1]"#)
        #expect(list.error.hasPrefix("prefs write: recentFiles[1]: is an int, not text;"), "\(list)")
        // What the app reads of a struct the tool accepted with members missing.
        try app.prefs("write", app.domain, "windowFrame", #"{"width":1024}"#).expectSuccess()
        #expect(try app.run("read").contains("windowFrame=1024x600"))
    }

    /// `prefs import` refuses a file holding a value the app cannot read, naming it, and changes nothing.
    @Test func importRefusesAFileTheAppCannotReadAndNamesTheValue() throws {
        let app = try App()
        defer { app.sandbox.cleanup() }
        try app.prefs("write", app.domain, "accent", "green").expectSuccess()
        let file = app.sandbox.file("import.json")
        try Data(#"{"accent": "orange", "windowFrame": "{\"width\": \"wide\"}"}"#.utf8).write(to: file)
        let refused = try app.prefs("import", app.domain, file.path(percentEncoded: false))
        #expect(refused.status == 2, "\(refused)")
        #expect(refused.error.contains("windowFrame.width: expected an integer"), "\(refused)")
        #expect(try app.prefs("read", app.domain, "accent").output == "green\n", "nothing was imported")
        try app.prefs("import", app.domain, file.path(percentEncoded: false), "--ignore-schema").expectSuccess()
        #expect(try app.prefs("read", app.domain, "accent").output == "orange\n")
    }

    /// A type whose own `init(from:)` refuses what its members allow is published as such: `prefs` says it cannot
    /// check the key instead of passing its values.
    @Test func aTypeThatDecodesItselfIsSaidToBeUncheckable() throws {
        let app = try App()
        defer { app.sandbox.cleanup() }
        #expect(try app.prefs("list-keys", app.domain).output.contains("colour       string (unchecked)"))
        let described = try app.prefs("describe", app.domain, "colour")
        #expect(described.output.contains("checked: no; prefs cannot tell which values the app reads: NewcomerColour"))
        let written = try app.prefs("write", app.domain, "colour", "red")
        #expect(written.status == 0 && written.error.contains("\"colour\" is written unchecked"), "\(written)")
        #expect(try app.reports(about: "colour").count == 1, "the app cannot read it: check must not pass it")
        let checked = try app.prefs("check", app.domain)
        #expect(checked.status == 1 && checked.output.contains("user: colour = red cannot be checked"), "\(checked)")
    }

    /// The JSON Schema carries the struct's members as its stored JSON text's content, and the list's element type.
    @Test func theJSONSchemaDescribesTheStructsMembersAndTheListsElements() throws {
        let app = try App()
        defer { app.sandbox.cleanup() }
        let printed = try app.prefs("schema", app.domain, "--json-schema")
        printed.expectSuccess()
        let document = try #require(
            try JSONSerialization.jsonObject(with: Data(printed.output.utf8)) as? [String: Any])
        let properties = try #require(document["properties"] as? [String: [String: Any]])
        let frame = try #require(properties["windowFrame"])
        #expect(frame["type"] as? String == "string" && frame["contentMediaType"] as? String == "application/json")
        let content = try #require(frame["contentSchema"] as? [String: Any])
        let members = try #require(content["properties"] as? [String: [String: Any]])
        #expect(Set(members.keys) == ["x", "y", "width", "height", "title"])
        #expect(members["width"]?["type"] as? String == "integer")
        #expect((content["required"] as? [String]) == [], "the app fills missing members from the default")
        let files = try #require(properties["recentFiles"])
        #expect((files["items"] as? [String: Any])?["type"] as? String == "string")

        // It says what the tool says: a value the app reads validates, one it refuses does not, at the same place.
        let system = ["XDG_CONFIG_DIRS": app.system.path(percentEncoded: false)]
        try app.prefs("write", app.domain, "windowFrame", #"{"width":1024,"title":"Notes"}"#).expectSuccess()
        try app.prefs("write", app.domain, "recentFiles", #"["a"]"#).expectSuccess()
        let valid = try validateExport(app.domain, in: app.sandbox, environment: system)
        #expect(valid.succeeded, "\(valid)")
        try app.prefs("write", app.domain, "windowFrame", #"{"width":"wide"}"#, "--ignore-schema").expectSuccess()
        try app.prefs("write", app.domain, "recentFiles", #"["a", 1]"#, "--ignore-schema").expectSuccess()
        let invalid = try validateExport(app.domain, in: app.sandbox, environment: system)
        #expect(invalid.status == 1, "\(invalid)")
        #expect(
            invalid.lines.sorted() == ["1 is not of type 'string'", "windowFrame: 'wide' is not of type 'integer'"],
            "\(invalid)")
    }

    /// A value the app cannot read is reported in its layer's words, with a step that applies there: only the
    /// user's file is `prefs reset`'s.
    @Test func reportsNameTheLayerAValueCameFromAndAStepThatApplies() throws {
        let app = try App()
        defer { app.sandbox.cleanup() }
        let argument = try app.reports(about: "fontSize", ["-fontSize", "73"])
        #expect(
            argument == [
                "report: read of \"fontSize\" failed: -fontSize 73 (the command line): outside 8...72; the default 13 "
                    + "is read for this run"
            ], "\(argument)")
        let text = try app.reports(about: "fontSize", ["-fontSize", "abc"])
        #expect(text.count == 1 && text[0].contains("-fontSize abc (the command line): not a number"), "\(text)")
        let variable = try app.reports(
            about: "fontSize", environment: ["SCHEMA_PREFIX": "NEWCOMER_", "NEWCOMER_FONT_SIZE": "abc"])
        #expect(
            variable.count == 1
                && variable[0].contains("NEWCOMER_FONT_SIZE=abc (the environment): not a number")
                && variable[0].hasSuffix("the default 13 is read while the variable is set"), "\(variable)")

        try app.writePlist(["fontSize": 300], in: app.system)
        let systemFile = app.system.appending(path: app.domain + ".plist").path(percentEncoded: false)
        let system = try app.reports(about: "fontSize")
        #expect(
            system.count == 1 && system[0].contains("300 in \(systemFile) (a system-wide default): outside 8...72"),
            "\(system)")
        try app.writePlist(["fontSize": 400], in: app.managed)
        let managedFile = app.managed.appending(path: app.domain + ".plist").path(percentEncoded: false)
        let managed = try app.reports(about: "fontSize")
        #expect(
            managed.count == 1 && managed[0].contains("400 in \(managedFile) (forced by the administrator)"),
            "\(managed)")
        try FileManager.default.removeItem(atPath: managedFile)
        try FileManager.default.removeItem(atPath: systemFile)

        try app.prefs("write", app.domain, "fontSize", "-int", "500", "--ignore-schema").expectSuccess()
        let user = try app.reports(about: "fontSize")
        let userFile = app.sandbox.plist(app.domain).path(percentEncoded: false)
        #expect(
            user == [
                "report: read of \"fontSize\" failed: 500 in \(userFile): outside 8...72; the default 13 is read in "
                    + "its place (`prefs reset \(app.domain) fontSize` removes it)"
            ], "\(user)")
        for other in argument + text + variable + system + managed { #expect(!other.contains("prefs reset")) }
        try app.prefs("reset", app.domain, "fontSize").expectSuccess()
        #expect(try app.reports(about: "fontSize").isEmpty)
    }

    /// After the app published its schema and stored nothing, `prefs read` answers for every declared key with what
    /// the app reads, as `gsettings get` does; `prefs domains` lists the domain.
    @Test func readAnswersForEveryDeclaredKeyBeforeAnythingIsStored() throws {
        let app = try App()
        defer { app.sandbox.cleanup() }
        #expect(!FileManager.default.fileExists(atPath: app.sandbox.plist(app.domain).path(percentEncoded: false)))
        #expect(try app.prefs("domains").output.split(separator: "\n").contains(Substring(app.domain)))
        for (key, value) in [
            ("accent", "blue"), ("recentFiles", "[]"), ("windowFrame", #"{"height":600,"width":800,"x":0,"y":0}"#),
            ("fontSize", "13"), ("lastExport", "nil"), ("colour", "\"#336699\""),
        ] {
            let read = try app.prefs("read", app.domain, key)
            #expect(read.status == 0 && read.output == value + "\n", "\(key): \(read)")
        }
        #expect(try app.prefs("read", app.domain, "lastExport", "--json").output == "null\n")
        let explained = try app.prefs("read", app.domain, "fontSize", "--explain")
        #expect(explained.output == "13\nlayer: default (the app's declaration)\n", "\(explained)")
        let computed = try app.prefs("read", app.domain, "columns")
        #expect(computed.status == 1 && computed.error.contains("computes its default"), "\(computed)")
        #expect(try app.prefs("read", app.domain).output == "{\n}\n")
        #expect(!FileManager.default.fileExists(atPath: app.sandbox.plist(app.domain).path(percentEncoded: false)))
    }

    /// A default computed when read: reads answer what the closure answers now; observers (`values` and Observation)
    /// hear only of changes to what is stored, then with the closure's answer at that moment when it is removed.
    @Test func aComputedDefaultIsReadFreshAndAnnouncedOnlyWithStoredChanges() async throws {
        let app = try App()
        defer { app.sandbox.cleanup() }
        let described = try app.prefs("describe", app.domain, "columns")
        #expect(described.output.contains("default: computed by the app each time no layer holds a value"))
        let listed = try app.prefs("list-keys", app.domain).output.split(separator: "\n")
        let line = try #require(listed.first { $0.hasPrefix("columns ") })
        #expect(line.split(separator: " ") == ["columns", "int", "(computed)"], "\(line)")
        let schema = try String(
            contentsOf: app.sandbox.data.appending(path: "prefs/schemas/\(app.domain).json"), encoding: .utf8)
        #expect(schema.contains("\"computed\": true"))

        let observing = try ChildProcess(
            ChildProcess.helperURL, ["newcomer-app", app.domain, "observe"], environment: app.environment,
            input: .pipe)
        defer { observing.kill() }
        func next(_ expected: String) throws {
            let line = try #require(observing.readLine(), "the app ended before \(expected)")
            #expect(line == expected)
        }
        func nextTwo(_ expected: Set<String>) throws {
            var seen: Set<String> = []
            for _ in 0..<2 { seen.insert(try #require(observing.readLine(), "the app ended before \(expected)")) }
            #expect(seen == expected)
        }
        try next("value 2")
        try next("ready")
        observing.write("answer 5\n")
        try next("read 5")  // a read answers what the closure answers now; no observer hears of it
        try app.prefs("write", app.domain, "columns", "7").expectSuccess()
        try nextTwo(["value 7", "tracked 7"])
        observing.write("answer 6\n")
        try next("read 7")  // something is stored: the closure is not asked
        try app.prefs("delete", app.domain, "columns").expectSuccess()
        try nextTwo(["value 6", "tracked 6"])  // the removal brings back the closure's answer at that moment
        observing.write("answer 9\n")
        try next("read 9")
        observing.write("quit\n")
        observing.closeInput()
        let rest = observing.remainingLines()
        #expect(rest.isEmpty, "no observer heard of the closure's new answers: \(rest)")
        #expect(observing.wait().status == 0)
    }
}
