"""Every SQL statement of the PostgreSQL engine, in one place.

Statements are templates with a ``{schema}`` placeholder, composed once per
store by :class:`Statements` with :class:`psycopg.sql.Identifier` (so any
schema name works, quotes and ``%`` included); values always travel as
parameters. Parameters carry explicit casts, so that a ``None`` or a small
``int`` never leaves PostgreSQL guessing a type. Every statement is sent
with a parameter mapping (perhaps empty), so a ``%`` in the text is always
read as a placeholder: the schema's own ``%`` are doubled when composed.

Time: every statement that needs "now" reads ``clock_timestamp()`` once, in
a materialized ``clock`` CTE, and refers to it as ``(SELECT t FROM clock)``:
that is an init-plan parameter, so the planner can still use it as an index
bound (C-4). Durations are ``float8`` seconds times ``interval '1 second'``.

Operations are single statements wherever that is possible (data-modifying
CTEs), hence atomic on any connection, the caller's autocommit one included
(C-6, docs/adr/0004); the few that need several run them in one transaction
or savepoint (:mod:`._plan`). Wakes are ``pg_notify(<wake channel>, <key>)``
from a one-row CTE, so a statement sends one NOTIFY whatever the number of
rows (docs/adr/0003). The claim path and its indexes are explained in
docs/adr/0002 and docs/adr/0008.
"""

from __future__ import annotations

from psycopg import sql

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "Statements"]

SCHEMA_VERSION = 7

# ----------------------------------------------------------------------- schema

# Without the schema placeholder: the schema may not exist yet.
SCHEMA_EXISTS = "SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = %(schema)s::text"
META_EXISTS = """
SELECT 1 FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s::text AND c.relname = 'meta' AND c.relkind = 'r'
"""
# Serializes concurrent migrations of one schema until the migration commits.
MIGRATION_LOCK = "SELECT pg_advisory_xact_lock(%(key)s::bigint)"

GET_VERSION = "SELECT value FROM {schema}.meta WHERE key = 'schema_version'"
SET_VERSION = """
INSERT INTO {schema}.meta (key, value) VALUES ('schema_version', %(version)s::text)
ON CONFLICT (key) DO UPDATE SET value = excluded.value
"""
GET_STORE_ID = "SELECT value FROM {schema}.meta WHERE key = 'store_id'"
GET_WIDTH = "SELECT value FROM {schema}.meta WHERE key = 'partition_width_s'"
META_ROWS = "SELECT key, value FROM {schema}.meta ORDER BY key"
CREATE_SCHEMA = "CREATE SCHEMA {schema}"
CREATE_META = """
CREATE TABLE IF NOT EXISTS {schema}.meta (
    key text PRIMARY KEY,
    value text NOT NULL
)"""

