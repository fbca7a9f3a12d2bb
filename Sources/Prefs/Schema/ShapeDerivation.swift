import Foundation

/// Derives the ``ValueShape`` a declared type reads, when a schema is published (never when a key is declared).
///
/// - A type Prefs stores natively (`Int`, `[String]`, `[String: Date]`, …) is its own description.
/// - An enum with raw values lists them when it is `CaseIterable`; otherwise its values cannot be listed.
/// - Any other `Decodable` type is decoded once, from its default's JSON, by a decoder that records what the type
///   asks for: an object's members in order, each with `decode` (required) or `decodeIfPresent` (optional), and the
///   type of each; arrays, sets, dictionaries and optionals are described from their element types, so an empty
///   array of the default still says what it holds. A member absent from the default is described from a made-up
///   value of its type.
/// - The description is then checked against the type itself: the default's JSON, changed one place at a time (a
///   member removed or null, a value of the same kind and of another kind, an unknown member, an element added), is
///   decoded by the type and with the description, and any place where the two disagree (a custom `init(from:)`
///   that parses text, refuses unknown members, fills a missing member) makes the shape ``ValueShape/unknown(_:)``.
///   A shape is published only when the type read every such variant as the description says.
enum ShapeDerivation {
    /// The shape of a key's values as its codec reads them (`route`), described from `type` and its default.
    static func shape<Value>(of type: Value.Type, route: ReadRoute, default defaultValue: Value?) -> ValueShape {
        var base: Any.Type = type
        if route.isOptional, let optional = type as? any OptionalValue.Type { base = wrappedType(optional) }
        switch route.form {
        case .native:
            return nativeShape(base)
        case .rawValue:
            let shape = rawShape(base)
            // Its JSON forms (Defaults' quoted text) go through the type's own `init(from:)`.
            guard route.readsForeignForms, let decodable = base as? any Decodable.Type else { return shape }
            return verified(decodable, shape, sample: nil)
        case .json:
            guard let decodable = base as? any Decodable.Type else {
                return .unknown("\(base) is not Decodable")
            }
            let sample = defaultValue.flatMap { $0 as? any Encodable }.flatMap(jsonTree)
            return verified(decodable, Derivation().shape(decodable, sample: sample), sample: sample)
        }
    }

    /// A type Prefs stores natively, or unknown: a ``PrefValueConvertible`` type of the app's reads its stored form
    /// itself.
    static func nativeShape(_ type: Any.Type) -> ValueShape {
        if type == PrefValue.self { return .any }
        if let leaf = ValueShape.Leaf(type: type), leaf.nativeType != nil { return .leaf(leaf) }
        if let sequence = type as? any ShapeSequence.Type { return .array(nativeShape(sequence.elementType)) }
        if let dictionary = type as? any ShapeDictionary.Type, dictionary.keyType == String.self {
            return .dictionary(nativeShape(dictionary.valueType))
        }
        return .unknown("\(type) reads its stored form itself (PrefValueConvertible)")
    }

    /// The raw values of a `RawRepresentable` type that is `CaseIterable`, or unknown.
    static func rawShape(_ type: Any.Type) -> ValueShape {
        guard let iterable = type as? any (CaseIterable & RawRepresentable).Type else {
            return .unknown("\(type) is not CaseIterable, so the raw values it accepts cannot be listed")
        }
        return rawChoices(iterable)
    }

    private static func rawChoices<T: CaseIterable & RawRepresentable>(_: T.Type) -> ValueShape {
        guard let leaf = ValueShape.Leaf(type: T.RawValue.self) else {
            return .unknown("the raw values of \(T.self) are of type \(T.RawValue.self)")
        }
        let raws = T.allCases.compactMap { ($0.rawValue as? any PrefValueConvertible).flatMap { try? $0.prefValue } }
        return .choices(leaf, raws)
    }

    private static func wrappedType<O: OptionalValue>(_: O.Type) -> Any.Type { O.Wrapped.self }

