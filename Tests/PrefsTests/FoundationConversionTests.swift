import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

/// The two stores kept in UserDefaults domains: Prefs' own file engine, and the store over a Foundation instance.
enum DefaultsKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case hardened, foundation

    var testDescription: String { rawValue }

    /// Runs `body` with a fresh store of this kind, removed afterwards.
    func withStore(_ body: (any KeyValueStore) throws -> Void) throws {
        switch self {
        case .hardened:
            let directory = try TempDir()
            defer { directory.cleanup() }
            try body(try SuiteFileStore(suiteName: "conversions", directory: directory.url))
        case .foundation:
            let suite = FoundationSuite("conversions")
            defer { suite.cleanup() }
            try body(UserDefaultsBridgeStore(suite.defaults))
        }
    }
}

/// swift-corelibs-foundation's `TestUserDefaults`, case by case, as a user of a Prefs store meets it: each Foundation
/// getter is the typed read of a key declared with that type. Registered defaults are registered with the store.
@Suite(.ownThreads) struct FoundationUserDefaultsPortTests {
    private func read<T: PrefValueConvertible & Codable & Equatable>(
        _ store: any KeyValueStore, _ type: T.Type, default value: T
    ) throws -> T {
        try store.value(for: PrefKey("key1", default: value))
    }

    /// Registers `value` for "key1", makes sure nothing is stored, and returns the store for the read.
    private func registered(_ value: PrefValue, in store: any KeyValueStore) throws -> any KeyValueStore {
        store.register(defaults: ["key1": value])
        try store.removeValue(forKey: "key1")
        return store
    }

    @Test(arguments: DefaultsKind.allCases) func createUserDefaults(_ kind: DefaultsKind) throws {
        try kind.withStore { store throws in
            try store.set(4, for: PrefKey("ourKey", default: 0))
            #expect(try store.value(for: PrefKey("ourKey", default: 0)) == 4)
        }
    }

    @Test(arguments: DefaultsKind.allCases) func getRegisteredDefaultItem(_ kind: DefaultsKind) throws {
        try kind.withStore { store throws in
            #expect(try read(registered(.int(5), in: store), Int.self, default: 0) == 5)
        }
    }

    @Test(arguments: DefaultsKind.allCases) func getRegisteredDefaultItemString(_ kind: DefaultsKind) throws {
        try kind.withStore { store throws in
            #expect(try read(registered(.string("hello"), in: store), String.self, default: "") == "hello")
        }
    }

    @Test(arguments: DefaultsKind.allCases) func getRegisteredDefaultItemNSString(_ kind: DefaultsKind) throws {
        try kind.withStore { store throws in
            let text = FoundationBridge.value("hello" as NSString) ?? .string("")
            #expect(try read(registered(text, in: store), String.self, default: "") == "hello")
        }
    }

    @Test(arguments: DefaultsKind.allCases) func getRegisteredDefaultItemURL(_ kind: DefaultsKind) throws {
        try kind.withStore { store throws in
            let url = URL(fileURLWithPath: "/hello/world")
            store.register(PrefKey("key1", default: url))
            #expect(try read(store, URL.self, default: URL(string: "about:blank")!) == url)
        }
    }

    @Test(arguments: DefaultsKind.allCases) func getRegisteredDefaultItemNSURL(_ kind: DefaultsKind) throws {
        try kind.withStore { store throws in
            // An NSURL registered the way Foundation keeps one: its path.
            let path = FoundationBridge.value(NSURL(fileURLWithPath: "/hello/world") as URL) ?? .string("")
            let url = try read(registered(path, in: store), URL.self, default: URL(string: "about:blank")!)
            #expect(url == URL(fileURLWithPath: "/hello/world"))
        }
    }

    @Test(arguments: DefaultsKind.allCases) func getRegisteredDefaultItemData(_ kind: DefaultsKind) throws {
        try kind.withStore { store throws in
            let bytes = Data([0, 1, 2, 3, 4])
            #expect(try read(registered(.data(bytes), in: store), Data.self, default: Data()) == bytes)
        }
    }