# Migration n brings the schema from version n-1 to n.
MIGRATIONS: dict[int, list[str]] = {
    1: [
        CREATE_META,
        # Live jobs of every queue. ready_at: when the row can next be claimed
        # (run_at while pending, the claim deadline while processing). The
        # table churns (every job is inserted, updated and deleted), so
        # autovacuum looks at it more often than the default 20 % of rows.
        """CREATE TABLE IF NOT EXISTS {schema}.jobs (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            queue text NOT NULL,
            state text NOT NULL CHECK (state IN ('pending', 'processing')),
            payload json NOT NULL,
            priority integer NOT NULL,
            run_at timestamptz NOT NULL,
            ready_at timestamptz NOT NULL,
            created_at timestamptz NOT NULL,
            claimed_at timestamptz,
            deadline timestamptz,
            worker_id text,
            attempts integer NOT NULL DEFAULT 0,
            max_attempts integer NOT NULL,
            visibility_timeout_s double precision NOT NULL,
            backoff_base_s double precision NOT NULL,
            dead_letter_retention_s double precision,
            expires_at timestamptz
        ) WITH (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02)""",
        """CREATE INDEX IF NOT EXISTS jobs_claim
            ON {schema}.jobs (queue, priority DESC, ready_at, id)
            WHERE attempts < max_attempts""",
        """CREATE INDEX IF NOT EXISTS jobs_ready
            ON {schema}.jobs (queue, ready_at)
            WHERE attempts < max_attempts""",
        """CREATE INDEX IF NOT EXISTS jobs_exhausted
            ON {schema}.jobs (queue, ready_at)
            WHERE attempts >= max_attempts""",
        """CREATE INDEX IF NOT EXISTS jobs_expires
            ON {schema}.jobs (queue, expires_at)
            WHERE expires_at IS NOT NULL""",
        # Dead rows keep their live id (ids never repeat: identity above).
        """CREATE TABLE IF NOT EXISTS {schema}.dead (
            id bigint PRIMARY KEY,
            queue text NOT NULL,
            payload json NOT NULL,
            priority integer NOT NULL,
            run_at timestamptz NOT NULL,
            created_at timestamptz NOT NULL,
            claimed_at timestamptz,
            deadline timestamptz,
            worker_id text,
            attempts integer NOT NULL,
            max_attempts integer NOT NULL,
            visibility_timeout_s double precision NOT NULL,
            backoff_base_s double precision NOT NULL,
            dead_letter_retention_s double precision,
            expires_at timestamptz,
            last_error text NOT NULL,
            died_at timestamptz NOT NULL,
            purge_at timestamptz
        )""",
        "CREATE INDEX IF NOT EXISTS dead_queue ON {schema}.dead (queue, id)",
        """CREATE INDEX IF NOT EXISTS dead_purge
            ON {schema}.dead (queue, purge_at) WHERE purge_at IS NOT NULL""",
        # Streams: one counter row per stream hands out offsets (S-2).
        """CREATE TABLE IF NOT EXISTS {schema}.streams (
            name text PRIMARY KEY,
            last_seq bigint NOT NULL
        )""",
        """CREATE TABLE IF NOT EXISTS {schema}.events (
            stream text NOT NULL,
            seq bigint NOT NULL,
            key text,
            payload json NOT NULL,
            created_at timestamptz NOT NULL,
            PRIMARY KEY (stream, seq)
        )""",
        """CREATE TABLE IF NOT EXISTS {schema}.consumers (
            stream text NOT NULL,
            consumer text NOT NULL,
            seq bigint NOT NULL,
            PRIMARY KEY (stream, consumer)
        )""",
        # Locks keep their row after release so that tokens only grow (L-4).
        """CREATE TABLE IF NOT EXISTS {schema}.locks (
            name text PRIMARY KEY,
            owner text,
            token bigint NOT NULL,
            expires_at timestamptz NOT NULL
        )""",
        """CREATE TABLE IF NOT EXISTS {schema}.schedules (
            name text PRIMARY KEY,
            spec text NOT NULL,
            queue text NOT NULL,
            payload json NOT NULL,
            opts text,
            tz text NOT NULL,
            next_fire_at timestamptz NOT NULL,
            last_fire_at timestamptz,
            created_at timestamptz NOT NULL,
            updated_at timestamptz NOT NULL
        )""",
        "CREATE INDEX IF NOT EXISTS schedules_next ON {schema}.schedules (next_fire_at)",
    ],
    # Version 2 (as SQLite's): claim numbers that survive redrives (Q-4,
    # Q-21), unique keys (Q-23), groups (Q-25), the trace context (O-2),
    # rate limits (R-1), and the store's identity (C-7).
    2: [
        """ALTER TABLE {schema}.jobs
            ADD COLUMN claims integer NOT NULL DEFAULT 0,
            ADD COLUMN unique_key text,
            ADD COLUMN grp text,
            ADD COLUMN group_limit integer,
            ADD COLUMN parked smallint NOT NULL DEFAULT 0 CHECK (parked IN (0, 1)),
            ADD COLUMN trace_context text""",
        "UPDATE {schema}.jobs SET claims = attempts",
        """ALTER TABLE {schema}.dead
            ADD COLUMN claims integer NOT NULL DEFAULT 0,
            ADD COLUMN unique_key text,
            ADD COLUMN grp text,
            ADD COLUMN group_limit integer,
            ADD COLUMN trace_context text""",
        "UPDATE {schema}.dead SET claims = attempts",
        # Parked rows (a group at its limit, Q-25) are not claimable: they
        # leave the claim and ready indexes and wait in the group index.
        "DROP INDEX {schema}.jobs_claim",
        """CREATE INDEX jobs_claim ON {schema}.jobs (queue, priority DESC, ready_at, id)
            WHERE attempts < max_attempts AND parked = 0""",
        "DROP INDEX {schema}.jobs_ready",
        """CREATE INDEX jobs_ready ON {schema}.jobs (queue, ready_at)
            WHERE attempts < max_attempts AND parked = 0""",
        "CREATE INDEX jobs_parked ON {schema}.jobs (queue) WHERE parked = 1",
        # A group's rows by parked-ness, each in claim order: its slot holders
        # (parked = 0) are counted on at most group_limit entries, the next
        # row to unpark is one probe (Q-25, docs/adr/0014).
        """CREATE INDEX jobs_group
            ON {schema}.jobs (queue, grp, parked, priority DESC, ready_at, id)
            WHERE grp IS NOT NULL""",
        # Every path that may move a slot of a limited group runs through
        # these triggers: inserts (enqueues, redrives, schedule fires) and
        # retries wait parked, then the group is rebalanced; a slot holder's
        # delete (ack, cancel, a move to dead) frees its slot. Ungrouped rows
        # pay only the WHEN test.
        """CREATE FUNCTION {schema}.group_slots() RETURNS trigger
            LANGUAGE plpgsql AS $body$
        BEGIN
            IF TG_OP = 'DELETE' THEN
                PERFORM {schema}.rebalance_group(OLD.queue, OLD.grp);
            ELSE
                UPDATE {schema}.jobs SET parked = 1
                WHERE id = NEW.id AND state = 'pending' AND parked = 0;
                PERFORM {schema}.rebalance_group(NEW.queue, NEW.grp);
            END IF;
            RETURN NULL;
        END
        $body$""",
        """CREATE TRIGGER jobs_group_insert AFTER INSERT ON {schema}.jobs
            FOR EACH ROW WHEN (NEW.group_limit IS NOT NULL AND NEW.grp IS NOT NULL)
            EXECUTE FUNCTION {schema}.group_slots()""",
        """CREATE TRIGGER jobs_group_retry AFTER UPDATE OF state ON {schema}.jobs
            FOR EACH ROW WHEN (OLD.state = 'processing' AND NEW.state = 'pending'
                               AND NEW.group_limit IS NOT NULL AND NEW.grp IS NOT NULL
                               AND NEW.attempts = OLD.attempts)
            EXECUTE FUNCTION {schema}.group_slots()""",
        """CREATE TRIGGER jobs_group_delete AFTER DELETE ON {schema}.jobs
            FOR EACH ROW WHEN (OLD.group_limit IS NOT NULL AND OLD.grp IS NOT NULL
                               AND OLD.parked = 0)
            EXECUTE FUNCTION {schema}.group_slots()""",
        # Only live rows hold a key: the dead table has no such index.
        """CREATE UNIQUE INDEX jobs_unique ON {schema}.jobs (queue, unique_key)
            WHERE unique_key IS NOT NULL""",
        "CREATE INDEX dead_died ON {schema}.dead (queue, died_at)",
        # GCRA: one row per limiter; tat is the theoretical arrival time in
        # seconds since the epoch, on the server's clock.
        """CREATE TABLE {schema}.rate_limits (
            name text PRIMARY KEY,
            tat double precision NOT NULL,
            granted boolean NOT NULL DEFAULT true
        )""",
        # Names this database and schema for C-7 (two stores on it are one).
        """INSERT INTO {schema}.meta (key, value) VALUES ('store_id', %(store_id)s::text)
            ON CONFLICT (key) DO NOTHING""",
    ],
    # Version 3 (as SQLite's): a limited group's waiting slot holders by
    # expiry, so that a claim finds one that expired (it can never run, yet
    # holds a slot) with one probe; and the rebalance that gives a slot to a
    # row ready now before one that waits (Q-25, docs/adr/0014).
    3: [
        """CREATE INDEX IF NOT EXISTS jobs_group_expiry ON {schema}.jobs (queue, expires_at)
            WHERE grp IS NOT NULL AND parked = 0 AND state = 'pending'
              AND expires_at IS NOT NULL""",
        # A group's slots go to its best rows, never more than its limit:
        # "best" is a row ready now before one that waits (a delay, a retry's
        # backoff), then claim order. Serialized per group by a
        # transaction-level advisory lock; claims never take it (they only
        # turn a slot holder from pending to processing).
        """CREATE OR REPLACE FUNCTION {schema}.rebalance_group(q text, g text) RETURNS void
            LANGUAGE plpgsql AS $body$
        DECLARE
            best record;
            worst record;
            lim integer;
            holders integer;
            now_t timestamptz := clock_timestamp();
        BEGIN
            PERFORM pg_advisory_xact_lock(
                hashtextextended('alkstore.group' || chr(1) || q || chr(1) || g, 0));
            LOOP
                SELECT id, priority, ready_at, group_limit INTO best FROM {schema}.jobs
                WHERE queue = q AND grp = g AND parked = 1 AND ready_at <= now_t
                ORDER BY priority DESC, ready_at, id LIMIT 1;
                IF best.id IS NULL THEN
                    SELECT id, priority, ready_at, group_limit INTO best FROM {schema}.jobs
                    WHERE queue = q AND grp = g AND parked = 1
                    ORDER BY priority DESC, ready_at, id LIMIT 1;
                END IF;
                SELECT id, priority, ready_at, group_limit INTO worst FROM {schema}.jobs
                WHERE queue = q AND grp = g AND parked = 0 AND state = 'pending'
                  AND ready_at > now_t
                ORDER BY priority ASC, ready_at DESC, id DESC LIMIT 1;
                IF worst.id IS NULL THEN
                    SELECT id, priority, ready_at, group_limit INTO worst FROM {schema}.jobs
                    WHERE queue = q AND grp = g AND parked = 0 AND state = 'pending'
                    ORDER BY priority ASC, ready_at DESC, id DESC LIMIT 1;
                END IF;
                lim := best.group_limit;
                IF worst.id IS NOT NULL AND (lim IS NULL OR worst.group_limit < lim) THEN
                    lim := worst.group_limit;
                END IF;
                IF lim IS NULL THEN
                    RETURN;
                END IF;
                SELECT count(*) INTO holders FROM (
                    SELECT 1 FROM {schema}.jobs WHERE queue = q AND grp = g AND parked = 0
                    LIMIT lim + 1) h;
                IF best.id IS NOT NULL AND holders < lim THEN
                    UPDATE {schema}.jobs SET parked = 0 WHERE id = best.id;
                ELSIF worst.id IS NOT NULL AND holders > lim THEN
                    UPDATE {schema}.jobs SET parked = 1 WHERE id = worst.id AND state = 'pending';
                ELSIF best.id IS NOT NULL AND worst.id IS NOT NULL
                      AND (best.ready_at > now_t, -best.priority, best.ready_at, best.id)
                          < (worst.ready_at > now_t, -worst.priority, worst.ready_at, worst.id)
                THEN
                    UPDATE {schema}.jobs SET parked = 1 WHERE id = worst.id AND state = 'pending';
                    IF FOUND THEN
                        UPDATE {schema}.jobs SET parked = 0 WHERE id = best.id;
                    ELSE
                        RETURN;
                    END IF;
                ELSE
                    RETURN;
                END IF;
            END LOOP;
        END
        $body$""",
    ],
    # Version 4 (as SQLite's): kept results (RS-1..RS-3, docs/adr/0018). The
    # RS-1 stamp on live and dead rows; the results of acked jobs so stamped
    # in a table of their own, never read by a claim, partitioned by the
    # hour they finished in so that expiry drops whole partitions: the
    # sweep creates the next hours' partitions ahead and drops the past ones
    # whose every result is past its time (result_partitions below). Rows
    # of an hour without a partition go to the default one, whose rows the
    # sweep deletes one by one.
    4: [
        "ALTER TABLE {schema}.jobs ADD COLUMN result_ttl_s double precision",
        "ALTER TABLE {schema}.dead ADD COLUMN result_ttl_s double precision",
        """CREATE TABLE {schema}.results (
            id bigint NOT NULL,
            queue text NOT NULL,
            payload json NOT NULL,
            priority integer NOT NULL,
            run_at timestamptz NOT NULL,
            created_at timestamptz NOT NULL,
            claimed_at timestamptz,
            deadline timestamptz,
            worker_id text,
            attempts integer NOT NULL,
            max_attempts integer NOT NULL,
            visibility_timeout_s double precision NOT NULL,
            backoff_base_s double precision NOT NULL,
            dead_letter_retention_s double precision,
            expires_at timestamptz,
            claims integer NOT NULL,
            unique_key text,
            grp text,
            group_limit integer,
            trace_context text,
            result_ttl_s double precision NOT NULL,
            result json NOT NULL,
            finished_at timestamptz NOT NULL,
            keep_until timestamptz NOT NULL
        ) PARTITION BY RANGE (finished_at)""",
        "CREATE TABLE {schema}.results_default PARTITION OF {schema}.results DEFAULT",
        # A job's result by id (get_job, q.result) and a queue's in id order
        # (list_jobs); the newest expiry of a partition, one probe (whether
        # it can be dropped), and the rows past their time.
        "CREATE INDEX results_queue ON {schema}.results (queue, id)",
        "CREATE INDEX results_keep ON {schema}.results (keep_until)",
        # Partition upkeep, run by the sweep in a savepoint with a short lock
        # timeout: a role that may not run DDL, or a sweep that cannot get
        # the lock at once, skips it and the rows are deleted one by one.
        # Partitions are named after their hour (epoch seconds / 3600) and
        # only ever created for hours still to come, so no row of the
        # default partition can fall in one. Returns how many rows of queue
        # q the dropped partitions held. One sweep at a time does it.
        """CREATE FUNCTION {schema}.result_partitions(sch text, q text, ahead integer)
            RETURNS bigint LANGUAGE plpgsql AS $body$
        DECLARE
            now_t timestamptz := clock_timestamp();
            cur bigint := floor(extract(epoch FROM clock_timestamp()) / 3600)::bigint;
            part record;
            hour bigint;
            newest timestamptz;
            held bigint;
            dropped bigint := 0;
        BEGIN
            IF NOT pg_try_advisory_xact_lock(
                    hashtextextended('alkstore.results' || chr(1) || sch, 0)) THEN
                RETURN 0;
            END IF;
            FOR part IN
                SELECT c.relname FROM pg_catalog.pg_inherits i
                JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid
                WHERE i.inhparent = (
                    SELECT r.oid FROM pg_catalog.pg_class r
                    JOIN pg_catalog.pg_namespace n ON n.oid = r.relnamespace
                    WHERE n.nspname = sch AND r.relname = 'results')
                  AND c.relname ~ '^results_h[0-9]+$'
            LOOP
                hour := substr(part.relname, 10)::bigint;
                CONTINUE WHEN hour >= cur;
                EXECUTE format('SELECT max(keep_until) FROM %%I.%%I', sch, part.relname)
                    INTO newest;
                CONTINUE WHEN newest IS NOT NULL AND newest > now_t;
                EXECUTE format('SELECT count(*) FROM %%I.%%I WHERE queue = $1', sch, part.relname)
                    INTO held USING q;
                EXECUTE format('DROP TABLE %%I.%%I', sch, part.relname);
                dropped := dropped + held;
            END LOOP;
            FOR hour IN cur + 1 .. cur + ahead LOOP
                IF to_regclass(format('%%I.%%I', sch, 'results_h' || hour)) IS NULL THEN
                    EXECUTE format(
                        'CREATE TABLE %%I.%%I PARTITION OF %%I.results '
                        'FOR VALUES FROM (%%L) TO (%%L)',
                        sch, 'results_h' || hour, sch,
                        to_timestamp(hour * 3600), to_timestamp((hour + 1) * 3600));
                END IF;
            END LOOP;
            RETURN dropped;
        END
        $body$""",
    ],
    # Version 5 (as SQLite's): jobs that wait for other jobs (WF-1..WF-3,
    # docs/adr/0021). A waiting job lives in a table of its own, never read
    # by a claim; the edges (parent, child) keyed by the parent, so that a
    # parent's ack reads only its own children, and a count of unfinished
    # parents per waiting job. A job that died by a cascade names the
    # parent whose failure killed it (failed_dep), for that parent's redrive.
    5: [
        """CREATE TABLE {schema}.waiting (
            id bigint PRIMARY KEY,
            queue text NOT NULL,
            payload json NOT NULL,
            priority integer NOT NULL,
            run_at timestamptz NOT NULL,
            created_at timestamptz NOT NULL,
            claimed_at timestamptz,
            deadline timestamptz,
            worker_id text,
            attempts integer NOT NULL,
            max_attempts integer NOT NULL,
            visibility_timeout_s double precision NOT NULL,
            backoff_base_s double precision NOT NULL,
            dead_letter_retention_s double precision,
            expires_at timestamptz,
            claims integer NOT NULL,
            unique_key text,
            grp text,
            group_limit integer,
            trace_context text,
            result_ttl_s double precision,
            parents bigint[],
            delay_s double precision,
            unfinished integer NOT NULL
        )""",
        # WF-4: the ids a job was enqueued after, carried with its row to
        # dead and back, for parent_results(); results are read by id.
        "ALTER TABLE {schema}.jobs ADD COLUMN parents bigint[]",
        "ALTER TABLE {schema}.dead ADD COLUMN parents bigint[]",
        "CREATE INDEX results_id ON {schema}.results (id)",
        "CREATE INDEX waiting_queue ON {schema}.waiting (queue, id)",
        """CREATE TABLE {schema}.deps (
            parent bigint NOT NULL,
            child bigint NOT NULL,
            PRIMARY KEY (parent, child)
        )""",
        "CREATE INDEX deps_child ON {schema}.deps (child, parent)",
        "ALTER TABLE {schema}.dead ADD COLUMN failed_dep bigint",
        """CREATE INDEX dead_failed_dep ON {schema}.dead (failed_dep)
            WHERE failed_dep IS NOT NULL""",
        # WF-2: jobs ids were acked. Their children count one unfinished
        # parent less (row locks on the waiting rows: two parents acked at
        # once release their child exactly once); those at zero move to the
        # jobs table, ready now or at their own time, and wake their queues
        # at commit. One probe of the parent key when there are none.
        """CREATE FUNCTION {schema}.deps_finished(ids bigint[], wake text)
            RETURNS integer LANGUAGE plpgsql AS $body$
        DECLARE
            ready bigint[];
            queues text[];
        BEGIN
            IF ids IS NULL OR NOT EXISTS (
                    SELECT 1 FROM {schema}.deps WHERE parent = ANY (ids)) THEN
                RETURN 0;
            END IF;
            WITH d AS (DELETE FROM {schema}.deps WHERE parent = ANY (ids) RETURNING child),
            n AS (SELECT child, count(*) AS k FROM d GROUP BY child),
            u AS (UPDATE {schema}.waiting w SET unfinished = w.unfinished - n.k
                  FROM n WHERE w.id = n.child RETURNING w.id, w.unfinished)
            SELECT array_agg(id ORDER BY id) INTO ready FROM u WHERE unfinished <= 0;
            IF ready IS NULL THEN
                RETURN 0;
            END IF;
            WITH m AS (DELETE FROM {schema}.waiting WHERE id = ANY (ready) RETURNING *),
            ins AS (
                INSERT INTO {schema}.jobs (
                    id, queue, state, payload, priority, run_at, ready_at, created_at,
                    attempts, claims, max_attempts, visibility_timeout_s, backoff_base_s,
                    dead_letter_retention_s, expires_at, unique_key, grp, group_limit, parked,
                    trace_context, result_ttl_s, parents)
                OVERRIDING SYSTEM VALUE
                SELECT id, queue, 'pending', payload, priority, a.at, a.at, created_at,
                    attempts, claims, max_attempts, visibility_timeout_s, backoff_base_s,
                    dead_letter_retention_s, expires_at, unique_key, grp, group_limit, 0,
                    trace_context, result_ttl_s, parents
                FROM m CROSS JOIN LATERAL (
                    SELECT COALESCE(clock_timestamp() + m.delay_s * interval '1 second',
                                    m.run_at) AS at) a
                ORDER BY id
                RETURNING queue)
            SELECT array_agg(DISTINCT queue) INTO queues FROM ins;
            PERFORM pg_notify(wake, q) FROM unnest(queues) AS q;
            RETURN cardinality(ready);
        END
        $body$""",
        # WF-3: jobs ids died or were cancelled. Every job waiting on one of
        # them dies with it, a generation per round, transitively: each job
        # leaves the waiting table once, so the work is one pass over the
        # jobs that die and nothing else.
        """CREATE FUNCTION {schema}.deps_failed(ids bigint[])
            RETURNS integer LANGUAGE plpgsql AS $body$
        DECLARE
            frontier bigint[] := ids;
            died bigint[];
            total integer := 0;
        BEGIN
            WHILE frontier IS NOT NULL AND cardinality(frontier) > 0 LOOP
                WITH f AS (
                    SELECT child, min(parent) AS parent FROM {schema}.deps
                    WHERE parent = ANY (frontier) GROUP BY child),
                m AS (DELETE FROM {schema}.waiting w USING f WHERE w.id = f.child
                      RETURNING w.*, f.parent AS failed),
                ins AS (
                    INSERT INTO {schema}.dead (
                        id, queue, payload, priority, run_at, created_at, claimed_at,
                        deadline, worker_id, attempts, max_attempts, visibility_timeout_s,
                        backoff_base_s, dead_letter_retention_s, expires_at, claims,
                        unique_key, grp, group_limit, trace_context, result_ttl_s, parents,
                        last_error, died_at, purge_at, failed_dep)
                    SELECT id, queue, payload, priority, run_at, created_at, claimed_at,
                        deadline, worker_id, attempts, max_attempts, visibility_timeout_s,
                        backoff_base_s, dead_letter_retention_s, expires_at, claims,
                        unique_key, grp, group_limit, trace_context, result_ttl_s, parents,
                        'dependency ' || failed || ' failed', clock_timestamp(),
                        clock_timestamp() + dead_letter_retention_s * interval '1 second',
                        failed
                    FROM m RETURNING id)
                SELECT array_agg(id) INTO died FROM ins;
                total := total + COALESCE(cardinality(died), 0);
                frontier := died;
            END LOOP;
            RETURN total;
        END
        $body$""",
        # Every path to dead (fail, a retry at its budget, a claim's or the
        # sweep's dead-lettering, a freed unique key) runs through this:
        # the statement's new dead rows fail their waiting children. The
        # cascade's own inserts (depth 2) are already handled by its loop.
        """CREATE FUNCTION {schema}.dead_cascade() RETURNS trigger
            LANGUAGE plpgsql AS $body$
        BEGIN
            IF pg_trigger_depth() = 1 THEN
                PERFORM {schema}.deps_failed(ARRAY (SELECT id FROM born));
            END IF;
            RETURN NULL;
        END
        $body$""",
        """CREATE TRIGGER dead_cascade AFTER INSERT ON {schema}.dead
            REFERENCING NEW TABLE AS born FOR EACH STATEMENT
            EXECUTE FUNCTION {schema}.dead_cascade()""",
        # WF-3 redrive: the still-dead jobs that died by these parents'
        # cascade go back to waiting, transitively, counting again the
        # parents they still wait for.
        """CREATE FUNCTION {schema}.deps_revive(ids bigint[])
            RETURNS integer LANGUAGE plpgsql AS $body$
        DECLARE
            frontier bigint[] := ids;
            back bigint[];
        BEGIN
            WHILE frontier IS NOT NULL AND cardinality(frontier) > 0 LOOP
                WITH m AS (
                    DELETE FROM {schema}.dead WHERE failed_dep = ANY (frontier) RETURNING *),
                ins AS (
                    INSERT INTO {schema}.waiting (
                        id, queue, payload, priority, run_at, created_at, claimed_at,
                        deadline, worker_id, attempts, max_attempts, visibility_timeout_s,
                        backoff_base_s, dead_letter_retention_s, expires_at, claims,
                        unique_key, grp, group_limit, trace_context, result_ttl_s, parents,
                        delay_s, unfinished)
                    SELECT id, queue, payload, priority, run_at, created_at, claimed_at,
                        deadline, worker_id, attempts, max_attempts, visibility_timeout_s,
                        backoff_base_s, dead_letter_retention_s, expires_at, claims,
                        unique_key, grp, group_limit, trace_context, result_ttl_s, parents, 0,
                        (SELECT count(*) FROM {schema}.deps d WHERE d.child = m.id)
                    FROM m RETURNING id)
                SELECT array_agg(id) INTO back FROM ins;
                frontier := back;
            END LOOP;
            RETURN 0;
        END
        $body$""",
    ],
    # Version 6 entries (other features of version 6 add theirs beside).
    6: [
        # --- Q-28 progress checkpoints (docs/adr/0022): the job's last
        # checkpoint on the live row, carried with it to dead and back
        # (redrive). No index, so a checkpoint write changes no indexed
        # column and can be a HOT update; waiting rows never ran and have
        # none (the WF functions leave it NULL).
        "ALTER TABLE {schema}.jobs ADD COLUMN progress json",
        "ALTER TABLE {schema}.dead ADD COLUMN progress json",
        # --- end Q-28
        # ---- Q-27 pause (docs/adr/0023): one row per paused queue. The claim
        # reads it by primary key in its first priority probe (an
        # uncorrelated NOT EXISTS, a one-time filter), so a claim costs one
        # probe of a tiny table whether no queue or a thousand are paused.
        """CREATE TABLE {schema}.paused (
            queue text PRIMARY KEY,
            paused_at timestamptz NOT NULL
        )""",
        # ---- end Q-27
        # ---- O-5 workers' registry (docs/adr/0024) ----
        """CREATE TABLE {schema}.workers (
            id text PRIMARY KEY,
            host text NOT NULL,
            pid integer NOT NULL,
            queues text[] NOT NULL,
            concurrency integer NOT NULL,
            started_at timestamptz NOT NULL,
            version text NOT NULL,
            last_seen timestamptz NOT NULL
        )""",
        "CREATE INDEX workers_seen ON {schema}.workers (last_seen)",
        """CREATE TABLE {schema}.worker_counts (
            minute timestamptz NOT NULL,
            worker_id text NOT NULL,
            queue text NOT NULL,
            outcome text NOT NULL,
            n bigint NOT NULL,
            PRIMARY KEY (minute, worker_id, queue, outcome)
        )""",
        # ---- end O-5 ----
        # ---- WF-5 (docs/adr/0021): the dependency functions plan each
        # statement with its ids. A generic plan of `parent = ANY (ids)`
        # takes its row estimate from the column's statistics, and one parent
        # with 100,000 children (a fan-out) makes that "every row": every ack
        # and every death in the store then read the whole deps index (claim
        # + ack went from 0.9 to 10 ms in C-8 with 100,000 waiting jobs).
        # With the ids known, the planner sees they are not that parent.
        "ALTER FUNCTION {schema}.deps_finished(bigint[], text)"
        " SET plan_cache_mode = force_custom_plan",
        "ALTER FUNCTION {schema}.deps_failed(bigint[]) SET plan_cache_mode = force_custom_plan",
        "ALTER FUNCTION {schema}.deps_revive(bigint[]) SET plan_cache_mode = force_custom_plan",
        # ---- end WF-5
    ],
    # Version 7 (PostgreSQL only; docs/adr/0026): the dead letters
    # partitioned by their die time, one partition width for results and
    # dead letters, and table settings for steady load.
    7: [
        # The width of a partition in seconds (results and dead letters),
        # chosen when the schema is created or upgraded (the engine option
        # partition_width_s; default an hour).
        """INSERT INTO {schema}.meta (key, value) VALUES ('partition_width_s', %(width)s::text)
            ON CONFLICT (key) DO NOTHING""",
        # Rows a partition drop removed from queues other than the sweeping
        # one, counted by those queues' next sweep (SweepResult stays exact
        # per queue whichever queue's sweep dropped the partition).
        """CREATE TABLE {schema}.dropped (
            kind text NOT NULL CHECK (kind IN ('results', 'dead')),
            queue text NOT NULL,
            n bigint NOT NULL,
            PRIMARY KEY (queue, kind)
        )""",
        # The one-off conversion: result partitions renamed to the
        # <table>_p<from>_<to> form (epoch seconds); an empty v6 dead table is
        # replaced; one holding rows becomes
        # the first partition of a table partitioned by died_at (ATTACH: its
        # rows are read once to check the bound, never copied), covering
        # everything up to the end of the current width; its grants go to
        # the new parent.
        """CREATE FUNCTION {schema}.migrate_7(sch text) RETURNS void
            LANGUAGE plpgsql AS $body$
        DECLARE
            w bigint := (SELECT value::bigint FROM {schema}.meta
                         WHERE key = 'partition_width_s');
            edge bigint := (floor(extract(epoch FROM clock_timestamp()) / w)::bigint + 1) * w;
            part record;
            old_oid oid := to_regclass(format('%%I.dead', sch));
            legacy text := 'dead_p0_' || edge;
            g record;
        BEGIN
            FOR part IN
                SELECT c.relname, substr(c.relname, 10)::bigint AS hour
                FROM pg_catalog.pg_inherits i JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid
                WHERE i.inhparent = to_regclass(format('%%I.results', sch))
                  AND c.relname ~ '^results_h[0-9]+$'
            LOOP
                EXECUTE format('ALTER TABLE %%I.%%I RENAME TO %%I', sch, part.relname,
                    'results_p' || part.hour * 3600 || '_' || (part.hour + 1) * 3600);
            END LOOP;
            IF NOT EXISTS (SELECT 1 FROM {schema}.dead) THEN
                -- Nothing to keep (a fresh schema): a new table, with a
                -- partition for the current width (nothing can be in its
                -- default partition yet).
                EXECUTE format('ALTER TABLE %%I.dead RENAME TO dead_v6', sch);
                EXECUTE format(
                    'CREATE TABLE %%I.dead (LIKE %%I.dead_v6 INCLUDING DEFAULTS '
                    'INCLUDING CONSTRAINTS) PARTITION BY RANGE (died_at)', sch, sch);
                EXECUTE format(
                    'CREATE TABLE %%I.%%I PARTITION OF %%I.dead FOR VALUES FROM (%%L) TO (%%L)',
                    sch, 'dead_p' || (edge - w) || '_' || edge, sch, to_timestamp(edge - w),
                    to_timestamp(edge));
                FOR g IN
                    SELECT a.grantee, a.privilege_type FROM pg_catalog.pg_class c,
                        aclexplode(c.relacl) a
                    WHERE c.oid = old_oid AND a.grantee <> c.relowner
                LOOP
                    EXECUTE format('GRANT %%s ON %%I.dead TO %%s', g.privilege_type, sch,
                        CASE WHEN g.grantee = 0 THEN 'PUBLIC'
                             ELSE quote_ident(pg_get_userbyid(g.grantee)) END);
                END LOOP;
                EXECUTE format('DROP TABLE %%I.dead_v6', sch);
                RETURN;
            END IF;
            EXECUTE format('DROP TRIGGER dead_cascade ON %%I.dead', sch);
            EXECUTE format('ALTER TABLE %%I.dead DROP CONSTRAINT dead_pkey', sch);
            EXECUTE format('ALTER TABLE %%I.dead RENAME TO %%I', sch, legacy);
            EXECUTE format('ALTER INDEX %%I.dead_queue RENAME TO %%I', sch, legacy || '_queue');
            EXECUTE format('ALTER INDEX %%I.dead_purge RENAME TO %%I', sch, legacy || '_purge');
            EXECUTE format('ALTER INDEX %%I.dead_died RENAME TO %%I', sch, legacy || '_died');
            EXECUTE format('ALTER INDEX %%I.dead_failed_dep RENAME TO %%I', sch,
                legacy || '_failed_dep');
            EXECUTE format(
                'CREATE TABLE %%I.dead (LIKE %%I.%%I INCLUDING DEFAULTS INCLUDING CONSTRAINTS) '
                'PARTITION BY RANGE (died_at)', sch, sch, legacy);
            EXECUTE format(
                'ALTER TABLE %%I.dead ATTACH PARTITION %%I.%%I '
                'FOR VALUES FROM (MINVALUE) TO (%%L)', sch, sch, legacy, to_timestamp(edge));
            FOR g IN
                SELECT a.grantee, a.privilege_type FROM pg_catalog.pg_class c,
                    aclexplode(c.relacl) a
                WHERE c.oid = old_oid AND a.grantee <> c.relowner
            LOOP
                EXECUTE format('GRANT %%s ON %%I.dead TO %%s', g.privilege_type, sch,
                    CASE WHEN g.grantee = 0 THEN 'PUBLIC'
                         ELSE quote_ident(pg_get_userbyid(g.grantee)) END);
            END LOOP;
        END
        $body$""",
        # A fresh schema's (empty) dead table goes the same way.
        "SELECT {schema}.migrate_7(%(schema)s::text)",
        "DROP FUNCTION {schema}.migrate_7(text)",
        # Rows die "now": partitions are made ahead by the sweep; a row of a
        # width with no partition (no sweep for that long) goes here.
        "CREATE TABLE {schema}.dead_default PARTITION OF {schema}.dead DEFAULT",
        # The indexes of v6 under the same names (the legacy partition's own
        # are attached, not rebuilt); a job by id (get_job, redrive and purge
        # by ids: one probe per partition, no unique constraint possible
        # without the partition key; ids come from the jobs' identity); and
        # each partition's latest purge time, NULLs first (one probe tells
        # whether every row of a partition is past its retention).
        "CREATE INDEX dead_id ON {schema}.dead (id)",
        "CREATE INDEX dead_queue ON {schema}.dead (queue, id)",
        """CREATE INDEX dead_purge
            ON {schema}.dead (queue, purge_at) WHERE purge_at IS NOT NULL""",
        "CREATE INDEX dead_died ON {schema}.dead (queue, died_at)",
        """CREATE INDEX dead_failed_dep ON {schema}.dead (failed_dep)
            WHERE failed_dep IS NOT NULL""",
        "CREATE INDEX dead_purge_time ON {schema}.dead (purge_at)",
        """CREATE TRIGGER dead_cascade AFTER INSERT ON {schema}.dead
            REFERENCING NEW TABLE AS born FOR EACH STATEMENT
            EXECUTE FUNCTION {schema}.dead_cascade()""",
        "DROP FUNCTION {schema}.result_partitions(text, text, integer)",
        # Partition upkeep of results and dead letters, run by the sweep in a
        # savepoint with a short lock timeout (a role without DDL rights, or
        # a busy partition, skips it: rows are deleted one by one instead).
        # Under a try-lock (one upkeep at a time per schema): a partition
        # wholly in the past is dropped when every row in it is past its time
        # (results: keep_until; dead: purge_at, none without one), after
        # counting its rows by queue (q's are returned; other queues' wait in
        # `dropped` for their own sweep); the next widths' partitions are
        # made, `ahead` of them and at least 15 minutes' worth, and only for widths
        # still to come, so no row of a default partition can fall in one.
        """CREATE FUNCTION {schema}.partition_upkeep(
                sch text, q text, ahead integer, OUT results bigint, OUT dead bigint)
            LANGUAGE plpgsql AS $body$
        DECLARE
            now_t timestamptz := clock_timestamp();
            now_s numeric := extract(epoch FROM clock_timestamp());
            w bigint := COALESCE((SELECT value::bigint FROM {schema}.meta
                                  WHERE key = 'partition_width_s'), 3600);
            widths bigint := greatest(ahead, ceil(900.0 / w)::bigint);
            tbl text;
            part record;
            cnt record;
            last_hi bigint;
            blocked boolean;
            n bigint;
            nxt bigint;
            hi bigint;
            stop bigint;
        BEGIN
            results := 0;
            dead := 0;
            IF NOT pg_try_advisory_xact_lock(
                    hashtextextended('alkstore.partitions' || chr(1) || sch, 0)) THEN
                RETURN;
            END IF;
            FOREACH tbl IN ARRAY ARRAY['results', 'dead'] LOOP
                last_hi := 0;
                FOR part IN
                    SELECT c.relname,
                        substring(c.relname FROM '_p([0-9]+)_')::bigint AS lo,
                        substring(c.relname FROM '_([0-9]+)$')::bigint AS hi
                    FROM pg_catalog.pg_inherits i
                    JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid
                    WHERE i.inhparent = to_regclass(format('%%I.%%I', sch, tbl))
                      AND c.relname ~ ('^' || tbl || '_p[0-9]+_[0-9]+$')
                LOOP
                    last_hi := greatest(last_hi, part.hi);
                    CONTINUE WHEN part.hi > now_s;
                    IF tbl = 'results' THEN
                        EXECUTE format('SELECT max(keep_until) > $1 FROM %%I.%%I',
                            sch, part.relname) INTO blocked USING now_t;
                    ELSE
                        EXECUTE format(
                            'SELECT purge_at IS NULL OR purge_at > $1 FROM %%I.%%I '
                            'ORDER BY purge_at DESC NULLS FIRST LIMIT 1',
                            sch, part.relname) INTO blocked USING now_t;
                    END IF;
                    CONTINUE WHEN COALESCE(blocked, false);
                    EXECUTE format('LOCK TABLE %%I.%%I IN ACCESS EXCLUSIVE MODE',
                        sch, part.relname);
                    FOR cnt IN EXECUTE format(
                        'SELECT queue, count(*) AS n FROM %%I.%%I GROUP BY queue',
                        sch, part.relname)
                    LOOP
                        IF cnt.queue = q THEN
                            IF tbl = 'results' THEN
                                results := results + cnt.n;
                            ELSE
                                dead := dead + cnt.n;
                            END IF;
                        ELSE
                            INSERT INTO {schema}.dropped AS d (kind, queue, n)
                            VALUES (tbl, cnt.queue, cnt.n)
                            ON CONFLICT (queue, kind) DO UPDATE SET n = d.n + excluded.n;
                        END IF;
                    END LOOP;
                    EXECUTE format('DROP TABLE %%I.%%I', sch, part.relname);
                END LOOP;
                nxt := greatest(last_hi, (floor(now_s / w)::bigint + 1) * w);
                stop := (floor(now_s / w)::bigint + 1 + widths) * w;
                WHILE nxt < stop LOOP
                    hi := (nxt / w + 1) * w;
                    EXECUTE format(
                        'CREATE TABLE %%I.%%I PARTITION OF %%I.%%I '
                        'FOR VALUES FROM (%%L) TO (%%L)',
                        sch, tbl || '_p' || nxt || '_' || hi, sch, tbl,
                        to_timestamp(nxt), to_timestamp(hi));
                    nxt := hi;
                END LOOP;
            END LOOP;
        END
        $body$""",
        # Q-22 by age (or all): the partitions of dead letters wholly at or
        # before the cut that hold no other queue's row are dropped, after
        # counting their rows under their lock (the rest go by row deletes).
        # Same try-lock as the upkeep.
        """CREATE FUNCTION {schema}.dead_drop_before(sch text, q text, cut timestamptz)
            RETURNS bigint LANGUAGE plpgsql AS $body$
        DECLARE
            cut_s numeric := extract(epoch FROM cut);
            part record;
            other boolean;
            n bigint;
            total bigint := 0;
        BEGIN
            IF NOT pg_try_advisory_xact_lock(
                    hashtextextended('alkstore.partitions' || chr(1) || sch, 0)) THEN
                RETURN 0;
            END IF;
            FOR part IN
                SELECT c.relname FROM pg_catalog.pg_inherits i
                JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid
                WHERE i.inhparent = to_regclass(format('%%I.dead', sch))
                  AND c.relname ~ '^dead_p[0-9]+_[0-9]+$'
                  AND substring(c.relname FROM '_([0-9]+)$')::bigint <= cut_s
            LOOP
                -- Two probes of (queue, id): any row of another queue?
                EXECUTE format(
                    'SELECT EXISTS (SELECT 1 FROM %%I.%%I WHERE queue < $1) '
                    'OR EXISTS (SELECT 1 FROM %%I.%%I WHERE queue > $1)',
                    sch, part.relname, sch, part.relname) INTO other USING q;
                CONTINUE WHEN other;
                EXECUTE format('LOCK TABLE %%I.%%I IN ACCESS EXCLUSIVE MODE', sch, part.relname);
                EXECUTE format(
                    'SELECT EXISTS (SELECT 1 FROM %%I.%%I WHERE queue < $1) '
                    'OR EXISTS (SELECT 1 FROM %%I.%%I WHERE queue > $1)',
                    sch, part.relname, sch, part.relname) INTO other USING q;
                CONTINUE WHEN other;
                EXECUTE format('SELECT count(*) FROM %%I.%%I', sch, part.relname) INTO n;
                EXECUTE format('DROP TABLE %%I.%%I', sch, part.relname);
                total := total + n;
            END LOOP;
            RETURN total;
        END
        $body$""",
        # Table settings for steady load (docs/adr/0026). Claims, heartbeats
        # and retries change ready_at, an indexed column, so they are never
        # HOT; room left in each page still keeps a row's new version on its
        # page (no table growth while old versions wait for vacuum), and
        # progress checkpoints (no indexed column) are HOT. Vacuum runs after
        # 2 % of rows changed or were inserted, and works faster.
        """ALTER TABLE {schema}.jobs SET (fillfactor = 85,
            autovacuum_vacuum_insert_scale_factor = 0.02,
            autovacuum_vacuum_cost_limit = 2000)""",
        # Small tables updated in place by key: their updated columns are in
        # no index, so every update is HOT given room in the page (fillfactor
        # 50); vacuum after a fixed number of dead rows, whatever the size.
        """ALTER TABLE {schema}.locks SET (fillfactor = 50,
            autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 500)""",
        """ALTER TABLE {schema}.consumers SET (fillfactor = 50,
            autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 500)""",
        """ALTER TABLE {schema}.streams SET (fillfactor = 50,
            autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 500)""",
        """ALTER TABLE {schema}.rate_limits SET (fillfactor = 50,
            autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 500)""",
        """ALTER TABLE {schema}.worker_counts SET (fillfactor = 70,
            autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000)""",
        # A worker's heartbeat changes last_seen, which is indexed: not HOT;
        # the table is tiny, so vacuum it after a fixed number of dead rows.
        """ALTER TABLE {schema}.workers SET (
            autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 500)""",
        # Streams append and trim: vacuum after 5 % inserted or deleted (the
        # insert threshold also sets the visibility map for index-only reads).
        """ALTER TABLE {schema}.events SET (autovacuum_vacuum_scale_factor = 0.05,
            autovacuum_vacuum_insert_scale_factor = 0.05)""",
        # Jobs waiting on others move out when their parents finish.
        """ALTER TABLE {schema}.waiting SET (autovacuum_vacuum_scale_factor = 0.05)""",
        """ALTER TABLE {schema}.deps SET (autovacuum_vacuum_scale_factor = 0.05)""",
        """ALTER TABLE {schema}.dropped SET (fillfactor = 50,
            autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 500)""",
    ],
}
#: What each migration brings, for the error a role that cannot run it gets.
MIGRATION_TITLES = {
    1: "the engine's tables",
    2: "claim numbers, unique keys, groups, trace context, rate limits",
    3: "group slots for ready rows first, expired slot holders",
    4: "kept results",
    5: "jobs that wait for other jobs",
    6: "progress checkpoints, paused queues, the workers' registry, dependency plans",
    7: "partitioned dead letters, the partition width, table settings for steady load",
}

