import Foundation
import Prefs

/// The tables, triggers and statements of schema version 5 (documented in docs/PostgresStore.md), in one
/// PostgreSQL schema that every statement names (`"public".prefs_values`), so a role's `search_path` cannot send the
/// store to another table or function.
///
/// Notifications carry hints only (which namespace and key changed), never values or versions: `NOTIFY` needs no
/// privilege, so anything in a payload can be read or forged by any role that can connect.
struct Schema: Sendable {
    /// The PostgreSQL schema's name, as the store was given it.
    let name: String
    /// `name` quoted as an identifier and followed by a dot: the prefix of every table and function name.
    let prefix: String
    /// A write of a value, or a removal when `$3` is NULL: `$1` the namespace, `$2` the key, `$3` the value's JSON text,
    /// `$4` its hint, `$5` the writing transaction's id (NULL for a single `set`), `$6` the lock timeout
    /// (`4000ms`). Returns the row's version (NULL for a removal of a key without a value) and the id of the
    /// transaction (`pg_current_xact_id`, read once the function has written), and sends the hint.
    ///
    /// It calls `prefs_values_write`, whose statements PL/pgSQL plans once per server connection: the statement sent
    /// is parsed where it runs (no prepared statement outlives a transaction, so it works through a pooler in
    /// transaction mode) and is short to parse, while planning the upsert itself each time cost three times the
    /// upsert. The function sets `lock_timeout` and `prefs.notify_inline` for its own transaction only.
    let write: String
    /// One row, locked: `$1` the namespace, `$2` the largest value sent, `$3` the key; value, version and size.
    let selectKeyForUpdate: String
    /// Makes sure a row exists to lock, so two instances updating an absent key serialise on it.
    let placeholder: String

    /// The schema named `name`; throws when PostgreSQL could not name it exactly (empty, NUL, over 63 bytes).
    init(_ name: String) throws(PostgresStoreError) {
        if name.isEmpty || name.utf8.contains(0) || name.utf8.count > 63 {
            throw .invalidSchema(name, reason: "a schema name has 1 to 63 bytes and no NUL")
        }
        self.name = name
        let prefix = "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\"."
        self.prefix = prefix
        // Built once: a write does not form its text again.
        selectKeyForUpdate =
            "SELECT \(Self.valueVersionSize) FROM \(prefix)prefs_values WHERE namespace = $1 AND key = $3 FOR UPDATE"
        write =
            "SELECT w, pg_catalog.pg_current_xact_id_if_assigned()::text "
            + "FROM \(prefix)prefs_values_write($1, $2, $3::jsonb, $4, $5::uuid, $6) AS w"
        placeholder = """
            INSERT INTO \(prefix)prefs_values (namespace, key, value, version) VALUES ($1, $2, NULL, 0)
            ON CONFLICT (namespace, key) DO NOTHING
            """
    }

    /// Begins a transaction and sets, for it alone, the bounds of `limits`, a `search_path` that searches only the
    /// built-in catalog (this session's temporary objects last, so not even a built-in function or operator can be
    /// shadowed by another role's schema), and `prefs.notify_inline`: one round trip, and nothing outlives the
    /// transaction, so a pooler in transaction mode hands the server connection on clean.
    static func begin(_ limits: PostgresStore.Limits) -> String {
        [
            "BEGIN",
            "SET LOCAL statement_timeout = \(limits.statementTimeout.wholeMilliseconds)",
            "SET LOCAL lock_timeout = \(limits.lockTimeout.wholeMilliseconds)",
            "SET LOCAL idle_in_transaction_session_timeout = \(limits.writeDeadline.wholeMilliseconds * 2)",
            "SET LOCAL search_path TO pg_catalog, pg_temp",
            "SET LOCAL prefs.notify_inline = 'on'",
        ].joined(separator: "; ")
    }

