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
    private let updateLock = NSRecursiveLock()

    /// `let changes = ChangeFeed()` creates the feed a custom store exposes as ``KeyValueStore/changes``.
    public init() {}

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

    /// Runs `body` while holding the lock that serialises read-modify-write updates of a custom store.
    func withUpdateLock<T>(_ body: () throws -> T) rethrows -> T {
        updateLock.lock()
        defer { updateLock.unlock() }
        return try body()
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

/// One key of one store: a version counter bumped on every change, the Observation registrar that lets
/// `withObservationTracking` see reads of this key, and the listeners that feed `values` streams.
final class KeyCell: Observable, Sendable {
    let key: String
    private let versionCounter = Atomic<UInt64>(1)
    private let registrar = ObservationRegistrar()
    private let listeners = Mutex<[ObjectIdentifier: @Sendable () -> Void]>([:])
    // Key paths are immutable; the stored one only avoids re-forming it on every read.
    nonisolated(unsafe) private static let versionPath: KeyPath<KeyCell, UInt64> = \KeyCell.version

    init(key: String) { self.key = key }

    /// Increases with every change of the key's value; starts at 1.
    var version: UInt64 { versionCounter.load(ordering: .acquiring) }

    /// Tells Observation that the current tracking scope read this key.
    func trackAccess() { registrar.access(self, keyPath: Self.versionPath) }

    func didChange() {
        versionCounter.add(1, ordering: .releasing)
        registrar.withMutation(of: self, keyPath: Self.versionPath) {}
        for listener in listeners.withLock({ Array($0.values) }) { listener() }
    }

    func addListener(_ owner: ObjectIdentifier, _ listener: @escaping @Sendable () -> Void) {
        listeners.withLock { $0[owner] = listener }
    }

    func removeListener(_ owner: ObjectIdentifier) {
        listeners.withLock { _ = $0.removeValue(forKey: owner) }
    }

    var listenerCount: Int { listeners.withLock { $0.count } }
}
