import Synchronization

extension KeyValueStore {
    /// `store.addLayer(.arguments)` makes this store read values from another layer too, for this process.
    ///
    /// ``SuiteFileStore`` has the arguments and system-wide files of its domain from the start; every other
    /// store has only registered defaults until it adds others. Adding a source twice does nothing.
    public func addLayer(_ source: LayerSource) {
        switch source {
        case .arguments: hub.layers.enableArguments()
        case .environment(let prefix): hub.layers.enableEnvironment(prefix: prefix)
        case .systemFiles(let domain, let folders):
            hub.layers.enableSystem(domain: domain, folders: folders ?? Locations.current.configDirs)
        }
    }

    /// `store.allValues(in: .managed)` returns the values one layer holds, whether or not a stronger layer hides
    /// them: for tools that explain where values come from. `.user` gives the same as ``allValues()``.
    public func allValues(in layer: PreferenceLayer) throws -> [String: PrefValue] {
        if layer == .user { return try allValues() }
        return hub.layers.values(of: layer)
    }
}

extension KeyValueStore {
    /// `store.register(.fontSize)` registers a typed key's default, as a wrapper declaring the key does.
    public func register<Value>(_ key: PrefKey<Value>) {
        registerDeclared(key.name, default: key.defaultSource, codec: key.codec, describe: key.describe)
    }

    /// `store.layer(ofKey: "volume")` says which layer the key's value comes from (`.user`, `.arguments`,
    /// `.managed`, …), or nil when no layer holds it.
    public func layer(ofKey key: String) -> PreferenceLayer? {
        if hub.own?.resolvesLayers == true { return hub.layers.origin(of: key) }
        let held = (try? hub.stagedValue(forKey: key) ?? read(key)) != nil
        return hub.origin(of: key, holdsValue: held)
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
        if let describe, let domain = hub.own?.schemaDomain {
            DeclaredKeys.record(key, in: domain, describe)
        }
        guard case .fixed(let defaultValue) = source,
            let encoded = (try? codec.encode(defaultValue, key: key)) ?? nil
        else { return }
        hub.layers.register([key: encoded], keepingExisting: true)
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
                if hub.own?.convertsLikeFoundation == true { return true }
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
