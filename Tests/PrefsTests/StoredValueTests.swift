import Foundation
import Observation
import PrefsTestSupport
import Synchronization
import TestThreads
import Testing

@testable import Prefs

extension PrefKey where Value == [String] {
    static let favoriteTags = PrefKey("favoriteTags", default: [])
}

final class SampleModel {
    @StoredValue var hasHapticsEnabled: Bool
    @StoredValue var lastOpenedDate: Date?
    @StoredValue var currentTheme: Theme
    @StoredValue var preferences: UserPreferences
    @StoredValue var favoriteTags: [String]
    @StoredValue var featureFlags: [String: Bool]
    @StoredValue var doTheThing: Bool

    init(store: any KeyValueStore) {
        _hasHapticsEnabled = StoredValue(wrappedValue: false, key: "hasHapticsEnabled", store: store)
        _lastOpenedDate = StoredValue(wrappedValue: nil, key: "lastOpenedDate", store: store)
        _currentTheme = StoredValue(wrappedValue: .light, key: "currentTheme", store: store)
        _preferences = StoredValue(wrappedValue: UserPreferences(), key: "userPreferences", store: store)
        _favoriteTags = StoredValue(.favoriteTags, store: store)
        _featureFlags = StoredValue(wrappedValue: [:], key: "featureFlags", store: store)
        _doTheThing = StoredValue(.doTheThing, store: store)
    }
}

@Observable
final class ObservableModel {
    @ObservationIgnored @StoredValue var theme: Theme
    var unrelated = 0

    init(store: any KeyValueStore) {
        _theme = StoredValue(wrappedValue: .light, key: "theme", store: store)
    }
}

/// The README's short form: no `@Observable`, no `@ObservationIgnored`.
final class HandObservedPreferences: Observable {
    @StoredValue(key: "fontSize") var fontSize = 14
    @StoredValue(key: "showsLineNumbers") var showsLineNumbers = true
}

@Suite(.ownThreads)
struct StoredValueTests {
    @Test func defaultsUntilSetAndResetBack() {
        let model = SampleModel(store: InMemoryStore())
        #expect(model.currentTheme == .light)
        model.$currentTheme.set(.dark)
        #expect(model.currentTheme == .dark)
        model.currentTheme = .system
        #expect(model.currentTheme == .system)
        model.$currentTheme.reset()
        #expect(model.currentTheme == .light)
    }

    @Test func rawRepresentableStoresItsRawValue() throws {
        let store = InMemoryStore()
        let model = SampleModel(store: store)
        model.$currentTheme.set(.dark)
        #expect(try store.value(forKey: "currentTheme") == .string("dark"))
        model.$hasHapticsEnabled.set(true)
        #expect(try store.value(forKey: "hasHapticsEnabled") == .bool(true))
    }

    /// Other `Codable` values are JSON text with sorted keys, whatever order the type declares its properties in.
    @Test func aCodableValueIsStoredAsSortedJSONText() throws {
        struct Window: Codable, Equatable, Sendable {
            var width = 3
            var height = 2
            var alpha = 1
        }
        let store = InMemoryStore()
        let window = StoredValue(key: "window", default: Window(), store: store)
        window.set(Window(width: 4))
        #expect(try store.value(forKey: "window") == .string(#"{"alpha":1,"height":2,"width":4}"#))
        #expect(window.wrappedValue == Window(width: 4))
    }

    @Test func optionalNilRemovesTheKey() throws {
        let store = InMemoryStore()
        let model = SampleModel(store: store)
        let date = Date(timeIntervalSinceReferenceDate: 123_456.789)
        model.$lastOpenedDate.set(date)
        #expect(try store.value(forKey: "lastOpenedDate") == .date(date))
        #expect(model.lastOpenedDate == date)
        model.lastOpenedDate = nil
        #expect(try store.value(forKey: "lastOpenedDate") == nil)
        #expect(model.lastOpenedDate == nil)
        // An optional of a type stored as JSON text: its nil removes the key too, rather than storing `null`.
        let saved = StoredValue(key: "savedPreferences", default: UserPreferences?.none, store: store)
        saved.set(UserPreferences(fontScale: 2))
        #expect(try store.value(forKey: "savedPreferences") != nil)
        saved.set(nil)
        #expect(try store.value(forKey: "savedPreferences") == nil)
        #expect(saved.wrappedValue == nil)
    }

    @Test func toggleFlipsABool() {
        let model = SampleModel(store: InMemoryStore())
        model.$hasHapticsEnabled.toggle()
        #expect(model.hasHapticsEnabled)
        model.$hasHapticsEnabled.toggle()
        #expect(!model.hasHapticsEnabled)
    }

