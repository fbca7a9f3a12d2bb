import Foundation
import Prefs

/// The tables, triggers and statements of schema version 3 (documented in docs/PostgresStore.md).
///
/// Notifications carry hints only (which namespace and key changed), never values or versions: `NOTIFY` needs no
/// privilege, so anything in a payload can be read or forged by any role that can connect.
enum Schema {
    static let version = 3
    /// The `LISTEN`/`NOTIFY` channel.
    static let channel = "prefs_values"
    /// Serialises schema creation among instances that start at once (`pg_try_advisory_xact_lock` key).
    static let advisoryLock = "7301451916011975"
    /// The largest payload a hint may have (`NOTIFY` refuses 8000 bytes and more).
    static let largestHint = 7_000

    /// Functions and triggers, shared by creation and by the upgrade from version 1. `CREATE OR REPLACE` lets a
    /// database whose tables were dropped but whose functions were left behind be created again.
    static let functions = [
        // Versions grow by one and stop at Int64.max instead of overflowing: a row set to the largest version by
        // hand stays writable. Instances never trust a version they did not read, so a stuck version is harmless.
        """
        CREATE OR REPLACE FUNCTION prefs_values_bump() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            NEW.version := LEAST(OLD.version, 9223372036854775806) + 1;
            RETURN NEW;
        END
        $$
        """,
        """
        CREATE OR REPLACE FUNCTION prefs_values_hint(ns text, k text) RETURNS text
        LANGUAGE sql IMMUTABLE AS $$
            SELECT CASE
                WHEN octet_length(json_build_object('namespace', ns, 'key', k)::text) <= \(largestHint)
                    THEN json_build_object('namespace', ns, 'key', k)::text
                WHEN octet_length(json_build_object('namespace', ns)::text) <= \(largestHint)
                    THEN json_build_object('namespace', ns)::text
                ELSE '{}'
            END
        $$
        """,
        """
        CREATE OR REPLACE FUNCTION prefs_values_notify() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'TRUNCATE' THEN
                PERFORM pg_notify('prefs_values', '{"reset": true}');
                RETURN NULL;
            END IF;
            IF TG_OP <> 'INSERT' THEN
                PERFORM pg_notify('prefs_values', prefs_values_hint(OLD.namespace, OLD.key));
            END IF;
            IF TG_OP <> 'DELETE' THEN
                PERFORM pg_notify('prefs_values', prefs_values_hint(NEW.namespace, NEW.key));
            END IF;
            RETURN NULL;
        END
        $$
        """,
        "DROP FUNCTION IF EXISTS prefs_values_payload(text, text, jsonb, bigint)",
        "DROP TRIGGER IF EXISTS prefs_values_reset ON prefs_values",
        """
        CREATE TRIGGER prefs_values_reset AFTER TRUNCATE ON prefs_values
            FOR EACH STATEMENT EXECUTE FUNCTION prefs_values_notify()
        """,
    ]

    static let create =
        [
            """
            CREATE TABLE prefs_values (
                namespace text NOT NULL,
                key text NOT NULL,
                value jsonb,
                version bigint NOT NULL DEFAULT 1,
                writer uuid,
                PRIMARY KEY (namespace, key)
            )
            """,
            "COMMENT ON TABLE prefs_values IS 'Prefs PostgresStore, schema version 3: one row per key; "
                + "value is the FileStore JSON form, NULL once removed; version grows by one with every update; "
                + "writer names the Prefs transaction that wrote it'",
            "CREATE TABLE prefs_schema (version integer NOT NULL)",
            "INSERT INTO prefs_schema (version) VALUES (3)",
        ] + functions + [
            """
            CREATE TRIGGER prefs_values_bump BEFORE UPDATE ON prefs_values
                FOR EACH ROW WHEN (NEW.version = OLD.version) EXECUTE FUNCTION prefs_values_bump()
            """,
            // Prefs' own connections set prefs.notify_inline and notify from the writing statement itself, which
            // costs less than a PL/pgSQL trigger; writes from anyone else notify through the trigger.
            """
            CREATE TRIGGER prefs_values_notify AFTER INSERT OR UPDATE OR DELETE ON prefs_values
                FOR EACH ROW WHEN (current_setting('prefs.notify_inline', true) IS DISTINCT FROM 'on')
                EXECUTE FUNCTION prefs_values_notify()
            """,
        ]

    /// Version 3 adds the `writer` column, which settles a transaction's outcome after its `COMMIT` went unanswered.
    static let upgradeFromVersion2 = [
        "ALTER TABLE prefs_values ADD COLUMN IF NOT EXISTS writer uuid", "UPDATE prefs_schema SET version = 3",
    ]
    /// Version 1 sent values in its payloads; version 2 replaced its functions and added the `TRUNCATE` trigger.
    static let upgradeFromVersion1 = functions + upgradeFromVersion2

    /// What the database holds: the version rows of `prefs_schema` (nil without the table) and whether
    /// `prefs_values` exists.
    private static func inspect(_ connection: Connection, deadline: ContinuousClock.Instant) throws
        -> (versions: [Int]?, hasValues: Bool)
    {
        // pg_tables is read with the statement's snapshot; to_regclass can miss a table another session has just
        // created (its catalog cache is refreshed only when this session takes a lock on a relation).
        let found = try connection.execute(
            "SELECT EXISTS (SELECT FROM pg_tables WHERE schemaname = current_schema() AND tablename = 'prefs_schema'), "
                + "EXISTS (SELECT FROM pg_tables WHERE schemaname = current_schema() AND tablename = 'prefs_values')",
            deadline: deadline)
        let hasValues = found.first?[1] == "t"
        guard found.first?[0] == "t" else { return (nil, hasValues) }
        let rows = try connection.execute("SELECT version FROM prefs_schema", deadline: deadline)
        return (rows.compactMap { $0[0].flatMap { Int($0) } }, hasValues)
    }