# ------------------------------------------------------------------------ queue

_CLOCK = "clock AS MATERIALIZED (SELECT clock_timestamp() AS t)"
_NOW = "(SELECT t FROM clock)"

_JOB_COLUMNS = (
    "id, queue, payload, priority, run_at, created_at, claimed_at, deadline, worker_id, "
    "attempts, max_attempts, visibility_timeout_s, backoff_base_s, dead_letter_retention_s, "
    "expires_at, claims, unique_key, grp, group_limit, trace_context, result_ttl_s"
)


def _to_dead(source: str, error: str) -> str:
    """``INSERT INTO dead`` of the rows of CTE *source* (deleted from jobs),
    stamping died_at and, with a retention, purge_at (Q-16); the progress
    checkpoint goes with the row (Q-28)."""
    return (
        f"INSERT INTO {{schema}}.dead ({_JOB_COLUMNS}, parents, progress, last_error, died_at, "
        f"purge_at) SELECT {_JOB_COLUMNS}, parents, progress, {error}, {_NOW}, "
        f"{_NOW} + dead_letter_retention_s * interval '1 second' FROM {source}"
    )


# Q-12/Q-15: the rows of a queue that can never run again, each found on its
# partial index: expired ones, and lapsed claims with no budget left.
_PICK_EXPIRED = f"""
SELECT id FROM {{schema}}.jobs
WHERE queue = %(queue)s::text AND expires_at IS NOT NULL AND expires_at <= {_NOW}
FOR UPDATE SKIP LOCKED"""
_PICK_EXHAUSTED = f"""
SELECT id FROM {{schema}}.jobs
WHERE queue = %(queue)s::text AND attempts >= max_attempts AND ready_at <= {_NOW}
  AND (expires_at IS NULL OR expires_at > {_NOW})
FOR UPDATE SKIP LOCKED"""
# Bulk moves pick their rows with id = ANY (ARRAY (...)): with IN (...)
# PostgreSQL misjudged the row counts and scanned (docs/adr/0008).
_STALE_CTES = f"""
expired AS (
    DELETE FROM {{schema}}.jobs WHERE id = ANY (ARRAY ({_PICK_EXPIRED}))
    RETURNING *),
exhausted AS (
    DELETE FROM {{schema}}.jobs WHERE id = ANY (ARRAY ({_PICK_EXHAUSTED}))
    RETURNING *),
buried_expired AS ({_to_dead("expired", "'expired'")}),
buried_exhausted AS ({_to_dead("exhausted", "'max attempts exceeded'")})"""

