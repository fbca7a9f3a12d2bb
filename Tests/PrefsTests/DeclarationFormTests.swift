import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

/// Each way of declaring a preference chooses the stored form from the type written there: a built-in type and a
/// raw-value enum are stored natively, an Optional's nil removes the key, any other `Codable` type is JSON text.
/// Every overload is pinned here, so one that picked the JSON form by mistake is caught.
/// Two declarations of one key in one store that disagree on its type or default are reported, once.
@Suite(.ownThreads) struct DeclarationFormTests {
    private let date = Date(timeIntervalSinceReferenceDate: 123_456)

    @Test func everyDeclarationWithAStoreStoresTheNativeForm() throws {
        let store = InMemoryStore()
        @StoredValue(key: "flag", store: store) var flag = false
        @StoredValue(key: "when", store: store) var when: Date? = nil
        @StoredValue(key: "maybeTheme", store: store) var maybeTheme: Theme? = nil
        @StoredValue(key: "optionalDate", store: store) var optionalDate: Date?
        let forms = write(
            $flag, StoredValue(key: "count", default: 0, store: store), $when,
            StoredValue(key: "limit", default: nil, store: store),
            StoredValue(key: "theme", default: .light, store: store),
            $maybeTheme, StoredValue(key: "optionalTheme", default: nil, store: store), $optionalDate)
        for (key, form) in forms { #expect(try store.value(forKey: key) == form, "\(key)") }
    }

    @Test func everyDeclarationWithAUserDefaultsInstanceStoresTheNativeForm() throws {
        let suite = FoundationSuite("forms")
        defer { suite.cleanup() }
        let defaults = suite.defaults
        // The same overloads as above, called without property syntax.
        let forms = write(
            StoredValue(wrappedValue: false, key: "flag", storage: defaults),
            StoredValue(PrefKey("count", default: 0), storage: defaults),
            StoredValue(wrappedValue: nil, key: "when", storage: defaults),
            StoredValue(PrefKey<Int?>("limit"), storage: defaults),
            StoredValue(PrefKey("theme", default: Theme.light), storage: defaults),
            StoredValue(wrappedValue: nil, key: "maybeTheme", storage: defaults),
            StoredValue(PrefKey<Theme?>("optionalTheme"), storage: defaults),
            StoredValue(key: "optionalDate", storage: defaults))
        let store = UserDefaultsBridgeStore(defaults)
        for (key, form) in forms { #expect(try store.value(forKey: key) == form, "\(key)") }
        #expect(defaults.object(forKey: "flag") as? Bool == true)
        #expect(defaults.object(forKey: "theme") as? String == "dark")
    }

    @Test func anOptionalOfAnyKindRemovesTheKeyWhenSetToNil() throws {
        let store = InMemoryStore()
        @StoredValue(key: "date", store: store) var date: Date? = nil
        @StoredValue(key: "theme", store: store) var theme: Theme? = nil
        @StoredValue(key: "coordinates", store: store) var coordinates: Coordinates? = nil
        date = self.date
        theme = .dark
        coordinates = Coordinates(latitude: 1.5, longitude: 2.5)
        #expect(try store.value(forKey: "coordinates") == .string(#"{"latitude":1.5,"longitude":2.5}"#))
        date = nil
        theme = nil
        coordinates = nil
        #expect(try store.allValues().isEmpty)
        #expect(date == nil && theme == nil && coordinates == nil)
    }

    /// Code generic over `Codable` (`final class Model<Value: Codable>`) stores a String, Int, Date, [String] or an
    /// optional of one as concrete code does, not as JSON text (a String with its quotes).
    @Test func genericCodeThatKnowsOnlyCodableStoresWhatConcreteCodeStores() throws {
        func key<T: Codable & Sendable & Equatable>(_ name: String, _ value: T) -> PrefKey<T> {
            PrefKey(name, default: value)
        }
        let store = InMemoryStore()
        try store.setValue(.int(3), forKey: "count")
        try store.setValue(.date(date), forKey: "when")
        try store.setValue(.string("dark"), forKey: "name")
        #expect(try store.value(for: key("count", 0)) == 3)
        #expect(try store.value(for: key("when", Date.distantPast)) == date)
        #expect(try store.value(for: key("name", "")) == "dark")
        try store.set(4, for: key("count", 0))
        #expect(try store.value(forKey: "count") == .int(4))
        #expect(try store.value(for: key("count", 0)) == 4)
        try store.set("projected", for: key("name", ""))
        #expect(try store.value(forKey: "name") == .string("projected"))
        try store.set(["swift", "linux"], for: key("tags", [String]()))
        #expect(try store.value(forKey: "tags") == .array([.string("swift"), .string("linux")]))
        try store.set(date, for: key("when", Date.distantPast))
        #expect(try store.value(forKey: "when") == .date(date))
        try store.set("maybe", for: key("optional", String?.none))
        #expect(try store.value(forKey: "optional") == .string("maybe"))
        #expect(try store.value(for: key("optional", String?.none)) == "maybe")
        try store.set(nil, for: key("optional", String?.none))
        #expect(try store.value(forKey: "optional") == nil)

        // A generic model holding a wrapper, as StateGraph's tests declare one.
        final class Model<Value: Codable & Sendable & Equatable>: Sendable {
            let stored: StoredValue<Value>
            init(_ value: Value, store: InMemoryStore) {
                stored = StoredValue(key: "projected", default: value, store: store)
            }
        }
        let model = Model("", store: store)
        model.stored.set("projected")
        #expect(try store.value(forKey: "projected") == .string("projected"))
        #expect(try store.value(for: PrefKey<String?>("projected")) == "projected")
    }

    /// Writes a value through one wrapper of each overload and returns the stored form each must have.
    private func write(
        _ flag: StoredValue<Bool>, _ count: StoredValue<Int>, _ when: StoredValue<Date?>, _ limit: StoredValue<Int?>,
        _ theme: StoredValue<Theme>, _ maybeTheme: StoredValue<Theme?>, _ optionalTheme: StoredValue<Theme?>,
        _ optionalDate: StoredValue<Date?>
    ) -> [String: PrefValue] {
        flag.set(true)
        count.set(3)
        when.set(date)
        limit.set(7)
        theme.set(.dark)
        maybeTheme.set(.dark)
        optionalTheme.set(.system)
        optionalDate.set(date)
        #expect(flag.wrappedValue && count.wrappedValue == 3 && when.wrappedValue == date && limit.wrappedValue == 7)
        #expect(theme.wrappedValue == .dark && maybeTheme.wrappedValue == .dark)
        #expect(optionalTheme.wrappedValue == .system && optionalDate.wrappedValue == date)
        return [
            "flag": .bool(true), "count": .int(3), "when": .date(date), "limit": .int(7), "theme": .string("dark"),
            "maybeTheme": .string("dark"), "optionalTheme": .string("system"), "optionalDate": .date(date),
        ]
    }

    @Test func aKeyDeclaredWithTwoTypesIsReportedOnceNamingBoth() {
        Reports.install()
        let store = InMemoryStore()
        let key = uniqueKey("conflict")
        let first = StoredValue(key: key, default: 1, store: store)
        let second = StoredValue(key: key, default: "one", store: store)
        _ = StoredValue(key: key, default: "one", store: store)
        _ = (first, second)
        let reports = Reports.for(key)
        #expect(reports.count == 1)
        let text = reports.first.map { "\($0)" } ?? ""
        #expect(text.contains("Swift.Int") && text.contains("Swift.String"), "\(text)")
    }

    @Test func aKeyDeclaredWithTwoDefaultsIsReportedOnceNamingBoth() {
        Reports.install()
        let store = InMemoryStore()
        let key = uniqueKey("defaults")
        _ = StoredValue(key: key, default: 10, store: store)
        _ = StoredValue(key: key, default: 10, store: store)
        #expect(Reports.for(key).isEmpty, "identical declarations agree")
        _ = StoredValue(key: key, default: 20, store: store)
        _ = StoredValue(key: key, default: 20, store: store)
        let reports = Reports.for(key)
        #expect(reports.count == 1)
        let text = reports.first.map { "\($0)" } ?? ""
        #expect(text.contains("= 10") && text.contains("= 20"), "\(text)")
        _ = StoredValue(key: key, default: 10, store: InMemoryStore())
        #expect(Reports.for(key).count == 1, "another store is another declaration space")
    }
}
