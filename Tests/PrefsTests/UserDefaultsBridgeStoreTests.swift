import Foundation
import Observation
import PrefsTestSupport
import Synchronization
import TestThreads
import Testing

@testable import Prefs

/// A suite of its own for one test, removed from Foundation's cache and from disk afterwards.
struct FoundationSuite {
    let name: String
    let defaults: UserDefaults

    /// A new suite; `notifying`, through a ``NotifyingDefaults``, which posts its change notification as Apple's
    /// Foundation does.
    init(_ base: String = "fd", notifying: Bool = false) {
        name = "\(base).\(UUID().uuidString.prefix(8))"
        defaults = notifying ? NotifyingDefaults(suiteName: name)! : UserDefaults(suiteName: name)!
    }

    /// A suite this process has not read yet, starting from a copy of `other`'s file: Foundation reads that file.
    init(copying other: FoundationSuite) throws {
        name = "\(other.name).copy"
        try FileManager.default.copyItem(
            at: other.file, to: SuiteFileStore.preferencesDirectory().appending(path: name + ".plist"))
        defaults = UserDefaults(suiteName: name)!
    }

    var file: URL { SuiteFileStore.preferencesDirectory().appending(path: name + ".plist") }

    func cleanup() {
        for key in defaults.dictionaryRepresentation().keys { defaults.removeObject(forKey: key) }
        defaults.synchronize()
        try? FileManager.default.removeItem(at: file)
    }
}

/// A `UserDefaults` that posts `didChangeNotification` from `set` and `removeObject`, on the thread that called them
/// and before they return, as Apple's Foundation does. swift-corelibs-foundation posts none for them, so without it
/// the path Apple platforms take through ``UserDefaultsBridgeStore`` would never run here.
final class NotifyingDefaults: UserDefaults {
    override func set(_ value: Any?, forKey defaultName: String) {
        super.set(value, forKey: defaultName)
        NotificationCenter.default.post(name: UserDefaults.didChangeNotification, object: self)
    }

    override func removeObject(forKey defaultName: String) {
        super.removeObject(forKey: defaultName)
        NotificationCenter.default.post(name: UserDefaults.didChangeNotification, object: self)
    }
}

struct Coordinates: Codable, Sendable, Equatable {
    var latitude = 0.0
    var longitude = 0.0
}

@Suite(.ownThreads) struct UserDefaultsBridgeStoreTests {
    @Test func foundationWritesAreReadByPrefsAtOnce() throws {
        let suite = FoundationSuite()
        defer { suite.cleanup() }
        let store = UserDefaultsBridgeStore(suite.defaults)
        let volume = StoredValue(key: "volume", default: 5, store: store)
        let name = StoredValue(key: "name", default: "", store: store)
        #expect(volume.wrappedValue == 5)
        suite.defaults.set(9, forKey: "volume")
        suite.defaults.set("Ada", forKey: "name")
        #expect(volume.wrappedValue == 9, "a wrapper read after Foundation's set sees it")
        #expect(name.wrappedValue == "Ada")
        #expect(try store.value(forKey: "volume") == .int(9))
        suite.defaults.removeObject(forKey: "volume")
        #expect(volume.wrappedValue == 5, "a removal reads as the default again")
    }

    @Test func prefsWritesAreReadByFoundationAtOnce() {
        let suite = FoundationSuite()
        defer { suite.cleanup() }
        @StoredValue(key: "enabled", storage: suite.defaults) var enabled = false
        @StoredValue(key: "count", storage: suite.defaults) var count = 0
        @StoredValue(key: "title", storage: suite.defaults) var title = ""
        @StoredValue(key: "ratio", storage: suite.defaults) var ratio = 0.0
        @StoredValue(key: "tags", storage: suite.defaults) var tags: [String] = []
        enabled = true
        count = 42
        title = "hello"
        ratio = 0.25
        $tags.append("swift")
        #expect(suite.defaults.bool(forKey: "enabled"))
        #expect(suite.defaults.integer(forKey: "count") == 42)
        #expect(suite.defaults.string(forKey: "title") == "hello")
        #expect(suite.defaults.double(forKey: "ratio") == 0.25)
        #expect(suite.defaults.stringArray(forKey: "tags") == ["swift"])
        #expect(UserDefaults(suiteName: suite.name)!.integer(forKey: "count") == 42, "any instance of the suite")
        $count.reset()
        #expect(suite.defaults.object(forKey: "count") == nil)
    }

