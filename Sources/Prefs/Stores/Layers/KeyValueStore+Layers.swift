import Synchronization

/// A store whose reads are served from a ``LayerStack``: every store Prefs ships.
protocol LayeredStore: KeyValueStore {
    var layers: StoreLayers { get }
}

extension FileBackedStore: LayeredStore {
    var layers: StoreLayers { engine.layers }
}

extension InMemoryStore: LayeredStore {}

extension KeyValueStore {
    /// The layers of a store that keeps its own (a ``LayeredStore``), found by class rather than by a cast to the
    /// protocol: the first cast of a type to a protocol searches every conformance record of every loaded library,
    /// which cost about a millisecond at an app's launch.
    var ownLayers: StoreLayers? {
        if let store = self as? FileBackedStore { return store.layers }
        if let store = self as? InMemoryStore { return store.layers }
        return nil
    }
}

extension LayeredStore {
    func add(_ source: LayerSource) {
        switch source {
        case .arguments: layers.enableArguments()
        case .environment(let prefix): layers.enableEnvironment(prefix: prefix)
        case .systemFiles(let domain, let folders):
            layers.enableSystem(domain: domain, folders: folders ?? Locations.current.configDirs)
        }
    }
}

extension FileBackedStore {
    /// `store.addLayer(.arguments)` makes this store read values from another layer too, for this process.
    ///
    /// ``UserDefaultsStore`` has the arguments and system-wide files of its domain from the start; a ``FileStore``
    /// has only registered defaults until it adds others. Adding a source twice does nothing.
    public func addLayer(_ source: LayerSource) { add(source) }

    /// `store.values(in: .managed)` returns the values one layer holds, whether or not a stronger layer hides them:
    /// for tools that explain where values come from. `.user` gives the same as ``allValues()``.
    public func values(in layer: PreferenceLayer) -> [String: PrefValue] { layers.values(of: layer) }
}

extension InMemoryStore {
    /// `store.addLayer(.environment(prefix: "MYAPP_"))` makes this store read values from another layer too.
    ///
    /// An `InMemoryStore` starts with registered defaults only. Adding a source twice does nothing.
    public func addLayer(_ source: LayerSource) { add(source) }
}

extension FileBackedStore {
    /// `store.register(defaults: ["volume": .int(5)])` registers defaults for this process in the store's
    /// registered-defaults layer, which ``value(forKey:)`` reads too; see ``KeyValueStore/register(defaults:)``.
    public func register(defaults: [String: PrefValue]) { layers.register(defaults) }

    /// `store.registeredDefault(forKey: "volume")` is the value of the key in the registered-defaults layer, or nil.
    public func registeredDefault(forKey key: String) -> PrefValue? { layers.values(of: .registered)[key] }
}

extension InMemoryStore {
    /// `store.register(defaults: ["volume": .int(5)])` registers defaults for this process in the store's
    /// registered-defaults layer, which ``value(forKey:)`` reads too; see ``KeyValueStore/register(defaults:)``.
    public func register(defaults: [String: PrefValue]) { layers.register(defaults) }

    /// `store.registeredDefault(forKey: "volume")` is the value of the key in the registered-defaults layer, or nil.
    public func registeredDefault(forKey key: String) -> PrefValue? { layers.values(of: .registered)[key] }
}

extension KeyValueStore {
    /// `store.register(.fontSize)` registers a typed key's default, as a wrapper declaring the key does.
    public func register<Value>(_ key: PrefKey<Value>) {
        registerDeclared(key.name, default: key.defaultSource, codec: key.codec, describe: key.describe)
    }

    /// `store.layer(ofKey: "volume")` says which layer the key's value comes from (`.user`, `.arguments`,
    /// `.managed`, …), or nil when no layer holds it. A custom store reports `.user` for the values it holds.
    public func layer(ofKey key: String) -> PreferenceLayer? {
        if let layers = ownLayers { return layers.origin(of: key) }
        if (try? value(forKey: key)) != nil { return .user }
        return registeredDefault(forKey: key) == nil ? nil : .registered
    }

