import Foundation

/// What a declared type reads, told from outside the app: published with the key (``KeyDescription/shape``) so that
/// `prefs` reads a stored value through the same decoding as the app, with this shape standing in for the type.
///
/// A leaf is one of the types Prefs and `JSONDecoder` both know (`Int`, `String`, `Date`, …) and is read by that very
/// type; an object lists the members a `Codable` type decodes, in the order it decodes them, each required or
/// optional (`decodeIfPresent`); an enum with raw values lists them. ``ShapeDerivation`` derives it from the type and
/// checks it against the type's own decoding; what it cannot describe is ``unknown(_:)``, with the reason.
package indirect enum ValueShape: Sendable, Equatable {
    /// A value of one of the types both sides know, read by that type.
    case leaf(Leaf)
    /// Any stored value (a key of type `PrefValue`).
    case any
    /// A raw value of a `RawRepresentable` and `CaseIterable` type: one of these, each in stored form.
    case choices(Leaf, [PrefValue])
    /// An array (or a set) of elements of one shape.
    case array(ValueShape)
    /// A dictionary with string keys, its values of one shape.
    case dictionary(ValueShape)
    /// A JSON object: the members a `Codable` type decodes, in order.
    case object([Member])
    /// The shape, or null.
    case optional(ValueShape)
    /// A type whose reading cannot be described from outside, and why: `prefs` says it cannot check such a value.
    case unknown(String)

    /// One member of an object.
    package struct Member: Sendable, Equatable {
        package var name: String
        package var shape: ValueShape
        /// Decoded with `decodeIfPresent`: it may be missing or null.
        package var isOptional: Bool

        package init(_ name: String, _ shape: ValueShape, isOptional: Bool = false) {
            self.name = name
            self.shape = shape
            self.isOptional = isOptional
        }
    }

    /// The types a leaf can be, by their Swift names.
    package enum Leaf: String, Sendable, CaseIterable {
        case bool = "Bool"
        case string = "String"
        case double = "Double"
        case float = "Float"
        case int = "Int"
        case int8 = "Int8"
        case int16 = "Int16"
        case int32 = "Int32"
        case int64 = "Int64"
        case uint = "UInt"
        case uint8 = "UInt8"
        case uint16 = "UInt16"
        case uint32 = "UInt32"
        case uint64 = "UInt64"
        case date = "Date"
        case data = "Data"
        case url = "URL"
        /// Read by `JSONDecoder` only: a type Prefs has no native form for.
        case decimal = "Decimal"
        case uuid = "UUID"

        /// The type that reads a value of the leaf from JSON.
        var jsonType: any Decodable.Type {
            switch self {
            case .bool: Bool.self
            case .string: String.self
            case .double: Double.self
            case .float: Float.self
            case .int: Int.self
            case .int8: Int8.self
            case .int16: Int16.self
            case .int32: Int32.self
            case .int64: Int64.self
            case .uint: UInt.self
            case .uint8: UInt8.self
            case .uint16: UInt16.self
            case .uint32: UInt32.self
            case .uint64: UInt64.self
            case .date: Date.self
            case .data: Data.self
            case .url: URL.self
            case .decimal: Decimal.self
            case .uuid: UUID.self
            }
        }

        /// The type that reads a stored value of the leaf, when Prefs stores the type natively.
        var nativeType: (any PrefValueConvertible.Type)? { jsonType as? any PrefValueConvertible.Type }

        /// The leaf of a type, or nil when the type is not one.
        init?(type: Any.Type) {
            let identifier = ObjectIdentifier(type)
            guard let leaf = Self.allCases.first(where: { ObjectIdentifier($0.jsonType) == identifier }) else {
                return nil
            }
            self = leaf
        }

        /// Whether the leaf is a whole number of some width.
        package var isInteger: Bool { jsonType is any FixedWidthInteger.Type }

        /// `an integer`, `a number`, `text`: what a message says a value of the leaf must be.
        package var expected: String { ShapeMismatch.expected(jsonType) }
    }

    /// Whether the shape, anywhere inside, is ``unknown(_:)``; the reason of the first such place.
    package var unknownReason: String? {
        switch self {
        case .unknown(let reason): reason
        case .leaf, .any, .choices: nil
        case .array(let inner), .dictionary(let inner), .optional(let inner): inner.unknownReason
        case .object(let members): members.lazy.compactMap(\.shape.unknownReason).first
        }
    }

    /// `{x: Int, title?: String, tags: [String]}`: the shape as `prefs describe` prints it.
    package var text: String {
        switch self {
        case .leaf(let leaf): leaf.rawValue
        case .any: "any value"
        case .choices(_, let choices): choices.map(AllowedValues.shown).joined(separator: " | ")
        case .array(let element): "[\(element.text)]"
        case .dictionary(let value): "[String: \(value.text)]"
        case .optional(let inner): inner.text + "?"
        case .object(let members):
            "{" + members.map { "\($0.name)\($0.isOptional ? "?" : ""): \($0.shape.text)" }.joined(separator: ", ")
                + "}"
        case .unknown: "unknown"
        }
    }
}