    /// A value's JSON, as Prefs stores it, parsed into Foundation objects.
    static func jsonTree(_ value: any Encodable) -> Any? {
        guard let data = try? ForeignForms.encoder.encode(value) else { return nil }
        return try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
    }

    /// The most variants decoded to check a shape: far more than any settings type has places.
    static let variantLimit = 20_000

    /// `shape` when the type decodes every variant of `sample` (or of a made-up value) as the shape says; unknown,
    /// naming the first place where they disagree, otherwise.
    static func verified(_ type: any Decodable.Type, _ shape: ValueShape, sample: Any?) -> ValueShape {
        guard shape.unknownReason == nil else { return shape }
        return verifiedAs(type, shape, sample: sample)
    }

    private static func verifiedAs<T: Decodable>(_: T.Type, _ shape: ValueShape, sample: Any?) -> ValueShape {
        let base = sample ?? shape.sampleJSON
        let reader = shape.jsonReader
        let variants = [(base, "its default")] + shape.variants(of: base, at: "")
        for (tree, place) in variants.prefix(variantLimit) {
            guard let data = try? JSONSerialization.data(withJSONObject: tree, options: [.fragmentsAllowed]) else {
                continue
            }
            let read = (try? ForeignForms.decoder.decode(T.self, from: data)) != nil
            let described = (try? reader.read(data)) != nil
            if read != described {
                return .unknown(
                    "\(T.self) \(read ? "reads" : "refuses") \(place), which the members it decodes do not say "
                        + "(a decoding of its own, init(from:))")
            }
        }
        return shape
    }
}

/// `Array`, `ContiguousArray` and `Set`, seen without knowing their element type.
protocol ShapeSequence {
    static var elementType: Any.Type { get }
}

extension Array: ShapeSequence {
    static var elementType: Any.Type { Element.self }
}

extension ContiguousArray: ShapeSequence {
    static var elementType: Any.Type { Element.self }
}

extension Set: ShapeSequence {
    static var elementType: Any.Type { Element.self }
}

/// `Dictionary`, seen without knowing its key and value types.
protocol ShapeDictionary {
    static var keyType: Any.Type { get }
    static var valueType: Any.Type { get }
}

extension Dictionary: ShapeDictionary {
    static var keyType: Any.Type { Key.self }
    static var valueType: Any.Type { Value.self }
}

/// One derivation: the types being described, so a type that contains itself is said to, not followed forever.
private final class Derivation {
    private var inProgress: Set<ObjectIdentifier> = []

    func shape(_ type: any Decodable.Type, sample: Any?) -> ValueShape { shape(of: type, sample: sample) }

    func shape<T: Decodable>(of type: T.Type, sample: Any?) -> ValueShape {
        if let leaf = ValueShape.Leaf(type: T.self) { return .leaf(leaf) }
        if let optional = T.self as? any OptionalValue.Type {
            guard let wrapped = ShapeDerivation.wrappedDecodable(optional) else { return .unknown("\(T.self)") }
            return .optional(shape(wrapped, sample: sample is NSNull ? nil : sample))
        }
        if let sequence = T.self as? any ShapeSequence.Type, let element = sequence.elementType as? any Decodable.Type {
            return .array(shape(element, sample: (sample as? [Any])?.first))
        }
        if let dictionary = T.self as? any ShapeDictionary.Type {
            guard dictionary.keyType == String.self, let value = dictionary.valueType as? any Decodable.Type else {
                return .unknown("\(T.self) has keys of type \(dictionary.keyType), not String")
            }
            return .dictionary(shape(value, sample: (sample as? [String: Any])?.values.first))
        }
        if T.self is any RawRepresentable.Type { return ShapeDerivation.rawShape(T.self) }
        let identifier = ObjectIdentifier(T.self)
        guard inProgress.insert(identifier).inserted else { return .unknown("\(T.self) contains itself") }
        defer { inProgress.remove(identifier) }
        let recorder = TraceRecorder()
        do {
            _ = try T(from: TracingDecoder(sample: sample, recorder: recorder, derivation: self, type: "\(T.self)"))
        } catch let unsupported as TraceUnsupported {
            return .unknown(unsupported.reason)
        } catch {
            return .unknown("\(T.self) does not decode its own default (\(error))")
        }
        switch recorder.kind {
        case .keyed(let members)?: return .object(members)
        case .single(let shape)?: return shape
        case nil: return .unknown("\(T.self) decodes nothing")
        }
    }

