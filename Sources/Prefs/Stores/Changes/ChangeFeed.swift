import Foundation
import Observation
import Synchronization

/// `store.changes` announces which keys of a store changed, whoever changed them.
///
/// Every ``KeyValueStore`` owns one feed. Stores call ``publish(changedKeys:)`` after each change; property
/// wrappers, `values` streams and Observation tracking all listen here, so a write through one wrapper, a direct
/// store write and a change made by another process reach every observer alike.
///
/// Watch several keys at once, for example on a settings screen:
///
/// ```swift
/// for await key in store.changes.keys(["theme", "fontSize"]) {
///     print("\(key) changed")
/// }
/// ```
public final class ChangeFeed: Sendable {
    private struct State {
        var cells: [String: KeyCell] = [:]
        var keySubscribers: [UInt64: KeySubscriber] = [:]
        var nextToken: UInt64 = 0
    }

    private struct KeySubscriber {
        let filter: Set<String>?
        let continuation: AsyncStream<String>.Continuation
    }

    private let state = Mutex(State())
    /// Serialises the default read-modify-write of custom stores; see `ChangeFeed+UpdateLock.swift`.
    let updateLock = NSRecursiveLock()

    /// `let changes = ChangeFeed()` creates the feed a custom store exposes as ``KeyValueStore/changes``.
    public init() {}

    deinit {
        // Failures reported about this store are keyed by its feed; a later store must not inherit them.
        ErrorReporter.forgetIncidents(of: self)
    }

    /// `changes.publish(changedKeys: ["theme"])` tells every observer that these keys now hold new values.
    ///
    /// Call it after the change is visible through ``KeyValueStore/value(forKey:)`` and after releasing your own
    /// locks: observers may read or write preferences from inside their callbacks.
    public func publish(changedKeys: some Sequence<String>) {
        let keys = Array(changedKeys)
        guard !keys.isEmpty else { return }
        let (cells, subscribers) = state.withLock { state in
            (keys.compactMap { state.cells[$0] }, Array(state.keySubscribers.values))
        }
        for cell in cells { cell.didChange() }
        for subscriber in subscribers {
            for key in keys where subscriber.filter?.contains(key) ?? true {
                subscriber.continuation.yield(key)
            }
        }
    }

    /// `for await key in store.changes.keys(["a", "b"])` yields the name of each of these keys as it changes.
    ///
    /// - Parameter keys: The keys to watch; `nil` watches every key of the store.
    /// - Returns: A stream that ends when the task iterating it is cancelled.
    public func keys(_ keys: Set<String>? = nil) -> AsyncStream<String> {
        let (stream, continuation) = AsyncStream.makeStream(of: String.self)
        let token = state.withLock { state in
            state.nextToken += 1
            state.keySubscribers[state.nextToken] = KeySubscriber(filter: keys, continuation: continuation)
            return state.nextToken
        }
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { _ = $0.keySubscribers.removeValue(forKey: token) }
        }
        return stream
    }

    /// The shared per-key state that wrappers of the same key and store use to agree.
    func cell(for key: String) -> KeyCell {
        state.withLock { state in
            if let cell = state.cells[key] { return cell }
            let cell = KeyCell(key: key)
            state.cells[key] = cell
            return cell
        }
    }

    /// The number of live `keys(_:)` subscribers, for leak tests.
    var keySubscriberCount: Int { state.withLock { $0.keySubscribers.count } }
}