    static let version = 5
    /// The `LISTEN`/`NOTIFY` channel.
    static let channel = "prefs_values"
    /// Serialises schema creation among instances that start at once (`pg_try_advisory_xact_lock` key).
    static let advisoryLock = "7301451916011975"
    /// The largest payload a hint may have (`NOTIFY` refuses 8000 bytes and more).
    static let largestHint = 7_000
    /// How long `prefs_removals` keeps a deletion after every transaction below its horizon had ended: an instance
    /// whose last read of the feed is older than half of it reads its namespace whole instead.
    static let removalsKept = Duration.seconds(3_600)
    /// The most bytes a namespace and a key may have together: PostgreSQL's b-tree index holds an entry of at most
    /// 2 704 bytes (8 KiB pages), and the primary key's entry of the two, uncompressed, takes at most 26 bytes more.
    static let largestIndexedKey = 2_678
    /// Functions and triggers, shared by creation and by the upgrade from version 1. `CREATE OR REPLACE` lets a
    /// database whose tables were dropped but whose functions were left behind be created again.
    var functions: [String] {
        [
            // Versions grow by one and stop at Int64.max instead of overflowing: a row set to the largest version by
            // hand stays writable. Instances never trust a version they did not read, so a stuck version is harmless.
            feedFunction,
            """
            CREATE OR REPLACE FUNCTION \(prefix)prefs_values_write(
                ns text, k text, v jsonb, hint text, w uuid, lock_wait text
            ) RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
            DECLARE
                written bigint;
            BEGIN
                PERFORM set_config('prefs.notify_inline', 'on', true), set_config('lock_timeout', lock_wait, true);
                IF v IS NULL THEN
                    UPDATE \(prefix)prefs_values AS r
                        SET value = NULL, writer = w, changed = pg_current_xact_id(),
                            version = LEAST(r.version, 9223372036854775806) + 1
                        WHERE r.namespace = ns AND r.key = k AND r.value IS NOT NULL
                        RETURNING r.version INTO written;
                ELSE
                    INSERT INTO \(prefix)prefs_values AS r (namespace, key, value, version, writer, changed)
                        VALUES (ns, k, v, 1, w, pg_current_xact_id())
                        ON CONFLICT (namespace, key) DO UPDATE
                            SET value = EXCLUDED.value, writer = EXCLUDED.writer, changed = EXCLUDED.changed,
                                version = LEAST(r.version, 9223372036854775806) + 1
                        RETURNING r.version INTO written;
                END IF;
                IF written IS NOT NULL THEN
                    PERFORM pg_notify('prefs_values', hint);
                END IF;
                RETURN written;
            END
            $$
            """,
            // A write that does not move the change stamp (anyone's SQL) gets its transaction's id, so pollers see it.
            """
            CREATE OR REPLACE FUNCTION \(prefix)prefs_values_bump() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF NEW.version = OLD.version THEN
                    NEW.version := LEAST(OLD.version, 9223372036854775806) + 1;
                END IF;
                IF NEW.changed IS NOT DISTINCT FROM OLD.changed THEN
                    NEW.changed := pg_catalog.pg_current_xact_id();
                END IF;
                RETURN NEW;
            END
            $$
            """,
            """
            CREATE OR REPLACE FUNCTION \(prefix)prefs_values_hint(ns text, k text) RETURNS text
            LANGUAGE sql IMMUTABLE AS $$
                SELECT CASE
                    WHEN octet_length(json_build_object('namespace', ns, 'key', k)::text) <= \(Self.largestHint)
                        THEN json_build_object('namespace', ns, 'key', k)::text
                    WHEN octet_length(json_build_object('namespace', ns)::text) <= \(Self.largestHint)
                        THEN json_build_object('namespace', ns)::text
                    ELSE '{}'
                END
            $$
            """,
            """
            CREATE OR REPLACE FUNCTION \(prefix)prefs_values_notify() RETURNS trigger LANGUAGE plpgsql
            SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
            BEGIN
                IF TG_OP = 'TRUNCATE' THEN
                    INSERT INTO \(prefix)prefs_removals (namespace, key) VALUES (NULL, NULL);
                    PERFORM pg_notify('prefs_values', '{"reset": true}');
                    RETURN NULL;
                END IF;
                IF TG_OP = 'DELETE' THEN
                    INSERT INTO \(prefix)prefs_removals (namespace, key) VALUES (OLD.namespace, OLD.key);
                END IF;
                IF TG_OP <> 'INSERT' THEN
                    PERFORM pg_notify('prefs_values', \(prefix)prefs_values_hint(OLD.namespace, OLD.key));
                END IF;
                IF TG_OP <> 'DELETE' THEN
                    PERFORM pg_notify('prefs_values', \(prefix)prefs_values_hint(NEW.namespace, NEW.key));
                END IF;
                RETURN NULL;
            END
            $$
            """,
            "DROP FUNCTION IF EXISTS \(prefix)prefs_values_payload(text, text, jsonb, bigint)",
            "DROP TRIGGER IF EXISTS prefs_values_reset ON \(prefix)prefs_values",
            """
            CREATE TRIGGER prefs_values_reset AFTER TRUNCATE ON \(prefix)prefs_values
                FOR EACH STATEMENT EXECUTE FUNCTION \(prefix)prefs_values_notify()
            """,
            pruneFunction,
            "DROP TRIGGER IF EXISTS prefs_removals_prune ON \(prefix)prefs_values",
            """
            CREATE TRIGGER prefs_removals_prune AFTER DELETE OR TRUNCATE ON \(prefix)prefs_values
                FOR EACH STATEMENT EXECUTE FUNCTION \(prefix)prefs_removals_prune()
            """,
        ]
    }

