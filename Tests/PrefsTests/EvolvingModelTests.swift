import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

/// A settings struct as version 1 of an app stored it, and as version 2 declares it: `wrapLines` and `theme` are
/// new, and `theme` is itself a struct that gained a field.
private enum Version2 {
    struct EditorSettings: Codable, Sendable, Equatable {
        var fontSize = 13
        var fontName = "Menlo"
        var wrapLines = true
        var colors = Colors()
    }

    struct Colors: Codable, Sendable, Equatable {
        var accent = "blue"
        var contrast = 1.0
    }
}

/// What reads and writes models stored by an older version of the app: missing fields and declared migrations.
@Suite(.ownThreads) struct EvolvingModelTests {
    @Test func aVersion1FileReadsInVersion2WithItsValuesAndTheNewFieldsDefaults() throws {
        let folder = try TempDir("prefs-evolve")
        defer { folder.cleanup() }
        let url = folder.file("settings.json")
        // What version 1 left on disk: no wrapLines, and colors without contrast.
        try Data(#"{"editor": "{\"colors\":{\"accent\":\"plum\"},\"fontName\":\"Iosevka\",\"fontSize\":20}"}"#.utf8)
            .write(to: url)
        Reports.install()
        let store = try FileStore(url: url)
        let editor = StoredValue(key: "editor", default: Version2.EditorSettings(), store: store)

        #expect(
            editor.wrappedValue
                == Version2.EditorSettings(
                    fontSize: 20, fontName: "Iosevka", wrapLines: true, colors: .init(accent: "plum", contrast: 1.0)))
        #expect(Reports.for("editor").isEmpty, "a value that reads is not an error")

        // A change of one member keeps every other stored field, and stores the whole version 2 form.
        editor.set(\.fontSize, to: 22)
        let reopened = try FileStore(url: url)
        let stored = try #require(try reopened.value(forKey: "editor"))
        let decoded = try stored.decoded(as: Version2.EditorSettings.self)
        #expect(decoded.fontSize == 22)
        #expect(decoded.fontName == "Iosevka")
        #expect(decoded.colors.accent == "plum")
        #expect(decoded.wrapLines && decoded.colors.contrast == 1.0)
    }

    @Test func filledFieldsKeepEveryStoredNumberAndFlagExactly() throws {
        struct Counters: Codable, Sendable, Equatable {
            var big: Int64 = 0
            var huge: UInt64 = 0
            var flag = false
            var ratio = 0.0
            var inner = Inner()
            var added = [7]
        }
        struct Inner: Codable, Sendable, Equatable {
            var count = 0
            var label = "new"
        }
        let store = InMemoryStore()
        let stored =
            #"{"big":9007199254740993,"huge":18446744073709551615,"flag":true,"ratio":0.1,"inner":{"count":1}}"#
        try store.setValue(.string(stored), forKey: "counters")
        let read = try store.value(for: PrefKey("counters", default: Counters()))
        let expected = Counters(
            big: 9_007_199_254_740_993, huge: .max, flag: true, ratio: 0.1, inner: Inner(count: 1), added: [7])
        #expect(read == expected)
    }

