import Foundation
import Synchronization

/// The in-memory stores that stand in for `UserDefaults` instances given to `storage:` in one isolated test: one
/// per suite name, as real instances of one suite share their values, so wrappers given instances of the same suite
/// share values; the instances themselves are never read or written.
package final class UserDefaultsStandIns: Sendable {
    private final class Held: @unchecked Sendable {
        // @unchecked Sendable: the instance is only kept alive (so its identifier is not reused), never used.
        let instance: AnyObject
        let store: InMemoryStore
        init(_ instance: AnyObject) {
            self.instance = instance
            store = InMemoryStore()
        }
    }

    private let stores = Mutex<[String: Held]>([:])

    package init() {}

    func store(for defaults: UserDefaults) -> InMemoryStore {
        // Where the suite name cannot be found (Foundation on Apple platforms keeps it out of reach), the instance.
        let name = Self.suiteName(of: defaults).map { "suite " + $0 } ?? "instance \(ObjectIdentifier(defaults))"
        let held = Held(defaults)
        return stores.withLock { stores in
            if let existing = stores[name] { return existing.store }
            stores[name] = held
            return held.store
        }
    }

    /// The suite name `defaults` was made with, as swift-corelibs-foundation keeps it (its stored `suite`).
    static func suiteName(of defaults: UserDefaults) -> String? {
        Mirror(reflecting: defaults).children.first { $0.label == "suite" }?.value as? String
    }

    /// Whether `defaults` was made without a suite name (`UserDefaults()`): the app's standard domain.
    static func isStandardDomain(_ defaults: UserDefaults) -> Bool {
        guard let suite = Mirror(reflecting: defaults).children.first(where: { $0.label == "suite" })?.value else {
            return false
        }
        return (suite as? String?) == .some(nil)
    }
}