    /// Deletes from `prefs_removals` what no instance can still need, after every statement that deletes or
    /// truncates (the only statements that add to it). A row records the horizon of its snapshot: every
    /// transaction below it had ended when the row was logged. The newest row logged more than ``removalsKept`` ago
    /// gives a horizon below which every transaction ended that long ago; an instance whose last read is younger than
    /// half of it has read what they did, and one whose last read is older reads its namespace whole. Rows locked by
    /// another statement pruning at once are left for the next.
    private var pruneFunction: String {
        let kept = "interval '\(Self.removalsKept.components.seconds) seconds'"
        return """
            CREATE OR REPLACE FUNCTION \(prefix)prefs_removals_prune() RETURNS trigger LANGUAGE plpgsql
            SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
            DECLARE
                settled xid8;
                old timestamptz := clock_timestamp() - \(kept);
            BEGIN
                SELECT r.horizon INTO settled FROM \(prefix)prefs_removals r
                    WHERE r.logged < old ORDER BY r.logged DESC LIMIT 1;
                IF settled IS NOT NULL THEN
                    DELETE FROM \(prefix)prefs_removals WHERE ctid = ANY (ARRAY(
                        SELECT r.ctid FROM \(prefix)prefs_removals r
                            WHERE r.logged < old AND r.changed < settled
                            FOR UPDATE SKIP LOCKED));
                END IF;
                RETURN NULL;
            END
            $$
            """
    }

    var create: [String] {
        [
            """
            CREATE TABLE \(prefix)prefs_values (
                namespace text NOT NULL,
                key text NOT NULL,
                value jsonb,
                version bigint NOT NULL DEFAULT 1,
                writer uuid,
                changed xid8 NOT NULL DEFAULT pg_catalog.pg_current_xact_id(),
                PRIMARY KEY (namespace, key)
            )
            """,
            "COMMENT ON TABLE \(prefix)prefs_values IS 'Prefs PostgresStore, schema version \(Self.version): one row per key; "
                + "value is the FileStore JSON form, NULL once removed; version grows by one with every update; "
                + "writer names the Prefs transaction that wrote it; changed is the id of the transaction that last "
                + "wrote it'",
            "CREATE TABLE \(prefix)prefs_schema (version integer NOT NULL)",
            "INSERT INTO \(prefix)prefs_schema (version) VALUES (\(Self.version))",
        ] + changeLog + functions + [bumpTrigger] + [
            // Prefs' own connections set prefs.notify_inline and notify from the writing statement itself, which
            // costs less than a PL/pgSQL trigger; writes from anyone else notify through the trigger.
            """
            CREATE TRIGGER prefs_values_notify AFTER INSERT OR UPDATE OR DELETE ON \(prefix)prefs_values
                FOR EACH ROW WHEN (current_setting('prefs.notify_inline', true) IS DISTINCT FROM 'on')
                EXECUTE FUNCTION \(prefix)prefs_values_notify()
            """
        ]
    }

