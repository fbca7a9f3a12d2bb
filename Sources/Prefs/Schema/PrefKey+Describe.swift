import Foundation

extension PrefKey {
    /// The key as its published schema describes it: made only when a schema is published, since naming types,
    /// listing an enum's cases and deriving a type's shape cost more than declaring a key should.
    func describe() -> KeyDescription {
        let codec = uncheckedCodec
        // A computed default is not called here: the shape is described from the type alone.
        let fixed = fixedDefault
        let stored = fixed.flatMap { (try? codec.encode($0)) ?? nil }
        var allowed = declaredSchema.allowedValues(codec)
        if allowed == nil, let cases = EnumCases.of(Value.self) {
            allowed = .choices(cases.compactMap { (try? codec.encode($0)) ?? nil })
        }
        let ruleType: String? =
            switch allowed {
            case .range(let lower, _): lower.typeName
            case .choices(let choices): choices.first?.typeName
            case nil: nil
            }
        let shape = ShapeDerivation.shape(of: Value.self, route: codec.route, default: fixed)
        let kind = codec.route.form == .json ? "string" : StoredKind.name(of: Value.self)
        return KeyDescription(
            type: stored?.typeName ?? ruleType ?? kind, defaultValue: stored,
            summary: declaredSchema.summary, allowed: allowed, route: codec.route, shape: shape,
            isComputed: computeDefault != nil)
    }
}

/// The cases of a `CaseIterable` type (or of the type an optional wraps), found from the type at run time.
private enum EnumCases {
    static func of<Value>(_ type: Value.Type) -> [Value]? {
        if let iterable = type as? any CaseIterable.Type { return all(iterable).compactMap { $0 as? Value } }
        if let optional = type as? any OptionalValue.Type { return wrapped(optional) as? [Value] }
        return nil
    }

    private static func all<T: CaseIterable>(_: T.Type) -> [Any] { T.allCases.map { $0 } }

    private static func wrapped<O: OptionalValue>(_: O.Type) -> [O]? {
        guard let iterable = O.Wrapped.self as? any CaseIterable.Type else { return nil }
        return all(iterable).map { O(asOptional: $0 as? O.Wrapped) }
    }
}

/// The stored form's type name of a type without a value to look at (an optional key whose default is nil).
private enum StoredKind {
    static func name(of type: Any.Type) -> String? {
        if let optional = type as? any OptionalValue.Type { return wrappedName(optional) }
        if type == Bool.self { return "bool" }
        if type is any BinaryInteger.Type { return "int" }
        if type == Float.self { return "float" }
        if type is any BinaryFloatingPoint.Type { return "double" }
        if type == String.self || type == URL.self { return "string" }
        if type == Data.self { return "data" }
        if type == Date.self { return "date" }
        if let raw = type as? any RawRepresentable.Type { return rawName(raw) }
        return nil
    }

    private static func wrappedName<O: OptionalValue>(_: O.Type) -> String? { name(of: O.Wrapped.self) }
    private static func rawName<R: RawRepresentable>(_: R.Type) -> String? { name(of: R.RawValue.self) }
}
