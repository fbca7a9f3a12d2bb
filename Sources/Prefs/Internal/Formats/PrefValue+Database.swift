extension PrefValue {
    /// `try value.databaseJSONText()` is ``jsonText()`` in the form a PostgreSQL `jsonb` column stores without
    /// changing its meaning: doubles are never written with a positive exponent, which `jsonb` would turn into an
    /// integer (`1e+16` becomes `10000000000000000`). ``init(jsonText:)`` reads both forms.
    package func databaseJSONText() throws -> String {
        try JSONFormat.encodeValue(self, plainDecimals: true)
    }
}
