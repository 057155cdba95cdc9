"""Every SQL statement of the PostgreSQL engine, in one place.

Statements are templates with a ``{schema}`` placeholder, composed once per
store by :class:`Statements` with :class:`psycopg.sql.Identifier` (so any
schema name works, quotes included); values always travel as parameters.
Parameters carry explicit casts, so that a ``None`` or a small ``int`` never
leaves PostgreSQL guessing a type.

Time: every statement that needs "now" reads ``clock_timestamp()`` once, in
a materialized ``clock`` CTE, and refers to it as ``(SELECT t FROM clock)``:
that is an init-plan parameter, so the planner can still use it as an index
bound (C-4). Durations are ``float8`` seconds times ``interval '1 second'``.

Every operation is ONE statement (data-modifying CTEs), hence atomic on any
connection, the caller's autocommit one included (C-6, docs/adr/0004). Wakes
are ``pg_notify(<wake channel>, <key>)`` from a one-row CTE, so a statement
sends one NOTIFY whatever the number of rows (docs/adr/0003). The claim path
and its indexes are explained in docs/adr/0002.
"""

from __future__ import annotations

from psycopg import sql

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "Statements"]

SCHEMA_VERSION = 1

# ----------------------------------------------------------------------- schema

# Without the schema placeholder: the schema may not exist yet.
META_EXISTS = """
SELECT 1 FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s AND c.relname = 'meta' AND c.relkind = 'r'
"""
# Serializes concurrent migrations of one schema until the migration commits.
MIGRATION_LOCK = "SELECT pg_advisory_xact_lock(%(key)s::bigint)"

GET_VERSION = "SELECT value FROM {schema}.meta WHERE key = 'schema_version'"
SET_VERSION = """
INSERT INTO {schema}.meta (key, value) VALUES ('schema_version', %(version)s::text)
ON CONFLICT (key) DO UPDATE SET value = excluded.value
"""
META_ROWS = "SELECT key, value FROM {schema}.meta ORDER BY key"
CREATE_SCHEMA = "CREATE SCHEMA IF NOT EXISTS {schema}"
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
}

# ------------------------------------------------------------------------ queue

_CLOCK = "clock AS MATERIALIZED (SELECT clock_timestamp() AS t)"
_NOW = "(SELECT t FROM clock)"

_JOB_COLUMNS = (
    "id, queue, payload, priority, run_at, created_at, claimed_at, deadline, worker_id, "
    "attempts, max_attempts, visibility_timeout_s, backoff_base_s, dead_letter_retention_s, "
    "expires_at"
)


def _to_dead(source: str, error: str) -> str:
    """``INSERT INTO dead`` of the rows of CTE *source* (deleted from jobs),
    stamping died_at and, with a retention, purge_at (Q-16)."""
    return (
        f"INSERT INTO {{schema}}.dead ({_JOB_COLUMNS}, last_error, died_at, purge_at) "
        f"SELECT {_JOB_COLUMNS}, {error}, {_NOW}, "
        f"{_NOW} + dead_letter_retention_s * interval '1 second' FROM {source}"
    )


_INSERT_JOB = """
INSERT INTO {schema}.jobs (
    queue, state, payload, priority, run_at, ready_at, created_at, max_attempts,
    visibility_timeout_s, backoff_base_s, dead_letter_retention_s, expires_at)
"""
# The values of one new job; :run_at wins over :delay_s (NewJob).
_JOB_VALUES = """
    %(queue)s::text, 'pending', {payload}, %(priority)s::int, r.run_at, r.run_at, c.t,
    %(max_attempts)s::int, %(vt)s::float8, %(backoff)s::float8, %(retention)s::float8,
    c.t + %(expires_s)s::float8 * interval '1 second'
"""
_JOB_SOURCES = """
clock c CROSS JOIN LATERAL (
    SELECT COALESCE(%(run_at)s::timestamptz,
                    c.t + %(delay_s)s::float8 * interval '1 second') AS run_at) r
"""
_WAKE_QUEUE = "wake AS MATERIALIZED (SELECT pg_notify(%(wake)s::text, %(queue)s::text))"

ENQUEUE = (
    f"WITH {_CLOCK}, {_WAKE_QUEUE}"
    + _INSERT_JOB
    + "SELECT "
    + _JOB_VALUES.replace("{payload}", "%(payload)s::json")
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
    + _JOB_VALUES.replace("{payload}", "p.payload::json")
    + " FROM "
    + _JOB_SOURCES
    + " CROSS JOIN wake"
    + " CROSS JOIN unnest(%(payloads)s::text[]) WITH ORDINALITY AS p(payload, ord)"
    + " ORDER BY p.ord RETURNING id"
)

