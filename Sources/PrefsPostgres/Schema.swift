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
            FOR EACH ROW EXECUTE FUNCTION prefs_values_bump()
        """,
        """
        CREATE FUNCTION prefs_values_notify() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            payload text;
        BEGIN
            IF TG_OP = 'DELETE' THEN
                payload := json_build_object('namespace', OLD.namespace, 'key', OLD.key, 'deleted', true)::text;
            ELSIF NEW.value IS NULL THEN
                payload := json_build_object(
                    'namespace', NEW.namespace, 'key', NEW.key, 'version', NEW.version, 'removed', true)::text;
            ELSE
                payload := json_build_object(
                    'namespace', NEW.namespace, 'key', NEW.key, 'version', NEW.version, 'value', NEW.value)::text;
                IF octet_length(payload) > 7000 THEN
                    payload := json_build_object(
                        'namespace', NEW.namespace, 'key', NEW.key, 'version', NEW.version)::text;
                END IF;
            END IF;
            IF octet_length(payload) > 7000 THEN
                payload := '{"reload": true}';
            END IF;
            PERFORM pg_notify('prefs_values', payload);
            RETURN NULL;
        END
        $$
        """,
        """
        CREATE TRIGGER prefs_values_notify AFTER INSERT OR UPDATE OR DELETE ON prefs_values
            FOR EACH ROW EXECUTE FUNCTION prefs_values_notify()
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
    static let upsert = """
        INSERT INTO prefs_values (namespace, key, value, version) VALUES ($1, $2, $3::jsonb, 1)
        ON CONFLICT (namespace, key) DO UPDATE SET value = EXCLUDED.value RETURNING version
        """
    static let remove = """
        UPDATE prefs_values SET value = NULL WHERE namespace = $1 AND key = $2 AND value IS NOT NULL
        RETURNING version
        """
    /// Makes sure a row exists to lock, so two instances updating an absent key serialise on it.
    static let placeholder = """
        INSERT INTO prefs_values (namespace, key, value, version) VALUES ($1, $2, NULL, 0)
        ON CONFLICT (namespace, key) DO NOTHING
        """
    static let lockNamespace = "SELECT key FROM prefs_values WHERE namespace = $1 FOR UPDATE"
}