_INSERT_JOB = """
INSERT INTO {schema}.jobs (
    queue, state, payload, priority, run_at, ready_at, created_at, max_attempts,
    visibility_timeout_s, backoff_base_s, dead_letter_retention_s, expires_at,
    unique_key, grp, group_limit, parked, trace_context, result_ttl_s, parents)
"""
# The values of one new job; :run_at wins over :delay_s (NewJob). A row of
# a limited group is parked and rebalanced by the trigger of its group.
_JOB_VALUES = """
    %(queue)s::text, 'pending', {payload}, %(priority)s::int, r.run_at, r.run_at, c.t,
    %(max_attempts)s::int, %(visibility_timeout_s)s::float8, %(backoff_base_s)s::float8,
    %(dead_letter_retention_s)s::float8, c.t + %(expires_s)s::float8 * interval '1 second',
    {key}, %(grp)s::text, %(group_limit)s::int, 0, %(trace_context)s::text,
    %(result_ttl_s)s::float8, %(parents)s::bigint[]
"""
_JOB_SOURCES = """
clock c CROSS JOIN LATERAL (
    SELECT COALESCE(%(run_at)s::timestamptz,
                    c.t + %(delay_s)s::float8 * interval '1 second') AS run_at) r
"""
_WAKE_QUEUE = "wake AS MATERIALIZED (SELECT pg_notify(%(wake)s::text, %(queue)s::text))"


def _values(payload: str, key: str) -> str:
    return _JOB_VALUES.replace("{payload}", payload).replace("{key}", key)


ENQUEUE = (
    f"WITH {_CLOCK}, {_WAKE_QUEUE}"
    + _INSERT_JOB
    + "SELECT "
    + _values("%(payload)s::json", "NULL")
    + " FROM "
    + _JOB_SOURCES
    + " CROSS JOIN wake RETURNING id"
)

# One statement for a whole batch; identity values follow the ORDER BY, so
# ids ascend in payload order.
ENQUEUE_MANY = (
    f"WITH {_CLOCK}, {_WAKE_QUEUE}"
    + _INSERT_JOB
    + "SELECT "
    + _values("p.payload::json", "NULL")
    + " FROM "
    + _JOB_SOURCES
    + " CROSS JOIN wake"
    + " CROSS JOIN unnest(%(payloads)b::text[]) WITH ORDINALITY AS p(payload, ord)"
    + " ORDER BY p.ord RETURNING id"
)

# Producer group commit (docs/adr/0008): the plain enqueues of several
# callers, of any queues and stamps, as one statement and one commit. Rows
# go in array order; identity values follow the ORDER BY, so the ids sorted
# ascending are the callers' jobs in order. One NOTIFY per queue.
ENQUEUE_ROWS = f"""
WITH {_CLOCK},
rows AS (
    SELECT * FROM unnest(
        %(queue)s::text[], %(payload)b::text[], %(priority)s::int[],
        %(run_at)s::timestamptz[], %(delay_s)s::float8[], %(max_attempts)s::int[],
        %(visibility_timeout_s)s::float8[], %(backoff_base_s)s::float8[],
        %(dead_letter_retention_s)s::float8[], %(expires_s)s::float8[], %(grp)s::text[],
        %(group_limit)s::int[], %(trace_context)s::text[], %(result_ttl_s)s::float8[])
        WITH ORDINALITY AS r(queue, payload, priority, run_at, delay_s, max_attempts,
                             visibility_timeout_s, backoff_base_s, dead_letter_retention_s,
                             expires_s, grp, group_limit, trace_context, result_ttl_s, ord)),
wake AS MATERIALIZED (
    SELECT pg_notify(%(wake)s::text, d.queue) FROM (SELECT DISTINCT queue FROM rows) d)
INSERT INTO {{schema}}.jobs (
    queue, state, payload, priority, run_at, ready_at, created_at, max_attempts,
    visibility_timeout_s, backoff_base_s, dead_letter_retention_s, expires_at,
    unique_key, grp, group_limit, parked, trace_context, result_ttl_s)
SELECT r.queue, 'pending', r.payload::json, r.priority, a.at, a.at, c.t, r.max_attempts,
    r.visibility_timeout_s, r.backoff_base_s, r.dead_letter_retention_s,
    c.t + r.expires_s * interval '1 second', NULL, r.grp, r.group_limit, 0, r.trace_context,
    r.result_ttl_s
FROM rows r CROSS JOIN clock c
CROSS JOIN LATERAL (SELECT COALESCE(r.run_at, c.t + r.delay_s * interval '1 second') AS at) a
CROSS JOIN (SELECT count(*) FROM wake) w
ORDER BY r.ord
RETURNING id
"""

# WF-1: the parents of a new job, each table in a statement of its own (a
# fresh snapshot each), in the order a job moves through them (waiting, live,
# dead), each row locked against its delete: a parent acked or failed
# meanwhile waits for this enqueue to commit, then sees its new children.
PARENTS_WAITING = """
SELECT id FROM {schema}.waiting WHERE id = ANY (%(ids)s::bigint[]) FOR KEY SHARE
"""
PARENTS_LIVE = "SELECT id FROM {schema}.jobs WHERE id = ANY (%(ids)s::bigint[]) FOR KEY SHARE"
PARENTS_DEAD = """
SELECT id FROM {schema}.dead WHERE id = ANY (%(ids)s::bigint[]) ORDER BY id FOR KEY SHARE
"""
# New jobs written straight to the waiting table (or, after a dead parent,
# to the dead table), their ids from the jobs' identity.
_HELD_VALUES = """
SELECT nextval(pg_get_serial_sequence('{schema}.jobs', 'id')), %(queue)s::text,
    p.payload::json, %(priority)s::int, COALESCE(%(run_at)s::timestamptz, c.t), c.t, 0, 0,
    %(max_attempts)s::int, %(visibility_timeout_s)s::float8, %(backoff_base_s)s::float8,
    %(dead_letter_retention_s)s::float8, c.t + %(expires_s)s::float8 * interval '1 second',
    %(grp)s::text, %(group_limit)s::int, %(trace_context)s::text, %(result_ttl_s)s::float8,
    %(parents)s::bigint[]
"""
_HELD_FROM = """
FROM (SELECT clock_timestamp() AS t) c
CROSS JOIN unnest(%(payloads)b::text[]) WITH ORDINALITY AS p(payload, ord) ORDER BY p.ord
"""
INSERT_WAITING = (
    """INSERT INTO {schema}.waiting (
    id, queue, payload, priority, run_at, created_at, attempts, claims, max_attempts,
    visibility_timeout_s, backoff_base_s, dead_letter_retention_s, expires_at, grp,
    group_limit, trace_context, result_ttl_s, parents, delay_s, unfinished) """
    + _HELD_VALUES.rstrip()
    + """, CASE WHEN %(run_at)s::timestamptz IS NULL THEN %(delay_s)s::float8 END,
    %(unfinished)s::int"""
    + _HELD_FROM
    + " RETURNING id"
)
INSERT_DEAD_DEP = (
    """INSERT INTO {schema}.dead (
    id, queue, payload, priority, run_at, created_at, attempts, claims, max_attempts,
    visibility_timeout_s, backoff_base_s, dead_letter_retention_s, expires_at, grp,
    group_limit, trace_context, result_ttl_s, parents, last_error, died_at, purge_at,
    failed_dep) """
    + _HELD_VALUES.rstrip()
    + """, 'dependency ' || %(parent)s::bigint || ' failed', c.t,
    c.t + %(dead_letter_retention_s)s::float8 * interval '1 second', %(parent)s::bigint"""
    + _HELD_FROM
    + " RETURNING id"
)
INSERT_DEPS = """
INSERT INTO {schema}.deps (parent, child)
SELECT p, c FROM unnest(%(parents)s::bigint[]) AS p, unnest(%(ids)s::bigint[]) AS c
ON CONFLICT DO NOTHING
"""