    /// A value of `T` to hand back to the type being traced: decoded from its part of the default, else from a
    /// made-up value of its shape.
    func value<T: Decodable>(_: T.Type, sample: Any?, shape: ValueShape) throws -> T {
        let tree = sample ?? shape.sampleJSON
        guard let data = try? JSONSerialization.data(withJSONObject: tree, options: [.fragmentsAllowed]),
            let value = try? ForeignForms.decoder.decode(T.self, from: data)
        else {
            throw TraceUnsupported(reason: "no value of \(T.self) could be made to describe the type around it")
        }
        return value
    }
}

extension ShapeDerivation {
    fileprivate static func wrappedDecodable<O: OptionalValue>(_: O.Type) -> (any Decodable.Type)? {
        O.Wrapped.self as? any Decodable.Type
    }
}

/// What a traced type did that cannot be described.
private struct TraceUnsupported: Error {
    let reason: String
}

/// What a traced type asked its decoder for.
private final class TraceRecorder {
    enum Kind {
        case keyed([ValueShape.Member])
        case single(ValueShape)
    }

    var kind: Kind?

    func add(_ member: ValueShape.Member) {
        guard case .keyed(var members) = kind, !members.contains(where: { $0.name == member.name }) else { return }
        members.append(member)
        kind = .keyed(members)
    }
}

/// The decoder a traced type decodes itself from: its part of the default's JSON (or nothing), recording each
/// request.
private struct TracingDecoder: Decoder {
    let sample: Any?
    let recorder: TraceRecorder
    let derivation: Derivation
    let type: String
    var codingPath: [any CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy: Key.Type) throws -> KeyedDecodingContainer<Key> {
        switch recorder.kind {
        case nil: recorder.kind = .keyed([])
        case .keyed: break
        case .single: throw TraceUnsupported(reason: "\(type) decodes both a value and members")
        }
        if let sample, !(sample is [String: Any]) {
            throw TraceUnsupported(reason: "\(type) encodes its default as something other than the object it decodes")
        }
        return KeyedDecodingContainer(TracingKeyed<Key>(decoder: self, object: sample as? [String: Any]))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw TraceUnsupported(reason: "\(type) decodes a list of its own (init(from:) with an unkeyed container)")
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        guard recorder.kind == nil else {
            throw TraceUnsupported(reason: "\(type) decodes both members and a value")
        }
        return TracingSingle(decoder: self)
    }

    /// Records a value decoded here (the whole value, or a member), and hands back one.
    func decoded<T: Decodable>(_: T.Type, sample: Any?) throws -> (ValueShape, T) {
        let present = sample.flatMap { $0 is NSNull ? nil : $0 }
        let shape = derivation.shape(of: T.self, sample: present)
        return (shape, try derivation.value(T.self, sample: present, shape: shape))
    }
}

private struct TracingSingle: SingleValueDecodingContainer {
    let decoder: TracingDecoder
    var codingPath: [any CodingKey] { decoder.codingPath }

    func decodeNil() -> Bool { decoder.sample is NSNull }

    func decode<T: Decodable>(_: T.Type) throws -> T {
        if case .single? = decoder.recorder.kind {
            throw TraceUnsupported(reason: "\(decoder.type) decodes its value twice")
        }
        let (shape, value) = try decoder.decoded(T.self, sample: decoder.sample)
        decoder.recorder.kind = .single(shape)
        return value
    }