    @Test func everyKindOfValueRoundTripsInTheProcess() throws {
        let suite = FoundationSuite()
        defer { suite.cleanup() }
        let store = UserDefaultsBridgeStore(suite.defaults)
        let date = Date(timeIntervalSinceReferenceDate: 123_456.789)
        let url = URL(string: "https://example.com/a?b=c#d")!
        let values: [String: PrefValue] = [
            "bool": .bool(true), "int": .int(.max), "negative": .int(-7), "unsigned": .unsignedInt(.max),
            "float": .float(0.1), "double": .double(.pi), "string": .string("émoji 🎉"),
            "data": .data(Data([0, 1, 255])),
            "date": .date(date), "array": .array([.int(1), .string("two"), .bool(false)]),
            "dictionary": .dictionary(["nested": .array([.double(1.5)]), "flag": .bool(true)]),
        ]
        for (key, value) in values { try store.setValue(value, forKey: key) }
        // Through this store and a second one over another instance: what Foundation itself hands out.
        let other = UserDefaultsBridgeStore(UserDefaults(suiteName: suite.name)!)
        for reader in [store, other] {
            for (key, value) in values where key != "float" && key != "date" {
                #expect(try reader.value(forKey: key) == value, "\(key)")
            }
            // Foundation hands a saved float out as a double, and keeps a date's fraction as text: typed reads
            // give back exactly what was set.
            #expect(try reader.value(for: PrefKey("float", default: Float(0))) == 0.1)
            #expect(try reader.value(for: PrefKey("date", default: Date.distantPast)) == date)
        }
        #expect(suite.defaults.string(forKey: "date")?.hasPrefix("2001-01-02T10:17:36.789") == true)
        try store.set(url, for: PrefKey("url", default: URL(string: "about:blank")!))
        #expect(try store.value(for: PrefKey("url", default: URL(string: "about:blank")!)) == url)
        #expect(suite.defaults.string(forKey: "url") == url.absoluteString, "Foundation reads the whole URL as text")
        let place = Coordinates(latitude: 1.5, longitude: -2)
        try store.set(place, for: PrefKey("place", default: Coordinates()))
        #expect(try store.value(for: PrefKey("place", default: Coordinates())) == place)
        #expect(try store.allValues()["bool"] == .bool(true))
    }

    @Test(arguments: [-0.5, 1e-7, 123_456.789, -978_307_200.25, 1_000_000_000.000_001])
    func datesWithASubSecondPartComeBackExactly(_ seconds: Double) throws {
        let suite = FoundationSuite()
        defer { suite.cleanup() }
        let store = UserDefaultsBridgeStore(suite.defaults)
        let date = Date(timeIntervalSinceReferenceDate: seconds)
        try store.set(date, for: PrefKey("date", default: Date.distantPast))
        #expect(try store.value(for: PrefKey("date", default: Date.distantPast)) == date)
        // Foundation code reads readable text: the date in whole seconds, then every digit of the fraction.
        let text = suite.defaults.string(forKey: "date") ?? ""
        let whole = Date(timeIntervalSinceReferenceDate: seconds.rounded(.down)).formatted(.iso8601).dropLast()
        #expect(text.hasPrefix(whole + "."), "\(text)")
    }

    @Test func storedFormsSurviveFoundationSavingAndANewProcess() throws {
        let suite = FoundationSuite()
        defer { suite.cleanup() }
        let store = UserDefaultsBridgeStore(suite.defaults)
        try store.setValue(.float(0.1), forKey: "float")
        try store.setValue(.unsignedInt(.max), forKey: "unsigned")
        try store.setValue(.string("https://example.com/a?b=c"), forKey: "url")
        try store.setValue(.date(Date(timeIntervalSinceReferenceDate: 123_456.789)), forKey: "date")
        #expect(FileManager.default.fileExists(atPath: suite.file.path), "every write is saved with synchronize()")
        func childReads(_ key: String) throws -> String {
            try ChildProcess.run(["instance-read", suite.name, key]).lines.first ?? ""
        }
        // Foundation saved the float as a double; Prefs reads it back as exactly the float.
        #expect(try Float(prefValue: store.decodeRaw(childReads("float"))) == 0.1)
        #expect(try childReads("unsigned") == "int 18446744073709551615")
        #expect(try childReads("url") == "string https://example.com/a?b=c")
        // A date's fraction survives as text, which a typed read turns back into the same date.
        let date = try childReads("date")
        #expect(date.hasPrefix("string 2001-01-02T10:17:36.789"), "\(date)")
        let text = String(date.dropFirst("string ".count))
        #expect(try Date(prefValue: .string(text)) == Date(timeIntervalSinceReferenceDate: 123_456.789))
        #expect(try Date(prefValue: .date(.distantPast)) == .distantPast)
    }

