import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

/// An app that describes its keys (`schema-app` in PrefsTestHelper), run as a real process over its own folders:
/// what it publishes, what it reads from files whose values its declarations do not allow, and what it refuses.
@Suite(.ownThreads) struct SchemaProcessTests {
    struct App {
        let directory: TempDir
        let name = "schema.\(UUID().uuidString.prefix(8))"
        var config: URL { directory.file("config") }
        var data: URL { directory.file("data") }
        var system: URL { directory.file("etc") }
        var managed: URL { directory.file("managed") }
        var schemaFile: URL { data.appending(path: "prefs/schemas/\(name).json") }

        init() throws {
            directory = try TempDir()
            for folder in [config, data, system, managed] {
                try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            }
            for folder in [directory.url, managed] {
                try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: folder.path)
            }
        }

        func run(_ action: String, _ extra: [String] = []) throws -> [String] {
            let result = try ChildProcess.run(
                ["schema-app", name, action] + extra,
                environment: [
                    "HOME": directory.path, "XDG_CONFIG_HOME": config.path, "XDG_DATA_HOME": data.path,
                    "XDG_STATE_HOME": directory.path("state"), "XDG_CONFIG_DIRS": system.path,
                    "SCHEMA_MANAGED_FOLDER": managed.path, "SCHEMA_MANAGED_TOP": directory.path,
                ])
            #expect(result.status == 0, "\(result.error)")
            return result.lines
        }

