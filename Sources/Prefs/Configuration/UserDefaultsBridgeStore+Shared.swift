import Foundation
import Synchronization

extension UserDefaultsBridgeStore {
    /// One store of the process's registry (``DefaultStores/State/foundationStores``).
    final class Registered: Sendable {
        // Set once, in `init`: `weak let` says so, but Swift 6.2.0 to 6.2.2 reject it.
        nonisolated(unsafe) private(set) weak var store: UserDefaultsBridgeStore?
        init(_ store: UserDefaultsBridgeStore) { self.store = store }
    }

    /// The one store over `defaults` that wrappers share, created on first use. A store keeps its instance alive,
    /// so an instance's identifier is not reused while its store lives.
    static func shared(over defaults: UserDefaults) -> UserDefaultsBridgeStore {
        let id = ObjectIdentifier(defaults)
        if let existing = DefaultStores.state.withLock({ $0.foundationStores[id]?.store }) { return existing }
        let created = UserDefaultsBridgeStore(defaults)
        return DefaultStores.state.withLock { state in
            if let existing = state.foundationStores[id]?.store { return existing }
            state.foundationStores = state.foundationStores.filter { $0.value.store != nil }
            state.foundationStores[id] = Registered(created)
            return created
        }
    }
}
