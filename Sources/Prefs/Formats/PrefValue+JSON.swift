package import Foundation

extension PrefValue {
    /// `try PrefValue(jsonText: "[1, 2]")` parses one value written in Prefs' JSON form.
    ///
    /// Any JSON value except `null` is accepted: numbers without a fraction or exponent become ``int(_:)`` (or
    /// ``unsignedInt(_:)`` above `Int64.max`), other numbers ``double(_:)``, objects ``dictionary(_:)``. The tagged
    /// objects a ``FileStore`` writes are understood too, so every value round-trips exactly through ``jsonText()``:
    /// `{"$float": 0.5}`, `{"$date": 786123456.789}` (seconds since 2001-01-01), `{"$data": "yv4="}` (base64),
    /// `{"$double": "inf"}` (also `"-inf"` and `"nan"`, and the same names in `$float` and `$date`) and `{"$dict": {…}}`.
    ///
    /// - Throws: ``PrefsError/decodingFailed(key:reason:)`` naming the byte offset of the first error.
    package init(jsonText: String) throws {
        self = try JSONFormat.decodeValue(jsonText)
    }

    /// `try value.jsonText()` writes the value as single-line JSON, in the form ``init(jsonText:)`` reads back.
    ///
    /// - Throws: ``PrefsError/encodingFailed(key:reason:)`` for a value JSON cannot hold: a date at infinity.
    package func jsonText() throws -> String {
        try JSONFormat.encodeValue(self)
    }

    /// `try value.databaseJSONText()` is ``jsonText()`` as a PostgreSQL `jsonb` column prints it back: every number
    /// written in full (`1e-05` as `0.00001`, `1e+16` as `10000000000000000.0`, which `jsonb` keeps as a
    /// non-integer), so its length is what a reader of the column measures. ``init(jsonText:)`` reads both forms.
    package func databaseJSONText() throws -> String {
        try JSONFormat.encodeValue(self, plainDecimals: true)
    }

    /// `try PrefValue.jsonDocument(values)` writes a whole set of preferences as a ``FileStore`` file does: a
    /// pretty-printed JSON object with sorted keys and a trailing newline, from which
    /// ``values(fromJSONDocument:source:)`` reads every value back exactly: `prefs export` and the schema files.
    ///
    /// - Throws: ``PrefsError/encodingFailed(key:reason:)`` naming the key whose value JSON cannot hold.
    package static func jsonDocument(_ values: [String: PrefValue]) throws -> Data {
        try JSONFormat.encode(values)
    }

    /// `try PrefValue.exportDocument(values)` is ``jsonDocument(_:)`` for `prefs export`: a date that is not a finite
    /// number is tagged `{"$date": "nan"}` (or `"inf"`, `"-inf"`) rather than refused, so one such value does not
    /// fail the export of a whole domain; ``values(fromJSONDocument:source:)`` reads it back.
    package static func exportDocument(_ values: [String: PrefValue]) throws -> Data {
        try JSONFormat.encode(values, tagsNonFiniteDates: true)
    }

    /// `try PrefValue.values(fromJSONDocument: data)` parses a document written by ``jsonDocument(_:)`` (or any
    /// JSON object of keys and values) in full before returning, so malformed input never yields partial results.
    ///
    /// - Parameters:
    ///   - data: The UTF-8 JSON text.
    ///   - source: Names the input in error messages, for example its path.
    /// - Throws: ``PrefsError/corruptFile(path:reason:)`` for anything but a well-formed JSON object without
    ///   `null`s or duplicate keys.
    package static func values(
        fromJSONDocument data: Data, source: String = "JSON document"
    ) throws -> [String: PrefValue] {
        try JSONFormat.decode(data, path: source)
    }
}
