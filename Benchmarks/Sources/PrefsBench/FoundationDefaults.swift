import Foundation
import Prefs

/// The store over a Foundation `UserDefaults` instance (issue 24) beside `UserDefaults` itself: what reading and
/// writing through Prefs costs where old code shares the domain.
func foundationDefaultsScenarios(folders: Folders) -> [Scenario] {
    [
        Scenario(
            name: "foundation_store_read_vs_userdefaults", target: 3.0,
            ours: "wrapper read through UserDefaultsBridgeStore, 10-key suite",
            baseline: "UserDefaults.object(forKey:) as? Int, same suite"
        ) { budget in
            let (defaults, store) = foundationSuite("bench-foundation-read")
            let value = StoredValue(key: "key-0", default: 0, store: store)
            return try await compare(
                ours: reading { value.wrappedValue },
                baseline: reading { defaults.object(forKey: "key-0") as? Int ?? 0 }, budget: budget)
        },
        Scenario(
            name: "foundation_store_set_vs_userdefaults", target: 1.5,
            ours: "wrapper set through UserDefaultsBridgeStore (set + synchronize), 10-key suite",
            baseline: "UserDefaults.set + synchronize(), same suite"
        ) { budget in
            let (defaults, store) = foundationSuite("bench-foundation-set")
            let value = StoredValue(key: "key-0", default: 0, store: store)
            return try await compareDurableWrites(value, defaults, key: "key-0", budget: budget)
        },
    ]
}

/// A suite of ten integer keys in the scratch folder, and the store over its instance.
private func foundationSuite(_ name: String) -> (UserDefaults, UserDefaultsBridgeStore) {
    let defaults = UserDefaults(suiteName: name)!
    for index in 0..<10 { defaults.set(index, forKey: "key-\(index)") }
    defaults.synchronize()
    return (defaults, UserDefaultsBridgeStore(defaults))
}
