/// The read-only layers of one store, and how a key resolves through them: a pure value, tested without files.
///
/// The user's values are not here: the store keeps them, once, and passes a key's own value in when it resolves
/// the key. The layers that override it (managed, arguments, environment) are consulted before it, the defaults
/// (system-wide, registered) after it.
struct LayerStack: Sendable {
    /// Each read-only layer's values, strongest first (``PreferenceLayer/order``); the `.user` slot stays empty. An
    /// array rather than a dictionary keyed by layer, so resolving a key hashes nothing but the key.
    private var slots = [[String: PrefValue]](repeating: [:], count: PreferenceLayer.allCases.count)

    /// Whether no layer holds anything, so every key reads as the user's own value.
    private(set) var isEmpty = true

    /// The values one read-only layer holds.
    func values(of layer: PreferenceLayer) -> [String: PrefValue] { slots[layer.order] }

    /// The value and layer `key` resolves to, given the user's own value of it.
    func resolve(_ key: String, user: PrefValue?) -> (value: PrefValue, layer: PreferenceLayer)? {
        if isEmpty { return user.map { ($0, .user) } }
        for index in slots.indices {
            if index == PreferenceLayer.user.order {
                if let user { return (user, .user) }
            } else if let value = slots[index][key] {
                return (value, PreferenceLayer.byOrder[index])
            }
        }
        return nil
    }

    /// What `key` reads as, given the user's own value of it.
    func value(forKey key: String, user: PrefValue?) -> PrefValue? {
        isEmpty ? user : resolve(key, user: user)?.value
    }

    /// The value `key` would read as without the user's value and the layers above it: the system-wide default,
    /// else the registered one. What a read-modify-write starts from when the user has no value.
    func valueBelowUser(_ key: String) -> PrefValue? {
        slots[PreferenceLayer.systemDefaults.order][key] ?? slots[PreferenceLayer.registered.order][key]
    }

    /// Whether an administrator forced `key`.
    func isForced(_ key: String) -> Bool { slots[PreferenceLayer.managed.order][key] != nil }

    /// Replaces one read-only layer; returns the keys whose value in that layer changed.
    mutating func setLayer(_ layer: PreferenceLayer, _ values: [String: PrefValue]) -> Set<String> {
        precondition(layer != .user, "the store keeps the user's values")
        let old = slots[layer.order]
        guard old != values else { return [] }
        slots[layer.order] = values
        isEmpty = slots.allSatisfy(\.isEmpty)
        var touched = Set<String>()
        for (key, value) in old where values[key] != value { touched.insert(key) }
        for key in values.keys where old[key] == nil { touched.insert(key) }
        return touched
    }

    /// Adds `value` under `key` to one read-only layer where it has none; returns whether it was added. In place:
    /// a declaration costs the same however many keys the layer holds.
    mutating func insertIfAbsent(_ value: PrefValue, forKey key: String, in layer: PreferenceLayer) -> Bool {
        precondition(layer != .user, "the store keeps the user's values")
        guard slots[layer.order][key] == nil else { return false }
        slots[layer.order][key] = value
        isEmpty = false
        return true
    }

    /// Adds values to one read-only layer, keeping its other keys; returns the keys whose value in it changed.
    mutating func merge(into layer: PreferenceLayer, _ values: [String: PrefValue]) -> Set<String> {
        setLayer(layer, slots[layer.order].merging(values) { _, new in new })
    }

    /// Of `keys`, those whose effective value or layer differs between `old` and `new`, given the user's values.
    static func changes(
        from old: LayerStack, to new: LayerStack, in keys: Set<String>, user: (String) -> PrefValue?
    ) -> Set<String> {
        keys.filter { key in
            let own = user(key)
            let before = old.resolve(key, user: own)
            let after = new.resolve(key, user: own)
            return before?.value != after?.value || before?.layer != after?.layer
        }
    }
}
