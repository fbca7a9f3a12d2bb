import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

enum Pane: String, Codable, CaseIterable, Sendable {
    case files, search, history
}

extension PrefKey where Value == Int {
    fileprivate static let checkedSize = PrefKey("size", default: 13, schema: .init("Font size", range: 8...72))
}

/// What a key's declaration allows (`PrefKey.Schema`): checked on every typed write and read, in the declarations
/// the contract already has.
@Suite(.ownThreads) struct KeySchemaTests {
    final class Model: @unchecked Sendable {
        @StoredValue(.checkedSize) var size
        @StoredValue(key: "accent", schema: .init("Accent colour", choices: ["blue", "green"])) var accent = "blue"
        @StoredValue(key: "zoom", schema: .init(range: 0.5...4)) var zoom = 1.0
        @StoredValue(key: "pane", schema: "The pane shown at launch") var pane: Pane = .files
        @StoredValue(key: "limit", schema: .init("Most recent files", range: 1...50)) var limit: Int? = nil
        @StoredValue(key: "plain") var plain = false
    }

    @Test func theDeclarationFormsTakeASchemaAndTheContractsFormsStillCompile() throws {
        let store = InMemoryStore()
        let model = PrefsConfig.withDefaultStore(store) { Model() }
        model.size = 20
        model.accent = "green"
        model.zoom = 2.5
        model.pane = .history
        model.limit = 10
        model.limit = nil
        model.plain = true
        #expect(model.size == 20 && model.accent == "green" && model.zoom == 2.5 && model.pane == .history)
        #expect(try store.value(forKey: "accent") == .string("green"))
        #expect(try store.value(forKey: "limit") == nil, "nil removes an optional key with a range")
        #expect(PrefKey.checkedSize.schema.summary == "Font size")
        let volume = StoredValue(key: "volume", default: 5, schema: .init(range: 0...10), store: store)
        let theme = StoredValue(key: "theme", default: Pane.files, schema: "Pane", store: store)
        volume.wrappedValue = 11
        theme.wrappedValue = .search
        #expect(volume.wrappedValue == 5 && theme.wrappedValue == .search)
    }