    /// An XML `<real>` has one width: once Foundation reads its file again, a `Float` it wrote comes back as a
    /// `Double`. Prefs reads it as the `Float` it was, through Foundation and through the hardened store alike.
    @Test func aFloatReadsAsTheSameFloatAfterFoundationReadsItsFileAgain() throws {
        let writer = FoundationSuite()
        defer { writer.cleanup() }
        writer.defaults.set(Float(12.34), forKey: "ratio")
        writer.defaults.set([Float(0.1)], forKey: "ratios")
        writer.defaults.set(0.1, forKey: "double")
        writer.defaults.set(3.0, forKey: "whole")
        #expect(writer.defaults.synchronize())
        let reader = try FoundationSuite(copying: writer)
        defer { reader.cleanup() }
        // What Foundation itself hands back once it has read the file.
        #expect(reader.defaults.string(forKey: "ratio") == "12.34000015258789")

        let hardened = try SuiteFileStore(suiteName: reader.name)
        for store: any KeyValueStore in [UserDefaultsBridgeStore(reader.defaults), hardened] {
            #expect(try store.value(forKey: "ratio") == .float(12.34))
            #expect(try store.value(for: PrefKey("ratio", default: "")) == "12.34")
            #expect(try store.value(for: PrefKey("ratio", default: Float(0))) == 12.34)
            #expect(try store.value(for: PrefKey("ratio", default: 0.0)) == Double(Float(12.34)))
            #expect(try store.value(forKey: "ratios") == .array([.float(0.1)]))
            // A double that is not exactly a float, or whose text is no longer as a double, stays a double.
            #expect(try store.value(forKey: "double") == .double(0.1))
            #expect(try store.value(forKey: "whole") == .double(3))
        }
        hardened.close()
    }

    @Test func helpersWorkThroughTheInstance() {
        let suite = FoundationSuite()
        defer { suite.cleanup() }
        let store = UserDefaultsBridgeStore(suite.defaults)
        let flag = StoredValue(key: "flag", default: false, store: store)
        let tags = StoredValue(key: "tags", default: [String](), store: store)
        let flags = StoredValue(key: "flags", default: [String: Bool](), store: store)
        let counter = StoredValue(key: "counter", default: 0, store: store)
        let place = StoredValue(key: "place", default: Coordinates(), store: store)
        flag.toggle()
        tags.append("a")
        tags.append("b")
        tags.togglePresence("a")
        tags.replace("b", with: "c")
        flags.update(key: "dark", value: true)
        for _ in 0..<3 { counter.update { $0 += 1 } }
        place.set(\.latitude, to: 3)
        #expect(suite.defaults.bool(forKey: "flag"))
        #expect(suite.defaults.stringArray(forKey: "tags") == ["c"])
        #expect(suite.defaults.dictionary(forKey: "flags")?["dark"] as? Bool == true)
        #expect(suite.defaults.integer(forKey: "counter") == 3)
        #expect(place.wrappedValue == Coordinates(latitude: 3, longitude: 0))
    }

    @Test func valuesStreamHearsPrefsWritesAndFoundationWritesAtTheNextRead() async throws {
        let suite = FoundationSuite()
        defer { suite.cleanup() }
        let store = UserDefaultsBridgeStore(suite.defaults)
        let level = StoredValue(key: "level", default: 0, store: store)
        let stream = level.values
        level.set(1)
        suite.defaults.set(2, forKey: "level")
        _ = level.wrappedValue  // Linux: the next Prefs read notices Foundation's write
        suite.defaults.set(3, forKey: "level")
        store.checkForChanges()  // or an explicit check
        #expect(try await first(4, of: stream) == [0, 1, 2, 3])
    }