    /// Creates the schema when the database has none, upgrades versions 1 and 2, or checks the version of the one it
    /// has.
    ///
    /// A database already at this version is only read: no lock is taken. Creating or upgrading takes a
    /// transaction-level advisory lock with `pg_try_advisory_xact_lock`, retried until the connection's
    /// `connectTimeout`, so a session that holds that lock (any role can) delays an open by that long at most.
    static func prepare(on connection: Connection) throws {
        let limit = connection.limits.connectTimeout
        let deadline = ContinuousClock.now + limit + connection.limits.writeDeadline
        let quick = try inspect(connection, deadline: deadline)
        if quick.versions == [version], quick.hasValues { return }
        try connection.execute("BEGIN", deadline: deadline)
        do {
            let giveUp = ContinuousClock.now + limit
            while try connection.execute("SELECT pg_try_advisory_xact_lock(\(advisoryLock))", deadline: deadline)
                .first?[0] != "t"
            {
                guard ContinuousClock.now < giveUp else {
                    throw PostgresStoreError.timedOut(
                        reason: "another session holds the schema lock (pg_advisory_lock \(advisoryLock))")
                }
                usleep(50_000)
            }
            let found = try inspect(connection, deadline: deadline)
            switch (found.versions, found.hasValues) {
            case ([version]?, true): break
            case ([1]?, true):
                for statement in upgradeFromVersion1 { try connection.execute(statement, deadline: deadline) }
            case ([2]?, true):
                for statement in upgradeFromVersion2 { try connection.execute(statement, deadline: deadline) }
            case (nil, false):
                for statement in create { try connection.execute(statement, deadline: deadline) }
            case (nil, true):
                throw PostgresStoreError.unsupportedSchemaVersion(found: nil, supported: version)
            case (let versions?, true):
                throw PostgresStoreError.unsupportedSchemaVersion(found: versions.first, supported: version)
            case (_?, false):
                throw PostgresStoreError.damagedSchema(
                    reason: "prefs_schema exists but prefs_values does not; drop prefs_schema to start afresh")
            }
            try connection.execute("COMMIT", deadline: deadline)
        } catch {
            if !connection.isBroken { _ = try? connection.execute("ROLLBACK", deadline: deadline) }
            throw error
        }
    }

    static let selectNamespace = "SELECT key, value::text, version FROM prefs_values WHERE namespace = $1"
    static let selectKey = "SELECT value::text, version FROM prefs_values WHERE namespace = $1 AND key = $2"
    static let selectKeyForUpdate = selectKey + " FOR UPDATE"
    /// The row's version and writer, once the row's lock is free (every transaction that wrote it has ended).
    static let selectWriterForUpdate =
        "SELECT version, writer::text FROM prefs_values WHERE namespace = $1 AND key = $2 FOR UPDATE"
    /// Run on the writing connection: its statements notify by themselves (see `notifyWritten`).
    static let notifyInline = "SET prefs.notify_inline = 'on'"
    /// Returns each written row's version and sends its hint (parameter `$4`, from ``hint(namespace:key:)``).
    /// Parameter `$5` is the writing transaction's id (NULL for a single `set`).
    private static let notifyWritten = """
        SELECT version, pg_notify('prefs_values', $4) FROM written
        """

    /// The hint a write of `key` sends: `{"namespace": …, "key": …}`, or only the namespace (listeners re-read it
    /// all) when that would be too long for `NOTIFY`, or `{}` when even the namespace is.
    static func hint(namespace: String, key: String) -> String {
        guard let names = try? PrefValue.string(namespace).jsonText() else { return "{}" }
        let keyed = #"{"namespace": "# + names + #", "key": "# + ((try? PrefValue.string(key).jsonText()) ?? "") + "}"
        if keyed.utf8.count <= largestHint { return keyed }
        let namespaceOnly = #"{"namespace": "# + names + "}"
        return namespaceOnly.utf8.count <= largestHint ? namespaceOnly : "{}"
    }
    static let upsert = """
        WITH written AS (
            INSERT INTO prefs_values (namespace, key, value, version, writer) VALUES ($1, $2, $3::jsonb, 1, $5::uuid)
            ON CONFLICT (namespace, key) DO UPDATE
                SET value = EXCLUDED.value, writer = EXCLUDED.writer,
                    version = LEAST(prefs_values.version, 9223372036854775806) + 1
            RETURNING version
        )
        """ + notifyWritten
    static let remove = """
        WITH written AS (
            UPDATE prefs_values SET value = NULL, writer = $5::uuid, version = LEAST(version, 9223372036854775806) + 1
            WHERE namespace = $1 AND key = $2 AND value IS NOT NULL AND $3::text IS NULL
            RETURNING version
        )
        """ + notifyWritten
    /// Makes sure a row exists to lock, so two instances updating an absent key serialise on it.
    static let placeholder = """
        INSERT INTO prefs_values (namespace, key, value, version) VALUES ($1, $2, NULL, 0)
        ON CONFLICT (namespace, key) DO NOTHING
        """
    static let lockNamespace = "SELECT key FROM prefs_values WHERE namespace = $1 FOR UPDATE"
}