    @Test func keyPathSetterChangesOneMember() throws {
        let store = InMemoryStore()
        let model = SampleModel(store: store)
        model.$preferences.set(\.prefersDarkMode, to: true)
        #expect(model.preferences == UserPreferences(hasHapticsEnabled: true, prefersDarkMode: true, fontScale: 1))
        // Codable structs are stored as sorted JSON text.
        #expect(
            try store.value(forKey: "userPreferences")
                == .string(#"{"fontScale":1,"hasHapticsEnabled":true,"prefersDarkMode":true}"#))
    }

    @Test func arrayHelpers() {
        let model = SampleModel(store: InMemoryStore())
        model.$favoriteTags.append("swfit")
        model.$favoriteTags.append(contentsOf: ["linux", "swfit"])
        model.$favoriteTags.replace("swfit", with: "swift")
        #expect(model.favoriteTags == ["swift", "linux", "swfit"])
        model.$favoriteTags.remove("swfit")
        #expect(model.favoriteTags == ["swift", "linux"])
        model.$favoriteTags.togglePresence("swift")
        #expect(model.favoriteTags == ["linux"])
        model.$favoriteTags.togglePresence("swift")
        #expect(model.favoriteTags == ["linux", "swift"])
        model.$favoriteTags.replace("absent", with: "x")
        #expect(model.favoriteTags == ["linux", "swift"])
    }

    @Test func dictionaryHelperWithNilRemoving() {
        let model = SampleModel(store: InMemoryStore())
        model.$featureFlags.update(key: "darkMode", value: true)
        model.$featureFlags.update(key: "beta", value: false)
        #expect(model.featureFlags == ["darkMode": true, "beta": false])
        model.$featureFlags.update(key: "darkMode", value: nil)
        #expect(model.featureFlags == ["beta": false])
    }

    @Test func typedKeysShareNameTypeAndDefault() throws {
        let store = InMemoryStore()
        let model = SampleModel(store: store)
        #expect(model.doTheThing == false)
        try store.set(true, for: .doTheThing)
        #expect(model.doTheThing)
        #expect(try store.value(for: .doTheThing))
        try store.removeValue(for: .doTheThing)
        #expect(model.doTheThing == false)
        #expect(model.$doTheThing.key == "doTheThing")
    }

    @Test func directFormWithoutWrapperSyntax() {
        let store = InMemoryStore()
        let flag = StoredValue(key: "hasHapticsEnabled", default: false, store: store)
        flag.set(true)
        #expect(flag.wrappedValue)
        @StoredValue(key: "local", store: store) var local = 3
        local += 1
        #expect(local == 4)
        #expect(StoredValue(key: "local", default: 0, store: store).wrappedValue == 4)
    }

    @Test func twoWrappersOfOneKeyAlwaysAgree() {
        let store = InMemoryStore()
        let first = SampleModel(store: store)
        let second = SampleModel(store: store)
        #expect(second.currentTheme == .light)
        first.currentTheme = .dark
        #expect(second.currentTheme == .dark)
        second.$favoriteTags.append("a")
        #expect(first.favoriteTags == ["a"])
    }

    /// A value another layer keeps (here an environment variable) and the app cannot read is reported once, also
    /// across the app's writes of the key, which go to the user's values beneath it.
    @Test func aRefusedValueOfAnotherLayerIsReportedOnceAcrossWritesOfTheKey() throws {
        Reports.install()
        let key = uniqueKey()
        let prefix = "PREFS_TEST_"
        let store = InMemoryStore()
        store.hub.layers.enableEnvironment(
            prefix: prefix, environment: [LayerSources.environmentName(forKey: key, prefix: prefix): "many"])
        let count = StoredValue(key: key, default: 7, store: store)

        #expect(count.wrappedValue == 7)
        count.wrappedValue = 8
        count.wrappedValue = 9
        #expect(count.wrappedValue == 7)
        #expect(try store.value(forKey: key) == .string("many"))
        #expect(try store.allValues()[key] == .int(9))
        #expect(Reports.for(key).filter { $0.operation == .read }.count == 1, "\(Reports.for(key))")
    }

    /// The same refusal is news again once the key has read well in between.
    @Test func aRefusalIsReportedAgainAfterTheKeyReadWell() throws {
        Reports.install()
        let key = uniqueKey()
        let store = InMemoryStore([key: .string("many")])
        let count = StoredValue(key: key, default: 7, store: store)
        #expect(count.wrappedValue == 7)
        try store.setValue(.int(3), forKey: key)
        #expect(count.wrappedValue == 3)
        try store.setValue(.string("many"), forKey: key)
        #expect(count.wrappedValue == 7)
        #expect(Reports.for(key).filter { $0.operation == .read }.count == 2, "\(Reports.for(key))")
    }

    @Test func wrongStoredTypeReadsDefaultReportsAndKeepsTheValue() throws {
        Reports.install()
        let key = uniqueKey()
        let store = InMemoryStore([key: .string("not a number")])
        let count = StoredValue(key: key, default: 7, store: store)
        #expect(count.wrappedValue == 7)
        #expect(count.wrappedValue == 7)
        let reports = Reports.for(key)
        #expect(reports.count == 1, "reported once per stored version, not on every read")
        #expect(reports.first?.operation == .read)
        #expect((reports.first?.error as? PrefsError) == .typeMismatch(key: key, expected: "Int", found: "string"))
        // An update on top of an undecodable value must not replace it with the default.
        count.update { $0 += 1 }
        #expect(try store.value(forKey: key) == .string("not a number"))
        #expect(Reports.for(key).last?.operation == .write)
        #expect(throws: PrefsError.typeMismatch(key: key, expected: "Int", found: "string")) {
            try store.value(for: PrefKey(key, default: 0))
        }
    }