    @Test(arguments: DefaultsKind.allCases) func getRegisteredDefaultItemNSData(_ kind: DefaultsKind) throws {
        try kind.withStore { store throws in
            let bytes: [UInt8] = [0, 1, 2, 3, 4]
            let data = FoundationBridge.value(NSData(bytes: bytes, length: bytes.count) as Data) ?? .data(Data())
            #expect(try read(registered(data, in: store), Data.self, default: Data()) == Data(bytes))
        }
    }

    @Test(arguments: DefaultsKind.allCases) func getRegisteredDefaultItemBoolFromString(_ kind: DefaultsKind) throws {
        try kind.withStore { store throws in
            #expect(try read(registered(.string("YES"), in: store), Bool.self, default: false))
        }
    }

    @Test(arguments: DefaultsKind.allCases) func getRegisteredDefaultItemIntFromString(_ kind: DefaultsKind) throws {
        try kind.withStore { store throws in
            #expect(try read(registered(.string("1234"), in: store), Int.self, default: 0) == 1234)
        }
    }

    @Test(arguments: DefaultsKind.allCases) func getRegisteredDefaultItemDoubleFromString(_ kind: DefaultsKind) throws {
        try kind.withStore { store throws in
            #expect(try read(registered(.string("12.34"), in: store), Double.self, default: 0) == 12.34)
        }
    }

    /// A value set in the store, then read as `T`: the `test_setValue_*` cases.
    private func setThenRead<T: PrefValueConvertible & Codable & Equatable>(
        _ value: PrefValue, as type: T.Type, default fallback: T, _ kind: DefaultsKind
    ) throws
        -> T
    {
        var result = fallback
        try kind.withStore { store throws in
            try store.setValue(value, forKey: "key1")
            result = try read(store, T.self, default: fallback)
        }
        return result
    }

    @Test(arguments: DefaultsKind.allCases) func setValueString(_ kind: DefaultsKind) throws {
        #expect(try setThenRead(.string("hello"), as: String.self, default: "", kind) == "hello")
    }

    @Test(arguments: DefaultsKind.allCases) func setValueNSString(_ kind: DefaultsKind) throws {
        let text = FoundationBridge.value("hello" as NSString) ?? .string("")
        #expect(try setThenRead(text, as: String.self, default: "", kind) == "hello")
    }

    @Test(arguments: DefaultsKind.allCases) func setValueURL(_ kind: DefaultsKind) throws {
        try kind.withStore { store throws in
            let url = URL(fileURLWithPath: "/hello/world")
            try store.set(url, for: PrefKey("key1", default: URL(string: "about:blank")!))
            #expect(try read(store, URL.self, default: URL(string: "about:blank")!) == url)
        }
    }

    @Test(arguments: DefaultsKind.allCases) func setValueNSURL(_ kind: DefaultsKind) throws {
        // Foundation keeps a URL as its path; Prefs reads that path as the same file URL.
        let path = FoundationBridge.value(NSURL(fileURLWithPath: "/hello/world") as URL) ?? .string("")
        let url = try setThenRead(path, as: URL.self, default: URL(string: "about:blank")!, kind)
        #expect(url == URL(fileURLWithPath: "/hello/world"))
    }

    @Test(arguments: DefaultsKind.allCases) func setValueData(_ kind: DefaultsKind) throws {
        let bytes = Data([0, 1, 2, 3, 4])
        #expect(try setThenRead(.data(bytes), as: Data.self, default: Data(), kind) == bytes)
    }

    @Test(arguments: DefaultsKind.allCases) func setValueNSData(_ kind: DefaultsKind) throws {
        let bytes: [UInt8] = [0, 1, 2, 3, 4]
        let data = FoundationBridge.value(NSData(bytes: bytes, length: bytes.count) as Data) ?? .data(Data())
        #expect(try setThenRead(data, as: Data.self, default: Data(), kind) == Data(bytes))
    }

    @Test(arguments: DefaultsKind.allCases) func setValueBoolFromString(_ kind: DefaultsKind) throws {
        #expect(try setThenRead(.string("YES"), as: Bool.self, default: false, kind))
    }