# The claimable rows, in claim order, walking the claim index (no sort).
_PICK = f"""
SELECT id FROM {{schema}}.jobs
WHERE queue = %(queue)s::text AND attempts < max_attempts AND ready_at <= {_NOW}
  AND (expires_at IS NULL OR expires_at > {_NOW})
ORDER BY priority DESC, ready_at, id
LIMIT %(n)s::int
FOR UPDATE SKIP LOCKED
"""

# lapsed claims with no budget left, found on the exhausted index.
_EXHAUSTED = f"""
DELETE FROM {{schema}}.jobs WHERE id = ANY (ARRAY (
    SELECT id FROM {{schema}}.jobs
    WHERE queue = %(queue)s::text AND attempts >= max_attempts AND ready_at <= {_NOW}
    FOR UPDATE SKIP LOCKED))
RETURNING *
"""

# The claim: one statement, one round trip. It claims up to n rows and says
# whether the queue holds lapsed claims with no budget left; only then does a
# second statement (EXHAUST) dead-letter them. Carrying the
# dead-lettering CTEs in every claim cost about 15 % of a claim + ack, mostly
# in planning, for work that is almost never there. run_at = ready_at
# records, for a reclaim, when the lapsed claim became ready again (for a
# pending row the two are equal); it also gives the claim order of the
# returned rows. With nothing claimed, one row of NULLs carries the flag.
# The flag is an ORDER BY ... LIMIT 1 probe, not EXISTS: PostgreSQL
# misjudges attempts >= max_attempts and scanned the table for EXISTS.
CLAIM = f"""
WITH {_CLOCK},
picked AS ({_PICK}),
claimed AS (
    UPDATE {{schema}}.jobs j
    SET state = 'processing',
        attempts = j.attempts + 1,
        claimed_at = c.t,
        run_at = j.ready_at,
        deadline = c.t + j.visibility_timeout_s * interval '1 second',
        ready_at = c.t + j.visibility_timeout_s * interval '1 second',
        worker_id = %(worker)s::text
    FROM picked p, clock c
    WHERE j.id = p.id
    RETURNING j.id, j.payload::text AS payload, j.attempts, j.max_attempts, j.priority,
        j.run_at, j.deadline, j.visibility_timeout_s, j.backoff_base_s)
SELECT claimed.*, flag.exhausted
FROM (SELECT (
        SELECT ready_at FROM {{schema}}.jobs
        WHERE queue = %(queue)s::text AND attempts >= max_attempts AND ready_at <= {_NOW}
        ORDER BY ready_at LIMIT 1
      ) IS NOT NULL AS exhausted) flag
LEFT JOIN claimed ON true
"""

# move the queue's lapsed claims with no budget left to dead.
EXHAUST = f"""
WITH {_CLOCK},
exhausted AS ({_EXHAUSTED}),
buried AS ({_to_dead("exhausted", "'max attempts exceeded'")} RETURNING 1)
SELECT count(*) FROM buried
"""

# The claim's row selection alone, for plan checks.
CLAIM_PICK = f"WITH {_CLOCK} {_PICK}"

# Seconds until the earliest claimable, unexpired row is ready (negative when
# it already is: a row that turned ready after the last attempt must end the
# wait at once, not at the next wake), from the ready index (the wait loops
# never walk the claim index). ORDER BY ... LIMIT 1 rather than min():
# PostgreSQL does not turn min() into an index probe in a query with a CTE.
NEXT_READY = f"""
WITH {_CLOCK}
SELECT EXTRACT(EPOCH FROM ready_at - {_NOW})::float8 FROM {{schema}}.jobs
WHERE queue = %(queue)s::text AND attempts < max_attempts
  AND (expires_at IS NULL OR expires_at > {_NOW})
ORDER BY ready_at LIMIT 1
"""

# Fencing: (id, attempts), still processing, deadline not passed.
_FENCE = f"""
id = %(id)s::bigint AND attempts = %(attempt)s::int AND state = 'processing'
AND deadline > {_NOW}
"""

ACK = f"WITH {_CLOCK} DELETE FROM {{schema}}.jobs WHERE {_FENCE}"

ACK_BATCH = f"""
WITH {_CLOCK}
DELETE FROM {{schema}}.jobs j
USING unnest(%(ids)s::bigint[], %(attempts)s::int[]) AS h(id, attempt)
WHERE j.id = h.id AND j.attempts = h.attempt AND j.queue = %(queue)s::text
  AND j.state = 'processing' AND j.deadline > {_NOW}
"""

