import Foundation
import Synchronization

extension UserDefaultsStore {
    /// `UserDefaultsStore.standard` is this app's standard domain: `<app identifier>.plist` in the preferences
    /// folder, where the app identifier is ``PrefsConfig/appIdentifier`` (by default the process name, the file
    /// Foundation's `UserDefaults.standard` uses).
    ///
    /// It is opened on first use. If the file cannot be read (empty, corrupt, not a property list, a folder),
    /// the app still starts: the error is reported once to ``PrefsConfig/errorHandler``, reads return defaults,
    /// writes throw rather than replace the file, and the file is left untouched.
    ///
    /// On Apple platforms, where the system owns these files, it is not the default store: wrappers without
    /// `store:` use a ``FoundationUserDefaultsStore`` over `UserDefaults.standard` there.
    public static var standard: UserDefaultsStore { DefaultStores.standardFile }

    /// The store behind a `UserDefaults` instance, for the `@StoredValue(key:storage:)` form: the
    /// ``FoundationUserDefaultsStore`` over that very instance (one per instance, shared by every wrapper given
    /// it), or inside an isolated test (`.isolatedPreferences`) an in-memory stand-in for it.
    static func store(for defaults: UserDefaults) -> any KeyValueStore {
        if let standIns = DefaultStores.userDefaultsStandIns {
            // The standard domain (`.standard`, or an instance made without a suite name) is the test's store.
            let standardDomain = defaults === UserDefaults.standard || UserDefaultsStandIns.isStandardDomain(defaults)
            if standardDomain, let scoped = DefaultStores.scopedDefault?.store { return scoped }
            return standIns.store(for: defaults)
        }
        return FoundationUserDefaultsStore.shared(over: defaults)
    }
}

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

extension KeyValueStore {
    /// `try UserDefaultsStore.standard.importValues(from: try UserDefaultsStore(suiteName: "MyApp"))` copies the
    /// values of another store that this one does not hold a value of its own for, in one batch, and returns the
    /// keys it copied.
    ///
    /// For moving old values once, for example from the domain `UserDefaults.standard` kept before
    /// ``PrefsConfig/appIdentifier`` was set. Values this store already holds are kept; `other` is not changed.
    @discardableResult
    public func importValues(from other: any KeyValueStore) throws -> [String] {
        let values = try other.allValues()
        return try batch {
            var copied: [String] = []
            for (key, value) in values.sorted(by: { $0.key < $1.key }) where layer(ofKey: key) != .user {
                try setValue(value, forKey: key)
                copied.append(key)
            }
            return copied
        }
    }
}
