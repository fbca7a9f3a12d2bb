extension KeyValueStore {
    /// `try SuiteFileStore.standard.importValues(from: try SuiteFileStore(suiteName: "MyApp"))` copies the
    /// values of another store that this one does not hold a value of its own for, in one batch, and returns the
    /// keys it copied.
    ///
    /// For moving old values once, for example from the domain `UserDefaults.standard` kept before
    /// ``PrefsConfiguration/appIdentifier`` was set. Values this store already holds are kept; `other` is not changed.
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
