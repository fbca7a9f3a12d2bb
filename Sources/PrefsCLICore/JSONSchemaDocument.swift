import Foundation
import Prefs

/// `prefs schema DOMAIN --json-schema`: a JSON Schema (draft 2020-12) of what `prefs export DOMAIN` writes as JSON,
/// for editors and validators. Each declared key is a property with its description, default and allowed values, in
/// Prefs' exact JSON form (`{"$float": …}`, `{"$date": …}`, `{"$data": …}`); keys the schema does not declare are
/// allowed, as the app stores them too.
enum JSONSchemaDocument {
    static func data(for schema: DomainSchema) throws -> Data {
        var properties: [String: Any] = [:]
        for (name, entry) in schema.keys { properties[name] = try property(entry) }
        let document: [String: Any] = [
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "Preferences of \(schema.domain)",
            "description": "What `prefs export \(schema.domain)` writes as JSON, checked against the keys the app "
                + "declares.",
            "type": "object", "properties": properties,
        ]
        var data = try JSONSerialization.data(
            withJSONObject: document, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        data.append(0x0A)
        return data
    }

    /// One key: its type in export form, its bounds or choices, description and default.
    private static func property(_ entry: KeyDescription) throws -> [String: Any] {
        var property = try type(entry)
        if !entry.summary.isEmpty { property["description"] = entry.summary }
        if let value = entry.defaultValue { property["default"] = try exported(value) }
        if case .choices(let choices)? = entry.allowed { property["enum"] = try choices.map(exported) }
        return property
    }

    /// The export form of a value, as a JSON object tree.
    private static func exported(_ value: PrefValue) throws -> Any {
        try JSONSerialization.jsonObject(with: Data(value.jsonText().utf8), options: [.fragmentsAllowed])
    }

    private static func type(_ entry: KeyDescription) throws -> [String: Any] {
        if let shape = entry.shape, let route = entry.route, route.form != .rawValue {
            if let reason = shape.unknownReason {
                return ["description": "prefs cannot describe which values the app reads: \(reason)"]
            }
            if route.form == .json {
                // Stored as JSON text: a string whose content is the type's JSON.
                let defaults = entry.defaultValue.flatMap { value -> Any? in
                    guard case .string(let text) = value else { return nil }
                    return try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
                }
                return [
                    "type": "string", "contentMediaType": "application/json",
                    "contentSchema": content(shape, filledFrom: route.fillsMissingFields ? defaults : nil),
                ]
            }
            if case .leaf = shape {} else { return exported(shape) }
        }
        var bounds: [String: Any] = [:]
        if case .range(let lower, let upper)? = entry.allowed {
            bounds["minimum"] = number(lower)
            bounds["maximum"] = number(upper)
        }
        func tagged(_ tag: String, _ inner: [String: Any]) -> [String: Any] {
            [
                "type": "object", "properties": [tag: inner], "required": [tag],
                "additionalProperties": false,
            ]
        }
        switch entry.type {
        case "bool": return ["anyOf": [["type": "boolean"], ["enum": [0, 1]]]]
        case "int": return bounds.merging(["type": "integer"]) { a, _ in a }
        case "double", "float":
            // A real may be written as a double or a float, or as a whole number: the app reads any of them.
            let plain = bounds.merging(["type": "number"]) { a, _ in a }
            return ["anyOf": [plain, tagged("$float", plain), tagged("$double", ["enum": ["nan", "inf", "-inf"]])]]
        case "date":
            let seconds =
                bounds.isEmpty ? ["type": ["number", "string"]] : bounds.merging(["type": "number"]) { a, _ in a }
            return tagged("$date", seconds)
        case "data": return tagged("$data", ["type": "string", "contentEncoding": "base64"])
        case "string": return ["type": "string"]
        case "array": return ["type": "array"]
        case "dictionary": return ["type": "object"]
        default: return [:]
        }
    }

    /// A natively stored array or dictionary, in export form: its elements as `type(_:)` gives a key of theirs.
    private static func exported(_ shape: ValueShape) -> [String: Any] {
        switch shape {
        case .leaf(let leaf):
            let entry = KeyDescription(type: storedTypeName(leaf), defaultValue: nil, summary: "", allowed: nil)
            return (try? type(entry)) ?? [:]
        case .array(let element): return ["type": "array", "items": exported(element)]
        case .dictionary(let value): return ["type": "object", "additionalProperties": exported(value)]
        default: return [:]
        }
    }

    /// The stored type's name of a leaf, as `type(_:)` takes it.
    private static func storedTypeName(_ leaf: ValueShape.Leaf) -> String {
        switch leaf {
        case .bool: "bool"
        case .double: "double"
        case .float: "float"
        case .string, .url: "string"
        case .date: "date"
        case .data: "data"
        default: "int"
        }
    }

    /// The JSON a `Codable` type reads, as `JSONDecoder` reads it: members required unless the type decodes them
    /// with `decodeIfPresent`, or the app fills them from the default's (`filledFrom`, the default's JSON there).
    private static func content(_ shape: ValueShape, filledFrom defaults: Any?) -> [String: Any] {
        switch shape {
        case .leaf(let leaf): return leafContent(leaf)
        case .any, .unknown: return [:]
        case .choices(_, let choices): return ["enum": choices.map(\.jsonObject)]
        case .array(let element): return ["type": "array", "items": content(element, filledFrom: nil)]
        case .dictionary(let value):
            return ["type": "object", "additionalProperties": content(value, filledFrom: nil)]
        case .optional(let inner): return ["anyOf": [content(inner, filledFrom: defaults), ["type": "null"]]]
        case .object(let members):
            let filled = defaults as? [String: Any]
            var properties: [String: Any] = [:]
            var required: [String] = []
            for member in members {
                let schema = content(member.shape, filledFrom: filled?[member.name])
                // `decodeIfPresent` reads null as absent.
                properties[member.name] = member.isOptional ? ["anyOf": [schema, ["type": "null"]]] : schema
                if !member.isOptional, filled?[member.name] == nil { required.append(member.name) }
            }
            return ["type": "object", "properties": properties, "required": required]
        }
    }

    private static func leafContent(_ leaf: ValueShape.Leaf) -> [String: Any] {
        switch leaf {
        case .bool: return ["type": "boolean"]
        case .string: return ["type": "string"]
        case .url: return ["type": "string", "format": "uri-reference"]
        case .uuid: return ["type": "string", "format": "uuid"]
        case .data: return ["type": "string", "contentEncoding": "base64"]
        case .date, .decimal: return ["type": "number"]
        case .double, .float: return ["anyOf": [["type": "number"], ["enum": ["nan", "inf", "-inf"]]]]
        default:
            var schema: [String: Any] = ["type": "integer"]
            let (lower, upper) = integerBounds(leaf)
            schema["minimum"] = lower
            schema["maximum"] = upper
            return schema
        }
    }

    /// The bounds of an integer leaf's type.
    private static func integerBounds(_ leaf: ValueShape.Leaf) -> (Any, Any) {
        switch leaf {
        case .int8: (Int8.min, Int8.max)
        case .int16: (Int16.min, Int16.max)
        case .int32: (Int32.min, Int32.max)
        case .uint, .uint64: (0, UInt64.max)
        case .uint8: (0, UInt8.max)
        case .uint16: (0, UInt16.max)
        case .uint32: (0, UInt32.max)
        default: (Int64.min, Int64.max)
        }
    }

    /// A bound as a JSON number: a date as its seconds since 2001-01-01, as `{"$date": …}` holds it.
    private static func number(_ value: PrefValue) -> Any {
        switch value {
        case .int(let value): value
        case .unsignedInt(let value): value
        case .float(let value): Double(value)
        case .double(let value): value
        case .date(let date): date.timeIntervalSinceReferenceDate
        default: 0
        }
    }
}
