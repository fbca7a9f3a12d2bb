import Foundation
import PrefsTestSupport
import Synchronization
import TestThreads
import Testing

@testable import Prefs

private enum Mood: String, Codable, Sendable { case calm, busy, away }

/// Cached reads: every kind of value, small plain ones (`Int`, `Bool`, `Double`, simple enums) included, must return
/// exactly the value last written, from any wrapper and thread.
@Suite(.ownThreads) struct CachedReadTests {
    @Test func everyKindOfSmallPlainValueReadsBackExactly() throws {
        let store = InMemoryStore()
        @StoredValue(key: "int", store: store) var int = 0
        @StoredValue(key: "bool", store: store) var bool = false
        @StoredValue(key: "double", store: store) var double = 0.5
        @StoredValue(key: "float", store: store) var float: Float = 0
        @StoredValue(key: "int8", store: store) var int8: Int8 = 0
        @StoredValue(key: "mood", store: store) var mood = Mood.calm
        @StoredValue(key: "maybe", store: store) var maybe: Bool? = nil
        for round in 1...3 {
            int = -round
            bool = round % 2 == 1
            double = -.infinity
            float = Float(round) / 3
            int8 = Int8(-round)
            mood = round == 2 ? .busy : .away
            maybe = round == 3 ? nil : round == 1
            #expect(int == -round && bool == (round % 2 == 1) && double == -.infinity)
            #expect(float == Float(round) / 3 && int8 == Int8(-round))
            #expect(mood == (round == 2 ? .busy : .away) && maybe == (round == 3 ? nil : round == 1))
        }
        // Another wrapper of the same key, a direct store write and a reset are seen at once.
        @StoredValue(key: "int", store: store) var sameInt = 0
        try store.setValue(.int(42), forKey: "int")
        #expect(int == 42 && sameInt == 42)
        $int.reset()
        #expect(int == 0 && sameInt == 0)
    }

    @Test func concurrentReadersSeeEachThreadsWritesAndNeverGoBack() async throws {
        let store = InMemoryStore()
        let writes = 20_000
        let counter = StoredValue(key: "counter", default: 0, store: store)
        let label = StoredValue(key: "label", default: "0", store: store)
        let writerDone = Flag()
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                defer { writerDone.set() }
                for value in 1...writes {
                    counter.set(value)
                    label.set(String(value))
                    // A read after a write returns on the writing thread sees that write (or a later one).
                    guard counter.wrappedValue == value, label.wrappedValue == String(value) else { return false }
                }
                return true
            }
            for _ in 0..<2 {
                group.addTask {
                    var last = 0
                    while last < writes, !writerDone.isSet {
                        let seen = counter.wrappedValue
                        // Only written values, and never an older one than a read before.
                        guard (0...writes).contains(seen), seen >= last else { return false }
                        last = seen
                        await Task.yield()
                    }
                    return true
                }
            }
            for await passed in group { #expect(passed) }
        }
    }

    /// TOUR: "Reads are served from memory, and each wrapper decodes a value once per change."
    @Test func aValueIsDecodedOncePerChangeForEveryWrapperOfItsKey() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try FileStore(url: directory.file("settings.json"))
        let key = uniqueKey("release")
        let fallback = CountedDecodes(text: key + " none")
        let release = StoredValue(key: key, default: fallback, store: store)
        let again = StoredValue(key: key, default: fallback, store: store)
        for version in ["1.0", "2.0"] {
            try store.setValue(.string(key + " " + version), forKey: key)  // a direct write the wrappers decode
            for _ in 0..<100 {
                #expect(release.wrappedValue.text == key + " " + version)
                #expect(again.wrappedValue.text == key + " " + version)
            }
            // At most once per wrapper, however often each reads.
            #expect((1...2).contains(CountedDecodes.count(of: key + " " + version)))
        }
    }
}

/// A value that records every decode of its stored text.
struct CountedDecodes: Codable, Sendable, Equatable, PrefValueConvertible {
    private static let decoded = Mutex<[String]>([])
    static func count(of text: String) -> Int { decoded.withLock { $0.filter { $0 == text }.count } }

    var text: String

    init(text: String) { self.text = text }

    init(prefValue: PrefValue) throws {
        guard case .string(let text) = prefValue else {
            throw PrefsError.typeMismatch(key: "", expected: "string", found: prefValue.typeName)
        }
        self.text = text
        Self.decoded.withLock { $0.append(text) }
    }

    var prefValue: PrefValue { .string(text) }
}