HEARTBEAT = f"""
WITH {_CLOCK}
UPDATE {{schema}}.jobs
SET deadline = {_NOW} + %(extend_s)s::float8 * interval '1 second',
    ready_at = {_NOW} + %(extend_s)s::float8 * interval '1 second'
WHERE {_FENCE}
RETURNING deadline
"""

# Q-10 with budget left: back to pending, and a wake for the queue.
RETRY_PENDING = f"""
WITH {_CLOCK},
moved AS (
    UPDATE {{schema}}.jobs
    SET state = 'pending',
        run_at = {_NOW} + %(delay_s)s::float8 * interval '1 second',
        ready_at = {_NOW} + %(delay_s)s::float8 * interval '1 second',
        deadline = NULL
    WHERE {_FENCE} AND attempts < max_attempts
    RETURNING queue)
SELECT pg_notify(%(wake)s::text, queue) FROM moved
"""

# Q-10 at budget, Q-11: the claim's row to dead with the caller's error.
FENCED_TO_DEAD = f"""
WITH {_CLOCK},
gone AS (DELETE FROM {{schema}}.jobs WHERE {_FENCE} RETURNING *)
{_to_dead("gone", "%(error)s::text")}
"""

CANCEL = "DELETE FROM {schema}.jobs WHERE id = %(id)s::bigint AND queue = %(queue)s::text"

_INFO_LIVE = """
SELECT id, queue, payload::text, priority, run_at, created_at, claimed_at, deadline,
    worker_id, attempts, max_attempts, visibility_timeout_s, backoff_base_s,
    dead_letter_retention_s, expires_at, state, NULL::text AS last_error,
    NULL::timestamptz AS died_at
FROM {schema}.jobs
"""
_INFO_DEAD = """
SELECT id, queue, payload::text, priority, run_at, created_at, claimed_at, deadline,
    worker_id, attempts, max_attempts, visibility_timeout_s, backoff_base_s,
    dead_letter_retention_s, expires_at, 'dead' AS state, last_error, died_at
FROM {schema}.dead
"""

# One statement over both tables: one snapshot, so a row moving to dead
# between two reads cannot be missed; scoped to the queue (C-7).
GET_JOB = (
    _INFO_LIVE
    + "WHERE id = %(id)s::bigint AND queue = %(queue)s::text UNION ALL "
    + _INFO_DEAD
    + "WHERE id = %(id)s::bigint AND queue = %(queue)s::text"
)

# Live rows of one queue are exactly the union of the two partial indexes
# (attempts < max_attempts, attempts >= max_attempts): each branch reads
# its queue's rows from one of them rather than the whole table.
_LIVE_BRANCHES = """
SELECT * FROM {schema}.jobs WHERE queue = %(queue)s::text AND attempts < max_attempts
UNION ALL
SELECT * FROM {schema}.jobs WHERE queue = %(queue)s::text AND attempts >= max_attempts
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
    (SELECT count(*) FROM {{schema}}.dead WHERE queue = %(queue)s::text)
FROM ({_LIVE_BRANCHES}) AS live
"""

# Names sort by code point (COLLATE "C"), as on every engine.
QUEUE_STATS = f"""
WITH {_CLOCK},
live AS (
    SELECT queue,
        count(*) FILTER (WHERE state = 'pending' AND run_at <= {_NOW}) AS pending,
        count(*) FILTER (WHERE state = 'pending' AND run_at > {_NOW}) AS scheduled,
        count(*) FILTER (WHERE state = 'processing') AS processing
    FROM {{schema}}.jobs GROUP BY queue),
dead_rows AS (SELECT queue, count(*) AS dead FROM {{schema}}.dead GROUP BY queue)
SELECT COALESCE(l.queue, d.queue) AS name, COALESCE(l.pending, 0), COALESCE(l.scheduled, 0),
    COALESCE(l.processing, 0), COALESCE(d.dead, 0)
FROM live l FULL JOIN dead_rows d ON d.queue = l.queue
ORDER BY COALESCE(l.queue, d.queue) COLLATE "C"
"""

