extension PrefMigration {
    /// Runs this migration of `key` in `store` if its older form is stored there and the key's current form is not.
    /// The conversion runs outside every lock; the write re-checks, inside one batch, that nothing changed meanwhile.
    func run(key: String, codec: ValueCodec<Value>, in store: any KeyValueStore) {
        let source = oldKey ?? key
        do {
            guard let stored = try store.layer(ofKey: source) == .user ? store.value(forKey: source) : nil else {
                return
            }
            if let oldKey {
                guard store.layer(ofKey: key) != .user, oldKey != key else { return }
            } else if (try? codec.decode(stored, key: key)) != nil {
                return
            }
            let converted = try codec.encode(try convert(stored, codec), key: key)
            let moved = try store.batch { () throws -> Bool in
                guard try store.value(forKey: source) == stored else { return false }
                if oldKey != nil, store.layer(ofKey: key) == .user { return false }
                try store.setValue(converted, forKey: key)
                if oldKey != nil { try store.removeValue(forKey: source) }
                return true
            }
            if moved {
                ErrorReporter.report(PrefsMigrationNotice(key: key, oldKey: source), key: key, operation: .migration)
            }
        } catch {
            ErrorReporter.report(error, key: key, operation: .migration)
        }
    }
}
