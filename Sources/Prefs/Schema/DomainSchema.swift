package import Foundation

/// The schema of one domain: every key declared on it, with its type, default, description and allowed values, as a
/// published schema file holds them (`$XDG_DATA_HOME/prefs/schemas/<domain>.json`, or one installed with the app in
/// `$XDG_DATA_DIRS/prefs/schemas/`). `prefs` reads it to describe, check and safely edit the domain.
///
/// The file is JSON, values in Prefs' exact JSON form (`{"$date": …}` and the other tags `prefs export` writes):
///
/// ```json
/// {
///   "domain": "com.example.notes",
///   "environmentPrefix": "NOTES_",
///   "format": "prefs-schema",
///   "keys": {
///     "fontSize": { "default": 13, "description": "Font size, in points", "range": [8, 72], "type": "int" },
///     "theme": { "choices": ["light", "dark"], "default": "light", "type": "string" }
///   },
///   "version": 1
/// }
/// ```
///
/// A key's entry also says how the app reads its values: `"read"`, the forms its codec reads (``ReadRoute``), and
/// `"shape"`, what its type reads (``ValueShape``): `prefs` reads a stored value through them as the app does. A
/// schema written before they existed has neither, and only its types are checked.
///
/// A reader of version 1 ignores members it does not know; a file of a later version is reported and ignored.
package struct DomainSchema: Sendable, Equatable {
    /// The version this Prefs writes and reads.
    package static let version = 1
    static let format = "prefs-schema"

    package var domain: String
    /// The prefix of the environment variables the app reads (``PrefsConfiguration/environmentPrefix``), when it set one.
    package var environmentPrefix: String?
    package var keys: [String: KeyDescription]

    package init(domain: String, environmentPrefix: String? = nil, keys: [String: KeyDescription]) {
        self.domain = domain
        self.environmentPrefix = environmentPrefix
        self.keys = keys
    }

    /// The file's text: pretty-printed JSON with sorted members and a trailing newline.
    package func jsonDocument() throws -> Data {
        var entries: [String: PrefValue] = [:]
        for (name, key) in keys {
            var entry: [String: PrefValue] = [:]
            if let type = key.type { entry["type"] = .string(type) }
            if let value = key.defaultValue { entry["default"] = value }
            if !key.summary.isEmpty { entry["description"] = .string(key.summary) }
            switch key.allowed {
            case .range(let lower, let upper)?: entry["range"] = .array([lower, upper])
            case .choices(let choices)?: entry["choices"] = .array(choices)
            case nil: break
            }
            if let route = key.route { entry["read"] = route.stored }
            if let shape = key.shape { entry["shape"] = shape.stored }
            if key.isComputed { entry["computed"] = .bool(true) }
            entries[name] = .dictionary(entry)
        }
        var document: [String: PrefValue] = [
            "format": .string(Self.format), "version": .int(Int64(Self.version)), "domain": .string(domain),
            "keys": .dictionary(entries),
        ]
        if let environmentPrefix { document["environmentPrefix"] = .string(environmentPrefix) }
        return try PrefValue.jsonDocument(document)
    }

    /// Reads a schema file's text; `path` names it in errors.
    package init(document data: Data, path: String) throws(SchemaFileProblem) {
        let document: [String: PrefValue]
        do {
            document = try PrefValue.values(fromJSONDocument: data, source: path)
        } catch {
            throw SchemaFileProblem(path: path, reason: "it is not valid JSON (\(Self.reason(error)))")
        }
        guard document["format"] == .string(Self.format) else {
            throw SchemaFileProblem(path: path, reason: "it is not a prefs schema (no \"format\": \"prefs-schema\")")
        }
        guard case .int(let version)? = document["version"] else {
            throw SchemaFileProblem(path: path, reason: "it has no version number")
        }
        guard version <= Self.version else {
            throw SchemaFileProblem(
                path: path,
                reason: "it is of version \(version), newer than this Prefs reads (\(Self.version)); update Prefs",
                isNewer: true)
        }
        guard case .string(let domain)? = document["domain"], case .dictionary(let entries)? = document["keys"] else {
            throw SchemaFileProblem(path: path, reason: "it lacks \"domain\" or \"keys\"")
        }
        var keys: [String: KeyDescription] = [:]
        for (name, entry) in entries.sorted(by: { $0.key < $1.key }) {
            guard let key = Self.key(entry) else {
                throw SchemaFileProblem(path: path, reason: "the entry of \(String(reflecting: name)) is malformed")
            }
            if let contradiction = key.contradiction {
                throw SchemaFileProblem(
                    path: path, reason: "the entry of \(String(reflecting: name)) contradicts itself: \(contradiction)")
            }
            keys[name] = key
        }
        var prefix: String?
        if case .string(let text)? = document["environmentPrefix"] { prefix = text }
        self.init(domain: domain, environmentPrefix: prefix, keys: keys)
    }

    private static func key(_ entry: PrefValue) -> KeyDescription? {
        guard case .dictionary(let members) = entry else { return nil }
        var key = KeyDescription(type: nil, defaultValue: members["default"], summary: "", allowed: nil)
        switch members["type"] {
        case .string(let type)?: key.type = type
        case nil: break
        default: return nil
        }
        switch members["description"] {
        case .string(let text)?: key.summary = text
        case nil: break
        default: return nil
        }
        switch (members["range"], members["choices"]) {
        case (.array(let bounds)?, nil):
            guard bounds.count == 2 else { return nil }
            key.allowed = .range(bounds[0], bounds[1])
        case (nil, .array(let choices)?): key.allowed = .choices(choices)
        case (nil, nil): break
        default: return nil
        }
        key.isComputed = members["computed"] == .bool(true)
        switch (members["read"], members["shape"]) {
        case (nil, nil): break
        case (let route?, let shape?):
            guard let shape = ValueShape(stored: shape) else { return nil }
            guard let route = ReadRoute(stored: route) else {
                // Written by a later Prefs: this one cannot tell how the app reads the key.
                key.route = ReadRoute(.native)
                key.shape = .unknown("the schema says the app reads it in a way this prefs does not know; update prefs")
                return key
            }
            key.route = route
            key.shape = shape
        default: return nil
        }
        return key
    }

    private static func reason(_ error: any Error) -> String {
        if case .corruptFile(_, let reason)? = error as? PrefsError { return reason }
        return String(describing: error)
    }
}

/// A schema file that is not read, and why: damaged, not a schema, or of a later version. Reported once; the values
/// of the domain are read and written as they would be without it.
package struct SchemaFileProblem: Error, Sendable, Equatable, CustomStringConvertible {
    package let path: String
    package let reason: String
    /// Whether the file is a later version's, which only a later Prefs replaces.
    package var isNewer = false

    /// `the schema /…/com.example.notes.json is ignored: it is not valid JSON (…)`.
    package var description: String { "the schema \(path) is ignored: \(reason)" }
}