# every row past expires_at, pending or processing; Q-12: lapsed claims
# without budget (not already counted as expired); Q-16: dead rows past their
# retention. One statement; SKIP LOCKED, so concurrent sweeps never move a
# row twice. Rows moved here are purged by a later sweep.
SWEEP = f"""
WITH {_CLOCK},
expired AS (
    DELETE FROM {{schema}}.jobs WHERE id = ANY (ARRAY (
        SELECT id FROM {{schema}}.jobs
        WHERE queue = %(queue)s::text AND expires_at IS NOT NULL AND expires_at <= {_NOW}
        FOR UPDATE SKIP LOCKED))
    RETURNING *),
exhausted AS (
    DELETE FROM {{schema}}.jobs WHERE id = ANY (ARRAY (
        SELECT id FROM {{schema}}.jobs
        WHERE queue = %(queue)s::text AND attempts >= max_attempts AND ready_at <= {_NOW}
          AND (expires_at IS NULL OR expires_at > {_NOW})
        FOR UPDATE SKIP LOCKED))
    RETURNING *),
buried_expired AS ({_to_dead("expired", "'expired'")}),
buried_exhausted AS ({_to_dead("exhausted", "'max attempts exceeded'")}),
purged AS (
    DELETE FROM {{schema}}.dead WHERE id = ANY (ARRAY (
        SELECT id FROM {{schema}}.dead
        WHERE queue = %(queue)s::text AND purge_at IS NOT NULL AND purge_at <= {_NOW}
        FOR UPDATE SKIP LOCKED))
    RETURNING 1)
SELECT (SELECT count(*) FROM expired), (SELECT count(*) FROM purged),
    (SELECT count(*) FROM exhausted)
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

# ---------------------------------------------------------------- notifications

NOTIFY = "SELECT pg_notify(%(channel)s::text, %(payload)s::text)"

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
SELECT c.t, {_SCHEDULE_COLUMNS} FROM {{schema}}.schedules, clock c
WHERE next_fire_at <= c.t ORDER BY next_fire_at, name COLLATE "C"
"""
CLOCK = "SELECT clock_timestamp()"

# SC-3: compare-and-set of the fire and its enqueue in one statement. Only
# the tick whose compare-and-set matched inserts the job and wakes its queue.
FIRE_SCHEDULE = (
    f"""
WITH {_CLOCK},
advanced AS (
    UPDATE {{schema}}.schedules
    SET next_fire_at = %(next_fire_at)s::timestamptz, last_fire_at = %(fire_at)s::timestamptz
    WHERE name = %(name)s::text AND next_fire_at = %(expected)s::timestamptz
    RETURNING name),
job AS ("""
    + _INSERT_JOB
    + "SELECT "
    + _JOB_VALUES.replace("{payload}", "%(payload)s::json")
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


class Statements:
    """Every statement composed for one schema, as ready-to-run strings."""

    def __init__(self, schema: str) -> None:
        def c(template: str) -> str:
            return sql.SQL(template).format(schema=sql.Identifier(schema)).as_string(None)

        self.get_version = c(GET_VERSION)
        self.set_version = c(SET_VERSION)
        self.meta_rows = c(META_ROWS)
        self.create_schema = c(CREATE_SCHEMA)
        self.migrations = {v: [c(s) for s in stmts] for v, stmts in MIGRATIONS.items()}
        self.enqueue = c(ENQUEUE)
        self.enqueue_many = c(ENQUEUE_MANY)
        self.claim = c(CLAIM)
        self.exhaust = c(EXHAUST)
        self.claim_pick = c(CLAIM_PICK)
        self.next_ready = c(NEXT_READY)
        self.ack = c(ACK)
        self.ack_batch = c(ACK_BATCH)
        self.heartbeat = c(HEARTBEAT)
        self.retry_pending = c(RETRY_PENDING)
        self.fenced_to_dead = c(FENCED_TO_DEAD)
        self.cancel = c(CANCEL)
        self.get_job = c(GET_JOB)
        self.list_live = c(LIST_LIVE)
        self.list_dead = c(LIST_DEAD)
        self.stats = c(STATS)
        self.queue_stats = c(QUEUE_STATS)
        self.sweep = c(SWEEP)
        self.publish = c(PUBLISH)
        self.read_events = c(READ_EVENTS)
        self.has_event_after = c(HAS_EVENT_AFTER)
        self.commit_offset = c(COMMIT_OFFSET)
        self.get_offset = c(GET_OFFSET)
        self.trim = c(TRIM)
        self.acquire_lock = c(ACQUIRE_LOCK)
        self.renew_lock = c(RENEW_LOCK)
        self.release_lock = c(RELEASE_LOCK)
        self.notify = c(NOTIFY)
        self.upsert_schedule = c(UPSERT_SCHEDULE)
        self.delete_schedule = c(DELETE_SCHEDULE)
        self.list_schedules = c(LIST_SCHEDULES)
        self.due_schedules = c(DUE_SCHEDULES)
        self.clock = c(CLOCK)
        self.fire_schedule = c(FIRE_SCHEDULE)
        self.next_fire = c(NEXT_FIRE)