    /// The change feed's index, and the log of rows deleted or truncated by SQL (the store itself only ever clears a
    /// row's value, which moves its `changed` stamp), with when each was logged and its snapshot's horizon, by which
    /// it is pruned (``pruneFunction``).
    private var changeLog: [String] {
        [
            "CREATE INDEX IF NOT EXISTS prefs_values_changes ON \(prefix)prefs_values (namespace, changed)",
            """
            CREATE TABLE IF NOT EXISTS \(prefix)prefs_removals (
                namespace text,
                key text,
                changed xid8 NOT NULL DEFAULT pg_catalog.pg_current_xact_id(),
                logged timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
                horizon xid8 NOT NULL DEFAULT pg_catalog.pg_snapshot_xmin(pg_catalog.pg_current_snapshot())
            )
            """,
            "CREATE INDEX IF NOT EXISTS prefs_removals_changes ON \(prefix)prefs_removals (namespace, changed)",
            // Rows logged by version 4 have no horizon: '0' says nothing, so they are pruned by the rows after them.
            """
            ALTER TABLE \(prefix)prefs_removals
                ADD COLUMN IF NOT EXISTS logged timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
                ADD COLUMN IF NOT EXISTS horizon xid8 NOT NULL DEFAULT '0'
            """,
            """
            ALTER TABLE \(prefix)prefs_removals ALTER COLUMN horizon
                SET DEFAULT pg_catalog.pg_snapshot_xmin(pg_catalog.pg_current_snapshot())
            """,
            "CREATE INDEX IF NOT EXISTS prefs_removals_logged ON \(prefix)prefs_removals (logged)",
        ]
    }

    private var bumpTrigger: String {
        """
        CREATE TRIGGER prefs_values_bump BEFORE UPDATE ON \(prefix)prefs_values
            FOR EACH ROW WHEN (NEW.version = OLD.version OR NEW.changed IS NOT DISTINCT FROM OLD.changed)
            EXECUTE FUNCTION \(prefix)prefs_values_bump()
        """
    }

    /// Version 5 reads the feed from a snapshot (`prefs_values_feed`) rather than from a horizon, and prunes
    /// `prefs_removals`. `prefs_values_changes`, which version 4 reads, is kept for instances still running it.
    var upgradeFromVersion4: [String] {
        changeLog + functions + ["UPDATE \(prefix)prefs_schema SET version = \(Self.version)"]
    }
    /// Version 4 adds the change feed: the `changed` column (the id of the transaction that last wrote the row), its
    /// index, and `prefs_removals`. Rows written before it read as changed at transaction 0.
    var upgradeFromVersion3: [String] {
        [
            "ALTER TABLE \(prefix)prefs_values ADD COLUMN IF NOT EXISTS changed xid8 NOT NULL DEFAULT '0'",
            "ALTER TABLE \(prefix)prefs_values ALTER COLUMN changed SET DEFAULT pg_catalog.pg_current_xact_id()",
        ] + changeLog + functions + [
            "DROP TRIGGER IF EXISTS prefs_values_bump ON \(prefix)prefs_values", bumpTrigger,
            "UPDATE \(prefix)prefs_schema SET version = \(Self.version)",
        ]
    }
    /// Version 3 adds the `writer` column, which settles a transaction's outcome after its `COMMIT` went unanswered.
    var upgradeFromVersion2: [String] {
        ["ALTER TABLE \(prefix)prefs_values ADD COLUMN IF NOT EXISTS writer uuid"] + upgradeFromVersion3
    }
    /// Version 1 sent values in its payloads; version 2 replaced its functions and added the `TRUNCATE` trigger.
    var upgradeFromVersion1: [String] { functions + upgradeFromVersion2 }

