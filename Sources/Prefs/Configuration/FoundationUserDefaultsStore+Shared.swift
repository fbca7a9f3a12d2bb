import Foundation
import Synchronization

extension FoundationUserDefaultsStore {
    private final class Entry: Sendable {
        weak let store: FoundationUserDefaultsStore?
        init(_ store: FoundationUserDefaultsStore) { self.store = store }
    }

    /// The live stores by instance. A store keeps its instance alive, so an identifier is not reused while its
    /// store lives.
    private static let registry = Mutex<[ObjectIdentifier: Entry]>([:])

    /// The one store over `defaults` that wrappers share, created on first use.
    static func shared(over defaults: UserDefaults) -> FoundationUserDefaultsStore {
        let id = ObjectIdentifier(defaults)
        if let existing = registry.withLock({ $0[id]?.store }) { return existing }
        let created = FoundationUserDefaultsStore(defaults)
        return registry.withLock { registry in
            if let existing = registry[id]?.store { return existing }
            registry = registry.filter { $0.value.store != nil }
            registry[id] = Entry(created)
            return created
        }
    }
}