    /// `store.isForced("volume")` is true when an administrator forced the key's value: writes of it throw
    /// ``PrefsError/forced(key:)``.
    public func isForced(_ key: String) -> Bool { layer(ofKey: key) == .managed }

    /// Registers a declaration's default, keeping a default registered earlier (the first declaration wins), and in a
    /// domain of the preferences folder records the key for its published schema (`describe` runs only then). A
    /// computed default is never registered: it is computed when it is read.
    func registerDeclared<Value>(
        _ key: String, default source: DefaultSource<Value>, codec: ValueCodec<Value>,
        describe: (@Sendable () -> KeyDescription)? = nil
    ) {
        if let describe, let domain = (self as? UserDefaultsStore)?.schemaDomain {
            DeclaredKeys.record(key, in: domain, describe)
        }
        guard case .fixed(let defaultValue) = source,
            let encoded = (try? codec.encode(defaultValue, key: key)) ?? nil
        else { return }
        if let layers = ownLayers {
            layers.register([key: encoded], keepingExisting: true)
        } else if registeredDefault(forKey: key) == nil {
            // Beside the store's feed, where the default `registeredDefault(forKey:)` reads it. A declaration
            // announces nothing (see `StoreLayers.register`): cached reads only decode again.
            let added = changes.registeredDefaults.withLock { registered in
                guard registered[key] == nil else { return false }
                registered[key] = encoded
                return true
            }
            if added { changes.invalidate([key]) }
        }
    }

    /// The effective value a typed read starts from: the store's value, or for a custom store the default
    /// registered with it (a layered store's value already is the effective one).
    func effectiveValue(forKey key: String) throws -> PrefValue? {
        if let stored = try value(forKey: key) { return stored }
        if ownLayers != nil { return nil }
        return registeredDefault(forKey: key)
    }

    /// Decodes an effective value for a typed read. In a UserDefaults domain every value (stored, registered,
    /// argument, environment) that does not decode as it is gets converted as Foundation's typed getters convert it
    /// (``FoundationBridge/candidates(for:)``: "3" for an Int, "YES" for a Bool, 1 for a Bool); in any store, so does
    /// text from the command line or the environment. Returns nil when the value is a default registered by a
    /// declaration of another type, so this declaration's own default applies.
    func decodeEffective<Value>(_ stored: PrefValue, key: String, codec: ValueCodec<Value>) throws(PrefsError)
        -> Value?
    {
        var origin: PreferenceLayer??
        func layer() -> PreferenceLayer? {
            if let origin { return origin }
            let found = self.layer(ofKey: key)
            origin = .some(found)
            return found
        }
        do {
            return try codec.decodeConverting(stored) {
                if self is UserDefaultsStore || self is FoundationUserDefaultsStore { return true }
                guard case .string = stored else { return false }
                return layer()?.isText == true
            }
        } catch {
            if layer() == .registered { return nil }
            throw ValueCodec<Value>.prefsError(error, key: key)
        }
    }
}

extension ValueCodec {
    /// `stored` decoded; when it does not decode and `converts()` says so, the first of Foundation's readings of it
    /// that decodes (``FoundationBridge/candidates(for:)``). Throws the error of `stored` itself, unless a reading
    /// decoded to a value the key does not allow: that refusal is the closer cause (`-fontSize 73` is a number
    /// outside the range, not text that is not a number). The read of the app and the check of `prefs` alike.
    func decodeConverting(_ stored: PrefValue, converts: () -> Bool) throws -> Value {
        do {
            return try decode(stored)
        } catch {
            guard converts() else { throw error }
            var refusal: (any Error)?
            for candidate in FoundationBridge.candidates(for: stored) {
                do {
                    return try decode(candidate)
                } catch let candidateError {
                    if refusal == nil, case .notAllowed? = candidateError as? PrefsError { refusal = candidateError }
                }
            }
            throw refusal ?? error
        }
    }
}
