import Foundation
import Observation
import Synchronization
import Testing

@testable import Prefs

/// Issue 14, point 3: every value that became current reaches a subscriber, in the order the store applied them.
struct ChangeOrderTests {
    @Test(arguments: [Backend.memory, .file, .userDefaults])
    func concurrentWritersOfDistinctValuesAreAllSeenInApplyOrder(_ backend: Backend) async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try backend.open(in: directory)
        let key = uniqueKey("order")
        let wrapper = StoredValue(key: key, default: -1, store: store)
        let stream = wrapper.values
        // The transform runs under the store's write lock, so this log is the order the store applied the values.
        let applied = Mutex<[Int]>([])
        let writers = 4
        let perWriter = backend == .memory ? 250 : 30
        DispatchQueue.concurrentPerform(iterations: writers) { writer in
            for index in 0..<perWriter {
                let value = writer * 10_000 + index
                _ = try? store.updateValue(forKey: key) { _ in
                    applied.withLock { $0.append(value) }
                    return .int(Int64(value))
                }
            }
        }
        let expected = [-1] + applied.withLock { $0 }
        #expect(expected.count == writers * perWriter + 1)
        let seen = try await first(expected.count, of: stream)
        #expect(seen == expected)
    }

    @Test func aSubscriberSeesEveryValueOfAFeedAnnouncedWithValues() async throws {
        // A custom store following the documented rule: announce under its lock, deliver after releasing it.
        let store = AnnouncingStore()
        let key = uniqueKey("custom")
        let stream = StoredValue(key: key, default: "", store: store).values
        DispatchQueue.concurrentPerform(iterations: 4) { writer in
            for index in 0..<200 { try? store.setValue(.string("\(writer)-\(index)"), forKey: key) }
        }
        let expected = [""] + store.log.withLock { $0 }
        #expect(try await first(expected.count, of: stream) == expected)
    }

    @Test func observationTrackingIsToldOfChangesWithoutALockHeld() throws {
        let store = InMemoryStore()
        let key = uniqueKey("tracked")
        let value = StoredValue(key: key, default: 0, store: store)
        let fired = Mutex(0)
        withObservationTracking {
            _ = value.wrappedValue
        } onChange: {
            // Writing the store from inside the callback would deadlock if a store lock were held here.
            try? store.setValue(.int(99), forKey: key + "-other")
            fired.withLock { $0 += 1 }
        }
        value.set(1)
        #expect(fired.withLock { $0 } == 1)
        #expect(try store.value(forKey: key + "-other") == .int(99))
    }
}

/// The store of the "Writing a store" documentation: announces each change under its lock, delivers after.
private final class AnnouncingStore: KeyValueStore {
    let changes = ChangeFeed()
    let log = Mutex<[String]>([])
    private let values = Mutex<[String: PrefValue]>([:])

    func value(forKey key: String) throws -> PrefValue? { values.withLock { $0[key] } }

    func setValue(_ value: PrefValue?, forKey key: String) throws {
        values.withLock { values in
            guard values[key] != value else { return }
            values[key] = value
            if case .string(let text)? = value { log.withLock { $0.append(text) } }
            changes.announce([key: value])
        }
        changes.deliverAnnouncements()
    }

    func allValues() throws -> [String: PrefValue] { values.withLock { $0 } }
}