    @Test(arguments: DefaultsKind.allCases) func setValueIntFromBool(_ kind: DefaultsKind) throws {
        #expect(try setThenRead(.bool(true), as: Int.self, default: 0, kind) == 1)
    }

    @Test(arguments: DefaultsKind.allCases) func setValueIntFromFloat(_ kind: DefaultsKind) throws {
        #expect(try setThenRead(.float(12.34), as: Int.self, default: 0, kind) == 12)
    }

    @Test(arguments: DefaultsKind.allCases) func setValueIntFromDouble(_ kind: DefaultsKind) throws {
        #expect(try setThenRead(.double(12.34), as: Int.self, default: 0, kind) == 12)
    }

    @Test(arguments: DefaultsKind.allCases) func setValueIntFromString(_ kind: DefaultsKind) throws {
        #expect(try setThenRead(.string("1234"), as: Int.self, default: 0, kind) == 1234)
    }

    @Test(arguments: DefaultsKind.allCases) func setValueFloatFromBool(_ kind: DefaultsKind) throws {
        #expect(try setThenRead(.bool(true), as: Float.self, default: 0, kind) == 1)
    }

    @Test(arguments: DefaultsKind.allCases) func setValueFloatFromInt(_ kind: DefaultsKind) throws {
        #expect(try setThenRead(.int(42), as: Float.self, default: 0, kind) == 42)
    }

    @Test(arguments: DefaultsKind.allCases) func setValueFloatFromDouble(_ kind: DefaultsKind) throws {
        #expect(try setThenRead(.double(12.34), as: Float.self, default: 0, kind) == 12.34)
    }

    @Test(arguments: DefaultsKind.allCases) func setValueFloatFromString(_ kind: DefaultsKind) throws {
        #expect(try setThenRead(.string("1234"), as: Float.self, default: 0, kind) == 1234)
    }

    @Test(arguments: DefaultsKind.allCases) func setValueDoubleFromBool(_ kind: DefaultsKind) throws {
        #expect(try setThenRead(.bool(true), as: Double.self, default: 0, kind) == 1)
    }

    @Test(arguments: DefaultsKind.allCases) func setValueDoubleFromInt(_ kind: DefaultsKind) throws {
        #expect(try setThenRead(.int(42), as: Double.self, default: 0, kind) == 42)
    }

    @Test(arguments: DefaultsKind.allCases) func setValueDoubleFromFloat(_ kind: DefaultsKind) throws {
        #expect(try setThenRead(.float(12.34), as: Double.self, default: 0, kind) == Double(Float(12.34)))
    }

    @Test(arguments: DefaultsKind.allCases) func setValueDoubleFromString(_ kind: DefaultsKind) throws {
        #expect(try setThenRead(.string("12.34"), as: Double.self, default: 0, kind) == 12.34)
    }

    @Test(arguments: DefaultsKind.allCases) func setValueStringFromBool(_ kind: DefaultsKind) throws {
        #expect(try setThenRead(.bool(true), as: String.self, default: "", kind) == "1")
    }

    @Test(arguments: DefaultsKind.allCases) func setValueStringFromInt(_ kind: DefaultsKind) throws {
        #expect(try setThenRead(.int(42), as: String.self, default: "", kind) == "42")
    }

    @Test(arguments: DefaultsKind.allCases) func setValueStringFromFloat(_ kind: DefaultsKind) throws {
        #expect(try setThenRead(.float(12.34), as: String.self, default: "", kind) == "12.34")
    }

    @Test(arguments: DefaultsKind.allCases) func setValueStringFromDouble(_ kind: DefaultsKind) throws {
        #expect(try setThenRead(.double(12.34), as: String.self, default: "", kind) == "12.34")
    }

