"""Every SQL statement of the SQLite engine, in one place.

Times are integer microseconds since the epoch (exact comparisons, which the
scheduler's compare-and-set relies on). Statements take named parameters;
``:now`` is read once per operation from the process clock (C-4).

The claim path and its indexes are explained in docs/adr/0002.
"""

from __future__ import annotations

# ----------------------------------------------------------------------- schema

SCHEMA_VERSION = 1

META_TABLE_EXISTS = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '__alkstore_meta'"
GET_VERSION = "SELECT value FROM __alkstore_meta WHERE key = 'schema_version'"
SET_VERSION = (
    "INSERT INTO __alkstore_meta (key, value) VALUES ('schema_version', :version) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)

# Migration n brings the schema from version n-1 to n.
MIGRATIONS: dict[int, list[str]] = {
    1: [
        """CREATE TABLE IF NOT EXISTS __alkstore_meta (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        ) WITHOUT ROWID""",
        # Live jobs of every queue. ready_at: when the row can next be claimed
        # (run_at while pending, the claim deadline while processing).
        """CREATE TABLE IF NOT EXISTS __alkstore_jobs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            queue TEXT NOT NULL,
            state TEXT NOT NULL CHECK (state IN ('pending', 'processing')),
            payload TEXT NOT NULL,
            priority INTEGER NOT NULL,
            run_at INTEGER NOT NULL,
            ready_at INTEGER NOT NULL,
            created_at INTEGER NOT NULL,
            claimed_at INTEGER,
            deadline INTEGER,
            worker_id TEXT,
            attempts INTEGER NOT NULL DEFAULT 0,
            max_attempts INTEGER NOT NULL,
            visibility_timeout_s REAL NOT NULL,
            backoff_base_s REAL NOT NULL,
            dead_letter_retention_s REAL,
            expires_at INTEGER
        )""",
        """CREATE INDEX IF NOT EXISTS __alkstore_jobs_claim
            ON __alkstore_jobs (queue, priority DESC, ready_at, id)
            WHERE attempts < max_attempts""",
        """CREATE INDEX IF NOT EXISTS __alkstore_jobs_ready
            ON __alkstore_jobs (queue, ready_at)
            WHERE attempts < max_attempts""",
        """CREATE INDEX IF NOT EXISTS __alkstore_jobs_exhausted
            ON __alkstore_jobs (queue, ready_at)
            WHERE attempts >= max_attempts""",
        """CREATE INDEX IF NOT EXISTS __alkstore_jobs_expires
            ON __alkstore_jobs (queue, expires_at)
            WHERE expires_at IS NOT NULL""",
        """CREATE TABLE IF NOT EXISTS __alkstore_dead (
            id INTEGER PRIMARY KEY,
            queue TEXT NOT NULL,
            payload TEXT NOT NULL,
            priority INTEGER NOT NULL,
            run_at INTEGER NOT NULL,
            created_at INTEGER NOT NULL,
            claimed_at INTEGER,
            deadline INTEGER,
            worker_id TEXT,
            attempts INTEGER NOT NULL,
            max_attempts INTEGER NOT NULL,
            visibility_timeout_s REAL NOT NULL,
            backoff_base_s REAL NOT NULL,
            dead_letter_retention_s REAL,
            expires_at INTEGER,
            last_error TEXT NOT NULL,
            died_at INTEGER NOT NULL,
            purge_at INTEGER
        )""",
        "CREATE INDEX IF NOT EXISTS __alkstore_dead_queue ON __alkstore_dead (queue, id)",
        """CREATE INDEX IF NOT EXISTS __alkstore_dead_purge
            ON __alkstore_dead (queue, purge_at) WHERE purge_at IS NOT NULL""",
        # Streams: one counter row per stream hands out offsets.
        """CREATE TABLE IF NOT EXISTS __alkstore_streams (
            name TEXT PRIMARY KEY,
            last_seq INTEGER NOT NULL
        ) WITHOUT ROWID""",
        """CREATE TABLE IF NOT EXISTS __alkstore_events (
            stream TEXT NOT NULL,
            seq INTEGER NOT NULL,
            key TEXT,
            payload TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            PRIMARY KEY (stream, seq)
        ) WITHOUT ROWID""",
        """CREATE TABLE IF NOT EXISTS __alkstore_consumers (
            stream TEXT NOT NULL,
            consumer TEXT NOT NULL,
            seq INTEGER NOT NULL,
            PRIMARY KEY (stream, consumer)
        ) WITHOUT ROWID""",
        # Locks keep their row after release so that tokens only grow (L-4).
        """CREATE TABLE IF NOT EXISTS __alkstore_locks (
            name TEXT PRIMARY KEY,
            owner TEXT,
            token INTEGER NOT NULL,
            expires_at INTEGER NOT NULL
        ) WITHOUT ROWID""",
        """CREATE TABLE IF NOT EXISTS __alkstore_notifications (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            channel TEXT NOT NULL,
            payload TEXT NOT NULL,
            created_at INTEGER NOT NULL
        )""",
        """CREATE TABLE IF NOT EXISTS __alkstore_schedules (
            name TEXT PRIMARY KEY,
            spec TEXT NOT NULL,
            queue TEXT NOT NULL,
            payload TEXT NOT NULL,
            opts TEXT,
            tz TEXT NOT NULL,
            next_fire_at INTEGER NOT NULL,
            last_fire_at INTEGER,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL
        ) WITHOUT ROWID""",
        """CREATE INDEX IF NOT EXISTS __alkstore_schedules_next
            ON __alkstore_schedules (next_fire_at)""",
    ],
}

# ------------------------------------------------------------------------ queue

_JOB_COLUMNS = (
    "id, queue, payload, priority, run_at, created_at, claimed_at, deadline, worker_id, "
    "attempts, max_attempts, visibility_timeout_s, backoff_base_s, dead_letter_retention_s, "
    "expires_at"
)
# Moving a row to dead stamps died_at and, with a retention, purge_at.
_TO_DEAD = (
    f"INSERT INTO __alkstore_dead ({_JOB_COLUMNS}, last_error, died_at, purge_at) "
    f"SELECT {_JOB_COLUMNS}, :error, :now, "
    "CASE WHEN dead_letter_retention_s IS NULL THEN NULL "
    "ELSE :now + CAST(dead_letter_retention_s * 1000000 AS INTEGER) END "
    "FROM __alkstore_jobs "
)

ENQUEUE = """
INSERT INTO __alkstore_jobs (
    queue, state, payload, priority, run_at, ready_at, created_at, max_attempts,
    visibility_timeout_s, backoff_base_s, dead_letter_retention_s, expires_at)
VALUES (:queue, 'pending', :payload, :priority, :run_at, :run_at, :now, :max_attempts,
    :vt, :backoff, :retention, :expires_at)
RETURNING id
"""

# One statement for a whole batch: the payloads arrive as one JSON array of
# already-encoded texts, inserted in array order.
ENQUEUE_MANY = """
INSERT INTO __alkstore_jobs (
    queue, state, payload, priority, run_at, ready_at, created_at, max_attempts,
    visibility_timeout_s, backoff_base_s, dead_letter_retention_s, expires_at)
SELECT :queue, 'pending', value, :priority, :run_at, :run_at, :now, :max_attempts,
    :vt, :backoff, :retention, :expires_at
FROM json_each(:payloads) ORDER BY key
RETURNING id
"""

# Read-only: is anything claimable, or is a lapsed claim waiting to be
# dead-lettered? Lets an idle claimer go back to sleep without the write lock.
CLAIM_PRECHECK = """
SELECT
  EXISTS (SELECT 1 FROM __alkstore_jobs INDEXED BY __alkstore_jobs_ready
          WHERE queue = :queue AND attempts < max_attempts AND ready_at <= :now
            AND (expires_at IS NULL OR expires_at > :now)),
  EXISTS (SELECT 1 FROM __alkstore_jobs INDEXED BY __alkstore_jobs_exhausted
          WHERE queue = :queue AND attempts >= max_attempts AND ready_at <= :now)
"""

# lapsed claims with no budget left go to dead.
EXHAUSTED_TO_DEAD = (
    _TO_DEAD + "WHERE queue = :queue AND attempts >= max_attempts AND ready_at <= :now "
    "AND state = 'processing'"
)
EXHAUSTED_DELETE = """
DELETE FROM __alkstore_jobs
WHERE queue = :queue AND attempts >= max_attempts AND ready_at <= :now AND state = 'processing'
"""

# The claim: one statement walking the claim index in order (no sort).
# run_at = ready_at records, for a reclaim, when the lapsed claim became
# ready again (for a pending row the two are equal); it also gives the claim
# order of the returned rows.
CLAIM = """
UPDATE __alkstore_jobs
SET state = 'processing',
    attempts = attempts + 1,
    claimed_at = :now,
    run_at = ready_at,
    deadline = :now + CAST(visibility_timeout_s * 1000000 AS INTEGER),
    ready_at = :now + CAST(visibility_timeout_s * 1000000 AS INTEGER),
    worker_id = :worker
WHERE id IN (
    SELECT id FROM __alkstore_jobs INDEXED BY __alkstore_jobs_claim
    WHERE queue = :queue AND attempts < max_attempts AND ready_at <= :now
      AND (expires_at IS NULL OR expires_at > :now)
    ORDER BY priority DESC, ready_at, id
    LIMIT :n)
RETURNING id, payload, attempts, max_attempts, priority, run_at, deadline,
    visibility_timeout_s, backoff_base_s
"""

# The claim's inner SELECT, for EXPLAIN QUERY PLAN checks.
CLAIM_SELECT = """
SELECT id FROM __alkstore_jobs INDEXED BY __alkstore_jobs_claim
WHERE queue = :queue AND attempts < max_attempts AND ready_at <= :now
  AND (expires_at IS NULL OR expires_at > :now)
ORDER BY priority DESC, ready_at, id
LIMIT :n
"""

# When the earliest claimable, unexpired row is (or was) ready. Not limited
# to the future: a row that turned ready after the last attempt must end the
# wait at once, not at the next wake.
NEXT_READY = """
SELECT MIN(ready_at) FROM __alkstore_jobs INDEXED BY __alkstore_jobs_ready
WHERE queue = :queue AND attempts < max_attempts
  AND (expires_at IS NULL OR expires_at > :now)
"""

# Fencing: (id, attempts), still processing, deadline not passed.
_FENCE = "id = :id AND attempts = :attempt AND state = 'processing' AND deadline > :now"

ACK = f"DELETE FROM __alkstore_jobs WHERE {_FENCE}"

HEARTBEAT = f"""
UPDATE __alkstore_jobs SET deadline = :deadline, ready_at = :deadline
WHERE {_FENCE}
RETURNING deadline
"""

RETRY_PENDING = f"""
UPDATE __alkstore_jobs
SET state = 'pending', run_at = :run_at, ready_at = :run_at, deadline = NULL
WHERE {_FENCE} AND attempts < max_attempts
"""

FENCED_TO_DEAD = _TO_DEAD + f"WHERE {_FENCE}"
DELETE_BY_ID = "DELETE FROM __alkstore_jobs WHERE id = :id"

CANCEL = "DELETE FROM __alkstore_jobs WHERE id = :id AND queue = :queue"

_INFO_LIVE = f"""
SELECT {_JOB_COLUMNS}, state, NULL AS last_error, NULL AS died_at
FROM __alkstore_jobs
"""
_INFO_DEAD = f"""
SELECT {_JOB_COLUMNS}, 'dead' AS state, last_error, died_at
FROM __alkstore_dead
"""

# One statement over both tables: one snapshot, so a row moving to dead
# between two reads cannot be missed.
GET_JOB = (
    _INFO_LIVE
    + "WHERE id = :id AND queue = :queue UNION ALL "
    + _INFO_DEAD
    + "WHERE id = :id AND queue = :queue"
)

LIST_LIVE = (
    _INFO_LIVE + "WHERE queue = :queue AND state = :state AND id > :after ORDER BY id LIMIT :limit"
)
LIST_DEAD = _INFO_DEAD + "WHERE queue = :queue AND id > :after ORDER BY id LIMIT :limit"

STATS = """
SELECT
  (SELECT COUNT(*) FROM __alkstore_jobs
   WHERE queue = :queue AND state = 'pending' AND run_at <= :now),
  (SELECT COUNT(*) FROM __alkstore_jobs
   WHERE queue = :queue AND state = 'pending' AND run_at > :now),
  (SELECT COUNT(*) FROM __alkstore_jobs WHERE queue = :queue AND state = 'processing'),
  (SELECT COUNT(*) FROM __alkstore_dead WHERE queue = :queue)
"""

QUEUE_STATS = """
SELECT queue, SUM(pending), SUM(scheduled), SUM(processing), SUM(dead) FROM (
  SELECT queue,
         SUM(state = 'pending' AND run_at <= :now) AS pending,
         SUM(state = 'pending' AND run_at > :now) AS scheduled,
         SUM(state = 'processing') AS processing,
         0 AS dead
  FROM __alkstore_jobs GROUP BY queue
  UNION ALL
  SELECT queue, 0, 0, 0, COUNT(*) FROM __alkstore_dead GROUP BY queue
) GROUP BY queue ORDER BY queue
"""

# every row past expires_at, pending or processing.
EXPIRED_TO_DEAD = _TO_DEAD + "WHERE queue = :queue AND expires_at <= :now"
EXPIRED_DELETE = "DELETE FROM __alkstore_jobs WHERE queue = :queue AND expires_at <= :now"
# dead rows past their retention.
PURGE_DEAD = "DELETE FROM __alkstore_dead WHERE queue = :queue AND purge_at <= :now"

# ---------------------------------------------------------------------- streams

NEXT_SEQ = """
INSERT INTO __alkstore_streams (name, last_seq) VALUES (:stream, 1)
ON CONFLICT (name) DO UPDATE SET last_seq = last_seq + 1
RETURNING last_seq
"""
PUBLISH = """
INSERT INTO __alkstore_events (stream, seq, key, payload, created_at)
VALUES (:stream, :seq, :key, :payload, :now)
"""
READ_EVENTS = """
SELECT seq, key, payload, created_at FROM __alkstore_events
WHERE stream = :stream AND seq > :after ORDER BY seq LIMIT :limit
"""
HAS_EVENT_AFTER = """
SELECT EXISTS (SELECT 1 FROM __alkstore_events WHERE stream = :stream AND seq > :after)
"""
COMMIT_OFFSET = """
INSERT INTO __alkstore_consumers (stream, consumer, seq) VALUES (:stream, :consumer, :seq)
ON CONFLICT (stream, consumer) DO UPDATE SET seq = excluded.seq
WHERE excluded.seq > __alkstore_consumers.seq
"""
GET_OFFSET = """
SELECT seq FROM __alkstore_consumers WHERE stream = :stream AND consumer = :consumer
"""
TRIM = "DELETE FROM __alkstore_events WHERE stream = :stream AND seq < :before"

# ------------------------------------------------------------------------ locks

# Free or expired: a fresh acquisition, token + 1. Held by the same owner:
# TTL reset, same token (L-2). Held by another owner: no row comes back.
ACQUIRE_LOCK = """
INSERT INTO __alkstore_locks (name, owner, token, expires_at)
VALUES (:name, :owner, 1, :expires_at)
ON CONFLICT (name) DO UPDATE SET
    token = CASE WHEN __alkstore_locks.owner = excluded.owner
                  AND __alkstore_locks.expires_at > :now
                 THEN __alkstore_locks.token ELSE __alkstore_locks.token + 1 END,
    owner = excluded.owner,
    expires_at = excluded.expires_at
WHERE __alkstore_locks.expires_at <= :now OR __alkstore_locks.owner = excluded.owner
RETURNING token, expires_at
"""
_LOCK_FENCE = "name = :name AND owner = :owner AND token = :token AND expires_at > :now"
RENEW_LOCK = f"""
UPDATE __alkstore_locks SET expires_at = :expires_at WHERE {_LOCK_FENCE} RETURNING expires_at
"""
RELEASE_LOCK = f"UPDATE __alkstore_locks SET owner = NULL, expires_at = 0 WHERE {_LOCK_FENCE}"

# ---------------------------------------------------------------- notifications

NOTIFY = """
INSERT INTO __alkstore_notifications (channel, payload, created_at)
VALUES (:channel, :payload, :now)
"""
LAST_NOTIFICATION = "SELECT COALESCE(MAX(id), 0) FROM __alkstore_notifications"
NOTIFICATIONS_AFTER = """
SELECT id, channel, payload FROM __alkstore_notifications WHERE id > :after ORDER BY id
"""
NOTIFICATIONS_EXCESS = """
SELECT EXISTS (SELECT 1 FROM __alkstore_notifications
               WHERE id <= (SELECT COALESCE(MAX(id), 0) FROM __alkstore_notifications) - :cap)
"""
# N-3: keep the newest :cap rows.
PRUNE_NOTIFICATIONS = """
DELETE FROM __alkstore_notifications
WHERE id <= (SELECT COALESCE(MAX(id), 0) FROM __alkstore_notifications) - :cap
"""

# -------------------------------------------------------------------- schedules

GET_SCHEDULE = """
SELECT name, spec, queue, payload, opts, tz, next_fire_at, last_fire_at
FROM __alkstore_schedules WHERE name = :name
"""
UPSERT_SCHEDULE = """
INSERT INTO __alkstore_schedules (
    name, spec, queue, payload, opts, tz, next_fire_at, created_at, updated_at)
VALUES (:name, :spec, :queue, :payload, :opts, :tz, :next_fire_at, :now, :now)
ON CONFLICT (name) DO UPDATE SET
    spec = excluded.spec, queue = excluded.queue, payload = excluded.payload,
    opts = excluded.opts, tz = excluded.tz, next_fire_at = excluded.next_fire_at,
    updated_at = excluded.updated_at
"""
DELETE_SCHEDULE = "DELETE FROM __alkstore_schedules WHERE name = :name"
LIST_SCHEDULES = """
SELECT name, spec, queue, payload, opts, tz, next_fire_at, last_fire_at
FROM __alkstore_schedules ORDER BY name
"""
DUE_SCHEDULES = """
SELECT name, spec, queue, payload, opts, tz, next_fire_at, last_fire_at
FROM __alkstore_schedules WHERE next_fire_at <= :now ORDER BY next_fire_at, name
"""
# SC-3: the fire happens only for the tick whose compare-and-set matched.
ADVANCE_SCHEDULE = """
UPDATE __alkstore_schedules SET next_fire_at = :next_fire_at, last_fire_at = :fire_at
WHERE name = :name AND next_fire_at = :expected
"""
NEXT_FIRE = "SELECT MIN(next_fire_at) FROM __alkstore_schedules"