    @Test func observationTrackingSeesAForeignChangeWhenPrefsLooks() async throws {
        let suite = FoundationSuite()
        defer { suite.cleanup() }
        let store = UserDefaultsBridgeStore(suite.defaults)
        let mode = StoredValue(key: "mode", default: "a", store: store)
        let (fired, signal) = AsyncStream.makeStream(of: Int.self)
        withObservationTracking {
            _ = mode.wrappedValue
        } onChange: {
            signal.yield(1)
        }
        suite.defaults.set("b", forKey: "mode")
        store.checkForChanges()
        #expect(try await first(1, of: fired) == [1])
        #expect(mode.wrappedValue == "b")
    }

    @Test func anotherProcessesSavedWriteIsSeenAfterACheck() throws {
        let suite = FoundationSuite()
        defer { suite.cleanup() }
        let store = UserDefaultsBridgeStore(suite.defaults)
        let launches = StoredValue(key: "launches", default: 0, store: store)
        launches.set(1)
        let written = try ChildProcess.run(["foundation-write", suite.name, "launches", "7"])
        #expect(written.lines == ["ok"], "\(written.error)")
        store.checkForChanges()
        #expect(launches.wrappedValue == 7)
    }

    @Test func aBatchSavesOnceAndUndoesItsWritesWhenItThrows() throws {
        let suite = FoundationSuite()
        defer { suite.cleanup() }
        let store = UserDefaultsBridgeStore(suite.defaults)
        try store.set(1, for: PrefKey("a", default: 0))
        struct Abort: Error {}
        #expect(throws: Abort.self) {
            try store.batch {
                try store.set(2, for: PrefKey("a", default: 0))
                try store.set(3, for: PrefKey("b", default: 0))
                #expect(suite.defaults.integer(forKey: "a") == 2, "a batch's writes take effect at once")
                throw Abort()
            }
        }
        #expect(suite.defaults.integer(forKey: "a") == 1)
        #expect(suite.defaults.object(forKey: "b") == nil)
        try store.batch {
            try store.set(4, for: PrefKey("a", default: 0))
            try store.set(5, for: PrefKey("b", default: 0))
        }
        let read = try ChildProcess.run(["foundation-read", suite.name, "b"])
        #expect(read.lines == ["Int 5"], "the batch was saved when it ended")
    }

    @Test func replaceAllAndRemoveValuesGoThroughTheInstance() throws {
        let suite = FoundationSuite()
        defer { suite.cleanup() }
        let store = UserDefaultsBridgeStore(suite.defaults)
        suite.defaults.set("old", forKey: "legacy")
        try store.replaceAll(["x": .int(1), "y": .int(2)])
        #expect(suite.defaults.object(forKey: "legacy") == nil)
        #expect(suite.defaults.integer(forKey: "y") == 2)
        try store.removeValues(forKeys: ["x", "y"])
        // allValues() includes Foundation's process-wide registered defaults, which parallel tests add.
        #expect(try store.allValues().keys.allSatisfy { !["x", "y", "legacy"].contains($0) })
    }

    @Test func theStandardInstanceIsSharedWithUserDefaultsStandard() {
        let key = uniqueKey("standard")
        defer {
            UserDefaults.standard.removeObject(forKey: key)
            UserDefaults.standard.synchronize()
        }
        @StoredValue(key: key, storage: .standard) var value = 0
        value = 11
        #expect(UserDefaults.standard.integer(forKey: key) == 11)
        UserDefaults.standard.set(12, forKey: key)
        #expect(value == 12)
    }

    @Test func aValueOfTheWrongTypeReadsAsTheDefaultWithOneReport() {
        Reports.install()
        let suite = FoundationSuite()
        defer { suite.cleanup() }
        let key = uniqueKey("wrong")
        suite.defaults.set(Data([1, 2]), forKey: key)
        let store = UserDefaultsBridgeStore(suite.defaults)
        let value = StoredValue(key: key, default: 4, store: store)
        #expect(value.wrappedValue == 4)
        #expect(value.wrappedValue == 4)
        #expect(Reports.for(key).count == 1)
        #expect(suite.defaults.data(forKey: key) == Data([1, 2]), "nothing stored is overwritten")
    }

    @Test(arguments: [false, true])
    func theStoreIsSafeToUseFromManyThreads(notifying: Bool) async {
        let suite = FoundationSuite(notifying: notifying)
        defer { suite.cleanup() }
        let store = UserDefaultsBridgeStore(suite.defaults)
        let counter = StoredValue(key: "n", default: 0, store: store)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    for _ in 0..<25 { counter.update { $0 += 1 } }
                }
            }
        }
        #expect(suite.defaults.integer(forKey: "n") == 100)
    }
}