    /// `test_volatileDomains`: values of every kind, held for this process only (the registered layer), read back.
    @Test(arguments: DefaultsKind.allCases) func volatileDomains(_ kind: DefaultsKind) throws {
        try kind.withStore { store throws in
            let now = Date(timeIntervalSinceReferenceDate: 800_000_000)
            let domain: [String: PrefValue] = [
                "A Date": .date(now), "A String": .string("The String"),
                "An Array": .array([.int(1), .int(2), .int(3)]),
                "A Dictionary": .dictionary(["Swift": .string("Imperative"), "Today": .date(now)]),
                "Some Data": .data(Data("The Data".utf8)), "A Bool": .bool(true),
            ]
            store.register(defaults: domain)
            #expect(try store.value(for: PrefKey("A Date", default: Date.distantPast)) == now)
            #expect(try store.value(for: PrefKey("A String", default: "")) == "The String")
            #expect(try store.value(for: PrefKey("An Array", default: [Int]())) == [1, 2, 3])
            #expect(try store.value(for: PrefKey("Some Data", default: Data())) == Data("The Data".utf8))
            #expect(try store.value(for: PrefKey("A Bool", default: false)))
            let dictionary = try store.value(forKey: "A Dictionary")
            #expect(dictionary == .dictionary(["Swift": .string("Imperative"), "Today": .date(now)]))
        }
    }

    /// `test_persistentDomain`: a whole domain set, read by a second store, removed; observers hear each change.
    @Test(arguments: DefaultsKind.allCases) func persistentDomain(_ kind: DefaultsKind) async throws {
        let domain: [String: PrefValue] = [
            "An Integer": .int(1234), "A Double": .double(5678.1234), "A String": .string("Some string"),
            "An Array": .array([.int(1), .int(2), .int(3), .int(4), .string("Surprise")]),
            "A Dictionary": .dictionary(["Swift": .string("Imperative"), "LISP": .string("LISP")]),
        ]
        let directory = try TempDir()
        defer { directory.cleanup() }
        let suite = FoundationSuite("persistent")
        defer { suite.cleanup() }
        func open() throws -> any KeyValueStore {
            switch kind {
            case .hardened: try SuiteFileStore(suiteName: "persistent", directory: directory.url)
            case .foundation: UserDefaultsBridgeStore(UserDefaults(suiteName: suite.name)!)
            }
        }
        let writer = try open()
        let changes = writer.changedKeys(["An Integer"])
        try writer.replaceAll(domain)
        // `allValues()` of a store over an instance includes the defaults registered with Foundation, which are
        // process-wide: tests running in parallel register some. Only this domain's keys are compared.
        #expect(try open().allValues().filter { domain.keys.contains($0.key) } == domain)
        try writer.removeAll()
        #expect(try open().allValues().keys.allSatisfy { domain[$0] == nil })
        #expect(try await first(2, of: changes) == ["An Integer", "An Integer"])
    }

    // Beyond Foundation's suite: what the issue asked for besides.

    @Test(arguments: DefaultsKind.allCases) func decimalTextReadsAsAFloat(_ kind: DefaultsKind) throws {
        #expect(try setThenRead(.string("12.34"), as: Float.self, default: 0, kind) == 12.34)
    }

    @Test(arguments: DefaultsKind.allCases) func aPathReadsAsAFileURL(_ kind: DefaultsKind) throws {
        let url = try setThenRead(.string("/srv/x"), as: URL.self, default: URL(string: "about:blank")!, kind)
        #expect(url == URL(fileURLWithPath: "/srv/x"))
        #expect(url.isFileURL)
    }

    @Test(arguments: DefaultsKind.allCases) func textWrittenByTheCLIReadsAsTheDeclaredType(_ kind: DefaultsKind) throws
    {
        // `prefs write MyApp volume 9` stores text, as `defaults write` does.
        #expect(try setThenRead(.string("9"), as: Int.self, default: 5, kind) == 9)
        #expect(try setThenRead(.string(" true "), as: Bool.self, default: false, kind))
        #expect(try setThenRead(.int(0), as: Bool.self, default: true, kind) == false)
        #expect(try setThenRead(.int(2), as: Bool.self, default: false, kind))
    }