# Q-23 in one statement. First the holders of these keys that can never run
# again go to dead; then the insert skips every key a live job holds (the
# unique index decides, waiting for a holder another transaction has not
# committed yet). The insert reads the stale CTE, so that runs first. The
# queue is woken only when something was written.
_CANNOT_RUN = f"""
((expires_at IS NOT NULL AND expires_at <= {_NOW})
 OR (attempts >= max_attempts AND state = 'processing' AND ready_at <= {_NOW}))"""
ENQUEUE_UNIQUE = (
    f"""
WITH {_CLOCK},
stale AS (
    DELETE FROM {{schema}}.jobs WHERE id = ANY (ARRAY (
        SELECT id FROM {{schema}}.jobs
        WHERE queue = %(queue)s::text AND unique_key = ANY (%(keys)s::text[]) AND {_CANNOT_RUN}
        FOR UPDATE))
    RETURNING *),
buried AS ({
        _to_dead(
            "stale",
            "CASE WHEN expires_at IS NOT NULL AND expires_at <= (SELECT t FROM clock) "
            "THEN 'expired' ELSE 'max attempts exceeded' END",
        )
    }),
inserted AS ("""
    + _INSERT_JOB
    + "SELECT "
    + _values("p.payload::json", "p.key")
    + " FROM "
    + _JOB_SOURCES
    + " CROSS JOIN unnest(%(payloads)b::text[], %(keys)s::text[])"
    + " WITH ORDINALITY AS p(payload, key, ord)"
    + " WHERE (SELECT count(*) FROM stale) >= 0"
    + " ORDER BY p.ord"
    + " ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL DO NOTHING"
    + """ RETURNING id, unique_key),
wake AS MATERIALIZED (SELECT pg_notify(%(wake)s::text, %(queue)s::text))
SELECT i.id, i.unique_key, (SELECT count(*) FROM wake) FROM inserted i
"""
)
# The live job holding each key (after an insert that skipped some).
KEY_HOLDERS = """
SELECT unique_key, id FROM {schema}.jobs
WHERE queue = %(queue)s::text AND unique_key = ANY (%(keys)s::text[])
"""

# Q-29: the pending holder of a key, replaced or debounced in place, in one
# statement (nothing else runs when it finds one). Its ready time before the
# change is read in the same statement, so that the commit wakes the queue
# only when the job became ready earlier (a debounce pushes it later, and a
# claim asleep until the old time finds nothing and sleeps again). That
# read takes no lock (a row lock would be one more write of the row per
# call): under a concurrent change of the same holder the comparison may be
# made with the version before it, which costs at worst a wake for nothing
# or a late one; wakes are hints (Q-19). The update's own WHERE repeats the
# conditions, so that a holder claimed or deleted meanwhile is left alone.
# Its id, created_at, attempts, claim number, key and group stay; a
# processing holder, or one past its expiry (the insert path frees that
# key), is left alone. The new time is the enqueue's (or now plus the
# debounce), no later than created_at plus max_wait_s when that is set
# (LEAST ignores the NULL of an unset one). A replace keeps one attempt at
# least, so a retried job that had used up the new max_attempts can run.
_HOLDER_RUN_AT = (
    "LEAST(COALESCE(%(run_at)s::timestamptz, c.t + %(delay_s)s::float8 * interval '1 second'), "
    "j.created_at + %(max_wait_s)s::float8 * interval '1 second')"
)
_HOLDER_IS = f"""{{t}}queue = %(queue)s::text AND {{t}}unique_key = %(key)s::text
      AND {{t}}state = 'pending' AND ({{t}}expires_at IS NULL OR {{t}}expires_at > {_NOW})"""
_HOLDER_UPDATE = f"""
WITH {_CLOCK},
moved AS (
    UPDATE {{schema}}.jobs j SET {{sets}}run_at = {_HOLDER_RUN_AT}, ready_at = {_HOLDER_RUN_AT}
    FROM (SELECT id, ready_at FROM {{schema}}.jobs WHERE {_HOLDER_IS.replace("{t}", "")}) o,
        clock c
    WHERE j.id = o.id AND {_HOLDER_IS.replace("{t}", "j.")}
    RETURNING j.id, j.grp, j.group_limit, j.ready_at < o.ready_at AS earlier),
wake AS MATERIALIZED (
    SELECT pg_notify(%(wake)s::text, %(queue)s::text) FROM moved WHERE moved.earlier)
SELECT m.id, m.grp, m.group_limit, (SELECT count(*) FROM wake) FROM moved m
"""
DEBOUNCE_HOLDER = _HOLDER_UPDATE.replace("{sets}", "")
REPLACE_HOLDER = _HOLDER_UPDATE.replace(
    "{sets}",
    """payload = %(payload)s::json, priority = %(priority)s::int,
        max_attempts = GREATEST(%(max_attempts)s::int, j.attempts + 1),
        visibility_timeout_s = %(visibility_timeout_s)s::float8,
        backoff_base_s = %(backoff_base_s)s::float8,
        dead_letter_retention_s = %(dead_letter_retention_s)s::float8,
        expires_at = c.t + %(expires_s)s::float8 * interval '1 second',
        trace_context = %(trace_context)s::text, result_ttl_s = %(result_ttl_s)s::float8,
        """,
)
# The live holder of one key and its state, after an insert that found the
# key held (waiting, if need be, for the transaction that wrote it).
KEY_HOLDER_STATE = """
SELECT id, state FROM {schema}.jobs WHERE queue = %(queue)s::text AND unique_key = %(key)s::text
"""
# Q-25: a replaced or debounced job of a limited group may change which of
# the group's rows hold its slots.
REBALANCE_GROUP = "SELECT {schema}.rebalance_group(%(queue)s::text, %(grp)s::text)"

# Q-24: bounded enqueues of one queue take turns on a transaction-level
# advisory lock (acks and claims never take it); the key names the schema
# and queue.
DEPTH_LOCK = "SELECT pg_advisory_xact_lock(%(key)s::bigint)"
# Before counting, rows that can never run again go to dead (they do not
# count, and must not be read past).
BURY_STALE = f"""
WITH {_CLOCK}, {_STALE_CTES}
SELECT (SELECT count(*) FROM expired) + (SELECT count(*) FROM exhausted)
"""
# Unfinished jobs of a queue, reading at most :n index entries: live rows
# fall into exactly one of three partial indexes (claimable or claimed with
# budget left, at budget, parked in a group), each read only as far as the
# earlier ones left room. The ORDER BY follows the indexes, so that the
# planner walks them rather than scanning the table up to the limit.
COUNT_UNFINISHED = """
WITH a AS (
    SELECT count(*) AS n FROM (
        SELECT 1 FROM {schema}.jobs
        WHERE queue = %(queue)s::text AND attempts < max_attempts AND parked = 0
        ORDER BY ready_at LIMIT %(n)s::int) x),
b AS (
    SELECT a.n + (SELECT count(*) FROM (
        SELECT 1 FROM {schema}.jobs
        WHERE queue = %(queue)s::text AND attempts >= max_attempts
        ORDER BY ready_at LIMIT (SELECT %(n)s::int - n FROM a)) y) AS n
    FROM a)
SELECT b.n + (SELECT count(*) FROM (
    SELECT 1 FROM {schema}.jobs
    WHERE queue = %(queue)s::text AND attempts < max_attempts AND parked = 1
    LIMIT (SELECT %(n)s::int - n FROM b)) z)
FROM b
"""

# A waiting row of a limited group that expired (on jobs_group_expiry).
_GROUP_EXPIRED = f"""queue = %(queue)s::text AND grp IS NOT NULL AND parked = 0
          AND state = 'pending' AND expires_at IS NOT NULL AND expires_at <= {_NOW}"""

# The claimable rows, in claim order, walking the claim index (no sort) one
# priority level at a time: rows that cannot be claimed now (in flight,
# scheduled) sit in the index beside the ready ones, and a single walk in
# (priority, ready_at) order would step over every such row of a higher
# level than the first ready one (a full group's slot holders are exactly
# that). The levels are found by skipping from one to the next (a probe
# each, PostgreSQL has no skip scan before 18); within a level the ready
# rows come first, one range seek. The nested loop runs lazily under the
# outer LIMIT, so a level below is read (and its rows locked) only while the
# claim wants more (C-8, docs/adr/0014). The batch size is written into the
# text ({limit}): a parameter there made PostgreSQL plan every claim afresh
# (LESSONS).
_LEVELS = """levels(p) AS (
    SELECT (SELECT priority FROM {schema}.jobs
            WHERE queue = %(queue)s::text AND attempts < max_attempts AND parked = 0
              AND NOT EXISTS (SELECT 1 FROM {schema}.paused WHERE queue = %(queue)s::text)
            ORDER BY priority DESC LIMIT 1)
    UNION ALL
    SELECT (SELECT priority FROM {schema}.jobs
            WHERE queue = %(queue)s::text AND attempts < max_attempts AND parked = 0
              AND priority < l.p
            ORDER BY priority DESC LIMIT 1)
    FROM levels l WHERE l.p IS NOT NULL)"""
_PICK = f"""
SELECT j.id FROM levels l CROSS JOIN LATERAL (
    SELECT id FROM {{schema}}.jobs
    WHERE queue = %(queue)s::text AND attempts < max_attempts AND parked = 0
      AND priority = l.p AND ready_at <= {_NOW} AND (expires_at IS NULL OR expires_at > {_NOW})
    ORDER BY ready_at, id
    LIMIT {{limit}}
    FOR UPDATE SKIP LOCKED) j
WHERE l.p IS NOT NULL
LIMIT {{limit}}
"""

# The claim: one statement, one round trip. It claims up to n rows and says
# whether the queue holds lapsed claims with no budget left; only then does a
# second statement (EXHAUST) dead-letter them (Q-12). Carrying the
# dead-lettering CTEs in every claim cost about 15 % of a claim + ack, mostly
# in planning, for work that is almost never there. run_at = ready_at
# records, for a reclaim, when the lapsed claim became ready again (for a
# pending row the two are equal); it gives the claim order of the returned
# rows, the queue time (O-1), and where a release puts the row back (Q-26).
# claims counts every claim and is never reset (Q-4). With nothing claimed,
# one row of NULLs carries the flag. The flag is an ORDER BY ... LIMIT 1
# probe, not EXISTS: PostgreSQL misjudges attempts >= max_attempts and
# scanned the table for EXISTS.
CLAIM = f"""
WITH RECURSIVE {_CLOCK}, {_LEVELS},
picked AS ({_PICK}),
claimed AS (
    UPDATE {{schema}}.jobs j
    SET state = 'processing',
        attempts = j.attempts + 1,
        claims = j.claims + 1,
        claimed_at = c.t,
        run_at = j.ready_at,
        deadline = c.t + j.visibility_timeout_s * interval '1 second',
        ready_at = c.t + j.visibility_timeout_s * interval '1 second',
        worker_id = %(worker_id)s::text
    FROM picked p, clock c
    WHERE j.id = p.id
    RETURNING j.id, j.queue, j.payload::text AS payload, j.attempts, j.claims, j.max_attempts,
        j.priority, j.run_at, j.claimed_at, j.deadline, j.visibility_timeout_s,
        j.backoff_base_s, j.grp, j.trace_context, j.result_ttl_s,
        j.progress::text AS progress)
SELECT claimed.*, flag.exhausted
FROM (SELECT (
        SELECT ready_at FROM {{schema}}.jobs
        WHERE queue = %(queue)s::text AND attempts >= max_attempts AND ready_at <= {_NOW}
        ORDER BY ready_at LIMIT 1
      ) IS NOT NULL OR (
        SELECT expires_at FROM {{schema}}.jobs
        WHERE {_GROUP_EXPIRED}
        ORDER BY expires_at LIMIT 1
      ) IS NOT NULL AS exhausted) flag
LEFT JOIN claimed ON true
"""

# Q-12: move the queue's lapsed claims with no budget left to dead; Q-25:
# and the waiting rows of limited groups that expired, which hold slots
# they can never use (each delete rebalances its group, by trigger).
EXHAUST = f"""
WITH {_CLOCK},
exhausted AS (
    DELETE FROM {{schema}}.jobs WHERE id = ANY (ARRAY (
        SELECT id FROM {{schema}}.jobs
        WHERE queue = %(queue)s::text AND attempts >= max_attempts AND ready_at <= {_NOW}
        FOR UPDATE SKIP LOCKED))
    RETURNING *),
expired AS (
    DELETE FROM {{schema}}.jobs WHERE id = ANY (ARRAY (
        SELECT id FROM {{schema}}.jobs WHERE {_GROUP_EXPIRED}
        FOR UPDATE SKIP LOCKED))
    RETURNING *),
buried AS ({_to_dead("exhausted", "'max attempts exceeded'")} RETURNING 1),
buried_expired AS ({_to_dead("expired", "'expired'")} RETURNING 1)
SELECT (SELECT count(*) FROM buried) + (SELECT count(*) FROM buried_expired)
"""

# The claim's row selection alone, for plan checks.
CLAIM_PICK = f"WITH RECURSIVE {_CLOCK}, {_LEVELS} {_PICK}"


def _planned_once(text: str) -> str:
    """*text* with its queue name out of the planner's sight: each use reads
    it through a one-time subquery (an InitPlan), so a custom plan can never
    look cheaper than the generic one and the prepared statement settles on
    its generic plan after five runs. With the name in sight, a store with
    many queues in the ``queue`` column's statistics got a custom plan for
    every claim, 0.4 ms of planning each (docs/adr/0029); the plan itself is
    the same either way (the claim index's seeks are by whatever the name
    is). The claim statements only: the rest plan as before."""
    return text.replace("%(queue)s::text", "(SELECT %(queue)s::text)")