// MARK: The schema file's form

extension ValueShape {
    /// The shape in a schema file: a leaf as its type's name (`"Int"`), anything else as an object of one member
    /// (`{"array": "String"}`, `{"object": [{"name": "x", "shape": "Int"}, …]}`, `{"unknown": "why"}`).
    package var stored: PrefValue {
        switch self {
        case .leaf(let leaf): .string(leaf.rawValue)
        case .any: .string("any")
        case .choices(let leaf, let choices): .dictionary(["choices": .array(choices), "of": .string(leaf.rawValue)])
        case .array(let element): .dictionary(["array": element.stored])
        case .dictionary(let value): .dictionary(["dictionary": value.stored])
        case .optional(let inner): .dictionary(["optional": inner.stored])
        case .unknown(let reason): .dictionary(["unknown": .string(reason)])
        case .object(let members):
            .dictionary([
                "object": .array(
                    members.map { member in
                        var entry: [String: PrefValue] = ["name": .string(member.name), "shape": member.shape.stored]
                        if member.isOptional { entry["optional"] = .bool(true) }
                        return .dictionary(entry)
                    })
            ])
        }
    }

    /// A shape read back from a schema file; nil when it is malformed. A form a later Prefs writes reads as
    /// ``unknown(_:)``, so an older `prefs` says it cannot check the key rather than refusing the file.
    package init?(stored: PrefValue, depth: Int = 0) {
        guard depth < 64 else { return nil }
        switch stored {
        case .string("any"): self = .any
        case .string(let name): self = Leaf(rawValue: name).map(ValueShape.leaf) ?? .unknown("a type named \(name)")
        case .dictionary(let members) where members.count <= 2:
            func inner(_ value: PrefValue) -> ValueShape? { ValueShape(stored: value, depth: depth + 1) }
            switch (members["choices"], members["of"]) {
            case (.array(let choices)?, .string(let name)?):
                guard let leaf = Leaf(rawValue: name) else { return nil }
                self = .choices(leaf, choices)
                return
            default: break
            }
            guard members.count == 1, let (kind, value) = members.first else { return nil }
            switch (kind, value) {
            case ("array", _):
                guard let shape = inner(value) else { return nil }
                self = .array(shape)
            case ("dictionary", _):
                guard let shape = inner(value) else { return nil }
                self = .dictionary(shape)
            case ("optional", _):
                guard let shape = inner(value) else { return nil }
                self = .optional(shape)
            case ("unknown", .string(let reason)): self = .unknown(reason)
            case ("object", .array(let entries)):
                var list: [Member] = []
                for entry in entries {
                    guard case .dictionary(let fields) = entry, case .string(let name)? = fields["name"],
                        let shape = fields["shape"].flatMap(inner)
                    else { return nil }
                    list.append(Member(name, shape, isOptional: fields["optional"] == .bool(true)))
                }
                self = .object(list)
            default: self = .unknown("a shape of kind \(kind)")
            }
        default: return nil
        }
    }
}