    @Test(arguments: DefaultsKind.allCases) func aValueNoConversionFitsReadsAsTheDefaultWithOneReport(
        _ kind: DefaultsKind
    ) throws {
        Reports.install()
        try kind.withStore { store throws in
            let key = uniqueKey("unfit")
            try store.setValue(.string("twelve"), forKey: key)
            let volume = StoredValue(key: key, default: 5, store: store)
            #expect(volume.wrappedValue == 5)
            #expect(volume.wrappedValue == 5)
            #expect(Reports.for(key).count == 1)
            #expect(try store.value(forKey: key) == .string("twelve"), "nothing stored is overwritten")
        }
    }

    @Test func otherStoresDoNotConvert() throws {
        let store = InMemoryStore(["key1": .string("1234")])
        #expect(throws: PrefsError.self) { try store.value(for: PrefKey("key1", default: 0)) }
    }

    @Test func aDefaultRegisteredWithFoundationConvertsToo() throws {
        let suite = FoundationSuite("registered")
        defer { suite.cleanup() }
        let key = uniqueKey("foundation-registered")
        suite.defaults.register(defaults: [key: "42"])
        let store = UserDefaultsBridgeStore(suite.defaults)
        #expect(StoredValue(key: key, default: 0, store: store).wrappedValue == 42)
    }

    @Test func argumentTextReadsAsAFloat() throws {
        let store = InMemoryStore()
        store.hub.layers.enableArguments(["x": .string("12.34")])
        #expect(try store.value(for: PrefKey("x", default: Float(0))) == 12.34)
    }
}

/// Not `Codable`: `RawRepresentable`, as `@AppStorage` takes it, stored as its raw value by the one-line conformance.
enum SortOrder: String, Sendable, PrefValueConvertible {
    case name, date, size
}

enum Priority: Int, Sendable, PrefValueConvertible {
    case low = 1
    case high = 9
}

/// The same with `Codable`: what an optional needs.
enum CodableSortOrder: String, Codable, Sendable {
    case name, date, size
}

@Suite(.ownThreads) struct RawRepresentableTests {
    @Test func aStringRawValueEnumIsStoredAsItsRawValue() throws {
        let store = InMemoryStore()
        @StoredValue(key: "sort", store: store) var sort: SortOrder = .name
        #expect(sort == .name)
        sort = .date
        #expect(try store.value(forKey: "sort") == .string("date"))
        #expect(StoredValue(PrefKey("sort", default: SortOrder.name), store: store).wrappedValue == .date)
    }

    @Test func anIntRawValueEnumIsStoredAsItsRawValue() throws {
        let store = InMemoryStore()
        @StoredValue(key: "priority", store: store) var priority: Priority = .low
        $priority.set(.high)
        #expect(try store.value(forKey: "priority") == .int(9))
        try store.setValue(.int(4), forKey: "priority")
        #expect(priority == .low, "a raw value the enum refuses reads as the default")
    }

    @Test func optionalRawRepresentableAndUserDefaults() throws {
        let suite = FoundationSuite("raw")
        defer { suite.cleanup() }
        @StoredValue(PrefKey("sort", default: SortOrder.size), storage: suite.defaults) var sort
        sort = .name
        #expect(suite.defaults.string(forKey: "sort") == "name")
        suite.defaults.set("date", forKey: "sort")
        #expect(sort == .date)
        let store = InMemoryStore()
        @StoredValue(key: "last", store: store) var last: CodableSortOrder?
        #expect(last == nil)
        last = .size
        #expect(try store.value(forKey: "last") == .string("size"))
        last = nil
        #expect(try store.value(forKey: "last") == nil)
    }

    @Test func aCodableRawValueEnumKeepsItsFormsAndReadsOthersToo() throws {
        let store = InMemoryStore(["theme": .string("\"dark\"")])  // sindresorhus/Defaults' JSON text
        @StoredValue(key: "theme", store: store) var theme: Theme = .light
        #expect(theme == .dark)
        theme = .system
        #expect(try store.value(forKey: "theme") == .string("system"))
    }

    @Test func textFromAUserDefaultsDomainConvertsToAnIntRawValue() throws {
        try DefaultsKind.foundation.withStore { store throws in
            try store.setValue(.string("9"), forKey: "priority")
            #expect(StoredValue(PrefKey("priority", default: Priority.low), store: store).wrappedValue == .high)
        }
    }
}
