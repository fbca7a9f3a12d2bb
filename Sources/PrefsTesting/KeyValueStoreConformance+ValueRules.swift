import Foundation
import Observation
import Prefs
import Synchronization

// The rules of `KeyValueStoreConformance` about values and keys: what is stored reads back exactly, whole or
// refused, and removal, listing and replacement do what they say (see its documentation for each rule).
extension KeyValueStoreConformance {
    /// Every kind of value with its extremes, each under its own name.
    static let samples: [(String, PrefValue)] = [
        ("true", .bool(true)), ("false", .bool(false)), ("zero", .int(0)), ("int64-min", .int(.min)),
        ("int64-max", .int(.max)), ("uint64-max", .unsignedInt(.max)), ("float", .float(0.1)),
        ("float-nan", .float(.nan)), ("float-minus-zero", .float(-0.0)), ("double", .double(0.1)),
        ("double-nan", .double(.nan)), ("double-minus-zero", .double(-0.0)),
        ("double-tiny", .double(.leastNonzeroMagnitude)),
        ("empty-string", .string("")), ("string", .string("dark")), ("unicode", .string("ünï 😀\nline \"q\"")),
        ("empty-data", .data(Data())), ("data", .data(Data((0...255).map { UInt8($0) }))),
        ("date", .date(Date(timeIntervalSinceReferenceDate: 123_456.789))),
        ("date-before-2001", .date(Date(timeIntervalSinceReferenceDate: -1_000_000.25))),
        ("empty-array", .array([])), ("empty-dictionary", .dictionary([:])),
        (
            "nested",
            .dictionary([
                "list": .array([.int(1), .string("two"), .dictionary(["three": .array([.float(3.5), .bool(false)])])]),
                "when": .date(Date(timeIntervalSinceReferenceDate: 0.5)), "bytes": .data(Data([0, 0xFF])),
            ])
        ),
    ]

    static func valueRoundTrip(_ context: Context) throws {
        let store = context.store
        for (name, value) in samples {
            try store.setValue(value, forKey: context.key(name))
            let read = try store.value(forKey: context.key(name))
            context.expect(identical(read, value), "\(name): value(forKey:) \(expected(value, read: read))")
        }
        let all = try store.allValues()
        for (name, value) in samples {
            let read = all[context.key(name)]
            context.expect(identical(read, value), "\(name): allValues() \(expected(value, read: read))")
        }
    }