    @Test func invalidKeysAreRefusedAndReported() throws {
        Reports.install()
        let store = InMemoryStore()
        #expect(throws: PrefsError.invalidKey("", reason: "a key cannot be empty")) {
            try store.setValue(.bool(true), forKey: "")
        }
        let key = "bad\u{0}key"
        StoredValue(key: key, default: 1, store: store).set(2)
        #expect(Reports.for(key).count == 1)
        #expect(try store.allValues().isEmpty)
    }

    @Test func eightTasksAppendingLoseNothing() async {
        let store = InMemoryStore()
        let tags = StoredValue(key: "tags", default: [Int](), store: store)
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for index in 0..<250 { tags.append(task * 1000 + index) }
                }
            }
        }
        #expect(tags.wrappedValue.count == 2000)
        #expect(Set(tags.wrappedValue).count == 2000)
    }

    @Test func descriptionShowsKeyAndValue() {
        let model = SampleModel(store: InMemoryStore())
        #expect(model.$currentTheme.description == "currentTheme = light")
        model.$currentTheme.set(.dark)
        #expect(model.$currentTheme.description == "currentTheme = dark")
    }

    @Test func anOptionalWrapperNeedsNoInitialValue() throws {
        let store = InMemoryStore()
        @StoredValue(key: "c", store: store) var c: Int?
        #expect(c == nil)
        c = 3
        #expect(c == 3)
        #expect(try store.value(forKey: "c") == .int(3))
        $c.reset()
        #expect(c == nil)
        #expect(try store.value(forKey: "c") == nil)
    }

    @Test func changesYieldOldAndNewValues() async throws {
        let store = InMemoryStore()
        let theme = StoredValue(key: "theme", default: "light", store: store)
        let changes = theme.changes
        theme.wrappedValue = "dark"
        theme.wrappedValue = "dark"
        try store.set("system", for: PrefKey("theme", default: "light"))
        let pairs = try await first(2, of: changes)
        #expect(pairs.map(\.old) == ["light", "dark"])
        #expect(pairs.map(\.new) == ["dark", "system"])
    }
}

@Suite(.ownThreads)
struct ObservationTests {
    @Test func valuesYieldCurrentThenDistinctChanges() async throws {
        let store = InMemoryStore()
        let theme = StoredValue(key: "theme", default: Theme.light, store: store)
        let stream = theme.values
        theme.set(.dark)
        theme.set(.dark)
        theme.set(.system)
        #expect(try await first(3, of: stream) == [.light, .dark, .system])
    }

    /// A key announced again without a new value (a store may publish a key it did not change) yields nothing: the
    /// element after each value is the next distinct one.
    @Test func anUnchangedKeyPublishedAgainIsNotYieldedAgain() async throws {
        let store = InMemoryStore()
        let theme = StoredValue(key: "theme", default: Theme.light, store: store)
        let stream = theme.values
        store.hub.keysChanged(["theme"])
        theme.set(.dark)
        store.hub.keysChanged(["theme"])
        store.hub.keysChanged(["theme"])
        theme.set(.system)
        #expect(try await first(3, of: stream) == [.light, .dark, .system])
    }

