import Foundation

extension KeyDescription {
    /// What the app makes of a stored value of the key, as `prefs` tells from the published schema.
    package enum Reading: Sendable {
        /// The app reads it; the value it reads, in stored form (text from the command line read as a number is the
        /// number), or nil for an optional's nil.
        case reads(PrefValue?)
        /// The app cannot read it and reads the default in its place: where inside the value and why.
        case refused(ShapeMismatch)
        /// How the app reads the key cannot be described from outside (a type's own decoding), so `prefs` cannot
        /// tell; why.
        case unknown(String)
    }

    /// How the app reads `stored` for this key: through the same forms in the same order as its codec (its own form,
    /// other libraries' forms, missing fields filled from the default, Foundation's readings of text and numbers in
    /// a UserDefaults domain), with the key's shape standing in for its type, then what its schema allows.
    ///
    /// A schema published before Prefs described shapes has only the stored type: that alone is checked.
    package func read(_ stored: PrefValue) -> Reading {
        guard let route, let shape else {
            guard let problem = problem(with: stored) else { return .reads(stored) }
            return .refused(ShapeMismatch(path: "", reason: problem))
        }
        if let reason = shape.unknownReason { return .unknown(reason) }
        do {
            return .reads(try codec(route, shape).decodeConverting(stored) { true })
        } catch {
            if case .notAllowed? = error as? PrefsError, let allowed {
                return .refused(ShapeMismatch(path: "", reason: "is not allowed (\(allowed.text))"))
            }
            return .refused(ShapeMismatch(error))
        }
    }

    /// The codec the app's declaration composed, rebuilt from its route, with the shape reading JSON and native
    /// values, checking what the schema allows.
    private func codec(_ route: ReadRoute, _ shape: ValueShape) -> ValueCodec<PrefValue?> {
        let reader = shape.jsonReader
        var codec: ValueCodec<PrefValue>
        switch route.form {
        case .native, .rawValue:
            codec = ValueCodec(encode: { $0 }, decode: { try shape.readNative($0) }, route: ReadRoute(route.form))
        case .json:
            codec = ValueCodec(
                encode: { $0 },
                decode: { stored in
                    _ = try ForeignForms.decodeJSON(stored, reader)
                    return stored
                }, route: ReadRoute(.json))
        }
        if route.readsForeignForms { codec = codec.readingForeignForms(reader, hasNativeForm: route.form == .native) }
        if route.fillsMissingFields {
            let defaults = defaultJSON
            codec = codec.fillingMissingFields(reader) { defaults }
        }
        let optional = route.isOptional ? ValueCodec<PrefValue?>(wrapping: codec) : codec.map()
        let allowed = allowed
        let description = self
        return ValueCodec(
            encode: { $0 },
            decode: { stored in
                let value = try optional.decode(stored)
                if let value, let allowed, !allowed.allows(value), !description.isDefault(value) {
                    throw PrefsError.notAllowed(
                        key: "", value: AllowedValues.shown(value), allowed: allowed.text)
                }
                return value
            }, route: route)
    }

    /// The default's JSON, as the app encodes it to fill a stored object's missing fields.
    private var defaultJSON: Data? {
        switch defaultValue {
        case .string(let text)? where route?.form == .json: Data(text.utf8)
        case let value?:
            try? JSONSerialization.data(
                withJSONObject: ForeignForms.jsonObject(value, expandingJSONText: false), options: [.fragmentsAllowed])
        case nil: nil
        }
    }
}

extension ValueCodec where Value == PrefValue {
    /// This codec, its values optional.
    fileprivate func map() -> ValueCodec<PrefValue?> {
        ValueCodec<PrefValue?>(encode: { try $0.flatMap(encode) }, decode: { .some(try decode($0)) }, route: route)
    }
}