    /// What the database holds: the version rows of `prefs_schema` (nil without the table) and whether
    /// `prefs_values` exists.
    private func inspect(_ connection: Connection, deadline: ContinuousClock.Instant) throws
        -> (versions: [Int]?, hasValues: Bool)
    {
        // pg_tables is read with the statement's snapshot; to_regclass can miss a table another session has just
        // created (its catalog cache is refreshed only when this session takes a lock on a relation).
        let found = try connection.execute(
            "SELECT EXISTS (SELECT FROM pg_tables WHERE schemaname = $1 AND tablename = 'prefs_schema'), "
                + "EXISTS (SELECT FROM pg_tables WHERE schemaname = $1 AND tablename = 'prefs_values')",
            [name], deadline: deadline)
        let hasValues = found.first?[1] == "t"
        guard found.first?[0] == "t" else { return (nil, hasValues) }
        let rows = try connection.execute("SELECT version FROM \(prefix)prefs_schema", deadline: deadline)
        return (rows.compactMap { $0[0].flatMap { Int($0) } }, hasValues)
    }

    /// Creates the schema when the database has none, upgrades versions 1 and 2, or checks the version of the one it
    /// has.
    ///
    /// A database already at this version is only read: no lock is taken. Creating or upgrading takes a
    /// transaction-level advisory lock with `pg_try_advisory_xact_lock`, retried until the connection's
    /// `connectTimeout`, so a session that holds that lock (any role can) delays an open by that long at most.
    func prepare(on connection: Connection) throws {
        let limit = connection.limits.connectTimeout
        let deadline = ContinuousClock.now + limit + connection.limits.writeDeadline
        let version = Self.version
        let advisoryLock = Self.advisoryLock
        let quick = try inspect(connection, deadline: deadline)
        if quick.versions == [version], quick.hasValues { return }
        try connection.execute(script: Self.begin(connection.limits), deadline: deadline)
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
            case ([3]?, true):
                for statement in upgradeFromVersion3 { try connection.execute(statement, deadline: deadline) }
            case ([4]?, true):
                for statement in upgradeFromVersion4 { try connection.execute(statement, deadline: deadline) }
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

    /// A row's value as text when its text has at most `$2` bytes (NULL beyond, so an oversized row is never
    /// sent), its version, and the size of its text (NULL once removed).
    private static let valueVersionSize =
        "CASE WHEN octet_length(value::text) <= $2::bigint THEN value::text END, version, octet_length(value::text)"
    /// What changed in a namespace since a snapshot: `$1` the namespace, `$2` the largest value sent, `$3` the `xmax`
    /// of the read before's snapshot (NULL reads every row) and `$4` its transactions in progress (`{1,2}`). It calls
    /// `prefs_values_feed`, whose queries PL/pgSQL plans once per server connection (see ``write``).
    ///
    /// The first row is `h` and this read's own snapshot, which bounds the next read. Then one `v` row per key
    /// written by a transaction the bound does not include (key, value, version, size): one that had not ended when
    /// the bound was taken (its `xmax` and above, or its list of transactions in progress), and one per key SQL
    /// deleted in such a transaction (the key alone: a row written again since was written after the deletion, so by
    /// such a transaction too, and comes as a row of its own), then `x` when the table was truncated in one. Each is found by the `(namespace, changed)` indexes, a range from `xmax` and one look-up of
    /// both columns per transaction in progress (a statement of its own each: with `changed = ANY (…)` or an `OR`, the
    /// plan PL/pgSQL keeps scanned the whole namespace of the index): the rows changed since, whatever a long
    /// transaction elsewhere holds open.
    var changesSince: String {
        "SELECT * FROM \(prefix)prefs_values_feed($1, $2::bigint, $3::xid8, $4::xid8[])"
    }

    /// The function behind ``changesSince``; one snapshot serves the bound and the rows (a `STABLE` function runs
    /// its queries with its caller's). PL/pgSQL keeps each query's plan for the session's life, planned when the table
    /// may have been small: without sequential scans, a plan reads the indexes' ranges, whatever the table grew to
    /// (dead row versions a long transaction keeps included).
    private var feedFunction: String {
        let valueVersionSize =
            "CASE WHEN octet_length(v.value::text) <= largest THEN v.value::text END, v.version::text, "
            + "octet_length(v.value::text)::text"
        return """
            CREATE OR REPLACE FUNCTION \(prefix)prefs_values_feed(ns text, largest bigint, upto xid8, pending xid8[])
            RETURNS TABLE (row_kind text, row_key text, row_value text, row_version text, row_size text)
            LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp SET enable_seqscan = off
            SET plan_cache_mode = force_generic_plan AS $$
            DECLARE
                running xid8;
            BEGIN
                IF upto IS NULL THEN
                    RETURN QUERY
                    SELECT 'h', pg_current_snapshot()::text, NULL, NULL, NULL
                    UNION ALL
                    SELECT 'v', v.key, \(valueVersionSize) FROM \(prefix)prefs_values v WHERE v.namespace = ns;
                    RETURN;
                END IF;
                RETURN QUERY
                SELECT 'h', pg_current_snapshot()::text, NULL, NULL, NULL
                UNION ALL
                SELECT 'v', v.key, \(valueVersionSize) FROM \(prefix)prefs_values v
                    WHERE v.namespace = ns AND v.changed >= upto
                UNION ALL
                SELECT 'v', r.key, NULL, NULL, NULL FROM \(prefix)prefs_removals r
                    WHERE r.namespace = ns AND r.changed >= upto
                UNION ALL
                (SELECT 'x', NULL, NULL, NULL, NULL FROM \(prefix)prefs_removals t
                    WHERE t.namespace IS NULL AND t.changed >= upto LIMIT 1);
                FOREACH running IN ARRAY pending LOOP
                    RETURN QUERY
                    SELECT 'v', v.key, \(valueVersionSize) FROM \(prefix)prefs_values v
                        WHERE v.namespace = ns AND v.changed = running
                    UNION ALL
                    SELECT 'v', r.key, NULL, NULL, NULL FROM \(prefix)prefs_removals r
                        WHERE r.namespace = ns AND r.changed = running
                    UNION ALL
                    (SELECT 'x', NULL, NULL, NULL, NULL FROM \(prefix)prefs_removals t
                        WHERE t.namespace IS NULL AND t.changed = running LIMIT 1);
                END LOOP;
            END
            $$
            """
    }
    /// The row's version and writer, once the row's lock is free (every transaction that wrote it has ended).
    var selectWriterForUpdate: String {
        "SELECT version, writer::text FROM \(prefix)prefs_values WHERE namespace = $1 AND key = $2 FOR UPDATE"
    }
    var lockNamespace: String { "SELECT key FROM \(prefix)prefs_values WHERE namespace = $1 FOR UPDATE" }
}

/// The hints one namespace's writes send: `{"namespace": …, "key": …}`, or only the namespace (listeners re-read it
/// all) when that would be too long for `NOTIFY`, or `{}` when even the namespace is. The namespace's part is written
/// once, when the store opens.
struct Hints: Sendable {
    /// `{"namespace": "…", "key": ` (nil when the namespace alone is too long).
    private let keyedPrefix: String?
    private let namespaceOnly: String

    init(namespace: String) {
        let names = (try? PrefValue.string(namespace).jsonText()) ?? "\"\""
        let namespaceOnly = #"{"namespace": "# + names + "}"
        if namespaceOnly.utf8.count <= Schema.largestHint {
            self.namespaceOnly = namespaceOnly
            keyedPrefix = #"{"namespace": "# + names + #", "key": "#
        } else {
            self.namespaceOnly = "{}"
            keyedPrefix = nil
        }
    }

    /// The hint of a write of `key`.
    func hint(key: String) -> String {
        guard let keyedPrefix else { return namespaceOnly }
        var hint = keyedPrefix
        // A key that needs no escaping (the usual one) is quoted as it is, without a JSON writer.
        if key.utf8.allSatisfy({ $0 >= 0x20 && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) {
            hint += "\""
            hint += key
            hint += "\"}"
        } else {
            hint += ((try? PrefValue.string(key).jsonText()) ?? "\"\"") + "}"
        }
        return hint.utf8.count <= Schema.largestHint ? hint : namespaceOnly
    }
}