# R-1 inside a claim's transaction: the limiter row, locked until the claim
# commits (created first if missing, so that two first claims cannot both
# take a full burst), and the server's clock the units are counted from.
RATE_LOCK = """
INSERT INTO {schema}.rate_limits AS r (name, tat)
VALUES (%(name)s::text, EXTRACT(EPOCH FROM clock_timestamp())::float8)
ON CONFLICT (name) DO NOTHING
"""
RATE_READ = """
SELECT tat, EXTRACT(EPOCH FROM clock_timestamp())::float8 FROM {schema}.rate_limits
WHERE name = %(name)s::text FOR UPDATE
"""
RATE_TAKE = "UPDATE {schema}.rate_limits SET tat = %(tat)s::float8 WHERE name = %(name)s::text"

# GCRA (R-1) in one statement: take :cost (n * interval) when the arrival
# time, moved past now, stays within :burst_t (burst * interval) of now. The
# row always comes back, with whether the units were granted (both SET
# expressions see the row as it was) and the clock they were judged by.
ACQUIRE_RATE = """
WITH clock AS MATERIALIZED (SELECT EXTRACT(EPOCH FROM clock_timestamp())::float8 AS t)
INSERT INTO {schema}.rate_limits AS r (name, tat, granted)
SELECT %(name)s::text, c.t + %(cost)s::float8, true FROM clock c
ON CONFLICT (name) DO UPDATE SET
    tat = CASE WHEN greatest(r.tat, (SELECT t FROM clock)) + %(cost)s::float8
                    - %(burst_t)s::float8 <= (SELECT t FROM clock)
               THEN greatest(r.tat, (SELECT t FROM clock)) + %(cost)s::float8 ELSE r.tat END,
    granted = greatest(r.tat, (SELECT t FROM clock)) + %(cost)s::float8
              - %(burst_t)s::float8 <= (SELECT t FROM clock)
RETURNING tat, granted, (SELECT t FROM clock)
"""

# Seconds until the earliest claimable, unexpired row of any of the queues is
# ready (negative when it already is: a row that turned ready after the last
# attempt must end the wait at once), one probe of the ready index per queue
# (the wait loops never walk the claim index). ORDER BY ... LIMIT 1 rather
# than min(): PostgreSQL does not turn min() into an index probe in a query
# with a CTE.
NEXT_READY = f"""
WITH {_CLOCK}
SELECT min(r.s) FROM unnest(%(queues)s::text[]) AS q(name)
CROSS JOIN LATERAL (
    (SELECT EXTRACT(EPOCH FROM j.ready_at - {_NOW})::float8 AS s FROM {{schema}}.jobs j
     WHERE j.queue = q.name AND j.attempts < j.max_attempts AND j.parked = 0
       AND (j.expires_at IS NULL OR j.expires_at > {_NOW})
     ORDER BY j.ready_at LIMIT 1)
    UNION ALL
    -- Q-25: a waiting slot holder's expiry may hand its slot to a parked row.
    (SELECT EXTRACT(EPOCH FROM j.expires_at - {_NOW})::float8 FROM {{schema}}.jobs j
     WHERE j.queue = q.name AND j.grp IS NOT NULL AND j.parked = 0 AND j.state = 'pending'
       AND j.expires_at IS NOT NULL AND j.expires_at > {_NOW}
     ORDER BY j.expires_at LIMIT 1)) r
-- Q-27: a paused queue has nothing to wait for until its resume wakes it.
WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.paused p WHERE p.queue = q.name)
"""

# Fencing: (id, claim number), still processing, deadline not passed (Q-4, Q-7).
_FENCE = f"""
id = %(id)s::bigint AND claims = %(claim)s::int AND state = 'processing'
AND deadline > {_NOW}
"""

# WF-2: in the ack's statement, the children of what it deleted are released
# (one probe of the parent key when there are none).
ACK = f"""
WITH {_CLOCK}, gone AS (DELETE FROM {{schema}}.jobs WHERE {_FENCE} RETURNING id)
SELECT count(*), {{schema}}.deps_finished(array_agg(id), %(wake)s::text) FROM gone
"""

# Many fences (of any queues) in one statement; the ids that landed come back.
ACK_MANY = f"""
WITH {_CLOCK},
gone AS (
    DELETE FROM {{schema}}.jobs j
    USING unnest(%(ids)s::bigint[], %(claims)s::int[]) AS h(id, claim)
    WHERE j.id = h.id AND j.claims = h.claim AND j.state = 'processing'
      AND j.deadline > {_NOW}
    RETURNING j.id, j.claims),
released AS MATERIALIZED (
    SELECT {{schema}}.deps_finished(ARRAY (SELECT id FROM gone), %(wake)s::text) AS n)
SELECT g.id, g.claims, (SELECT n FROM released) FROM gone g
"""

# RS-1: the ack of fences whose jobs may keep a result, one statement: the
# stamped rows it deletes go, with their results (a JSON null when none was
# given), into the results table in the same transaction, and the commit
# wakes the waiters of each queue's results (RS-2).
ACK_KEEP = f"""
WITH {_CLOCK},
gone AS (
    DELETE FROM {{schema}}.jobs j
    USING unnest(%(ids)s::bigint[], %(claims)s::int[], %(results)s::text[])
        AS h(id, claim, result)
    WHERE j.id = h.id AND j.claims = h.claim AND j.state = 'processing'
      AND j.deadline > {_NOW}
    RETURNING j.*, h.result AS kept),
stored AS (
    INSERT INTO {{schema}}.results ({_JOB_COLUMNS}, result, finished_at, keep_until)
    SELECT {_JOB_COLUMNS}, COALESCE(kept, 'null')::json, {_NOW},
        {_NOW} + result_ttl_s * interval '1 second'
    FROM gone WHERE result_ttl_s IS NOT NULL
    RETURNING queue),
wake AS MATERIALIZED (
    SELECT pg_notify(%(wake)s::text, %(prefix)s::text || d.queue)
    FROM (SELECT DISTINCT queue FROM stored) d),
released AS MATERIALIZED (
    SELECT {{schema}}.deps_finished(ARRAY (SELECT id FROM gone), %(wake)s::text) AS n)
SELECT g.id, g.claims, (SELECT count(*) FROM wake), (SELECT n FROM released) FROM gone g
"""

HEARTBEAT = f"""
WITH {_CLOCK}
UPDATE {{schema}}.jobs
SET deadline = {_NOW} + %(extend_s)s::float8 * interval '1 second',
    ready_at = {_NOW} + %(extend_s)s::float8 * interval '1 second'
WHERE {_FENCE}
RETURNING deadline
"""

# Q-28: a checkpoint, fenced like a heartbeat; the deadline stays.
PROGRESS = f"""
WITH {_CLOCK}
UPDATE {{schema}}.jobs SET progress = %(progress)s::json
WHERE {_FENCE}
"""

# RS-2: a stamped job's death wakes the waiters of its queue's results, as
# its ack would; one row per job moved either way (the callers count rows).
_RESULT_WAKE_OF_DEAD = (
    "CASE WHEN result_ttl_s IS NOT NULL "
    "THEN pg_notify(%(wake)s::text, %(prefix)s::text || queue) END"
)

# Q-10 in one statement: with budget left back to pending (and a wake for
# the queue), at budget to dead with the caller's error. The two conditions
# exclude each other, so at most one row comes back.
RETRY = f"""
WITH {_CLOCK},
moved AS (
    UPDATE {{schema}}.jobs
    SET state = 'pending',
        run_at = {_NOW} + %(delay_s)s::float8 * interval '1 second',
        ready_at = {_NOW} + %(delay_s)s::float8 * interval '1 second',
        deadline = NULL
    WHERE {_FENCE} AND attempts < max_attempts
    RETURNING queue),
gone AS (DELETE FROM {{schema}}.jobs WHERE {_FENCE} AND attempts >= max_attempts RETURNING *),
buried AS ({_to_dead("gone", "%(last_error)s::text")} RETURNING queue, result_ttl_s)
SELECT pg_notify(%(wake)s::text, queue) FROM moved
UNION ALL SELECT {_RESULT_WAKE_OF_DEAD} FROM buried
"""

# Q-11: the claim's row to dead with the caller's error.
FENCED_TO_DEAD = f"""
WITH {_CLOCK},
gone AS (DELETE FROM {{schema}}.jobs WHERE {_FENCE} RETURNING *),
buried AS ({_to_dead("gone", "%(last_error)s::text")} RETURNING queue, result_ttl_s)
SELECT {_RESULT_WAKE_OF_DEAD} FROM buried
"""

# Q-26: back where it stood in claim order (run_at kept the ready time the
# claim took it at), the attempt not counted; the queue is woken.
RELEASE = f"""
WITH {_CLOCK},
moved AS (
    UPDATE {{schema}}.jobs
    SET state = 'pending', attempts = attempts - 1, ready_at = run_at, deadline = NULL
    WHERE {_FENCE}
    RETURNING queue)
SELECT pg_notify(%(wake)s::text, queue) FROM moved
"""

# A waiting job is cancelled as a pending one; either way its waiting
# children fail with it (WF-3).
CANCEL = """
WITH gone AS (
    DELETE FROM {schema}.jobs WHERE id = %(id)s::bigint AND queue = %(queue)s::text
    RETURNING id),
held AS (
    DELETE FROM {schema}.waiting WHERE id = %(id)s::bigint AND queue = %(queue)s::text
    RETURNING id),
edges AS (DELETE FROM {schema}.deps WHERE child IN (SELECT id FROM held)),
every AS (SELECT id FROM gone UNION ALL SELECT id FROM held)
SELECT count(*), {schema}.deps_failed(array_agg(id)) FROM every
"""

# A job as get_job and list_jobs read it: the columns in the field order of
# alkstore.engine.JobRow (alkstore.engine.job_row maps them).
_INFO_LIVE = """
SELECT id, queue, state, payload::text, priority, run_at, created_at, claimed_at, deadline,
    worker_id, attempts, max_attempts, visibility_timeout_s, backoff_base_s,
    dead_letter_retention_s, expires_at, NULL::text AS last_error,
    NULL::timestamptz AS died_at, unique_key, grp, group_limit, trace_context, result_ttl_s,
    NULL::text AS result, NULL::timestamptz AS finished_at, progress::text
FROM {schema}.jobs
"""
_INFO_DEAD = """
SELECT id, queue, 'dead' AS state, payload::text, priority, run_at, created_at, claimed_at,
    deadline, worker_id, attempts, max_attempts, visibility_timeout_s, backoff_base_s,
    dead_letter_retention_s, expires_at, last_error, died_at,
    unique_key, grp, group_limit, trace_context, result_ttl_s,
    NULL::text AS result, NULL::timestamptz AS finished_at, progress::text
FROM {schema}.dead
"""
# RS-1: a kept result, until its time is up.
_INFO_DONE = """
SELECT id, queue, 'done' AS state, payload::text, priority, run_at, created_at, claimed_at,
    deadline, worker_id, attempts, max_attempts, visibility_timeout_s, backoff_base_s,
    dead_letter_retention_s, expires_at, NULL::text AS last_error,
    NULL::timestamptz AS died_at, unique_key, grp, group_limit, trace_context, result_ttl_s,
    result::text, finished_at, NULL::text AS progress
FROM {schema}.results
"""

# WF-1: a job waiting for others.
_INFO_WAITING = """
SELECT id, queue, 'waiting' AS state, payload::text, priority, run_at, created_at, claimed_at,
    deadline, worker_id, attempts, max_attempts, visibility_timeout_s, backoff_base_s,
    dead_letter_retention_s, expires_at, NULL::text AS last_error,
    NULL::timestamptz AS died_at, unique_key, grp, group_limit, trace_context, result_ttl_s,
    NULL::text AS result, NULL::timestamptz AS finished_at, NULL::text AS progress
FROM {schema}.waiting
"""
LIST_WAITING = (
    _INFO_WAITING
    + "WHERE queue = %(queue)s::text AND id > %(after)s::bigint ORDER BY id LIMIT %(limit)s::int"
)
# WF-4: the kept results of a job's parents, one key probe each.
PARENT_RESULTS = f"""
WITH {_CLOCK}
SELECT r.id, r.result::text FROM {{schema}}.results r
WHERE r.id = ANY ((SELECT parents FROM {{schema}}.jobs WHERE id = %(id)s::bigint)::bigint[])
  AND r.keep_until > {_NOW}
"""
WAITING_ON = """
SELECT child, array_agg(parent ORDER BY parent) FROM {schema}.deps
WHERE child = ANY (%(ids)s::bigint[]) GROUP BY child
"""