    /// Values larger than a database column or a message usually holds, each under a short key of its own.
    static let largeSamples: [(key: String, name: String, value: PrefValue)] = {
        // 21 bytes a repetition, in characters of one to four bytes, so that a cut can fall inside one.
        let text = String(repeating: "ünï😀 long text, ", count: 5_000)
        let bytes = Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) })
        return [
            ("large.string", "a string of \(text.utf8.count) bytes", .string(text)),
            ("large.data", "1 MiB of data", .data(bytes)),
            ("large.array", "an array of 10 000 strings", .array((0..<10_000).map { .string("element \($0)") })),
            (
                "large.dictionary", "a dictionary holding that string",
                .dictionary(["text": .string(text), "n": .int(1)])
            ),
        ]
    }()

    static func largeValues(_ context: Context) throws {
        let store = context.store
        // A write may throw (the store cannot keep the value); what it may not do is keep less of it.
        var kept: [String: PrefValue] = [:]
        for (key, _, value) in largeSamples {
            if (try? store.setValue(value, forKey: context.key(key))) != nil { kept[key] = value }
        }
        let all = try store.allValues()
        for (key, name, _) in largeSamples {
            let wanted = kept[key]
            let refused = wanted == nil ? " (its write threw)" : ""
            let read = try store.value(forKey: context.key(key))
            context.expect(identical(read, wanted), "\(name)\(refused): value(forKey:) \(expected(wanted, read: read))")
            let listed = all[context.key(key)]
            context.expect(
                identical(listed, wanted), "\(name)\(refused): allValues() \(expected(wanted, read: listed))")
        }
    }

    static func longKeys(_ context: Context) throws {
        let store = context.store
        // Pairs of keys alike but for their last character, at lengths where stores cut keys, and a pair made of
        // two-byte characters, where a cut can fall inside one.
        var keys: [String] = []
        for length in [100, 256, 1_000] {
            let stem = context.prefix + String(repeating: "k", count: length - context.prefix.utf8.count - 1)
            keys += [stem + "a", stem + "b"]
        }
        let wide = context.prefix + String(repeating: "é", count: 150)
        keys += [wide + "a", wide + "b"]
        // A key may be refused with an error; one that is stored keeps its own value.
        var kept: [String: PrefValue] = [:]
        for (index, key) in keys.enumerated() {
            if (try? store.setValue(.int(Int64(index)), forKey: key)) != nil { kept[key] = .int(Int64(index)) }
        }
        var wrong: [String] = []
        for key in keys {
            let read = try store.value(forKey: key)
            if !identical(read, kept[key]) {
                wrong.append(
                    "the key of \(key.utf8.count) bytes ending in \(key.suffix(1)) \(expected(kept[key], read: read))")
            }
        }
        context.expect(
            wrong.isEmpty,
            "keys alike but for their last character did not stay apart: \(wrong.prefix(3).joined(separator: "; "))"
                + (wrong.count > 3 ? "; and \(wrong.count - 3) more" : ""))
        let listed = try store.allValues().filter { $0.key.hasPrefix(context.prefix) }
        context.expect(
            listed == kept,
            "allValues() lists keys of \(listed.keys.map(\.utf8.count).sorted()) bytes, expected \(kept.keys.map(\.utf8.count).sorted())"
        )
    }

    static func nilRemoves(_ context: Context) throws {
        let store = context.store
        let key = context.key("removed")
        let unwritten = try store.value(forKey: key)
        context.expect(unwritten == nil, "a key never written: \(expected(nil, read: unwritten))")
        try store.setValue(nil, forKey: key)
        try store.removeValue(forKey: key)
        let removals: [(String, () throws -> Void)] = [
            ("setValue(nil, forKey:)", { try store.setValue(nil, forKey: key) }),
            ("removeValue(forKey:)", { try store.removeValue(forKey: key) }),
            ("an updateValue transform returning nil", { try store.updateValue(forKey: key) { _ in nil } }),
        ]
        for (name, remove) in removals {
            try store.setValue(.int(1), forKey: key)
            try remove()
            let read = try store.value(forKey: key)
            context.expect(read == nil, "\(name) left the key readable: \(expected(nil, read: read))")
            let listed = try store.allValues()[key]
            context.expect(listed == nil, "\(name) left the key in allValues(): \(expected(nil, read: listed))")
        }
    }

    static func keyValidation(_ context: Context) throws {
        let store = context.store
        let kept = context.key("kept")
        try store.setValue(.int(1), forKey: kept)
        for bad in ["", "a\u{0}b"] {
            let writes: [(String, () throws -> Void)] = [
                ("setValue", { try store.setValue(.int(1), forKey: bad) }),
                ("updateValue", { try store.updateValue(forKey: bad) { _ in .int(1) } }),
                ("replaceAll", { try store.replaceAll([bad: .int(1)]) }),
            ]
            for (name, write) in writes {
                expectError("\(name) of the key \(String(reflecting: bad))", "invalidKey", context, write) {
                    guard case .invalidKey? = $0 as? PrefsError else { return false }
                    return true
                }
            }
            let stored = try store.allValues()[bad]
            context.expect(stored == nil, "the key \(String(reflecting: bad)) was stored: \(shown(stored))")
        }
        let read = try store.value(forKey: kept)
        context.expect(read == .int(1), "a refused replaceAll changed the store: \(expected(.int(1), read: read))")
    }

    static func allValues(_ context: Context) throws {
        let store = context.store
        let written: [String: PrefValue] = [
            context.key("a"): .int(1), context.key("b"): .string("two"), context.key("c"): .array([.bool(true)]),
        ]
        for (key, value) in written { try store.setValue(value, forKey: key) }
        try store.removeValue(forKey: context.key("b"))
        let all = try store.allValues()
        for name in ["a", "b", "c"] {
            let wanted = name == "b" ? nil : written[context.key(name)]
            let listed = all[context.key(name)]
            context.expect(
                listed == wanted,
                "allValues() after setting a, b, c and removing b, for \(name): \(expected(wanted, read: listed))")
        }
    }

    static func replaceAll(_ context: Context) async throws {
        let store = context.store
        let (a, b, c, sentinel) = (context.key("a"), context.key("b"), context.key("c"), context.key("sentinel"))
        try await onThread {
            try store.setValue(.int(1), forKey: a)
            try store.setValue(.int(2), forKey: b)
        }
        let stream = store.changedKeys([a, b, c, sentinel])
        let replacement: [String: PrefValue] = [b: .int(20), c: .string("three")]
        try await onThread {
            try store.replaceAll(replacement)
            // Only this run's keys: values from elsewhere (defaults registered with Foundation) may read too.
            let all = try store.allValues().filter { $0.key.hasPrefix(context.prefix) }
            context.expect(
                all == replacement,
                "after replaceAll the store holds \(shown(.dictionary(all))), expected \(shown(.dictionary(replacement)))"
            )
            try store.setValue(.int(1), forKey: sentinel)
        }
        guard let keys = try await delivered(stream, before: sentinel, context) else { return }
        context.expect(
            keys.sorted() == [a, b, c].sorted(),
            "replaceAll of {a: 1, b: 2} by {b: 20, c: \"three\"} announced \(keys.map(context.name)), expected a, b and c once each"
        )
    }

    static func removeValues(_ context: Context) throws {
        let store = context.store
        for name in ["a", "b", "c"] { try store.setValue(.string(name), forKey: context.key(name)) }
        try store.removeValues(forKeys: [context.key("a"), context.key("b"), context.key("absent")])
        for name in ["a", "b", "c"] {
            let wanted: PrefValue? = name == "c" ? .string("c") : nil
            let read = try store.value(forKey: context.key(name))
            context.expect(
                read == wanted, "removeValues(forKeys: [a, b, absent]), then \(name): \(expected(wanted, read: read))")
        }
    }

    static func closedStoreThrows(_ context: Context) throws {
        guard let close = context.close else { return }
        let store = context.store
        let key = context.key("k")
        try store.setValue(.int(1), forKey: key)
        try close()
        var operations: [(String, () throws -> Void)] = [
            ("setValue", { try store.setValue(.int(2), forKey: key) }),
            ("setValue(nil)", { try store.setValue(nil, forKey: key) }),
            ("updateValue", { try store.updateValue(forKey: key) { _ in .int(3) } }),
            ("replaceAll", { try store.replaceAll([key: .int(4)]) }),
            ("removeValues", { try store.removeValues(forKeys: [key]) }),
            ("batch", { try store.batch { try store.setValue(.int(5), forKey: key) } }),
        ]
        if !context.unsupported.contains(.closedReads) {
            operations += [
                ("value(forKey:)", { _ = try store.value(forKey: key) }),
                ("allValues", { _ = try store.allValues() }),
            ]
        }
        let anyError = context.unsupported.contains(.storeClosedError)
        for (name, operation) in operations {
            expectError("\(name) on a closed store", "storeClosed", context, operation) {
                if anyError { return true }
                guard case .storeClosed? = $0 as? PrefsError else { return false }
                return true
            }
        }
    }
}