    @Test func everySourceReachesEverySubscriber() async throws {
        let store = InMemoryStore()
        let theme = StoredValue(key: "theme", default: Theme.light, store: store)
        let other = StoredValue(key: "theme", default: Theme.light, store: store)
        let (a, b) = (theme.values, theme.values)
        other.set(.dark)  // another wrapper
        try store.set(.system, for: PrefKey("theme", default: Theme.light))  // a direct store write
        try store.removeValue(forKey: "theme")
        #expect(try await first(4, of: a) == [.light, .dark, .system, .light])
        #expect(try await first(4, of: b) == [.light, .dark, .system, .light])
    }

    @Test func cancelledSubscribersLeaveNothingBehind() async throws {
        let store = InMemoryStore()
        let value = StoredValue(key: "n", default: 0, store: store)
        for _ in 0..<10_000 {
            let task = Task { for await _ in value.values {} }
            task.cancel()
            await task.value
        }
        for _ in 0..<1_000 { _ = value.values }  // dropped without iterating
        #expect(value.box.subscriberCount == 0)
        #expect(value.box.store.hub.feed.listenerCount(forKey: value.box.key) == 1)
    }

    @Test func observationTrackingFiresForEverySource() async throws {
        let store = InMemoryStore()
        let model = ObservableModel(store: store)
        let other = StoredValue(key: "theme", default: Theme.light, store: store)
        let sources: [() throws -> Void] = [
            { model.theme = .dark },
            { other.set(.system) },
            { try store.setValue(.string("light"), forKey: "theme") },
        ]
        for source in sources {
            let fired = Flag()
            withObservationTracking {
                _ = model.theme
            } onChange: {
                fired.set()
            }
            #expect(!fired.isSet)
            try source()
            #expect(fired.isSet)
        }
    }

    /// The short form: a class that holds only preference wrappers conforms to `Observable` by hand (no macro, no
    /// `@ObservationIgnored`), meets what `@Bindable` and `@Environment` ask of a model, and is tracked per key.
    @Test func aClassOfWrappersAloneIsObservableByHandAndTrackedPerKey() throws {
        try PrefsConfig.withDefaultStore(InMemoryStore()) {
            let prefs = requiresObservable(HandObservedPreferences())
            let changes: [(String, () throws -> Void)] = [
                ("its wrapper", { prefs.fontSize = 16 }),
                ("another model", { HandObservedPreferences().fontSize = 18 }),
                ("a direct store write", { try PrefsConfig.defaultStore.setValue(.int(20), forKey: "fontSize") }),
            ]
            for (source, change) in changes {
                let fired = Flag()
                withObservationTracking {
                    _ = prefs.fontSize
                } onChange: {
                    fired.set()
                }
                prefs.showsLineNumbers.toggle()
                #expect(!fired.isSet, "a change of another key, not read, is not tracked")
                try change()
                #expect(fired.isSet, "a change through \(source) of the key read is tracked")
            }
            #expect(prefs.fontSize == 20)
        }
    }

    /// What `@Bindable` and `@Environment` require of their model.
    private func requiresObservable<Model: Observable & AnyObject>(_ model: Model) -> Model { model }

    @Test func observerMayWriteFromItsCallback() throws {
        let store = InMemoryStore()
        let a = StoredValue(key: "a", default: 0, store: store)
        let b = StoredValue(key: "b", default: 0, store: store)
        withObservationTracking {
            _ = a.wrappedValue
        } onChange: {
            b.update { $0 = a.wrappedValue + 10 }
        }
        a.set(1)
        #expect(b.wrappedValue == 11)
    }

    @Test func multiKeyObservation() async throws {
        let store = InMemoryStore()
        let stream = store.changedKeys(["a", "b"])
        try store.setValue(.int(1), forKey: "a")
        try store.setValue(.int(1), forKey: "ignored")
        try store.setValue(.int(1), forKey: "a")  // unchanged: not announced
        try store.setValue(.int(2), forKey: "b")
        #expect(try await first(2, of: stream) == ["a", "b"])
        for _ in 0..<100 {
            let task = Task { for await _ in store.changedKeys() {} }
            task.cancel()
            await task.value
        }
        #expect(store.hub.feed.keySubscriberCount == 1, "only the first, still referenced stream remains")
    }