# One statement over both tables: one snapshot, so a row moving to dead
# between two reads cannot be missed (Q-14); scoped to the queue (C-7).
GET_JOB = (
    f"WITH {_CLOCK} "
    + _INFO_LIVE
    + "WHERE id = %(id)s::bigint AND queue = %(queue)s::text UNION ALL "
    + _INFO_DEAD
    + "WHERE id = %(id)s::bigint AND queue = %(queue)s::text UNION ALL "
    + _INFO_DONE
    + f"WHERE id = %(id)s::bigint AND queue = %(queue)s::text AND keep_until > {_NOW} "
    + "UNION ALL "
    + _INFO_WAITING
    + "WHERE id = %(id)s::bigint AND queue = %(queue)s::text"
)
# RS-2: how a job ended, in one snapshot of both tables.
GET_RESULT = f"""
WITH {_CLOCK}
SELECT id, 'done', result::text, NULL::text, finished_at FROM {{schema}}.results
WHERE id = %(id)s::bigint AND queue = %(queue)s::text AND keep_until > {_NOW}
UNION ALL
SELECT id, 'dead', NULL::text, last_error, died_at FROM {{schema}}.dead
WHERE id = %(id)s::bigint AND queue = %(queue)s::text
"""
LIST_DONE = (
    f"WITH {_CLOCK} "
    + _INFO_DONE
    + f"WHERE queue = %(queue)s::text AND keep_until > {_NOW} AND id > %(after)s::bigint "
    + "ORDER BY id LIMIT %(limit)s::int"
)
# RS-3, row by row: the queue's results past their time by more than
# :held_widths partition widths, in the widths before the current one (the
# current width's wait for its partition to be dropped whole). Reads never
# show a result past its time. When the partition upkeep could not run (a
# role without DDL rights, a lock not free at once), every such result goes
# (0 widths). After it ran, only those held past their time by more than two
# widths (2): they share a partition with a result kept much longer, which
# keeps that partition from being dropped; the rest wait for their
# partition's drop, which takes them whole, so that nothing is deleted by
# row that a drop removes anyway, and the drop's locks are not held through
# long deletes (docs/adr/0026).
PURGE_RESULTS = f"""
WITH {_CLOCK},
width AS MATERIALIZED (
    SELECT COALESCE((SELECT value::float8 FROM {{schema}}.meta
                     WHERE key = 'partition_width_s'), 3600) AS w),
hour AS MATERIALIZED (
    SELECT to_timestamp(floor(extract(epoch FROM {_NOW}) / w) * w) AS start FROM width)
DELETE FROM {{schema}}.results
WHERE queue = %(queue)s::text AND finished_at < (SELECT start FROM hour)
  AND id = ANY (ARRAY (
    SELECT id FROM {{schema}}.results
    WHERE queue = %(queue)s::text
      AND keep_until <= {_NOW} - make_interval(
          secs => %(held_widths)s::int * (SELECT w FROM width))
      AND finished_at < (SELECT start FROM hour)
    FOR UPDATE SKIP LOCKED))
"""
# RS-3 after the partition upkeep ran: the default partition's rows past
# their time in the widths before the current one, row by row (no drop ever
# takes them); the current width's wait for the width to end, as in
# PURGE_RESULTS.
PURGE_DEFAULT_RESULTS = f"""
WITH {_CLOCK},
width AS MATERIALIZED (
    SELECT COALESCE((SELECT value::float8 FROM {{schema}}.meta
                     WHERE key = 'partition_width_s'), 3600) AS w),
hour AS MATERIALIZED (
    SELECT to_timestamp(floor(extract(epoch FROM {_NOW}) / w) * w) AS start FROM width)
DELETE FROM {{schema}}.results_default
WHERE queue = %(queue)s::text AND finished_at < (SELECT start FROM hour)
  AND id = ANY (ARRAY (
    SELECT id FROM {{schema}}.results_default
    WHERE queue = %(queue)s::text AND keep_until <= {_NOW}
      AND finished_at < (SELECT start FROM hour)
    FOR UPDATE SKIP LOCKED))
"""
# RS-3, Q-16 (docs/adr/0026): the partitions of results and dead letters,
# dropped whole when past, made ahead; this queue's rows dropped.
PARTITION_UPKEEP = """
SELECT results, dead
FROM {schema}.partition_upkeep(%(schema)s::text, %(queue)s::text, %(ahead)s::int)
"""

# Every index of the jobs table is partial, so a queue's live rows are read
# as the union of three disjoint branches, each on one of them (claim or
# ready, exhausted, parked), never the whole table.
_LIVE_BRANCHES = """
SELECT * FROM {schema}.jobs
WHERE queue = %(queue)s::text AND attempts < max_attempts AND parked = 0
UNION ALL
SELECT * FROM {schema}.jobs WHERE queue = %(queue)s::text AND attempts >= max_attempts
UNION ALL
SELECT * FROM {schema}.jobs
WHERE queue = %(queue)s::text AND attempts < max_attempts AND parked = 1
"""

LIST_LIVE = (
    _INFO_LIVE.replace("{schema}.jobs", f"({_LIVE_BRANCHES}) AS live")
    + "WHERE state = %(state)s::text AND id > %(after)s::bigint ORDER BY id LIMIT %(limit)s::int"
)
LIST_DEAD = (
    _INFO_DEAD
    + "WHERE queue = %(queue)s::text AND id > %(after)s::bigint ORDER BY id LIMIT %(limit)s::int"
)

STATS = f"""
WITH {_CLOCK}
SELECT
    count(*) FILTER (WHERE state = 'pending' AND run_at <= {_NOW}),
    count(*) FILTER (WHERE state = 'pending' AND run_at > {_NOW}),
    count(*) FILTER (WHERE state = 'processing'),
    (SELECT count(*) FROM {{schema}}.dead WHERE queue = %(queue)s::text),
    min(run_at) FILTER (WHERE state = 'pending' AND run_at <= {_NOW}),
    (SELECT count(*) FROM {{schema}}.waiting WHERE queue = %(queue)s::text),
    EXISTS (SELECT 1 FROM {{schema}}.paused WHERE queue = %(queue)s::text)
FROM ({_LIVE_BRANCHES}) AS live
"""

# ---- Q-27 pause, O-6 run now (docs/adr/0023)
PAUSE = """
INSERT INTO {schema}.paused (queue, paused_at) VALUES (%(queue)s::text, clock_timestamp())
ON CONFLICT (queue) DO NOTHING
"""
# A resume wakes the queue's blocked claims at its commit, as an enqueue does.
RESUME = """
WITH gone AS (DELETE FROM {schema}.paused WHERE queue = %(queue)s::text RETURNING queue)
SELECT pg_notify(%(wake)s::text, queue) FROM gone
"""
IS_PAUSED = "SELECT EXISTS (SELECT 1 FROM {schema}.paused WHERE queue = %(queue)s::text)"
PAUSED_QUEUES = "SELECT queue FROM {schema}.paused"
# A pending job becomes ready now; one ready already keeps its place (its
# times only ever move back). A row of a limited group is rebalanced after
# (ready rows hold the slots first, Q-25).
RUN_NOW = f"""
WITH {_CLOCK},
moved AS (
    UPDATE {{schema}}.jobs
    SET run_at = least(run_at, {_NOW}), ready_at = least(ready_at, {_NOW})
    WHERE id = %(id)s::bigint AND queue = %(queue)s::text AND state = 'pending'
    RETURNING queue, grp, group_limit),
wake AS MATERIALIZED (SELECT pg_notify(%(wake)s::text, queue) FROM moved)
SELECT m.grp, m.group_limit, (SELECT count(*) FROM wake) FROM moved m
"""
REBALANCE_GROUP = "SELECT {schema}.rebalance_group(%(queue)s::text, %(grp)s::text)"
# ---- end Q-27, O-6

# Names sort by code point (COLLATE "C"), as on every engine.
QUEUE_STATS = f"""
WITH {_CLOCK},
live AS (
    SELECT queue,
        count(*) FILTER (WHERE state = 'pending' AND run_at <= {_NOW}) AS pending,
        count(*) FILTER (WHERE state = 'pending' AND run_at > {_NOW}) AS scheduled,
        count(*) FILTER (WHERE state = 'processing') AS processing,
        min(run_at) FILTER (WHERE state = 'pending' AND run_at <= {_NOW}) AS oldest
    FROM {{schema}}.jobs GROUP BY queue),
dead_rows AS (SELECT queue, count(*) AS dead FROM {{schema}}.dead GROUP BY queue),
waiting_rows AS (SELECT queue, count(*) AS waiting FROM {{schema}}.waiting GROUP BY queue)
SELECT COALESCE(l.queue, d.queue, w.queue) AS name, COALESCE(l.pending, 0),
    COALESCE(l.scheduled, 0), COALESCE(l.processing, 0), COALESCE(d.dead, 0), l.oldest,
    COALESCE(w.waiting, 0)
FROM live l FULL JOIN dead_rows d ON d.queue = l.queue
FULL JOIN waiting_rows w ON w.queue = COALESCE(l.queue, d.queue)
ORDER BY COALESCE(l.queue, d.queue, w.queue) COLLATE "C"
"""

# Q-15: every row past expires_at, pending or processing; Q-12: lapsed claims
# without budget (not already counted as expired); Q-16: dead rows past their
# retention. One statement; SKIP LOCKED, so concurrent sweeps never move a
# row twice (Q-17). Rows moved here are purged by a later sweep. It also
# takes the counts of this queue's rows that another queue's partition
# upkeep dropped (docs/adr/0026), so that each queue's counts stay exact.
SWEEP = f"""
WITH {_CLOCK}, {_STALE_CTES},
purged AS (
    DELETE FROM {{schema}}.dead WHERE id = ANY (ARRAY (
        SELECT id FROM {{schema}}.dead
        WHERE queue = %(queue)s::text AND purge_at IS NOT NULL AND purge_at <= {_NOW}
        FOR UPDATE SKIP LOCKED))
    RETURNING 1),
carried AS (DELETE FROM {{schema}}.dropped WHERE queue = %(queue)s::text RETURNING kind, n)
SELECT (SELECT count(*) FROM expired),
    (SELECT count(*) FROM purged)
        + (SELECT COALESCE(sum(n), 0) FROM carried WHERE kind = 'dead'),
    (SELECT count(*) FROM exhausted),
    (SELECT COALESCE(sum(n), 0) FROM carried WHERE kind = 'results')
"""

# Q-21: dead rows back to pending with their id, a fresh budget and their
# claim number (and their progress checkpoint, Q-28). The insert skips rows
# whose unique key a live job holds (they stay dead), and only the rows it
# wrote leave the dead table. FOR UPDATE (without SKIP LOCKED): a concurrent
# redrive or purge of the same rows waits, then finds them gone.
REDRIVE = f"""
WITH {_CLOCK},
source AS (
    SELECT * FROM {{schema}}.dead
    WHERE queue = %(queue)s::text AND {{which}}
    ORDER BY id
    FOR UPDATE),
moved AS (
    INSERT INTO {{schema}}.jobs (
        id, queue, state, payload, priority, run_at, ready_at, created_at, attempts, claims,
        max_attempts, visibility_timeout_s, backoff_base_s, dead_letter_retention_s, expires_at,
        unique_key, grp, group_limit, parked, trace_context, result_ttl_s, parents, progress)
    OVERRIDING SYSTEM VALUE
    SELECT id, queue, 'pending', payload, priority, c.t, c.t, created_at, 0, claims,
        max_attempts, visibility_timeout_s, backoff_base_s, dead_letter_retention_s, NULL,
        unique_key, grp, group_limit, 0, trace_context, result_ttl_s, parents, progress
    FROM source, clock c
    ORDER BY id
    ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL DO NOTHING
    RETURNING id),
gone AS (DELETE FROM {{schema}}.dead WHERE id IN (SELECT id FROM moved)),
wake AS MATERIALIZED (SELECT pg_notify(%(wake)s::text, %(queue)s::text)),
revived AS MATERIALIZED (SELECT {{schema}}.deps_revive(ARRAY (SELECT id FROM moved)) AS n)
SELECT m.id, (SELECT count(*) FROM wake), (SELECT n FROM revived) FROM moved m
"""

# Q-22: the given ids (or all) that died at or before now - :older_than_s
# (or any time). {which} and {older} are filled in per variant, so that each
# uses its index (ids: the primary key; age: dead_died).
PURGE_DEAD = f"""
WITH {_CLOCK}
DELETE FROM {{schema}}.dead
WHERE queue = %(queue)s::text AND {{which}} AND {{older}}
"""
_ALL = "true"
_BY_IDS = "id = ANY (%(ids)s::bigint[])"
_ANY_AGE = "true"
_OLD_ENOUGH = f"died_at <= {_NOW} - %(older_than_s)s::float8 * interval '1 second'"
# Q-22 without ids, first (docs/adr/0026): the partitions wholly at or before
# the cut (now, to purge all) holding only this queue's rows, dropped.
DEAD_DROP_BEFORE = """
SELECT {schema}.dead_drop_before(%(schema)s::text, %(queue)s::text,
    clock_timestamp() - COALESCE(%(older_than_s)s::float8, 0) * interval '1 second')
"""

# ---------------------------------------------------------------------- streams

_WAKE_KEY = "wake AS MATERIALIZED (SELECT pg_notify(%(wake)s::text, %(wake_key)s::text))"

# The counter row is locked by the upsert until commit: publishers of one
# stream take offsets one after the other, each visible only once every lower
# offset is committed or rolled back with its counter bump (S-2, S-4).
PUBLISH = f"""
WITH {_CLOCK},
counter AS (
    INSERT INTO {{schema}}.streams AS s (name, last_seq) VALUES (%(stream)s::text, 1)
    ON CONFLICT (name) DO UPDATE SET last_seq = s.last_seq + 1
    RETURNING last_seq),
event AS (
    INSERT INTO {{schema}}.events (stream, seq, key, payload, created_at)
    SELECT %(stream)s::text, counter.last_seq, %(key)s::text, %(payload)s::json, c.t
    FROM counter, clock c
    RETURNING seq),
{_WAKE_KEY}
SELECT event.seq FROM event, wake
"""
READ_EVENTS = """
SELECT seq, key, payload::text, created_at FROM {schema}.events
WHERE stream = %(stream)s::text AND seq > %(after)s::bigint ORDER BY seq LIMIT %(limit)s::int
"""
HAS_EVENT_AFTER = """
SELECT EXISTS (SELECT 1 FROM {schema}.events
               WHERE stream = %(stream)s::text AND seq > %(after)s::bigint)
"""
# S-3: only forward.
COMMIT_OFFSET = """
INSERT INTO {schema}.consumers AS o (stream, consumer, seq)
VALUES (%(stream)s::text, %(consumer)s::text, %(seq)s::bigint)
ON CONFLICT (stream, consumer) DO UPDATE SET seq = excluded.seq
WHERE excluded.seq > o.seq
"""
GET_OFFSET = """
SELECT seq FROM {schema}.consumers WHERE stream = %(stream)s::text AND consumer = %(consumer)s::text
"""
TRIM = "DELETE FROM {schema}.events WHERE stream = %(stream)s::text AND seq < %(before)s::bigint"
STREAM_STATS = """
SELECT s.name, s.last_seq, (SELECT count(*) FROM {schema}.events e WHERE e.stream = s.name)
FROM {schema}.streams s ORDER BY s.name COLLATE "C"
"""
CONSUMERS = """
SELECT stream, consumer, seq FROM {schema}.consumers
ORDER BY stream COLLATE "C", consumer COLLATE "C"
"""

# ------------------------------------------------------------------------ locks

