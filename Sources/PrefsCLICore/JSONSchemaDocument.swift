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