    /// ObservingChanges: "`values` and `keys(_:)` buffer their elements, so a slow consumer never blocks a writer",
    /// and "until a consumer catches up, its stream holds every value it has not yet received".
    // A bound for a hang, with room for 200 durable writes under ThreadSanitizer on a busy machine.
    @Test(.timeLimit(.minutes(5)))
    func aConsumerThatHasNotReadYetNeverBlocksAWriter() async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try FileStore(url: directory.file("settings.json"))
        let key = uniqueKey("counter")
        let counter = StoredValue(key: key, default: 0, store: store)
        let values = counter.values
        let keys = store.changedKeys([key])
        let memory = InMemoryStore()
        let inMemory = StoredValue(key: key, default: 0, store: memory)
        let memoryValues = inMemory.values
        // Nobody reads any stream while the writes happen; every write returns.
        for n in 1...200 { counter.set(n) }
        for n in 1...5_000 { inMemory.set(n) }
        #expect(try await first(201, of: values) == Array(0...200))
        #expect(try await first(200, of: keys) == Array(repeating: key, count: 200))
        #expect(try await first(5_001, of: memoryValues) == Array(0...5_000))
    }
}

final class Flag: Sendable {
    private let value = Mutex(false)
    func set() { value.withLock { $0 = true } }
    var isSet: Bool { value.withLock { $0 } }
}

/// A type that is not Codable and chooses its own compact stored form.
struct SemanticVersion: PrefValueConvertible, Equatable {
    var major: Int
    var minor: Int

    init(_ major: Int, _ minor: Int) {
        self.major = major
        self.minor = minor
    }

    init(prefValue: PrefValue) throws {
        guard case .string(let text) = prefValue else {
            throw PrefsError.typeMismatch(key: "", expected: "version", found: prefValue.typeName)
        }
        let parts = text.split(separator: ".").compactMap { Int($0) }
        guard parts.count == 2 else {
            throw PrefsError.typeMismatch(key: "", expected: "major.minor", found: "string")
        }
        self.init(parts[0], parts[1])
    }

    var prefValue: PrefValue { .string("\(major).\(minor)") }
}

/// A Codable type that still prefers its own stored form over JSON.
struct Celsius: Codable, PrefValueConvertible, Equatable {
    var degrees: Double
    init(degrees: Double) { self.degrees = degrees }
    init(prefValue: PrefValue) throws { degrees = try Double(prefValue: prefValue) }
    var prefValue: PrefValue { .double(degrees) }
}

@Suite(.ownThreads)
struct CustomRepresentationTests {
    @Test func aNonCodableTypeStoresItsOwnForm() throws {
        let store = InMemoryStore()
        let key = PrefKey("lastSeenVersion", default: SemanticVersion(1, 0))
        let version = StoredValue(key, store: store)
        #expect(version.wrappedValue == SemanticVersion(1, 0))
        version.set(SemanticVersion(2, 3))
        #expect(try store.value(forKey: "lastSeenVersion") == .string("2.3"))
        #expect(try store.value(for: key) == SemanticVersion(2, 3))
    }

    @Test func aCodableTypeWithItsOwnFormIsNotJSON() throws {
        let store = InMemoryStore()
        @StoredValue(key: "temperature", store: store) var temperature = Celsius(degrees: 20)
        temperature = Celsius(degrees: 21.5)
        #expect(try store.value(forKey: "temperature") == .double(21.5))
    }

    @Test func conversionsRefuseValuesThatDoNotFitExactly() throws {
        #expect(throws: PrefsError.self) { try Double(prefValue: .int(Int64.max - 1)) }
        #expect(try Double(prefValue: .int(1 << 52)) == 4_503_599_627_370_496)
        #expect(throws: PrefsError.self) { try Float(prefValue: .int((1 << 24) + 1)) }
        #expect(try Float(prefValue: .int(1 << 24)) == 16_777_216)
        #expect(throws: PrefsError.self) { try URL(prefValue: .int(1)) }
        #expect(PrefsError.invalidKey("", reason: "empty").localizedDescription.contains("invalid key"))
    }
}

@Suite(.ownThreads)
struct ObservationsSequenceTests {
    // `Observations` (SE-0475) is in the Swift 6.2 runtime: on Apple platforms, the 26 releases.
    @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)
    @Test func observationsSequenceSeesChangesFromAnotherWrapper() async throws {
        let store = InMemoryStore()
        let theme = StoredValue(key: "theme", default: Theme.light, store: store)
        let (started, signal) = AsyncStream.makeStream(of: Theme.self)
        let collected = Task {
            var seen: [Theme] = []
            for await current in Observations({ theme.wrappedValue }) {
                seen.append(current)
                signal.yield(current)
                if current == .system { break }
            }
            return seen
        }
        #expect(try await first(1, of: started) == [.light])
        StoredValue(key: "theme", default: Theme.light, store: store).set(.system)
        #expect(await collected.value == [.light, .system])
    }
}
