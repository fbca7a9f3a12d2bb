import Foundation
import Observation
import PrefsTestSupport
import Synchronization
import TestThreads
import Testing

@testable import Prefs

/// When and where observers hear of a change: a store's own write is delivered exactly once, on the writer's
/// thread, before the write returns, whichever store it is; the file watcher never delivers it (again).
@Suite(.ownThreads)
struct ChangeDeliveryTests {
    /// Who ran an Observation callback, and whether the write had returned by then.
    private final class Sightings: Sendable {
        private let state = Mutex<[(thread: ThreadID, afterReturn: Bool)]>([])
        let returned = Atomic(false)

        func saw() {
            state.withLock { $0.append((ThreadID.current, returned.load(ordering: .sequentiallyConsistent))) }
        }
        var all: [(thread: ThreadID, afterReturn: Bool)] { state.withLock { $0 } }
    }

    @Test(arguments: Backend.allCases)
    func aWriteIsObservedOnTheWritersThreadBeforeItReturns(_ backend: Backend) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try backend.open(in: directory)
        let key = uniqueKey("delivered")
        let wrapper = StoredValue(key: key, default: 0, store: store)
        for value in 1...50 {
            let sightings = Sightings()
            withObservationTracking {
                _ = wrapper.wrappedValue
            } onChange: {
                sightings.saw()
            }
            wrapper.set(value)
            sightings.returned.store(true, ordering: .sequentiallyConsistent)
            let seen = sightings.all
            #expect(seen.count == 1, "write \(value) was observed \(seen.count) times before it returned")
            #expect(seen.first?.thread == ThreadID.current, "write \(value) was observed on another thread")
            #expect(seen.allSatisfy { !$0.afterReturn })
            #expect(wrapper.wrappedValue == value)
        }
    }

    @Test(arguments: Backend.allCases)
    func declaringAWrapperAnnouncesNothing(_ backend: Backend) async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try backend.open(in: directory)
        let declared = uniqueKey("declared")
        let written = uniqueKey("written")
        let stream = store.changes.keys()
        let wrapper = StoredValue(key: declared, default: 7, store: store)
        #expect(wrapper.wrappedValue == 7)
        try store.setValue(.int(1), forKey: written)
        // The stream yields in announcement order: had the declaration announced anything, it would come first.
        #expect(try await first(1, of: stream) == [written])
    }

    @Test func anObserverThatWritesSeesItsWriteDeliveredRightAfterItReturns() throws {
        let store = InMemoryStore()
        let first = StoredValue(key: uniqueKey("outer"), default: 0, store: store)
        let second = StoredValue(key: uniqueKey("inner"), default: 0, store: store)
        let order = Mutex<[String]>([])
        withObservationTracking {
            _ = first.wrappedValue
        } onChange: {
            second.set(1)
            order.withLock { $0.append("outer observer returns") }
        }
        withObservationTracking {
            _ = second.wrappedValue
        } onChange: {
            order.withLock { $0.append("inner change delivered") }
        }
        first.set(1)
        #expect(order.withLock { $0 } == ["outer observer returns", "inner change delivered"])
        #expect(second.wrappedValue == 1)
    }
}