    @Test func aTypedWriteOutsideTheSchemaThrowsNotAllowedAndWritesNothing() throws {
        let store = InMemoryStore()
        try store.set(20, for: .checkedSize)
        #expect(throws: PrefsError.notAllowed(key: "size", value: "300", allowed: "from 8 to 72")) {
            try store.set(300, for: .checkedSize)
        }
        #expect(try store.value(forKey: "size") == .int(20))
        let accent = PrefKey("accent", default: "blue", schema: .init(choices: ["blue", "green"]))
        #expect(
            throws: PrefsError.notAllowed(key: "accent", value: "\"purple\"", allowed: "one of \"blue\", \"green\"")
        ) {
            try store.set("purple", for: accent)
        }
        #expect(try store.value(forKey: "accent") == nil)
        let when = PrefKey<Date?>(
            "when",
            schema: .init(range: Date(timeIntervalSinceReferenceDate: 0)...Date(timeIntervalSinceReferenceDate: 100)))
        try store.set(Date(timeIntervalSinceReferenceDate: 50), for: when)
        #expect(throws: PrefsError.self) { try store.set(Date(timeIntervalSinceReferenceDate: 101), for: when) }
        #expect(try store.value(for: when) == Date(timeIntervalSinceReferenceDate: 50))
        #expect(
            PrefsError.notAllowed(key: "size", value: "300", allowed: "from 8 to 72").description
                == "300 is not an allowed value of \"size\" (allowed: from 8 to 72); left unchanged")
    }

    @Test func aWrappersSetterReportsTheRefusalAndKeepsTheValue() throws {
        Reports.install()
        let store = InMemoryStore()
        let key = uniqueKey("size")
        let size = StoredValue(key: key, default: 13, schema: .init(range: 8...72), store: store)
        size.wrappedValue = 20
        size.wrappedValue = 300
        size.set(0)
        size.update { $0 += 1000 }
        #expect(size.wrappedValue == 20)
        #expect(try store.value(forKey: key) == .int(20))
        let reports = Reports.for(key)
        #expect(reports.count == 3, "one report per refused write: \(reports)")
        #expect(reports.allSatisfy { $0.operation == .write && "\($0.error)".contains("from 8 to 72") })
    }

    @Test func aStoredValueOutsideTheSchemaReadsAsTheDefaultReportedOnceAndIsKept() throws {
        Reports.install()
        let key = uniqueKey("size")
        let store = InMemoryStore([key: .int(300)])
        let size = StoredValue(key: key, default: 13, schema: .init(range: 8...72), store: store)
        #expect(size.wrappedValue == 13)
        #expect(size.wrappedValue == 13)
        #expect(Reports.for(key).count == 1, "\(Reports.for(key))")
        #expect(Reports.for(key).first?.operation == .read)
        #expect(throws: PrefsError.notAllowed(key: key, value: "300", allowed: "from 8 to 72")) {
            try store.value(for: PrefKey(key, default: 13, schema: .init(range: 8...72)))
        }
        // An update does not start from the default in its place, which would overwrite it.
        size.update { $0 += 1 }
        #expect(try store.value(forKey: key) == .int(300), "never overwritten")
        // A new stored value outside the range is reported afresh; one inside reads.
        try store.setValue(.int(500), forKey: key)
        #expect(size.wrappedValue == 13)
        #expect(Reports.for(key).filter { $0.operation == .read }.count == 2)
        try store.setValue(.int(40), forKey: key)
        #expect(size.wrappedValue == 40)
        // The subscript reads the default and reports once too.
        try store.setValue(.int(600), forKey: key)
        let typed = PrefKey(key, default: 13, schema: .init(range: 8...72))
        #expect(store[typed] == 13 && store[typed] == 13)
    }

    @Test func theDeclaredDefaultIsAlwaysAllowed() throws {
        let store = InMemoryStore()
        let key = PrefKey("odd", default: 0, schema: .init(range: 1...10))
        try store.set(0, for: key)
        #expect(try store.value(for: key) == 0)
    }

    @Test func keysWithoutASchemaTakeAnyValueAsBefore() throws {
        let store = InMemoryStore()
        let plain = PrefKey("count", default: 13)
        try store.set(300, for: plain)
        try store.set(-5, for: plain)
        #expect(try store.value(for: plain) == -5)
        #expect(plain.schema.summary.isEmpty && plain.schema.rule == nil)
    }

    @Test func aKeyDescribesItselfInStoredFormWithAnEnumsCases() {
        #expect(
            PrefKey.checkedSize.describe()
                == KeyDescription(
                    type: "int", defaultValue: .int(13), summary: "Font size", allowed: .range(.int(8), .int(72)),
                    route: ReadRoute(.native, readsForeignForms: true), shape: .leaf(.int)))
        let cases: [PrefValue] = [.string("files"), .string("search"), .string("history")]
        #expect(
            PrefKey("pane", default: Pane.files, schema: "Pane").describe()
                == KeyDescription(
                    type: "string", defaultValue: .string("files"), summary: "Pane", allowed: .choices(cases),
                    route: ReadRoute(.rawValue, readsForeignForms: true), shape: .choices(.string, cases)))
        #expect(
            PrefKey<Pane?>("pane").describe().allowed
                == .choices([.string("files"), .string("search"), .string("history")]))
        #expect(PrefKey<Date?>("opened").describe().type == "date")
        #expect(PrefKey<Int?>("limit").describe().type == "int")
        #expect(PrefKey<Double?>("ratio").describe().type == "double")
        #expect(PrefKey<URL?>("site").describe().type == "string")
        let choices = PrefKey<String?>("accent", schema: .init(choices: ["a", "b"])).describe()
        #expect(choices.type == "string" && choices.defaultValue == nil)
    }

    @Test func storedValuesAreCheckedAgainstADescriptionAsTheAppReadsThem() {
        let size = KeyDescription(type: "int", defaultValue: .int(13), summary: "", allowed: .range(.int(8), .int(72)))
        #expect(size.problem(with: .int(20)) == nil)
        #expect(size.problem(with: .double(20)) == nil, "a whole real reads as an int")
        #expect(size.problem(with: .int(300)) == "is not allowed (from 8 to 72)")
        #expect(size.problem(with: .string("big")) == "is a string, not an int")
        let zoom = KeyDescription(
            type: "double", defaultValue: nil, summary: "", allowed: .range(.double(0.5), .double(4)))
        #expect(zoom.problem(with: .int(2)) == nil && zoom.problem(with: .float(5)) != nil)
        let flag = KeyDescription(type: "bool", defaultValue: nil, summary: "", allowed: nil)
        #expect(flag.problem(with: .int(1)) == nil && flag.problem(with: .int(2)) != nil)
        let dates = AllowedValues.range(.date(Date(timeIntervalSinceReferenceDate: 0)), .date(.distantFuture))
        #expect(dates.allows(.date(.now)) && !dates.allows(.date(.distantPast)) && !dates.allows(.int(1)))
    }

    /// A reader of a version 1 schema file ignores members it does not know, at the top and in a key's entry (a later
    /// Prefs may add some without a new version); a later version is refused, as the file says it is newer.
    @Test func aVersion1SchemaReaderIgnoresMembersItDoesNotKnow() throws {
        let known = DomainSchema(
            domain: "com.example.notes", environmentPrefix: "NOTES_",
            keys: [
                "fontSize": KeyDescription(
                    type: "int", defaultValue: .int(13), summary: "Font size", allowed: .range(.int(8), .int(72))),
                "theme": KeyDescription(
                    type: "string", defaultValue: .string("light"), summary: "",
                    allowed: .choices([.string("light"), .string("dark")])),
            ])
        let text = """
            {
              "domain": "com.example.notes", "environmentPrefix": "NOTES_", "format": "prefs-schema",
              "generator": {"name": "a later Prefs", "at": [1, 2]},
              "keys": {
                "fontSize": {"default": 13, "description": "Font size", "range": [8, 72], "type": "int",
                             "unit": "pt", "deprecated": false},
                "theme": {"choices": ["light", "dark"], "default": "light", "type": "string", "since": {"v": 2}}
              },
              "version": 1
            }
            """
        #expect(try DomainSchema(document: Data(text.utf8), path: "s.json") == known)
        let later = text.replacingOccurrences(of: "\"version\": 1", with: "\"version\": 2")
        #expect {
            try DomainSchema(document: Data(later.utf8), path: "s.json")
        } throws: { ($0 as? SchemaFileProblem)?.isNewer == true }
    }
}
