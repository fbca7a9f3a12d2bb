import Foundation
import Observation
import PrefsTestSupport
import Synchronization
import TestThreads
import Testing

@testable import Prefs

/// Every value that became current reaches a subscriber, in the order the store applied them.
@Suite(.ownThreads)
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
        let writers = 8
        let perWriter = backend == .memory ? 500 : 25
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
        let seen = try await collect(stream, through: expected.last!)
        #expect(seen.count == expected.count, "\(expected.count - seen.count) values were merged")
        #expect(seen.count != expected.count || seen == expected, "the values arrived out of order")
    }

    @Test(arguments: [Backend.memory, .file, .userDefaults])
    func aChangeAppliedWhileAnEarlierOneIsDeliveredIsNotMerged(_ backend: Backend) async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try backend.open(in: directory)
        let key = uniqueKey("merge")
        let wrapper = StoredValue(key: key, default: 0, store: store)
        let stream = wrapper.values
        // While the first change is being delivered (its Observation callback runs), another thread applies a
        // second one and finishes. The subscriber must still see the first value, then the second.
        withObservationTracking {
            _ = wrapper.wrappedValue
        } onChange: {
            let done = DispatchSemaphore(value: 0)
            Thread {
                try? store.setValue(.int(2), forKey: key)
                done.signal()
            }.start()
            done.wait()
        }
        try store.setValue(.int(1), forKey: key)
        #expect(try await collect(stream, through: 2) == [0, 1, 2])
    }

    @Test func aSubscriberSeesEveryValueOfAFeedAnnouncedWithValues() async throws {
        // A store of the app's own, whose writes Prefs announces in the order it makes them.
        let store = LoggingStore()
        let key = uniqueKey("custom")
        let stream = StoredValue(key: key, default: "", store: store).values
        DispatchQueue.concurrentPerform(iterations: 4) { writer in
            for index in 0..<200 { try? store.setValue(.string("\(writer)-\(index)"), forKey: key) }
        }
        let expected = [""] + store.log.withLock { $0 }
        #expect(try await collect(stream, through: expected.last!) == expected)
    }
}

/// The values `stream` yields up to and including `last`, failing after `seconds` (a guard, not a synchronisation).
private func collect<T: Sendable & Equatable>(
    _ stream: AsyncStream<T>, through last: T, within seconds: Double = 20
) async throws -> [T] {
    try await collect(stream, within: seconds) { $0.last == last }
}

/// A store of the app's own that logs the text values it is given, in the order it applies them.
private final class LoggingStore: KeyValueStore {
    let hub = StoreHub()
    let log = PThreadLocked<[String]>([])
    private let values = PThreadLocked<[String: PrefValue]>([:])

    func read(_ key: String) throws -> PrefValue? { values.withLock { $0[key] } }

    func readAll() throws -> [String: PrefValue] { values.withLock { $0 } }

    func write(_ changes: [String: PrefValue?]) throws {
        values.withLock { values in
            for (key, value) in changes {
                values[key] = value
                if case .string(let text)? = value { log.withLock { $0.append(text) } }
            }
        }
    }
}
