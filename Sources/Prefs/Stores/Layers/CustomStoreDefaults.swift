import Synchronization

/// The defaults registered with custom stores, which have no layers of their own: used by typed reads and
/// wrappers, dropped when the store goes away.
enum CustomStoreDefaults {
    private final class Entry: Sendable {
        weak let feed: ChangeFeed?
        let values: Mutex<[String: PrefValue]>
        init(_ feed: ChangeFeed) {
            self.feed = feed
            values = Mutex([:])
        }
    }

    private static let entries = Mutex<[ObjectIdentifier: Entry]>([:])

    static func register(_ defaults: [String: PrefValue], in store: some KeyValueStore, keepingExisting: Bool) {
        let feed = store.changes
        let entry = entries.withLock { entries in
            if let entry = entries[ObjectIdentifier(feed)], entry.feed === feed { return entry }
            entries = entries.filter { $0.value.feed != nil }
            let entry = Entry(feed)
            entries[ObjectIdentifier(feed)] = entry
            return entry
        }
        let changed = entry.values.withLock { values in
            var changed: [String] = []
            for (key, value) in defaults where values[key] != value && !(keepingExisting && values[key] != nil) {
                values[key] = value
                changed.append(key)
            }
            return changed
        }
        // A declaration announces nothing (see `StoreLayers.register`); a registration does.
        if keepingExisting { feed.invalidate(Set(changed)) } else { feed.publish(changedKeys: changed) }
    }

    static func value(forKey key: String, in store: some KeyValueStore) -> PrefValue? {
        let feed = store.changes
        guard let entry = entries.withLock({ $0[ObjectIdentifier(feed)] }), entry.feed === feed else { return nil }
        return entry.values.withLock { $0[key] }
    }
}