# Free or expired: a fresh acquisition, token + 1. Held by the same owner:
# TTL reset, same token (L-2). Held by another owner: no row comes back.
ACQUIRE_LOCK = f"""
WITH {_CLOCK}
INSERT INTO {{schema}}.locks AS l (name, owner, token, expires_at)
SELECT %(name)s::text, %(owner)s::text, 1, c.t + %(ttl_s)s::float8 * interval '1 second'
FROM clock c
ON CONFLICT (name) DO UPDATE SET
    token = CASE WHEN l.owner = excluded.owner AND l.expires_at > {_NOW}
                 THEN l.token ELSE l.token + 1 END,
    owner = excluded.owner,
    expires_at = excluded.expires_at
WHERE l.expires_at <= {_NOW} OR l.owner = excluded.owner
RETURNING token, expires_at
"""
_LOCK_FENCE = f"""
name = %(name)s::text AND owner = %(owner)s::text AND token = %(token)s::bigint
AND expires_at > {_NOW}
"""
RENEW_LOCK = f"""
WITH {_CLOCK}
UPDATE {{schema}}.locks SET expires_at = {_NOW} + %(ttl_s)s::float8 * interval '1 second'
WHERE {_LOCK_FENCE}
RETURNING expires_at
"""
# The row stays (owner NULL, expired now) so that the token keeps growing.
RELEASE_LOCK = f"""
WITH {_CLOCK}
UPDATE {{schema}}.locks SET owner = NULL, expires_at = {_NOW} WHERE {_LOCK_FENCE}
"""
HELD_LOCKS = """
SELECT name, owner, token, expires_at FROM {schema}.locks
WHERE owner IS NOT NULL AND expires_at > clock_timestamp() ORDER BY name COLLATE "C"
"""

# ---------------------------------------------------------- workers (O-5)

# A worker's refresh in one statement: its row (or, gone, its deletion), its
# counts added, stale workers and old counts deleted. Every data-modifying
# CTE runs once whether read or not; each touches rows the others do not
# (the worker's own row versus other workers', counts at or past the cutoff
# versus before it), so their order does not matter.
REPORT_WORKER = f"""
WITH {_CLOCK},
w AS (
    INSERT INTO {{schema}}.workers AS w
        (id, host, pid, queues, concurrency, started_at, version, last_seen)
    SELECT %(id)s::text, %(host)s::text, %(pid)s::int, %(queues)s::text[],
        %(concurrency)s::int, %(started_at)s::timestamptz, %(version)s::text, c.t
    FROM clock c WHERE NOT %(gone)s::boolean
    ON CONFLICT (id) DO UPDATE SET
        host = excluded.host, pid = excluded.pid, queues = excluded.queues,
        concurrency = excluded.concurrency, started_at = excluded.started_at,
        version = excluded.version, last_seen = excluded.last_seen
    RETURNING 1),
g AS (
    DELETE FROM {{schema}}.workers WHERE %(gone)s::boolean AND id = %(id)s::text
    RETURNING 1),
k AS (
    INSERT INTO {{schema}}.worker_counts AS k (minute, worker_id, queue, outcome, n)
    SELECT u.minute, %(id)s::text, u.queue, u.outcome, u.n
    FROM unnest(%(minutes)s::timestamptz[], %(cqueues)s::text[], %(outcomes)s::text[],
        %(ns)s::bigint[]) AS u(minute, queue, outcome, n)
    WHERE u.minute >= {_NOW} - %(keep_s)s::float8 * interval '1 second'
    ON CONFLICT (minute, worker_id, queue, outcome) DO UPDATE SET n = k.n + excluded.n
    RETURNING 1),
f AS (
    DELETE FROM {{schema}}.workers
    WHERE last_seen < {_NOW} - %(forget_s)s::float8 * interval '1 second'
        AND id <> %(id)s::text
    RETURNING 1),
o AS (
    DELETE FROM {{schema}}.worker_counts
    WHERE minute < {_NOW} - %(keep_s)s::float8 * interval '1 second'
    RETURNING 1)
SELECT 1
"""
LIST_WORKERS = """
SELECT id, host, pid, queues, concurrency, started_at, version, last_seen
FROM {schema}.workers
WHERE last_seen >= clock_timestamp() - %(within_s)s::float8 * interval '1 second'
ORDER BY id COLLATE "C"
"""
WORKER_COUNTS = """
SELECT minute, worker_id, queue, outcome, n FROM {schema}.worker_counts
WHERE minute >= %(since)s::timestamptz
ORDER BY minute, worker_id COLLATE "C", queue COLLATE "C", outcome COLLATE "C"
"""

# ---------------------------------------------------------------- notifications

NOTIFY = "SELECT pg_notify(%(channel)s::text, %(payload)s::text)"

# ------------------------------------------------------------------------ wakes

# The wake probe of a transaction pooler (EN-4), one statement per poll for
# every watched key: the head of a queue's ready index (which moves when a
# row turns claimable or is claimed), a stream's counter, the schedules'
# count and last change, and whether the queue is paused (Q-27). Nothing is
# written; no NOTIFY is needed to see it.
WAKE_PROBE = """
SELECT k.key,
    (SELECT j.id::text || '@' || j.ready_at::text FROM {schema}.jobs j
     WHERE j.queue = k.key AND j.attempts < j.max_attempts AND j.parked = 0
       AND j.ready_at <= clock_timestamp()
     ORDER BY j.ready_at LIMIT 1),
    (SELECT s.last_seq::text FROM {schema}.streams s
     WHERE left(k.key, 7) = 'stream:' AND s.name = substr(k.key, 8)),
    CASE WHEN k.key = %(schedules_key)s::text THEN
        (SELECT count(*)::text || '@' || COALESCE(max(updated_at)::text, '')
         FROM {schema}.schedules) END,
    -- Q-27: a resume changes the fingerprint (the head may not move).
    EXISTS (SELECT 1 FROM {schema}.paused p WHERE p.queue = k.key)
FROM unnest(%(keys)s::text[]) AS k(key)
"""

# -------------------------------------------------------------------- schedules

_SCHEDULE_COLUMNS = "name, spec, queue, payload::text, opts, tz, next_fire_at, last_fire_at"

# SC-2: an unchanged spec and zone keep the stored next fire time.
UPSERT_SCHEDULE = f"""
WITH {_CLOCK},
saved AS (
    INSERT INTO {{schema}}.schedules AS s (
        name, spec, queue, payload, opts, tz, next_fire_at, created_at, updated_at)
    SELECT %(name)s::text, %(spec)s::text, %(queue)s::text, %(payload)s::json,
        %(opts)s::text, %(tz)s::text, %(next_fire_at)s::timestamptz, c.t, c.t
    FROM clock c
    ON CONFLICT (name) DO UPDATE SET
        spec = excluded.spec, queue = excluded.queue, payload = excluded.payload,
        opts = excluded.opts, tz = excluded.tz,
        next_fire_at = CASE WHEN s.spec = excluded.spec AND s.tz = excluded.tz
                            THEN s.next_fire_at ELSE excluded.next_fire_at END,
        updated_at = excluded.updated_at
    RETURNING {_SCHEDULE_COLUMNS}),
{_WAKE_KEY}
SELECT saved.* FROM saved, wake
"""
DELETE_SCHEDULE = """
WITH gone AS (DELETE FROM {schema}.schedules WHERE name = %(name)s::text RETURNING name)
SELECT pg_notify(%(wake)s::text, %(wake_key)s::text) FROM gone
"""
LIST_SCHEDULES = f"""
SELECT {_SCHEDULE_COLUMNS} FROM {{schema}}.schedules ORDER BY name COLLATE "C"
"""
DUE_SCHEDULES = f"""
WITH {_CLOCK}
SELECT c.t, {_SCHEDULE_COLUMNS} FROM clock c
LEFT JOIN {{schema}}.schedules s ON s.next_fire_at <= c.t
ORDER BY s.next_fire_at, s.name COLLATE "C"
"""
CLOCK = "SELECT clock_timestamp()"

# SC-3: compare-and-set of the fire and its enqueue in one statement. Only
# the tick whose compare-and-set matched inserts the job and wakes its queue.
FIRE_SCHEDULE = (
    f"""
WITH {_CLOCK},
advanced AS (
    UPDATE {{schema}}.schedules
    SET next_fire_at = %(next_fire_at)s::timestamptz, last_fire_at = %(last_fire_at)s::timestamptz
    WHERE name = %(name)s::text AND next_fire_at = %(expected)s::timestamptz
    RETURNING name),
job AS ("""
    + _INSERT_JOB
    + "SELECT "
    + _values("%(payload)s::json", "NULL")
    + " FROM advanced CROSS JOIN "
    + _JOB_SOURCES
    + """ RETURNING queue)
SELECT pg_notify(%(wake)s::text, queue) FROM job
"""
)
NEXT_FIRE = """
SELECT EXTRACT(EPOCH FROM min(next_fire_at) - clock_timestamp())::float8
FROM {schema}.schedules
"""

#: Claim statements are composed per batch size up to this many distinct
#: sizes; beyond it the size travels as a parameter.
_MAX_CLAIM_SHAPES = 256


class Statements:
    """Every statement composed for one schema, as ready-to-run strings."""

    def __init__(self, schema: str) -> None:
        # A '%' of the schema name is doubled: statements always travel with
        # parameters, so psycopg reads every '%' of the text as a placeholder.
        ident = sql.Identifier(schema).as_string(None).replace("%", "%%")
        self._ident = ident

        def c(template: str) -> str:
            return template.replace("{schema}", ident)

        self.get_version = c(GET_VERSION)
        self.set_version = c(SET_VERSION)
        self.get_store_id = c(GET_STORE_ID)
        self.get_width = c(GET_WIDTH)
        self.meta_rows = c(META_ROWS)
        self.create_schema = c(CREATE_SCHEMA)
        self.migrations = {v: [c(s) for s in stmts] for v, stmts in MIGRATIONS.items()}
        self.enqueue = c(ENQUEUE)
        self.enqueue_many = c(ENQUEUE_MANY)
        self.enqueue_rows = c(ENQUEUE_ROWS)
        self.enqueue_unique = c(ENQUEUE_UNIQUE)
        self.key_holders = c(KEY_HOLDERS)
        self.debounce_holder = c(DEBOUNCE_HOLDER)
        self.replace_holder = c(REPLACE_HOLDER)
        self.key_holder_state = c(KEY_HOLDER_STATE)
        self.rebalance_group = c(REBALANCE_GROUP)
        self.depth_lock = DEPTH_LOCK
        self.bury_stale = c(BURY_STALE)
        self.count_unfinished = c(COUNT_UNFINISHED)
        self._claim_template = _planned_once(c(CLAIM))
        self._claims: dict[int, str] = {}
        self.claim_param = self._claim_template.replace("{limit}", "%(n)s::int")
        self.exhaust = c(EXHAUST)
        self.claim_pick = _planned_once(c(CLAIM_PICK)).replace("{limit}", "%(n)s::int")
        self.rate_lock = c(RATE_LOCK)
        self.rate_read = c(RATE_READ)
        self.rate_take = c(RATE_TAKE)
        self.acquire_rate = c(ACQUIRE_RATE)
        self.next_ready = c(NEXT_READY)
        self.ack = c(ACK)
        self.ack_many = c(ACK_MANY)
        self.ack_keep = c(ACK_KEEP)
        self.get_result = c(GET_RESULT)
        self.list_done = c(LIST_DONE)
        self.purge_results = c(PURGE_RESULTS)
        self.purge_default_results = c(PURGE_DEFAULT_RESULTS)
        self.partition_upkeep = c(PARTITION_UPKEEP)
        self.dead_drop_before = c(DEAD_DROP_BEFORE)
        self.heartbeat = c(HEARTBEAT)
        self.progress = c(PROGRESS)
        self.retry = c(RETRY)
        self.fenced_to_dead = c(FENCED_TO_DEAD)
        self.release = c(RELEASE)
        self.cancel = c(CANCEL)
        self.list_waiting = c(LIST_WAITING)
        self.waiting_on = c(WAITING_ON)
        self.parent_results = c(PARENT_RESULTS)
        self.parents_waiting = c(PARENTS_WAITING)
        self.parents_live = c(PARENTS_LIVE)
        self.parents_dead = c(PARENTS_DEAD)
        self.insert_waiting = c(INSERT_WAITING)
        self.insert_dead_dep = c(INSERT_DEAD_DEP)
        self.insert_deps = c(INSERT_DEPS)
        self.get_job = c(GET_JOB)
        self.list_live = c(LIST_LIVE)
        self.list_dead = c(LIST_DEAD)
        self.stats = c(STATS)
        self.pause = c(PAUSE)
        self.resume = c(RESUME)
        self.is_paused = c(IS_PAUSED)
        self.paused_queues = c(PAUSED_QUEUES)
        self.run_now = c(RUN_NOW)
        self.rebalance_group = c(REBALANCE_GROUP)
        self.queue_stats = c(QUEUE_STATS)
        self.sweep = c(SWEEP)
        self.redrive_all = c(REDRIVE).replace("{which}", _ALL)
        self.redrive_ids = c(REDRIVE).replace("{which}", _BY_IDS)
        purge = c(PURGE_DEAD)
        self.purge_dead = {
            (by_ids, by_age): purge.replace("{which}", _BY_IDS if by_ids else _ALL).replace(
                "{older}", _OLD_ENOUGH if by_age else _ANY_AGE
            )
            for by_ids in (False, True)
            for by_age in (False, True)
        }
        self.publish = c(PUBLISH)
        self.read_events = c(READ_EVENTS)
        self.has_event_after = c(HAS_EVENT_AFTER)
        self.commit_offset = c(COMMIT_OFFSET)
        self.get_offset = c(GET_OFFSET)
        self.trim = c(TRIM)
        self.stream_stats = c(STREAM_STATS)
        self.consumers = c(CONSUMERS)
        self.acquire_lock = c(ACQUIRE_LOCK)
        self.renew_lock = c(RENEW_LOCK)
        self.release_lock = c(RELEASE_LOCK)
        self.held_locks = c(HELD_LOCKS)
        self.report_worker = c(REPORT_WORKER)
        self.list_workers = c(LIST_WORKERS)
        self.worker_counts = c(WORKER_COUNTS)
        self.notify = NOTIFY
        self.wake_probe = c(WAKE_PROBE)
        self.upsert_schedule = c(UPSERT_SCHEDULE)
        self.delete_schedule = c(DELETE_SCHEDULE)
        self.list_schedules = c(LIST_SCHEDULES)
        self.due_schedules = c(DUE_SCHEDULES)
        self.clock = CLOCK
        self.fire_schedule = c(FIRE_SCHEDULE)
        self.next_fire = c(NEXT_FIRE)

    def claim(self, n: int) -> str:
        """The claim statement for batches of *n*, the size in its text."""
        text = self._claims.get(n)
        if text is None:
            if len(self._claims) >= _MAX_CLAIM_SHAPES:
                return self.claim_param
            text = self._claim_template.replace("{limit}", str(int(n)))
            self._claims[n] = text
        return text