        func write(_ values: [String: PrefValue], in folder: URL) throws {
            let file = folder.appending(path: name + ".plist")
            try PropertyListFormat.encode(values).write(to: file, options: .atomic)
            try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file.path)
        }

        func identity(of url: URL) throws -> [FileAttributeKey: AnyHashable] {
            let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
            return [
                .systemFileNumber: attributes[.systemFileNumber] as! AnyHashable,
                .modificationDate: attributes[.modificationDate] as! AnyHashable,
            ]
        }
    }

    @Test func anAppPublishesItsDeclaredKeysWhereprefsFindsThemAndOnlyWhenTheyChange() throws {
        let app = try App()
        defer { app.directory.cleanup() }
        #expect(try app.run("publish") == ["wrote \(app.schemaFile.path(percentEncoded: false))"])
        let schema = try #require(try SchemaFiles.read(at: app.schemaFile.path))
        #expect(schema.domain == app.name)
        #expect(
            schema.keys["fontSize"]
                == KeyDescription(
                    type: "int", defaultValue: .int(13), summary: "Editor font size, in points",
                    allowed: .range(.int(8), .int(72)), route: ReadRoute(.native, readsForeignForms: true),
                    shape: .leaf(.int)))
        #expect(schema.keys["theme"]?.allowed == .choices(["light", "dark", "system"].map(PrefValue.string)))
        #expect(schema.keys["theme"]?.summary == "Colour scheme of the windows")
        #expect(schema.keys["accent"]?.allowed == .choices([.string("blue"), .string("green")]))
        #expect(
            schema.keys["lastOpened"]
                == KeyDescription(
                    type: "date", defaultValue: nil, summary: "", allowed: nil,
                    route: ReadRoute(.native, readsForeignForms: true, isOptional: true), shape: .leaf(.date)))
        #expect(schema.keys["hasHaptics"]?.defaultValue == .bool(false))
        #expect(
            SchemaFiles.load(domain: app.name, folders: [app.data.appending(path: "prefs/schemas")]).schema == schema)

        // A launch that declares the same keys writes nothing.
        let before = try app.identity(of: app.schemaFile)
        #expect(try app.run("publish").isEmpty)
        #expect(try app.identity(of: app.schemaFile) == before, "the file was not rewritten")

        // An entry another process of the app declared stays; a changed declaration is written.
        var changed = schema
        changed.keys["other"] = KeyDescription(type: "string", defaultValue: .string("x"), summary: "", allowed: nil)
        changed.keys["fontSize"]?.summary = "an older text"
        try changed.jsonDocument().write(to: app.schemaFile)
        #expect(try app.run("publish").count == 1)
        let merged = try #require(try SchemaFiles.read(at: app.schemaFile.path))
        #expect(merged.keys["fontSize"]?.summary == "Editor font size, in points")
        #expect(merged.keys["other"] != nil)
    }

    /// Foundation's `Data.write` raised SIGXFSZ, whose default action ends the process, when the schema did not fit
    /// the process's RLIMIT_FSIZE; it is written through Prefs' own writes now, which are refused with EFBIG instead.
    @Test func aSchemaTooLargeForTheFileSizeLimitIsReportedAndTheAppGoesOn() throws {
        let app = try App()
        defer { app.directory.cleanup() }
        let lines = try app.run("publish-limited", ["64"])
        #expect(lines.contains("wrote 0"), "\(lines)")
        #expect(lines.contains("SIGXFSZ untouched"), "\(lines)")
        #expect(
            lines.contains {
                $0.hasPrefix("report:") && $0.contains("could not be written") && $0.contains("too large")
            },
            "\(lines)")
        #expect(!FileManager.default.fileExists(atPath: app.schemaFile.path))
    }

    @Test func aDamagedOrNewerSchemaNeverStopsTheAppAndIsReportedOnce() throws {
        let app = try App()
        defer { app.directory.cleanup() }
        try FileManager.default.createDirectory(
            at: app.schemaFile.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data("{ not json".utf8).write(to: app.schemaFile)
        let repaired = try app.run("publish")
        #expect(
            repaired.filter { $0.hasPrefix("report:") && $0.contains("is not valid JSON") }.count == 1, "\(repaired)")
        #expect(
            repaired.contains("wrote \(app.schemaFile.path(percentEncoded: false))"), "a damaged schema is replaced")

        let newer = Data(#"{"format": "prefs-schema", "version": 99, "future": true}"#.utf8)
        try newer.write(to: app.schemaFile)
        let kept = try app.run("publish")
        #expect(kept.count == 1 && kept[0].contains("of version 99, newer than this Prefs reads"), "\(kept)")
        #expect(try Data(contentsOf: app.schemaFile) == newer, "a later version's schema is left alone")
        let read = try app.run("read")
        #expect(read == Array(repeating: "fontSize=13 theme=light accent=blue zoom=1.0", count: 2), "\(read)")
    }

    @Test func valuesOutsideTheDeclarationsReadAsTheDefaultFromEveryFileReportedOnceNeverOverwritten() throws {
        let app = try App()
        defer { app.directory.cleanup() }
        try app.write(["fontSize": .int(300), "theme": .string("purple")], in: app.config)
        try app.write(["accent": .string("purple")], in: app.system)
        try app.write(["zoom": .double(9)], in: app.managed)
        let userFile = try Data(contentsOf: app.config.appending(path: app.name + ".plist"))
        let lines = try app.run("read")
        #expect(
            lines.filter { !$0.hasPrefix("report:") }
                == Array(repeating: "fontSize=13 theme=light accent=blue zoom=1.0", count: 2), "\(lines)")
        let reports = lines.filter { $0.hasPrefix("report:") }
        #expect(reports.count == 4, "one report per value, however often it is read: \(reports)")
        // Each names the file the value is in, and why the app cannot read it.
        func file(_ folder: URL) -> String { folder.appending(path: app.name + ".plist").path(percentEncoded: false) }
        #expect(reports.contains { $0.contains("300 in \(file(app.config)): outside 8...72") }, "\(reports)")
        #expect(
            reports.contains {
                $0.contains("purple in \(file(app.system)) (a system-wide default): not one of \"blue\", \"green\"")
            }, "\(reports)")
        #expect(
            reports.contains {
                $0.contains("9.0 in \(file(app.managed)) (forced by the administrator): outside 0.5...4.0")
            },
            "\(reports)")
        #expect(reports.contains { $0.contains("\"theme\"") }, "an unknown case is reported as before")
        #expect(try Data(contentsOf: app.config.appending(path: app.name + ".plist")) == userFile)
    }

    @Test func writesOutsideTheDeclarationsAreRefusedThrownOrReportedAndWriteNothing() throws {
        let app = try App()
        defer { app.directory.cleanup() }
        let lines = try app.run("write")
        #expect(
            lines.first
                == "thrown: 300 is not an allowed value of \"fontSize\" (allowed: from 8 to 72); left unchanged")
        #expect(lines.contains("fontSize=20 accent=blue zoom=1.0"), "\(lines)")
        let reports = lines.filter { $0.hasPrefix("report: write of") }
        #expect(reports.count == 2 && reports.allSatisfy { $0.contains("is not an allowed value") }, "\(reports)")
        let stored = try PropertyListFormat.decode(
            Data(contentsOf: app.config.appending(path: app.name + ".plist")), path: "")
        #expect(stored == ["fontSize": .int(20)])
    }
}