// MARK: Reading stored values with the shape

extension ValueShape {
    /// A stored value in its native form as the type reads it, in the type's own stored form (a `"15"` read as an
    /// `Int` is `.int(15)`); throws a ``ShapeMismatch`` naming the place that fails.
    package func readNative(_ stored: PrefValue, at path: String = "") throws -> PrefValue {
        switch (self, stored) {
        case (.any, _): return stored
        case (.leaf(let leaf), _):
            guard let type = leaf.nativeType else {
                throw ShapeMismatch(path: path, reason: "expected JSON text of \(leaf.rawValue)")
            }
            do {
                return try type.init(prefValue: stored).prefValue
            } catch {
                throw ShapeMismatch(path: path, reason: "is \(Self.phrase(stored)), not \(leaf.expected)")
            }
        case (.choices(let leaf, let choices), _):
            let raw = try ValueShape.leaf(leaf).readNative(stored, at: path)
            guard choices.contains(raw) else {
                throw ShapeMismatch(path: path, reason: "is not allowed (\(AllowedValues.choices(choices).text))")
            }
            return raw
        case (.array(let element), .array(let elements)):
            return .array(try elements.enumerated().map { try element.readNative($1, at: path + "[\($0)]") })
        case (.dictionary(let value), .dictionary(let members)):
            var read: [String: PrefValue] = [:]
            for (name, member) in members { read[name] = try value.readNative(member, at: path + ".\(name)") }
            return .dictionary(read)
        case (.array, _): throw ShapeMismatch(path: path, reason: "is \(Self.phrase(stored)), not an array")
        case (.dictionary, _): throw ShapeMismatch(path: path, reason: "is \(Self.phrase(stored)), not a dictionary")
        case (.unknown(let reason), _): throw ShapeMismatch(path: path, reason: "cannot be checked: \(reason)")
        case (.object, _), (.optional, _):
            throw ShapeMismatch(path: path, reason: "expected JSON text of \(text)")
        }
    }

    /// `a string`, `an int`: a stored value's kind as a message names it.
    static func phrase(_ value: PrefValue) -> String {
        let type = value.typeName
        return ("aeiou".contains(type.first ?? "x") ? "an " : "a ") + type
    }

    /// The shape as a ``JSONReading``: a JSON document read by `JSONDecoder` with ``ShapeDecoding`` standing in for
    /// the type, so every container, member and leaf is asked for as the type asks for it. Its value is what was
    /// read, in stored form.
    var jsonReader: ShapeReader { ShapeReader(shape: self) }
}

/// A ``ValueShape`` read from JSON.
struct ShapeReader: JSONReading, Sendable {
    let plain: ShapeDecoding.Root
    /// Boutique's `{"value": …}`, decoded by its own type: the path of the value starts with "value".
    let envelope: ShapeDecoding.Root
    let typeName: String

    init(shape: ValueShape) {
        plain = ShapeDecoding.Root(shape: shape)
        envelope = ShapeDecoding.Root(shape: .object([ValueShape.Member("value", shape)]))
        typeName = shape.text
    }

    func read(_ data: Data) throws -> PrefValue { try ShapeDecoding.decode(data, root: plain, envelope: false) }
    func readEnvelope(_ data: Data) throws -> PrefValue {
        try ShapeDecoding.decode(data, root: envelope, envelope: true)
    }
}

