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

    /// Each of 50 writes is observed once, on the writer's thread, before it returns; and never again: a stream of
    /// the store's announcements, read until another writer's second change arrives (by then the watcher has handled
    /// every event of the 50 writes), holds each of them once.
    @Test(arguments: Backend.allCases)
    func aWriteIsObservedOnTheWritersThreadBeforeItReturns(_ backend: Backend) async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try backend.open(in: directory)
        let key = uniqueKey("delivered")
        let wrapper = StoredValue(key: key, default: 0, store: store)
        let announced = Mutex<[String]>([])
        let names = store.changedKeys([key, "sentinel"])
        let reader = Task { for await name in names { announced.withLock { $0.append(name) } } }
        defer { reader.cancel() }
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
        for round in 1...2 {
            if backend == .memory {
                try store.setValue(.int(Int64(round)), forKey: "sentinel")  // no other process can write it
            } else {
                let exit = try ChildProcess.run(["set-int", backend.spec(in: directory), "sentinel", String(round)])
                #expect(exit.status == 0, "\(exit)")
            }
            try await eventually("another writer's change \(round) to be announced") {
                announced.withLock { $0.count { $0 == "sentinel" } } == round
            }
        }
        #expect(announced.withLock { $0.count { $0 == key } } == 50, "\(announced.withLock { $0 })")
    }

    /// Another process's change is delivered on the store's own queue, the one its looks at the file run on (never on
    /// a thread of the app's), once.
    @Test(arguments: Backend.persistent)
    func anotherProcessesChangeIsDeliveredOnceOnTheStoresOwnQueue(_ backend: Backend) async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try backend.seededStore(in: directory)
        let wrapper = StoredValue(key: "remote", default: 0, store: store)
        let queues = Mutex<[String]>([])
        withObservationTracking {
            _ = wrapper.wrappedValue
        } onChange: {
            queues.withLock { $0.append(Self.currentQueueLabel()) }
        }
        let announced = Mutex<[String]>([])
        let names = store.changedKeys(["remote", "sentinel"])
        let reader = Task { for await name in names { announced.withLock { $0.append(name) } } }
        defer { reader.cancel() }
        for (key, value) in [("remote", 7), ("sentinel", 1)] {
            let exit = try ChildProcess.run(["set-int", backend.spec(in: directory), key, String(value)])
            #expect(exit.status == 0, "\(exit)")
            try await eventually("\(key) to be announced") { announced.withLock { $0.contains(key) } }
        }
        #expect(wrapper.wrappedValue == 7)
        #expect(queues.withLock { $0 } == ["Prefs.StoreEngine"])
        #expect(announced.withLock { $0 } == ["remote", "sentinel"])
    }

    /// The label of the Dispatch queue running the caller (`dispatch_queue_get_label(NULL)`, which Swift does not
    /// import).
    private static func currentQueueLabel() -> String {
        typealias Label = @convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "dispatch_queue_get_label") else {
            return "no dispatch_queue_get_label"
        }
        return unsafeBitCast(symbol, to: Label.self)(nil).map { String(cString: $0) } ?? "no queue"
    }

    @Test(arguments: Backend.allCases)
    func declaringAWrapperAnnouncesNothing(_ backend: Backend) async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try backend.open(in: directory)
        let declared = uniqueKey("declared")
        let written = uniqueKey("written")
        let stream = store.changedKeys()
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

    /// Ported from StateGraph's `publicationRunsAfterCoordinatorUnlocks`: an observer of one key waits for a write
    /// of another key made on another thread (a "save, then refresh" observer). That write is delivered on its own
    /// thread before it returns, while the first observer still runs; so is a write that changes nothing.
    @Test(arguments: Backend.allCases)
    func anObserverOfOneKeyDoesNotHoldUpAWriteOfAnother(_ backend: Backend) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try backend.open(in: directory)
        let watched = StoredValue(key: uniqueKey("watched"), default: 0, store: store)
        let saved = StoredValue(key: uniqueKey("saved"), default: 0, store: store)
        saved.set(5)
        let savedObserved = Atomic(false)
        let outcome = Mutex<[String]>([])
        withObservationTracking {
            _ = watched.wrappedValue
        } onChange: {
            withObservationTracking {
                _ = saved.wrappedValue
            } onChange: {
                savedObserved.store(true, ordering: .sequentiallyConsistent)
            }
            for (label, value) in [("change", 6), ("unchanged", 6)] {
                let done = DispatchSemaphore(value: 0)
                let thread = Thread {
                    saved.set(value)
                    let seen = savedObserved.load(ordering: .sequentiallyConsistent)
                    outcome.withLock { $0.append("\(label) returned, observed: \(seen)") }
                    done.signal()
                }
                thread.start()
                // A hang guard: the write should not wait for this observer at all.
                if done.wait(timeout: .now() + 30) == .timedOut {
                    outcome.withLock { $0.append("\(label) still waiting after 30 s") }
                }
            }
        }
        watched.set(1)
        #expect(
            outcome.withLock { $0 } == ["change returned, observed: true", "unchanged returned, observed: true"],
            "the write of another key returned before its observer ran, or never")
        #expect(saved.wrappedValue == 6)
    }
}