/// The path Apple platforms take: Foundation posts `didChangeNotification` on the thread that changed the instance,
/// from inside `set`, and the store answers it.
@Suite(.ownThreads) struct FoundationNotificationTests {
    /// Each kind of write through the store returns although the instance notifies from inside each `set` (the
    /// store calls Foundation outside its own lock), and a batch still announces once, when it ends, or nothing
    /// when it throws.
    @Test func writesReturnWhileTheInstanceNotifiesFromInsideSet() async throws {
        let suite = FoundationSuite(notifying: true)
        defer { suite.cleanup() }
        let store = UserDefaultsBridgeStore(suite.defaults)
        let heard = store.changedKeys(["a", "b", "c"])
        let outcome = Mutex("not started")
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            struct Abort: Error {}
            do {
                try store.setValue(.int(1), forKey: "a")
                try store.updateValue(forKey: "a") { _ in .int(2) }
                try store.removeValues(forKeys: ["a"])
                try store.replaceAll(["b": .int(2)])
                try store.batch {
                    try store.setValue(.int(3), forKey: "c")
                    try store.setValue(.int(30), forKey: "c")
                }
                do {
                    try store.batch {
                        try store.setValue(.int(4), forKey: "c")
                        throw Abort()
                    }
                } catch is Abort {}
                try store.setValue(.int(5), forKey: "b")
                outcome.withLock { $0 = "returned" }
            } catch {
                outcome.withLock { $0 = "threw \(error)" }
            }
            done.signal()
        }
        thread.start()
        // A hang guard: each write returns at once.
        if done.wait(timeout: .now() + 30) == .timedOut {
            Issue.record("a write did not return within 30 s: the notification posted from inside set waited for it")
            return
        }
        #expect(outcome.withLock { $0 } == "returned")
        #expect(try await first(6, of: heard) == ["a", "a", "a", "b", "c", "b"])
        #expect(suite.defaults.integer(forKey: "c") == 30, "the batch that threw was undone")
        #expect(try store.value(forKey: "b") == .int(5))
    }

    /// Other code's `set` through the instance reaches the store's observers by the notification alone: no Prefs
    /// read, no `checkForChanges()`. Delivery is on the thread that set, before `set` returns.
    @Test func aSetThroughTheInstanceReachesObserversByItsNotification() async throws {
        let suite = FoundationSuite(notifying: true)
        defer { suite.cleanup() }
        let store = UserDefaultsBridgeStore(suite.defaults)
        let level = StoredValue(key: "level", default: 0, store: store)
        #expect(level.wrappedValue == 0)
        let heard = store.changedKeys(["level"])
        let tracked = Atomic(false)
        withObservationTracking {
            _ = level.wrappedValue
        } onChange: {
            tracked.store(true, ordering: .sequentiallyConsistent)
        }
        suite.defaults.set(7, forKey: "level")
        let trackedAsSetReturned = tracked.load(ordering: .sequentiallyConsistent)
        #expect(trackedAsSetReturned, "Observation heard of the change before set returned")
        suite.defaults.removeObject(forKey: "level")
        #expect(try await first(2, of: heard) == ["level", "level"])
        #expect(level.wrappedValue == 0)
    }
}

extension UserDefaultsBridgeStore {
    /// The value a child printed as `kind text`, for the checks above.
    fileprivate func decodeRaw(_ line: String) -> PrefValue {
        let parts = line.split(separator: " ", maxSplits: 1).map(String.init)
        guard parts.count == 2 else { return .string(line) }
        switch parts[0] {
        case "double": return Double(parts[1]).map(PrefValue.double) ?? .string(line)
        case "float": return Float(parts[1]).map(PrefValue.float) ?? .string(line)
        default: return .string(line)
        }
    }
}