/// The stand-in for a declared type when `JSONDecoder` reads a document with a ``ValueShape``: it finds its place's
/// shape from the decoder's coding path and decodes it as the type does.
package struct ShapeDecoding: Decodable {
    /// What was read, in stored form: a leaf's value, an array or dictionary of them, an object's members.
    let value: PrefValue?

    /// The root shape, given to the decoder through `userInfo`.
    final class Root: Sendable {
        static let key = CodingUserInfoKey(rawValue: "prefs.valueShape")!
        let shape: ValueShape
        init(shape: ValueShape) { self.shape = shape }
    }

    /// Reads `data` with the shape of `root` (inside Boutique's `{"value": …}` when `envelope`).
    static func decode(_ data: Data, root: Root, envelope: Bool) throws -> PrefValue {
        let decoder = ForeignForms.makeDecoder()
        decoder.userInfo[Root.key] = root
        let value =
            envelope
            ? try decoder.decode(ForeignForms.Envelope<ShapeDecoding>.self, from: data).value.value
            : try decoder.decode(ShapeDecoding.self, from: data).value
        return value ?? .dictionary([:])
    }

    package init(from decoder: any Decoder) throws {
        guard let root = decoder.userInfo[Root.key] as? Root else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "no shape"))
        }
        var shape = root.shape
        for key in decoder.codingPath { shape = try shape.child(key, decoder.codingPath) }
        value = try shape.decode(from: decoder)
    }
}

extension ValueShape {
    /// The shape without the optionals around it.
    var unwrapped: ValueShape {
        if case .optional(let inner) = self { return inner.unwrapped }
        return self
    }

    /// The shape of a member, element or dictionary value.
    fileprivate func child(_ key: any CodingKey, _ path: [any CodingKey]) throws -> ValueShape {
        switch unwrapped {
        case .object(let members):
            if let member = members.first(where: { $0.name == key.stringValue }) { return member.shape }
        case .array(let element): return element
        case .dictionary(let value): return value
        default: break
        }
        throw DecodingError.dataCorrupted(.init(codingPath: path, debugDescription: "no shape here"))
    }

    /// Decodes this place as the type does: a leaf by its own type, an object member by member.
    fileprivate func decode(from decoder: any Decoder) throws -> PrefValue? {
        switch self {
        case .leaf(let leaf):
            let container = try decoder.singleValueContainer()
            let value: any Decodable
            do {
                value = try container.decode(leaf.jsonType)
            } catch {
                // JSONDecoder says a number with a fraction, or out of range, for an integer is "not valid JSON", at
                // the top: refused all the same, but said where and why.
                guard leaf.isInteger, let number = try? container.decode(Double.self) else { throw error }
                throw DecodingError.typeMismatch(
                    leaf.jsonType, .init(codingPath: decoder.codingPath, debugDescription: "found \(number)"))
            }
            return (value as? any PrefValueConvertible).flatMap { try? $0.prefValue } ?? .string("\(value)")
        case .choices(let leaf, let choices):
            let raw = try ValueShape.leaf(leaf).decode(from: decoder)
            guard let raw, choices.contains(raw) else {
                throw DecodingError.dataCorrupted(
                    .init(
                        codingPath: decoder.codingPath,
                        debugDescription: "\(raw.map(AllowedValues.shown) ?? "null") is not one of \(text)"))
            }
            return raw
        case .array:
            return .array(try [ShapeDecoding](from: decoder).map { $0.value ?? .dictionary([:]) })
        case .dictionary:
            return .dictionary(try [String: ShapeDecoding](from: decoder).mapValues { $0.value ?? .dictionary([:]) })
        case .optional(let inner):
            if try decoder.singleValueContainer().decodeNil() { return nil }
            return try inner.decode(from: decoder)
        case .object(let members):
            let container = try decoder.container(keyedBy: NamedKey.self)
            var read: [String: PrefValue] = [:]
            for member in members {
                let key = NamedKey(member.name)
                let value =
                    member.isOptional
                    ? try container.decodeIfPresent(ShapeDecoding.self, forKey: key)
                    : try container.decode(ShapeDecoding.self, forKey: key)
                read[member.name] = value?.value
            }
            return .dictionary(read)
        case .any:
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "cannot be read from JSON"))
        case .unknown(let reason):
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "cannot be checked: \(reason)"))
        }
    }
}

/// A coding key by name.
struct NamedKey: CodingKey {
    let stringValue: String
    let intValue: Int?
    init(_ name: String) {
        stringValue = name
        intValue = nil
    }
    init?(stringValue: String) { self.init(stringValue) }
    init?(intValue: Int) {
        stringValue = String(intValue)
        self.intValue = intValue
    }
}
