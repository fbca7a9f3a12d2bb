/// The layers of one store merged into the snapshot reads are served from: a pure value, tested without files.
///
/// The user's values (the store's own) sit between the layers that override them (managed, arguments,
/// environment) and the defaults below them (system-wide, registered). Each change of a layer re-resolves only
/// the keys it touched, and reports the keys whose effective value or origin changed, so a store announces
/// exactly those. Reads are one lookup in ``effective``; no layer is consulted per read.
struct LayerStack: Sendable {
    /// Each layer's values, strongest first (``PreferenceLayer/order``); the `.user` slot mirrors what the store
    /// keeps. An array rather than a dictionary keyed by layer, so resolving a key hashes nothing but the key.
    private var slots = [[String: PrefValue]](repeating: [:], count: PreferenceLayer.allCases.count)
    /// What each key reads as: the value of the strongest layer that holds it.
    private(set) var effective: [String: PrefValue] = [:]
    /// The layer of each effective value that does not come from `.user`; a key missing here is the user's.
    private(set) var origins: [String: PreferenceLayer] = [:]
    /// The user's own values: a mirror of what the store keeps.
    var user: [String: PrefValue] { slots[PreferenceLayer.user.order] }

    /// The values one layer holds.
    func values(of layer: PreferenceLayer) -> [String: PrefValue] { layer == .user ? user : slots[layer.order] }

    /// What `key` reads as.
    func value(forKey key: String) -> PrefValue? { effective[key] }

    /// Whether any layer besides the user's holds a value; while none does, ``effective`` is ``user`` itself.
    var hasOtherLayers: Bool {
        slots.indices.contains { $0 != PreferenceLayer.user.order && !slots[$0].isEmpty }
    }

    /// The layer `key`'s effective value comes from, or nil when no layer holds it.
    func origin(of key: String) -> PreferenceLayer? {
        if let origin = origins[key] { return origin }
        return value(forKey: key) == nil ? nil : .user
    }

    /// The value `key` would read as without the user's value and the layers above it: the system-wide default,
    /// else the registered one. What a read-modify-write starts from when the user has no value.
    func valueBelowUser(_ key: String) -> PrefValue? {
        slots[PreferenceLayer.systemDefaults.order][key] ?? slots[PreferenceLayer.registered.order][key]
    }

    /// The value and origin `key` resolves to.
    func resolve(_ key: String) -> (value: PrefValue, layer: PreferenceLayer)? {
        for index in slots.indices {
            if let value = slots[index][key] { return (value, PreferenceLayer.byOrder[index]) }
        }
        return nil
    }

    /// Replaces one read-only layer; returns the keys whose effective value or origin changed.
    mutating func setLayer(_ layer: PreferenceLayer, _ values: [String: PrefValue]) -> Set<String> {
        precondition(layer != .user, "the user's values change through setUser")
        let old = slots[layer.order]
        guard old != values else { return [] }
        slots[layer.order] = values
        var touched = Set(values.keys)
        for (key, value) in old where values[key] != value { touched.insert(key) }
        return reresolve(touched)
    }

    /// Adds values to one read-only layer, keeping its other keys; returns the keys whose effective value changed.
    mutating func merge(into layer: PreferenceLayer, _ values: [String: PrefValue]) -> Set<String> {
        setLayer(layer, slots[layer.order].merging(values) { _, new in new })
    }

    /// Sets (or with nil removes) one user value; returns whether the key's effective value or origin changed.
    @discardableResult
    mutating func setUser(_ key: String, _ value: PrefValue?) -> Bool {
        let slot = PreferenceLayer.user.order
        guard slots[slot][key] != value else { return false }
        slots[slot][key] = value
        // The only layer: the effective value is the user's (the common case, kept free of set building).
        if !hasOtherLayers {
            effective[key] = value
            return true
        }
        return !reresolve([key]).isEmpty
    }

    /// Whether an administrator forced `key`.
    func isForced(_ key: String) -> Bool {
        let managed = slots[PreferenceLayer.managed.order]
        return !managed.isEmpty && managed[key] != nil
    }

    /// Replaces every user value (a reload or a whole-file write); returns the keys whose effective value or origin
    /// changed (unless not `reporting`, when the caller announces nothing and the result may be empty).
    mutating func replaceUser(_ values: [String: PrefValue], reporting: Bool = true) -> Set<String> {
        let old = user
        slots[PreferenceLayer.user.order] = values
        if !hasOtherLayers {
            // Nothing to merge: the user's values are the effective ones (the same storage, no copy).
            effective = values
            origins = [:]
            return reporting ? Self.diff(old, values) : []
        }
        return reresolve(Self.diff(old, values))
    }

    private mutating func reresolve(_ keys: Set<String>) -> Set<String> {
        var changed = Set<String>()
        for key in keys {
            let resolved = resolve(key)
            let oldOrigin = origin(of: key)
            if value(forKey: key) != resolved?.value || oldOrigin != resolved?.layer { changed.insert(key) }
            effective[key] = resolved?.value
            origins[key] = resolved.flatMap { $0.layer == .user ? nil : $0.layer }
        }
        return changed
    }

    /// The keys whose values differ between two dictionaries.
    static func diff(_ old: [String: PrefValue], _ new: [String: PrefValue]) -> Set<String> {
        var changed = Set<String>()
        for (key, value) in old where new[key] != value { changed.insert(key) }
        for key in new.keys where old[key] == nil { changed.insert(key) }
        return changed
    }
}
