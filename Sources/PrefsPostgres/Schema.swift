import Prefs

/// The tables, triggers and statements of schema version 1 (documented in docs/PostgresStore.md).
enum Schema {
    static let version = 1
    /// The `LISTEN`/`NOTIFY` channel.
    static let channel = "prefs_values"
    /// Serialises schema creation among instances that start at once (`pg_advisory_xact_lock` key).
    static let advisoryLock = "7301451916011975"

    static let create = [
        """
        CREATE TABLE prefs_values (
            namespace text NOT NULL,
            key text NOT NULL,
            value jsonb,
            version bigint NOT NULL DEFAULT 1,
            PRIMARY KEY (namespace, key)
        )
        """,
        "COMMENT ON TABLE prefs_values IS 'Prefs PostgresStore, schema version 1: one row per key; "
            + "value is the FileStore JSON form, NULL once removed; version grows by one with every update'",
        "CREATE TABLE prefs_schema (version integer NOT NULL)",
        "INSERT INTO prefs_schema (version) VALUES (1)",
        """
        CREATE FUNCTION prefs_values_bump() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            NEW.version := OLD.version + 1;
            RETURN NEW;
        END
        $$
        """,
        """
        CREATE TRIGGER prefs_values_bump BEFORE UPDATE ON prefs_values
            FOR EACH ROW WHEN (NEW.version = OLD.version) EXECUTE FUNCTION prefs_values_bump()
        """,
        """
        CREATE FUNCTION prefs_values_payload(ns text, k text, v jsonb, ver bigint) RETURNS text
        LANGUAGE sql STABLE AS $$
            SELECT CASE
                WHEN octet_length(ns) + octet_length(k) > 3000 THEN '{"reload": true}'
                WHEN v IS NULL THEN
                    json_build_object('namespace', ns, 'key', k, 'version', ver, 'removed', true)::text
                WHEN octet_length(v::text) <= 4000 THEN
                    json_build_object('namespace', ns, 'key', k, 'version', ver, 'value', v)::text
                ELSE json_build_object('namespace', ns, 'key', k, 'version', ver)::text
            END
        $$
        """,
        """
        CREATE FUNCTION prefs_values_notify() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'DELETE' THEN
                PERFORM pg_notify('prefs_values', CASE
                    WHEN octet_length(OLD.namespace) + octet_length(OLD.key) > 3000 THEN '{"reload": true}'
                    ELSE json_build_object('namespace', OLD.namespace, 'key', OLD.key, 'deleted', true)::text
                END);
            ELSE
                PERFORM pg_notify('prefs_values',
                    prefs_values_payload(NEW.namespace, NEW.key, NEW.value, NEW.version));
            END IF;
            RETURN NULL;
        END
        $$
        """,
        // Prefs' own connections set prefs.notify_inline and notify from the writing statement itself, which
        // costs less than a PL/pgSQL trigger; writes from anyone else notify through the trigger.
        """
        CREATE TRIGGER prefs_values_notify AFTER INSERT OR UPDATE OR DELETE ON prefs_values
            FOR EACH ROW WHEN (current_setting('prefs.notify_inline', true) IS DISTINCT FROM 'on')
            EXECUTE FUNCTION prefs_values_notify()
        """,
    ]

    /// Creates the schema when the database has none, or checks the version of the one it has.
    static func prepare(on connection: Connection) throws {
        try connection.execute("BEGIN")
        do {
            try connection.execute("SELECT pg_advisory_xact_lock(\(advisoryLock))")
            let found = try connection.execute(
                "SELECT to_regclass('prefs_schema') IS NOT NULL, to_regclass('prefs_values') IS NOT NULL")
            let hasSchemaTable = found.first?[0] == "t"
            let hasValuesTable = found.first?[1] == "t"
            if hasSchemaTable {
                let rows = try connection.execute("SELECT version FROM prefs_schema")
                let versions = rows.compactMap { $0[0].flatMap { Int($0) } }
                guard versions == [version], hasValuesTable else {
                    throw PostgresStoreError.unsupportedSchemaVersion(found: versions.first, supported: version)
                }
            } else if hasValuesTable {
                throw PostgresStoreError.unsupportedSchemaVersion(found: nil, supported: version)
            } else {
                for statement in create { try connection.execute(statement) }
            }
            try connection.execute("COMMIT")
        } catch {
            if !connection.isBroken { _ = try? connection.execute("ROLLBACK") }
            throw error
        }
    }

    static let selectNamespace = "SELECT key, value::text, version FROM prefs_values WHERE namespace = $1"
    static let selectKey = "SELECT value::text, version FROM prefs_values WHERE namespace = $1 AND key = $2"
    static let selectKeyForUpdate = selectKey + " FOR UPDATE"
    /// Run on the writing connection: its statements notify by themselves (see `notifyWritten`).
    static let notifyInline = "SET prefs.notify_inline = 'on'"
    /// Returns each written row's version and sends its notification: the payload built by the client
    /// (`payloadPrefix(…)`, parameter `$4`) completed with the version.
    private static let notifyWritten = """
        SELECT version, pg_notify('prefs_values', $4 || version::text || '}') FROM written
        """

    /// The notification of a write before its version: `{"namespace": …, "key": …, "value": …, "version": `. A
    /// value that would make the payload larger than `NOTIFY` allows is left out (listeners re-read the row), and a
    /// namespace and key too long for any payload ask listeners to re-read everything.
    static func payloadPrefix(namespace: String, key: String, valueText: String?) -> String {
        guard
            let names = try? PrefValue.string(namespace).jsonText() + ", \"key\": "
                + PrefValue.string(key).jsonText(),
            names.utf8.count <= 3_000
        else { return #"{"reload": true, "version": "# }
        var prefix = #"{"namespace": "# + names
        if let valueText {
            if valueText.utf8.count <= 4_000 { prefix += #", "value": "# + valueText }
        } else {
            prefix += #", "removed": true"#
        }
        return prefix + #", "version": "#
    }
    static let upsert = """
        WITH written AS (
            INSERT INTO prefs_values (namespace, key, value, version) VALUES ($1, $2, $3::jsonb, 1)
            ON CONFLICT (namespace, key) DO UPDATE SET value = EXCLUDED.value, version = prefs_values.version + 1
            RETURNING namespace, key, value, version
        )
        """ + notifyWritten
    static let remove = """
        WITH written AS (
            UPDATE prefs_values SET value = NULL, version = version + 1
            WHERE namespace = $1 AND key = $2 AND value IS NOT NULL AND $3::text IS NULL
            RETURNING namespace, key, value, version
        )
        """ + notifyWritten
    /// Makes sure a row exists to lock, so two instances updating an absent key serialise on it.
    static let placeholder = """
        INSERT INTO prefs_values (namespace, key, value, version) VALUES ($1, $2, NULL, 0)
        ON CONFLICT (namespace, key) DO NOTHING
        """
    static let lockNamespace = "SELECT key FROM prefs_values WHERE namespace = $1 FOR UPDATE"
}