    func decode(_ type: Bool.Type) throws -> Bool { try generic(type) }
    func decode(_ type: String.Type) throws -> String { try generic(type) }
    func decode(_ type: Double.Type) throws -> Double { try generic(type) }
    func decode(_ type: Float.Type) throws -> Float { try generic(type) }
    func decode(_ type: Int.Type) throws -> Int { try generic(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try generic(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try generic(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try generic(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try generic(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try generic(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try generic(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try generic(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try generic(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try generic(type) }

    private func generic<T: Decodable>(_ type: T.Type) throws -> T { try decode(type) }
}

private struct TracingKeyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoder: TracingDecoder
    let object: [String: Any]?
    var codingPath: [any CodingKey] { decoder.codingPath }
    var allKeys: [Key] { object?.keys.compactMap { Key(stringValue: $0) } ?? [] }

    func contains(_ key: Key) -> Bool { object?[key.stringValue] != nil }

    func decodeNil(forKey key: Key) throws -> Bool {
        let value = object?[key.stringValue]
        return value == nil || value is NSNull
    }

    /// A member: described (required or optional) and handed back.
    private func member<T: Decodable>(_: T.Type, _ key: Key, optional: Bool) throws -> T? {
        let sample = object?[key.stringValue]
        let isPresent = sample.map { !($0 is NSNull) } ?? false
        let (shape, value) = try decoder.decoded(T.self, sample: sample)
        decoder.recorder.add(ValueShape.Member(key.stringValue, shape, isOptional: optional))
        return optional && !isPresent ? nil : value
    }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try member(type, key, optional: false)! }
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        try member(type, key, optional: true)
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try member(type, key, optional: false)! }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try member(type, key, optional: false)! }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try member(type, key, optional: false)! }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try member(type, key, optional: false)! }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try member(type, key, optional: false)! }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try member(type, key, optional: false)! }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try member(type, key, optional: false)! }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try member(type, key, optional: false)! }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try member(type, key, optional: false)! }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try member(type, key, optional: false)! }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try member(type, key, optional: false)! }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try member(type, key, optional: false)! }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try member(type, key, optional: false)! }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try member(type, key, optional: false)! }

    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try member(type, key, optional: true) }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
        try member(type, key, optional: true)
    }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? {
        try member(type, key, optional: true)
    }
    func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? {
        try member(type, key, optional: true)
    }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try member(type, key, optional: true) }
    func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? { try member(type, key, optional: true) }
    func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? {
        try member(type, key, optional: true)
    }
    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? {
        try member(type, key, optional: true)
    }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? {
        try member(type, key, optional: true)
    }
    func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? { try member(type, key, optional: true) }
    func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? {
        try member(type, key, optional: true)
    }
    func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? {
        try member(type, key, optional: true)
    }
    func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? {
        try member(type, key, optional: true)
    }
    func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? {
        try member(type, key, optional: true)
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy: NestedKey.Type, forKey key: Key) throws
        -> KeyedDecodingContainer<NestedKey>
    {
        throw TraceUnsupported(reason: "\(decoder.type) decodes a nested container itself (member \(key.stringValue))")
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        throw TraceUnsupported(reason: "\(decoder.type) decodes a nested list itself (member \(key.stringValue))")
    }

    func superDecoder() throws -> any Decoder {
        throw TraceUnsupported(reason: "\(decoder.type) decodes a superclass")
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        throw TraceUnsupported(reason: "\(decoder.type) decodes a superclass")
    }
}

// MARK: Made-up values and variants

extension ValueShape {
    /// A value of the shape in JSON form (Foundation objects): every member present, an optional's wrapped value.
    var sampleJSON: Any {
        switch self {
        case .leaf(let leaf): leaf.sample
        case .any: 0
        case .choices(_, let choices): choices.first?.jsonObject ?? ""
        case .array: [Any]()
        case .dictionary: [String: Any]()
        case .optional(let inner): inner.sampleJSON
        case .object(let members):
            Dictionary(members.map { ($0.name, $0.shape.sampleJSON) }, uniquingKeysWith: { first, _ in first })
        case .unknown: NSNull()
        }
    }

