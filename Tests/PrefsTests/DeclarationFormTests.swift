import Foundation
import PrefsTestSupport
import Testing

@testable import Prefs

/// Each way of declaring a preference chooses the stored form from the type written there: a built-in type and a
/// raw-value enum are stored natively, an Optional's nil removes the key, any other `Codable` type is JSON text.
/// Every overload is pinned here, so one that picked the JSON form by mistake is caught.
@Suite struct DeclarationFormTests {
    private let date = Date(timeIntervalSinceReferenceDate: 123_456)

    @Test func everyDeclarationWithAStoreStoresTheNativeForm() throws {
        let store = InMemoryStore()
        let forms = try declarations(store: store, storage: nil)
        for (key, form) in forms { #expect(try store.value(forKey: key) == form, "\(key)") }
    }

    @Test func everyDeclarationWithAUserDefaultsInstanceStoresTheNativeForm() throws {
        let suite = FoundationSuite("forms")
        defer { suite.cleanup() }
        let forms = try declarations(store: nil, storage: suite.defaults)
        let store = FoundationUserDefaultsStore(suite.defaults)
        for (key, form) in forms { #expect(try store.value(forKey: key) == form, "\(key)") }
        #expect(suite.defaults.object(forKey: "flag") as? Bool == true)
        #expect(suite.defaults.object(forKey: "theme") as? String == "dark")
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

    @Test func genericCodeThatKnowsOnlyCodableWritesJSONAndReadsTheNativeForms() throws {
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
        #expect(try store.value(forKey: "count") == .string("4"))
        #expect(try store.value(for: key("count", 0)) == 4)
    }

    /// Declares one wrapper per overload, in `store` or in `storage`, writes a value through each and returns the
    /// stored form each must have.
    private func declarations(store: (any KeyValueStore)?, storage: UserDefaults?) throws -> [String: PrefValue] {
        let flag: StoredValue<Bool>
        let count: StoredValue<Int>
        let when: StoredValue<Date?>
        let limit: StoredValue<Int?>
        let theme: StoredValue<Theme>
        let maybeTheme: StoredValue<Theme?>
        let optionalTheme: StoredValue<Theme?>
        let optionalDate: StoredValue<Date?>
        if let storage {
            flag = StoredValue(wrappedValue: false, key: "flag", storage: storage)
            count = StoredValue(key: "count", default: 0, storage: storage)
            when = StoredValue(wrappedValue: nil, key: "when", storage: storage)
            limit = StoredValue(key: "limit", default: nil, storage: storage)
            theme = StoredValue(key: "theme", default: .light, storage: storage)
            maybeTheme = StoredValue(wrappedValue: nil, key: "maybeTheme", storage: storage)
            optionalTheme = StoredValue(key: "optionalTheme", default: nil, storage: storage)
            optionalDate = StoredValue(key: "optionalDate", storage: storage)
        } else {
            flag = StoredValue(wrappedValue: false, key: "flag", store: store)
            count = StoredValue(key: "count", default: 0, store: store)
            when = StoredValue(wrappedValue: nil, key: "when", store: store)
            limit = StoredValue(key: "limit", default: nil, store: store)
            theme = StoredValue(key: "theme", default: .light, store: store)
            maybeTheme = StoredValue(wrappedValue: nil, key: "maybeTheme", store: store)
            optionalTheme = StoredValue(key: "optionalTheme", default: nil, store: store)
            optionalDate = StoredValue(key: "optionalDate", store: store)
        }
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
}