    @Test func aValueThatIsNotTheTypeStillReadsAsTheDefaultAndIsLeftAlone() throws {
        Reports.install()
        let key = uniqueKey("editor")
        let store = InMemoryStore([key: .string(#"{"fontSize":"large"}"#)])
        let editor = StoredValue(key: key, default: Version2.EditorSettings(), store: store)
        #expect(editor.wrappedValue == Version2.EditorSettings())
        #expect(Reports.for(key).count == 1)
        #expect(try store.value(forKey: key) == .string(#"{"fontSize":"large"}"#))
    }

    @Test func aRenamedKeyMovesOnceAndIsReported() throws {
        Reports.install()
        let key = uniqueKey("editor")
        let oldKey = uniqueKey("editorSettings")
        let folder = try TempDir("prefs-evolve")
        defer { folder.cleanup() }
        let url = folder.file("settings.json")
        try FileStore(url: url).setValue(.string(#"{"fontSize":18}"#), forKey: oldKey)

        let declared = PrefKey(key, default: Version2.EditorSettings()).migrating(.renamed(from: oldKey))
        let store = try FileStore(url: url)
        let editor = StoredValue(declared, store: store)
        #expect(editor.wrappedValue.fontSize == 18)
        #expect(try store.value(forKey: oldKey) == nil, "the old key is removed")
        let migrations = Reports.for(key).filter { $0.operation == .migration }
        #expect(migrations.count == 1)
        #expect(migrations.first?.error is PrefsMigrationNotice)
        #expect("\(migrations.first.map(String.init(describing:)) ?? "")".contains(oldKey))

        // Runs once: the next launch (another store on the file) finds nothing to migrate, even if the old key
        // came back.
        editor.set(\.fontSize, to: 19)
        let later = try FileStore(url: url)
        try later.setValue(.string(#"{"fontSize":12}"#), forKey: oldKey)
        let again = StoredValue(declared, store: later)
        #expect(again.wrappedValue.fontSize == 19)
        #expect(Reports.for(key).filter { $0.operation == .migration }.count == 1)
    }

    @Test func aChangedTypeIsConvertedInPlace() throws {
        Reports.install()
        let key = uniqueKey("editor")
        let oldKey = uniqueKey("fontSize")
        let store = InMemoryStore([key: .int(16), oldKey: .int(11)])
        let declared = PrefKey(key, default: Version2.EditorSettings())
            .migrating(.converted(as: Int.self) { Version2.EditorSettings(fontSize: $0) })
            .migrating(.converted(from: oldKey, as: Int.self) { Version2.EditorSettings(fontSize: $0) })
        let editor = StoredValue(declared, store: store)
        #expect(editor.wrappedValue.fontSize == 16, "the key's own older form wins; the other key is not needed")
        #expect(try store.value(forKey: oldKey) == .int(11), "a migration that does not apply leaves its key alone")
        #expect(Reports.for(key).filter { $0.operation == .migration }.count == 1)
        _ = StoredValue(declared, store: store)
        #expect(Reports.for(key).filter { $0.operation == .migration }.count == 1, "once")
    }

    @Test func anOldValueThatDoesNotReadIsReportedAndKept() throws {
        Reports.install()
        let key = uniqueKey("editor")
        let oldKey = uniqueKey("fontSize")
        let store = InMemoryStore([oldKey: .string("big")])
        let declared = PrefKey(key, default: Version2.EditorSettings())
            .migrating(.converted(from: oldKey, as: Int.self) { Version2.EditorSettings(fontSize: $0) })
        let editor = StoredValue(declared, store: store)
        #expect(editor.wrappedValue == Version2.EditorSettings())
        #expect(try store.value(forKey: oldKey) == .string("big"))
        let reports = Reports.for(key).filter { $0.operation == .migration }
        #expect(reports.count == 1 && !(reports.first?.error is PrefsMigrationNotice))
    }
}

// MARK: - EvolvingModels.md and docs/TOUR.md, as written

@Suite(.ownThreads)
private enum EvolvingModelsArticle {
    enum V1 {
        struct EditorSettings: Codable, Sendable, Equatable {  // version 1
            var fontSize = 13
        }
    }

    struct EditorSettings: Codable, Sendable, Equatable {  // version 2
        var fontSize = 13
        var wrapLines = true
    }

    final class Model {
        @StoredValue(key: "editor") var editor = EditorSettings()
        @StoredValue(.articleEditor) var migrated
    }
}

extension PrefKey where Value == EvolvingModelsArticle.EditorSettings {
    fileprivate static let articleEditor = PrefKey("articleEditor", default: EvolvingModelsArticle.EditorSettings())
        .migrating(
            .renamed(from: "editorSettings"),  // version 1 used another key
            .converted(from: "fontSize", as: Int.self) { size in  // version 0 kept only the size
                EvolvingModelsArticle.EditorSettings(fontSize: size)
            })
}

extension EvolvingModelTests {
    @Test func theArticlesVersion1ToVersion2Example() throws {
        // Version 1 stores its settings; version 2 (another store on the same file, as after an update) reads them.
        let folder = try TempDir("prefs-evolve")
        defer { folder.cleanup() }
        let url = folder.file("settings.json")
        try FileStore(url: url).set(
            EvolvingModelsArticle.V1.EditorSettings(fontSize: 20), for: PrefKey("editor", default: .init()))
        try FileStore(url: url).setValue(.int(17), forKey: "fontSize")

        let model = PrefsConfig.withDefaultStore(try FileStore(url: url)) { EvolvingModelsArticle.Model() }
        #expect(model.editor == .init(fontSize: 20, wrapLines: true))
        model.$editor.set(\.wrapLines, to: false)
        #expect(try FileStore(url: url).value(forKey: "editor") == .string(#"{"fontSize":20,"wrapLines":false}"#))
        // Version 0's fontSize moved to the migrated key, once.
        #expect(model.migrated.fontSize == 17)
        #expect(try FileStore(url: url).value(forKey: "fontSize") == nil)
    }
}