    /// `node` (a value of the shape) changed at one place, for each place and each probe there, with where and
    /// what: to tell a type's own decoding from what its shape says.
    func variants(of node: Any, at path: String) -> [(Any, String)] {
        let here = path.isEmpty ? "the value" : path
        var found: [(Any, String)] = [(NSNull(), "null as \(here)")]
        switch self {
        case .leaf(let leaf):
            found += leaf.probes.map { ($0, "\(Self.show($0)) as \(here)") }
        case .choices(let leaf, let choices):
            found += choices.map { ($0.jsonObject, "\(AllowedValues.shown($0)) as \(here)") }
            found += ValueShape.leaf(leaf).variants(of: node, at: path)
        case .optional(let inner):
            found += inner.variants(of: node is NSNull ? inner.sampleJSON : node, at: path)
        case .array(let element):
            found += [([Any](), "an empty array as \(here)"), ([String: Any](), "an object as \(here)")]
            let elements = node as? [Any] ?? []
            let first = elements.first ?? element.sampleJSON
            found.append(([first, first], "two elements in \(here)"))
            for (variant, place) in element.variants(of: first, at: path + "[0]") {
                found.append(([variant] + elements.dropFirst(), place))
            }
        case .dictionary(let value):
            found += [([String: Any](), "an empty dictionary as \(here)"), ([Any](), "an array as \(here)")]
            let members = node as? [String: Any] ?? [:]
            let (name, first) = members.first ?? ("prefs-probe", value.sampleJSON)
            for (variant, place) in value.variants(of: first, at: path + ".\(name)") {
                var changed = members
                changed[name] = variant
                found.append((changed, place))
            }
        case .object(let members):
            let object = node as? [String: Any] ?? [:]
            found += [([Any](), "an array as \(here)"), ("prefs-probe", "text as \(here)")]
            var extra = object
            extra["prefs-probe-unknown-member"] = 1
            found.append((extra, "an unknown member in \(here)"))
            for member in members {
                let place = path + ".\(member.name)"
                var removed = object
                removed[member.name] = nil
                found.append((removed, "\(here) without \(member.name)"))
                let child = object[member.name].flatMap { $0 is NSNull ? nil : $0 } ?? member.shape.sampleJSON
                for (variant, description) in member.shape.variants(of: child, at: place) {
                    var changed = object
                    changed[member.name] = variant
                    found.append((changed, description))
                }
            }
        case .any, .unknown:
            break
        }
        return found
    }

    private static func show(_ value: Any) -> String {
        if let text = value as? String { return String(reflecting: text) }
        return "\(value)"
    }
}

extension ValueShape.Leaf {
    /// A made-up value of the leaf, in JSON form.
    var sample: Any {
        switch self {
        case .bool: false
        case .string: ""
        case .date, .double, .float, .decimal: 0.0
        case .data: ""
        case .url: "https://example.com"
        case .uuid: "00000000-0000-0000-0000-000000000000"
        default: 0
        }
    }

    /// Values of the leaf's kind and of others, in JSON form: what a type that reads the leaf but checks more, or
    /// reads more, would answer differently.
    var probes: [Any] {
        let others: [Any] = [true, "prefs-probe", 7, 0.5, [Any](), [String: Any]()]
        let own: [Any] =
            switch self {
            case .bool: [false, "true", 1]
            case .string: ["", "#ff0000", "2024-05-01T12:00:00Z", "https://example.com/a"]
            case .double, .float, .decimal: [0.25, -3.5, 1e300, "nan", "inf", 0]
            case .date: [1.5, -1e9, 0, "2024-05-01T12:00:00Z"]
            case .data: ["AAEC", "!!", ""]
            case .url: ["https://example.com/probe", "relative/path", "", "not a url"]
            case .uuid: ["E621E1F8-C36C-495A-93FC-0C247A3E6E5F", ""]
            default: [0, 1, -1, 1e20, 127, 255, 65535, 4_294_967_296]
            }
        return own + others
    }
}