// MARK: - One stored form

extension KeyValueStoreConformance {
    static func oneStoredForm(_ context: Context) throws {
        try sameForm("projected", other: "other", "string", context)
        try sameForm(42, other: 7, "int", context)
        try sameForm(2.5, other: 1, "double", context)
        try sameForm(true, other: false, "bool", context)
        try sameForm(
            Date(timeIntervalSinceReferenceDate: 1234.5), other: Date(timeIntervalSinceReferenceDate: 0), "date",
            context)
        try sameForm(["swift", "linux"], other: [], "string-array", context)
        try sameForm(["a": 1], other: [:], "dictionary", context)
    }

    /// Writes `value` through a typed key, a generic `Codable` wrapper and the raw API, each under a key of its own:
    /// each must store the type's own form, and each path must read what the others wrote.
    private static func sameForm<Value: PrefValueConvertible & Codable & Equatable>(
        _ value: Value, other: Value, _ name: String, _ context: Context
    ) throws {
        let store = context.store
        let native = try value.prefValue
        let paths: [(String, (String) throws -> Void)] = [
            ("the raw API", { key in try store.setValue(native, forKey: key) }),
            ("a typed key", { key in try store.set(value, for: PrefKey(key, default: other)) }),
            (
                "a generic Codable wrapper",
                { key in try writeThroughCodable(value, other: other, key: key, store: store) }
            ),
        ]
        var rawForm: PrefValue?
        for (index, (path, write)) in paths.enumerated() {
            let key = context.key("\(name).\(index)")
            try write(key)
            // The raw API's write is the reference: the store may keep a value in a form of its own.
            let stored = try store.value(forKey: key)
            if index == 0 { rawForm = stored }
            context.expect(
                identical(stored, rawForm),
                "\(name) written through \(path) is stored as \(shown(stored)), expected the form the raw API stores, \(shown(rawForm))"
            )
            let typed = try store.value(for: PrefKey(key, default: other))
            context.expect(
                typed == value,
                "\(name) \(value) written through \(path), stored as \(shown(stored)), reads \(typed) through a typed key, expected \(value)"
            )
            let generic = try readThroughCodable(key: key, other: other, store: store)
            context.expect(
                generic == value,
                "\(name) \(value) written through \(path), stored as \(shown(stored)), reads \(generic) through a generic wrapper, expected \(value)"
            )
        }
    }

    /// What generic code (`final class Model<Value: Codable>`) does: knows only that the value is `Codable`.
    private static func writeThroughCodable<Value: Codable & Sendable & Equatable>(
        _ value: Value, other: Value, key: String, store: any KeyValueStore
    ) throws {
        try store.set(value, for: PrefKey(key, default: other))
    }

    private static func readThroughCodable<Value: Codable & Sendable & Equatable>(
        key: String, other: Value, store: any KeyValueStore
    ) throws -> Value {
        StoredValue(key: key, default: other, store: store).wrappedValue
    }
}
