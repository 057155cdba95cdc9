"""Every SQL statement of the SQLite engine, in one place.

Times are integer microseconds since the epoch (exact comparisons, which the
scheduler's compare-and-set relies on). Statements take named parameters;
``:now`` is read once per operation from the process clock (C-4).

The claim path and its indexes are explained in docs/adr/0002.
"""

from __future__ import annotations

# ----------------------------------------------------------------------- schema

SCHEMA_VERSION = 6

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
    # Version 2: claim numbers that survive redrives, unique keys
    # groups, the trace context (O-2), rate limits.
    2: [
        "ALTER TABLE __alkstore_jobs ADD COLUMN claims INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE __alkstore_jobs ADD COLUMN unique_key TEXT",
        "ALTER TABLE __alkstore_jobs ADD COLUMN grp TEXT",
        "ALTER TABLE __alkstore_jobs ADD COLUMN group_limit INTEGER",
        "ALTER TABLE __alkstore_jobs ADD COLUMN parked INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE __alkstore_jobs ADD COLUMN trace_context TEXT",
        "UPDATE __alkstore_jobs SET claims = attempts",
        "ALTER TABLE __alkstore_dead ADD COLUMN claims INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE __alkstore_dead ADD COLUMN unique_key TEXT",
        "ALTER TABLE __alkstore_dead ADD COLUMN grp TEXT",
        "ALTER TABLE __alkstore_dead ADD COLUMN group_limit INTEGER",
        "ALTER TABLE __alkstore_dead ADD COLUMN trace_context TEXT",
        "UPDATE __alkstore_dead SET claims = attempts",
        # Parked rows (a group at its limit, Q-25) are not claimable: they
        # leave the claim and ready indexes and wait in the group index.
        "DROP INDEX IF EXISTS __alkstore_jobs_claim",
        """CREATE INDEX __alkstore_jobs_claim
            ON __alkstore_jobs (queue, priority DESC, ready_at, id)
            WHERE attempts < max_attempts AND parked = 0""",
        # The claim index answers "is anything ready, and when" too (per
        # priority level, see NEXT_READY); a second index on the moving key
        # cost every enqueue and claim two more pages (docs/adr/0002).
        "DROP INDEX IF EXISTS __alkstore_jobs_ready",
        """CREATE INDEX IF NOT EXISTS __alkstore_jobs_parked
            ON __alkstore_jobs (queue) WHERE parked = 1""",
        # A group's rows by parked-ness, each in claim order: the holders of
        # its slots (parked = 0) are counted on at most group_limit entries,
        # the next to unpark is one probe (Q-25, docs/adr/0014).
        """CREATE INDEX IF NOT EXISTS __alkstore_jobs_group
            ON __alkstore_jobs (queue, grp, parked, priority DESC, ready_at, id)
            WHERE grp IS NOT NULL""",
        """CREATE UNIQUE INDEX IF NOT EXISTS __alkstore_jobs_unique
            ON __alkstore_jobs (queue, unique_key) WHERE unique_key IS NOT NULL""",
        "CREATE INDEX IF NOT EXISTS __alkstore_dead_died ON __alkstore_dead (queue, died_at)",
        # GCRA: one row per limiter; tat is the theoretical arrival time in
        # microseconds (REAL: an interval need not be whole microseconds).
        """CREATE TABLE IF NOT EXISTS __alkstore_rate_limits (
            name TEXT PRIMARY KEY,
            tat REAL NOT NULL,
            granted INTEGER NOT NULL DEFAULT 1
        ) WITHOUT ROWID""",
    ],
    # Version 3: a limited group's waiting slot holders by expiry, so that a
    # claim finds one that expired (it can never run, yet holds a slot) with
    # one probe (Q-25, docs/adr/0014).
    3: [
        """CREATE INDEX IF NOT EXISTS __alkstore_jobs_group_expiry
            ON __alkstore_jobs (queue, expires_at)
            WHERE grp IS NOT NULL AND parked = 0 AND state = 'pending'
              AND expires_at IS NOT NULL""",
    ],
    # Version 4: kept results (RS-1..RS-3, docs/adr/0018). The RS-1 stamp on
    # live and dead rows; the results of acked jobs so stamped in a table of
    # their own, with the job's row as it was at the ack, never read by a
    # claim: the claim's table and its indexes are unchanged.
    4: [
        "ALTER TABLE __alkstore_jobs ADD COLUMN result_ttl_s REAL",
        "ALTER TABLE __alkstore_dead ADD COLUMN result_ttl_s REAL",
        """CREATE TABLE IF NOT EXISTS __alkstore_results (
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
            claims INTEGER NOT NULL,
            unique_key TEXT,
            grp TEXT,
            group_limit INTEGER,
            trace_context TEXT,
            result_ttl_s REAL NOT NULL,
            result TEXT NOT NULL,
            finished_at INTEGER NOT NULL,
            keep_until INTEGER NOT NULL
        )""",
        # Listing a queue's done jobs by id; the sweep's deletes by time.
        "CREATE INDEX IF NOT EXISTS __alkstore_results_queue ON __alkstore_results (queue, id)",
        """CREATE INDEX IF NOT EXISTS __alkstore_results_keep
            ON __alkstore_results (queue, keep_until)""",
    ],
    # Version 5: jobs that wait for other jobs (WF-1..WF-3, docs/adr/0021).
    # A waiting job lives in a table of its own, so the claim's table and
    # indexes never see it; a count of its unfinished parents, and one row
    # per (parent, child) keyed by the parent, so that a parent's ack reads
    # only its own children. A job that died by a cascade names the parent
    # whose failure killed it (failed_dep), for that parent's redrive.
    5: [
        """CREATE TABLE IF NOT EXISTS __alkstore_waiting (
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
            claims INTEGER NOT NULL,
            unique_key TEXT,
            grp TEXT,
            group_limit INTEGER,
            trace_context TEXT,
            result_ttl_s REAL,
            parents TEXT,
            delay_us INTEGER,
            unfinished INTEGER NOT NULL
        )""",
        # WF-4: the ids a job was enqueued after (a JSON array), carried with
        # its row to dead and back, for parent_results().
        "ALTER TABLE __alkstore_jobs ADD COLUMN parents TEXT",
        "ALTER TABLE __alkstore_dead ADD COLUMN parents TEXT",
        "CREATE INDEX IF NOT EXISTS __alkstore_waiting_queue ON __alkstore_waiting (queue, id)",
        """CREATE TABLE IF NOT EXISTS __alkstore_deps (
            parent INTEGER NOT NULL,
            child INTEGER NOT NULL,
            PRIMARY KEY (parent, child)
        ) WITHOUT ROWID""",
        "CREATE INDEX IF NOT EXISTS __alkstore_deps_child ON __alkstore_deps (child, parent)",
        "ALTER TABLE __alkstore_dead ADD COLUMN failed_dep INTEGER",
        """CREATE INDEX IF NOT EXISTS __alkstore_dead_failed_dep
            ON __alkstore_dead (failed_dep) WHERE failed_dep IS NOT NULL""",
    ],
    # Version 6 entries (other features of version 6 add theirs beside).
    6: [
        # --- Q-28 progress checkpoints (docs/adr/0022): the job's last
        # checkpoint, JSON text or NULL, on the live row and carried with it
        # to dead and back (redrive). No index: only the claim's RETURNING,
        # get_job and list_jobs read it.
        "ALTER TABLE __alkstore_jobs ADD COLUMN progress TEXT",
        "ALTER TABLE __alkstore_dead ADD COLUMN progress TEXT",
        # --- end Q-28
        # ---- Q-27 pause (docs/adr/0023): one row per paused queue. The claim
        # statements read it by primary key (an uncorrelated NOT EXISTS,
        # evaluated once per statement), so a claim costs one probe of a
        # tiny table whether no queue or a thousand are paused.
        """CREATE TABLE IF NOT EXISTS __alkstore_paused (
            queue TEXT PRIMARY KEY,
            paused_at INTEGER NOT NULL
        ) WITHOUT ROWID""",
        # ---- end Q-27
        # ---- O-5 workers' registry (docs/adr/0024) ----
        # One row per running worker, refreshed every few seconds; queues
        # is a JSON array. Counts: finished jobs per minute (the minute's
        # start, microseconds), worker, queue and outcome.
        """CREATE TABLE IF NOT EXISTS __alkstore_workers (
            id TEXT PRIMARY KEY,
            host TEXT NOT NULL,
            pid INTEGER NOT NULL,
            queues TEXT NOT NULL,
            concurrency INTEGER NOT NULL,
            started_at INTEGER NOT NULL,
            version TEXT NOT NULL,
            last_seen INTEGER NOT NULL
        ) WITHOUT ROWID""",
        "CREATE INDEX IF NOT EXISTS __alkstore_workers_seen ON __alkstore_workers (last_seen)",
        """CREATE TABLE IF NOT EXISTS __alkstore_worker_counts (
            minute INTEGER NOT NULL,
            worker_id TEXT NOT NULL,
            queue TEXT NOT NULL,
            outcome TEXT NOT NULL,
            n INTEGER NOT NULL,
            PRIMARY KEY (minute, worker_id, queue, outcome)
        ) WITHOUT ROWID""",
        # ---- end O-5 ----
    ],
}

# ------------------------------------------------------------------------ queue

_JOB_COLUMNS = (
    "id, queue, payload, priority, run_at, created_at, claimed_at, deadline, worker_id, "
    "attempts, max_attempts, visibility_timeout_s, backoff_base_s, dead_letter_retention_s, "
    "expires_at, claims, unique_key, grp, group_limit, trace_context, result_ttl_s"
)
# A row moving between the jobs, waiting and dead tables (results keep no
# parents).
_ROW_COLUMNS = _JOB_COLUMNS + ", parents"
# Moving a row to dead stamps died_at and, with a retention, purge_at;
# the job's progress checkpoint goes with it.
_TO_DEAD = (
    f"INSERT INTO __alkstore_dead ({_ROW_COLUMNS}, progress, last_error, died_at, purge_at) "
    f"SELECT {_ROW_COLUMNS}, progress, :last_error, :now, "
    "CASE WHEN dead_letter_retention_s IS NULL THEN NULL "
    "ELSE :now + CAST(dead_letter_retention_s * 1000000 AS INTEGER) END "
    "FROM __alkstore_jobs "
)

_INSERT_COLUMNS = """
    queue, state, payload, priority, run_at, ready_at, created_at, max_attempts,
    visibility_timeout_s, backoff_base_s, dead_letter_retention_s, expires_at,
    unique_key, grp, group_limit, parked, trace_context, result_ttl_s, parents"""

ENQUEUE = f"""
INSERT INTO __alkstore_jobs ({_INSERT_COLUMNS})
VALUES (:queue, 'pending', :payload, :priority, :run_at, :run_at, :now, :max_attempts,
    :visibility_timeout_s, :backoff_base_s, :dead_letter_retention_s, :expires_at, :unique_key,
    :grp, :group_limit, :parked, :trace_context, :result_ttl_s, :parents)
RETURNING id
"""
# A unique key a live job holds already: nothing is written.
ENQUEUE_UNIQUE = ENQUEUE.replace("INSERT INTO", "INSERT OR IGNORE INTO")

# One statement for a whole batch: the payloads (and keys) arrive as one JSON
# array of [payload text, key] pairs, inserted in array order.
ENQUEUE_MANY = f"""
INSERT INTO __alkstore_jobs ({_INSERT_COLUMNS})
SELECT :queue, 'pending', json_extract(value, '$[0]'), :priority, :run_at, :run_at, :now,
    :max_attempts, :visibility_timeout_s, :backoff_base_s, :dead_letter_retention_s, :expires_at,
    json_extract(value, '$[1]'), :grp, :group_limit, :parked, :trace_context, :result_ttl_s,
    :parents
FROM json_each(:items) ORDER BY key
RETURNING id, unique_key
"""
ENQUEUE_MANY_UNIQUE = ENQUEUE_MANY.replace("INSERT INTO", "INSERT OR IGNORE INTO")

# The live job holding each key (after an insert that ignored some).
KEY_HOLDERS = """
SELECT unique_key, id FROM __alkstore_jobs
WHERE queue = :queue AND unique_key IN (SELECT value FROM json_each(:keys))
"""

# the pending holder of a key, replaced or debounced in place (one
# statement; nothing else is read or written when it finds one). Its id,
# created_at, attempts, claim number, key and group stay; a processing
# holder, or one past its expiry (Q-23 frees that key first), is left to
# the insert path. The new time is :run_at (the enqueue's, or now plus the
# debounce), but no later than created_at plus :max_wait_us when that is
# set. A replace keeps one attempt at least, so a retried job that had used
# up the new max_attempts can still run.
_HOLDER_RUN_AT = "min(:run_at, coalesce(created_at + :max_wait_us, :run_at))"
_HOLDER_WHERE = """
WHERE queue = :queue AND unique_key = :unique_key AND state = 'pending'
  AND (expires_at IS NULL OR expires_at > :now)
RETURNING id, grp, group_limit
"""
DEBOUNCE_HOLDER = (
    f"UPDATE __alkstore_jobs SET run_at = {_HOLDER_RUN_AT}, ready_at = {_HOLDER_RUN_AT}"
    + _HOLDER_WHERE
)
REPLACE_HOLDER = (
    f"""
UPDATE __alkstore_jobs SET
    payload = :payload, priority = :priority,
    max_attempts = max(:max_attempts, attempts + 1),
    visibility_timeout_s = :visibility_timeout_s, backoff_base_s = :backoff_base_s,
    dead_letter_retention_s = :dead_letter_retention_s, expires_at = :expires_at,
    trace_context = :trace_context, result_ttl_s = :result_ttl_s,
    run_at = {_HOLDER_RUN_AT}, ready_at = {_HOLDER_RUN_AT}"""
    + _HOLDER_WHERE
)

# a key held by a job that can never run again (past expires_at, or a
# lapsed claim with no budget) is freed first: that job goes to dead.
_CANNOT_RUN = """
((expires_at IS NOT NULL AND expires_at <= :now)
 OR (attempts >= max_attempts AND state = 'processing' AND ready_at <= :now))"""
# Each goes to dead with the error the sweep or a claim would have given it:
# "expired" past expires_at, else "max attempts exceeded".
STALE_KEYS_TO_DEAD = (
    _TO_DEAD.replace(
        ":last_error,",
        "CASE WHEN expires_at IS NOT NULL AND expires_at <= :now THEN 'expired' "
        "ELSE 'max attempts exceeded' END,",
        1,
    )
    + "WHERE queue = :queue AND unique_key IN (SELECT value FROM json_each(:keys)) AND "
    + _CANNOT_RUN
)
STALE_KEYS_DELETE = (
    "DELETE FROM __alkstore_jobs WHERE queue = :queue "
    "AND unique_key IN (SELECT value FROM json_each(:keys)) AND "
    + _CANNOT_RUN
    + " RETURNING id, grp"
)

# unfinished jobs of a queue, reading at most :n index entries. Live
# rows fall into exactly one of three partial indexes: claimable-or-claimed
# with budget left, at budget (the last attempt), parked in a group. Rows
# that can never run again are moved to dead before counting.
COUNT_UNFINISHED = """
WITH a(n) AS (
    SELECT count(*) FROM (SELECT 1 FROM __alkstore_jobs INDEXED BY __alkstore_jobs_claim
                          WHERE queue = :queue AND attempts < max_attempts AND parked = 0
                          LIMIT :n)),
b(n) AS (
    SELECT a.n + (SELECT count(*) FROM (
        SELECT 1 FROM __alkstore_jobs INDEXED BY __alkstore_jobs_exhausted
        WHERE queue = :queue AND attempts >= max_attempts LIMIT (SELECT :n - n FROM a)))
    FROM a)
SELECT b.n + (SELECT count(*) FROM (
    SELECT 1 FROM __alkstore_jobs INDEXED BY __alkstore_jobs_parked
    WHERE queue = :queue AND parked = 1 LIMIT (SELECT :n - n FROM b)))
FROM b
"""
# Expired rows of a queue, on the expires index (for the bounded count).
EXPIRED_ANY = """
SELECT EXISTS (SELECT 1 FROM __alkstore_jobs INDEXED BY __alkstore_jobs_expires
               WHERE queue = :queue AND expires_at IS NOT NULL AND expires_at <= :now)
"""

# nothing of a paused queue is claimable (one primary-key probe of the
# paused table, evaluated once per statement).
_NOT_PAUSED = "NOT EXISTS (SELECT 1 FROM __alkstore_paused WHERE queue = :queue)"

# The earliest ready_at of a claimable, unexpired row: per priority level on
# the claim index (see NEXT_READY).
_EARLIEST_READY = """(
WITH RECURSIVE level(p) AS (
    SELECT (SELECT priority FROM __alkstore_jobs INDEXED BY __alkstore_jobs_claim
            WHERE queue = :queue AND attempts < max_attempts AND parked = 0
            ORDER BY priority DESC LIMIT 1)
    UNION ALL
    SELECT (SELECT priority FROM __alkstore_jobs INDEXED BY __alkstore_jobs_claim
            WHERE queue = :queue AND attempts < max_attempts AND parked = 0 AND priority < level.p
            ORDER BY priority DESC LIMIT 1)
    FROM level WHERE level.p IS NOT NULL)
SELECT MIN((SELECT ready_at FROM __alkstore_jobs INDEXED BY __alkstore_jobs_claim
            WHERE queue = :queue AND attempts < max_attempts AND parked = 0
              AND priority = level.p AND (expires_at IS NULL OR expires_at > :now)
            ORDER BY ready_at LIMIT 1))
FROM level WHERE level.p IS NOT NULL)"""

# a waiting row of a limited group that expired holds a slot it can
# never use; a claim moves it to dead so the group's next row gets the slot.
_GROUP_EXPIRED = """
SELECT 1 FROM __alkstore_jobs INDEXED BY __alkstore_jobs_group_expiry
WHERE queue = :queue AND grp IS NOT NULL AND parked = 0 AND state = 'pending'
  AND expires_at IS NOT NULL AND expires_at <= :now"""

# Is anything claimable, or a lapsed claim waiting to be dead-lettered, or an
# expired row holding a group's slot? A pure read: an idle claimer goes back
# to sleep without the write lock.
CLAIM_PRECHECK = f"""
SELECT
  coalesce({_EARLIEST_READY} <= :now, 0) AND {_NOT_PAUSED},
  EXISTS (SELECT 1 FROM __alkstore_jobs INDEXED BY __alkstore_jobs_exhausted
          WHERE queue = :queue AND attempts >= max_attempts AND ready_at <= :now)
  OR EXISTS ({_GROUP_EXPIRED})
"""
# What a claim must clear first: exhausted lapsed claims, expired
# holders of group slots. One probe of an index each.
EXHAUSTED_ANY = f"""
SELECT EXISTS (SELECT 1 FROM __alkstore_jobs INDEXED BY __alkstore_jobs_exhausted
               WHERE queue = :queue AND attempts >= max_attempts AND ready_at <= :now),
       EXISTS ({_GROUP_EXPIRED})
"""
GROUP_EXPIRED_TO_DEAD = (
    _TO_DEAD + "WHERE id IN (" + _GROUP_EXPIRED.replace("SELECT 1", "SELECT id", 1) + ")"
)
GROUP_EXPIRED_DELETE = (
    "DELETE FROM __alkstore_jobs WHERE id IN ("
    + _GROUP_EXPIRED.replace("SELECT 1", "SELECT id", 1)
    + ") RETURNING id, grp"
)

# lapsed claims with no budget left go to dead.
EXHAUSTED_TO_DEAD = (
    _TO_DEAD + "WHERE queue = :queue AND attempts >= max_attempts AND ready_at <= :now "
    "AND state = 'processing'"
)
EXHAUSTED_DELETE = """
DELETE FROM __alkstore_jobs
WHERE queue = :queue AND attempts >= max_attempts AND ready_at <= :now AND state = 'processing'
RETURNING id, grp
"""

# The claim walks the claim index one priority level at a time (no sort).
# Rows that cannot be claimed now (in flight, scheduled) sit in the index
# beside the ready ones; a single walk in (priority, ready_at) order would
# step over every such row of a higher priority than the first ready one
# (the claims holding a group's slots, Q-25, are exactly that). Within one
# level they sort after the ready rows, so each level costs one range seek,
# and the next level below is one more seek (C-8). CLAIM takes the top
# level; CLAIM_AT a given one, which the engine walks down with
# NEXT_PRIORITY while the claim wants more.
#
# run_at = ready_at records when the row became ready (for a reclaim: when
# its lapsed claim did), which also gives the claim order of the rows and
# the queue time (O-1); release puts it back.
#
# the levels are where a pause stops a claim. A paused queue has no
# top level (so CLAIM picks nothing) and no level below (so CLAIM_AT, which
# only ever takes a level these found in the same write transaction, is
# never reached): one probe of the paused table per claim statement.
_CLAIMABLE = "queue = :queue AND attempts < max_attempts AND parked = 0"
TOP_PRIORITY = f"""
SELECT priority FROM __alkstore_jobs INDEXED BY __alkstore_jobs_claim
WHERE {_CLAIMABLE} AND {_NOT_PAUSED}
ORDER BY priority DESC LIMIT 1"""
NEXT_PRIORITY = f"""
SELECT priority FROM __alkstore_jobs INDEXED BY __alkstore_jobs_claim
WHERE {_CLAIMABLE} AND {_NOT_PAUSED} AND priority < :p
ORDER BY priority DESC LIMIT 1"""
_CLAIM_PICK = f"""
SELECT id FROM __alkstore_jobs INDEXED BY __alkstore_jobs_claim
WHERE {_CLAIMABLE} AND priority = ({TOP_PRIORITY}) AND ready_at <= :now
  AND (expires_at IS NULL OR expires_at > :now)
ORDER BY priority DESC, ready_at, id
LIMIT :n"""
_CLAIM_UPDATE = """
UPDATE __alkstore_jobs
SET state = 'processing',
    attempts = attempts + 1,
    claims = claims + 1,
    claimed_at = :now,
    run_at = ready_at,
    deadline = :now + CAST(visibility_timeout_s * 1000000 AS INTEGER),
    ready_at = :now + CAST(visibility_timeout_s * 1000000 AS INTEGER),
    worker_id = :worker_id
WHERE id IN ({pick})
RETURNING id, queue, payload, attempts, claims, max_attempts, priority, run_at, claimed_at,
    deadline, visibility_timeout_s, backoff_base_s, grp, trace_context, result_ttl_s, progress
"""
CLAIM = _CLAIM_UPDATE.format(pick=_CLAIM_PICK)
CLAIM_AT = _CLAIM_UPDATE.format(pick=_CLAIM_PICK.replace(f"({TOP_PRIORITY})", ":p", 1))
#: Where the priority sits in a claimed row (CLAIM's RETURNING).
CLAIM_PRIORITY_COLUMN = 6
# The top level's claim as one autocommit statement, carrying whether the
# queue holds anything a claim must clear (index probes evaluated once per
# statement): lapsed claims with no budget left, expired holders of
# group slots. Only then does a second write clear them.
CLAIM_FLAGGED = (
    CLAIM.rstrip()
    + f""",
    (SELECT EXISTS (SELECT 1 FROM __alkstore_jobs INDEXED BY __alkstore_jobs_exhausted
                    WHERE queue = :queue AND attempts >= max_attempts AND ready_at <= :now)
            OR EXISTS ({_GROUP_EXPIRED}))
"""
)
# The claim's inner SELECT, for EXPLAIN QUERY PLAN checks.
CLAIM_SELECT = _CLAIM_PICK

# When the earliest claimable, unexpired row is (or was) ready. Not limited
# to the future: a row that turned ready after the last attempt must end the
# wait at once, not at the next wake.
# On the claim index, one priority level at a time: the levels are found by
# skipping from one to the next (a probe each), and within a level the
# earliest ready row is the first entry. O(levels · log n), never a walk over
# the rows in flight. The second column: when the next waiting holder of a
# group's slot expires, which may hand its slot to a parked row.
NEXT_READY = f"""
SELECT {_EARLIEST_READY},
       (SELECT MIN(expires_at) FROM __alkstore_jobs INDEXED BY __alkstore_jobs_group_expiry
        WHERE queue = :queue AND grp IS NOT NULL AND parked = 0 AND state = 'pending'
          AND expires_at IS NOT NULL AND expires_at > :now)
WHERE {_NOT_PAUSED}
"""

# Fencing: (id, claim number), still processing, deadline not passed.
_FENCE = "id = :id AND claims = :claim AND state = 'processing' AND deadline > :now"

ACK = f"DELETE FROM __alkstore_jobs WHERE {_FENCE} RETURNING queue, grp"
# A lone ack in autocommit, one statement (docs/adr/0029): only of a job no
# child waits on (WF-2's release must commit with the ack). A child is
# enqueued in a write of its own, and SQLite runs one write at a time, so no
# child can appear between the probe and the delete. Nothing deleted: the
# fence was refused, or children wait; the full ack then tells which.
ACK_ALONE = f"""DELETE FROM __alkstore_jobs WHERE {_FENCE}
  AND NOT EXISTS (SELECT 1 FROM __alkstore_deps WHERE parent = :id)
RETURNING queue"""
# Many fences in one statement: a JSON array of [id, claim] pairs.
ACK_MANY = """
DELETE FROM __alkstore_jobs
WHERE (id, claims) IN (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]')
                       FROM json_each(:fences))
  AND state = 'processing' AND deadline > :now
RETURNING id, claims, queue, grp
"""

# RS-1: before the ack's delete, in its transaction, a stamped row's result
# is kept with the row as it stands (a JSON null when none was given).
_KEEP = (
    f"INSERT OR IGNORE INTO __alkstore_results ({_JOB_COLUMNS}, result, finished_at, keep_until) "
)
ACK_KEEP = (
    _KEEP
    + f"""SELECT {_JOB_COLUMNS}, COALESCE(:result, 'null'), :now,
    :now + CAST(result_ttl_s * 1000000 AS INTEGER)
FROM __alkstore_jobs WHERE {_FENCE} AND result_ttl_s IS NOT NULL"""
)
# Many: a JSON array of [id, claim, result text or null] triples.
ACK_MANY_KEEP = (
    _KEEP
    + "SELECT "
    + ", ".join(f"j.{c.strip()}" for c in _JOB_COLUMNS.split(","))
    + """, COALESCE(json_extract(h.value, '$[2]'), 'null'), :now,
    :now + CAST(j.result_ttl_s * 1000000 AS INTEGER)
FROM json_each(:fences) h
JOIN __alkstore_jobs j
  ON j.id = json_extract(h.value, '$[0]') AND j.claims = json_extract(h.value, '$[1]')
WHERE j.state = 'processing' AND j.deadline > :now AND j.result_ttl_s IS NOT NULL"""
)

HEARTBEAT = f"""
UPDATE __alkstore_jobs SET deadline = :deadline, ready_at = :deadline
WHERE {_FENCE}
RETURNING deadline
"""

# a checkpoint, fenced like a heartbeat; the deadline stays.
PROGRESS = f"UPDATE __alkstore_jobs SET progress = :progress WHERE {_FENCE}"

RETRY_PENDING = f"""
UPDATE __alkstore_jobs
SET state = 'pending', run_at = :run_at, ready_at = :run_at, deadline = NULL
WHERE {_FENCE} AND attempts < max_attempts
RETURNING queue, grp
"""

# back where it stood in claim order, the attempt not counted.
RELEASE = f"""
UPDATE __alkstore_jobs
SET state = 'pending', attempts = attempts - 1, ready_at = run_at, deadline = NULL
WHERE {_FENCE}
RETURNING grp
"""

FENCED_TO_DEAD = _TO_DEAD + f"WHERE {_FENCE}"
DELETE_BY_ID = "DELETE FROM __alkstore_jobs WHERE id = :id RETURNING queue, grp"

CANCEL = "DELETE FROM __alkstore_jobs WHERE id = :id AND queue = :queue RETURNING queue, grp"

# A job as get_job and list_jobs read it: the columns in the field order of
# alkstore.engine.JobRow (alkstore.engine.job_row maps them).
_INFO_LIVE = """
SELECT id, queue, state, payload, priority, run_at, created_at, claimed_at, deadline,
    worker_id, attempts, max_attempts, visibility_timeout_s, backoff_base_s,
    dead_letter_retention_s, expires_at, NULL AS last_error, NULL AS died_at,
    unique_key, grp, group_limit, trace_context, result_ttl_s, NULL AS result,
    NULL AS finished_at, progress
FROM __alkstore_jobs
"""
_INFO_DEAD = """
SELECT id, queue, 'dead' AS state, payload, priority, run_at, created_at, claimed_at, deadline,
    worker_id, attempts, max_attempts, visibility_timeout_s, backoff_base_s,
    dead_letter_retention_s, expires_at, last_error, died_at,
    unique_key, grp, group_limit, trace_context, result_ttl_s, NULL AS result,
    NULL AS finished_at, progress
FROM __alkstore_dead
"""
# RS-1: a kept result, until its time is up.
_INFO_DONE = """
SELECT id, queue, 'done' AS state, payload, priority, run_at, created_at, claimed_at, deadline,
    worker_id, attempts, max_attempts, visibility_timeout_s, backoff_base_s,
    dead_letter_retention_s, expires_at, NULL AS last_error, NULL AS died_at,
    unique_key, grp, group_limit, trace_context, result_ttl_s, result, finished_at,
    NULL AS progress
FROM __alkstore_results
"""

# WF-1: a job waiting for others.
_INFO_WAITING = """
SELECT id, queue, 'waiting' AS state, payload, priority, run_at, created_at, claimed_at, deadline,
    worker_id, attempts, max_attempts, visibility_timeout_s, backoff_base_s,
    dead_letter_retention_s, expires_at, NULL AS last_error, NULL AS died_at,
    unique_key, grp, group_limit, trace_context, result_ttl_s, NULL AS result,
    NULL AS finished_at, NULL AS progress
FROM __alkstore_waiting
"""
LIST_WAITING = _INFO_WAITING + "WHERE queue = :queue AND id > :after ORDER BY id LIMIT :limit"

# One statement over both tables: one snapshot, so a row moving to dead
# between two reads cannot be missed.
GET_JOB = (
    _INFO_LIVE
    + "WHERE id = :id AND queue = :queue UNION ALL "
    + _INFO_DEAD
    + "WHERE id = :id AND queue = :queue UNION ALL "
    + _INFO_DONE
    + "WHERE id = :id AND queue = :queue AND keep_until > :now UNION ALL "
    + _INFO_WAITING
    + "WHERE id = :id AND queue = :queue"
)
# RS-2: how a job ended, in one snapshot of both tables.
GET_RESULT = """
SELECT id, 'done', result, NULL, finished_at FROM __alkstore_results
WHERE id = :id AND queue = :queue AND keep_until > :now
UNION ALL
SELECT id, 'dead', NULL, last_error, died_at FROM __alkstore_dead
WHERE id = :id AND queue = :queue
"""
LIST_DONE = (
    _INFO_DONE
    + "WHERE queue = :queue AND keep_until > :now AND id > :after ORDER BY id LIMIT :limit"
)
# RS-3: kept results past their time.
PURGE_RESULTS = "DELETE FROM __alkstore_results WHERE queue = :queue AND keep_until <= :now"

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
  (SELECT COUNT(*) FROM __alkstore_dead WHERE queue = :queue),
  (SELECT MIN(run_at) FROM __alkstore_jobs
   WHERE queue = :queue AND state = 'pending' AND run_at <= :now),
  (SELECT COUNT(*) FROM __alkstore_waiting WHERE queue = :queue)
"""

QUEUE_STATS = """
SELECT queue, SUM(pending), SUM(scheduled), SUM(processing), SUM(dead), MIN(oldest),
    SUM(waiting) FROM (
  SELECT queue,
         SUM(state = 'pending' AND run_at <= :now) AS pending,
         SUM(state = 'pending' AND run_at > :now) AS scheduled,
         SUM(state = 'processing') AS processing,
         0 AS dead,
         MIN(CASE WHEN state = 'pending' AND run_at <= :now THEN run_at END) AS oldest,
         0 AS waiting
  FROM __alkstore_jobs GROUP BY queue
  UNION ALL
  SELECT queue, 0, 0, 0, COUNT(*), NULL, 0 FROM __alkstore_dead GROUP BY queue
  UNION ALL
  SELECT queue, 0, 0, 0, 0, NULL, COUNT(*) FROM __alkstore_waiting GROUP BY queue
) GROUP BY queue ORDER BY queue
"""

# ---- Q-27 pause, O-6 run now (docs/adr/0023)
PAUSE = (
    "INSERT INTO __alkstore_paused (queue, paused_at) VALUES (:queue, :now) "
    "ON CONFLICT (queue) DO NOTHING"
)
RESUME = "DELETE FROM __alkstore_paused WHERE queue = :queue"
IS_PAUSED = "SELECT EXISTS (SELECT 1 FROM __alkstore_paused WHERE queue = :queue)"
PAUSED_QUEUES = "SELECT queue FROM __alkstore_paused ORDER BY queue"
# A pending job becomes ready now; one ready already keeps its place (its
# times only ever move back). A parked row of a limited group stays parked
# here: the group rebalances after (ready rows first, Q-25).
RUN_NOW = """
UPDATE __alkstore_jobs
SET run_at = MIN(run_at, :now), ready_at = MIN(ready_at, :now)
WHERE id = :id AND queue = :queue AND state = 'pending'
RETURNING grp
"""
# ---- end Q-27, O-6

# every row past expires_at, pending or processing.
EXPIRED_TO_DEAD = _TO_DEAD + "WHERE queue = :queue AND expires_at <= :now"
EXPIRED_DELETE = (
    "DELETE FROM __alkstore_jobs WHERE queue = :queue AND expires_at <= :now RETURNING id, grp"
)
# dead rows past their retention.
PURGE_RETAINED = "DELETE FROM __alkstore_dead WHERE queue = :queue AND purge_at <= :now"

# dead rows back to pending, same id, a fresh budget, the progress
# checkpoint kept; a unique key a
# live job holds keeps its row dead (OR IGNORE). :ids is a JSON array, or
# NULL for every dead job of the queue.
REDRIVE = """
INSERT OR IGNORE INTO __alkstore_jobs (
    id, queue, state, payload, priority, run_at, ready_at, created_at, attempts, claims,
    max_attempts, visibility_timeout_s, backoff_base_s, dead_letter_retention_s, expires_at,
    unique_key, grp, group_limit, parked, trace_context, result_ttl_s, parents, progress)
SELECT id, queue, 'pending', payload, priority, :now, :now, created_at, 0, claims,
    max_attempts, visibility_timeout_s, backoff_base_s, dead_letter_retention_s, NULL,
    unique_key, grp, group_limit, 0, trace_context, result_ttl_s, parents, progress
FROM __alkstore_dead
WHERE queue = :queue AND (:ids IS NULL OR id IN (SELECT value FROM json_each(:ids)))
ORDER BY id
RETURNING id, grp
"""
DELETE_DEAD_IDS = "DELETE FROM __alkstore_dead WHERE id IN (SELECT value FROM json_each(:ids))"

# the given ids, or all, that died at or before :cutoff (or any time).
PURGE_DEAD = """
DELETE FROM __alkstore_dead
WHERE queue = :queue
  AND (:ids IS NULL OR id IN (SELECT value FROM json_each(:ids)))
  AND (:cutoff IS NULL OR died_at <= :cutoff)
"""

# a group's slots. Its holders are its claimed rows and its unparked
# pending rows; a parked row waits for a slot and cannot be claimed.
GROUP_HOLDERS = """
SELECT count(*) FROM (SELECT 1 FROM __alkstore_jobs INDEXED BY __alkstore_jobs_group
                      WHERE queue = :queue AND grp = :grp AND parked = 0 LIMIT :n)
"""
GROUP_BEST_PARKED = """
SELECT id, priority, ready_at, group_limit FROM __alkstore_jobs INDEXED BY __alkstore_jobs_group
WHERE queue = :queue AND grp = :grp AND parked = 1
ORDER BY priority DESC, ready_at, id LIMIT 1
"""
GROUP_WORST_WAITING = """
SELECT id, priority, ready_at, group_limit FROM __alkstore_jobs INDEXED BY __alkstore_jobs_group
WHERE queue = :queue AND grp = :grp AND parked = 0 AND state = 'pending'
ORDER BY priority ASC, ready_at DESC, id DESC LIMIT 1
"""
# A slot goes to a row that can be claimed now before one that waits (a
# delay, a retry's backoff): the best parked row that is ready, and the
# worst holder that is not. The first walks past the group's parked rows of
# higher priority that are not ready; the second reads at most limit entries.
GROUP_BEST_PARKED_READY = GROUP_BEST_PARKED.replace(
    "AND parked = 1", "AND parked = 1 AND ready_at <= :now", 1
)
GROUP_WORST_WAITING_LATER = GROUP_WORST_WAITING.replace(
    "AND state = 'pending'", "AND state = 'pending' AND ready_at > :now", 1
)
SET_PARKED = "UPDATE __alkstore_jobs SET parked = :parked WHERE id = :id"
PARK_NEW = """
UPDATE __alkstore_jobs SET parked = 1
WHERE id IN (SELECT value FROM json_each(:ids)) AND group_limit IS NOT NULL
"""

# ------------------------------------------------------------------- workflows

# WF-1: which of the named parents are unfinished (live or waiting, any
# queue), and which are dead; an id in neither has finished.
_IDS = "(SELECT value FROM json_each(:ids))"
PARENTS_UNFINISHED = f"""
SELECT id FROM __alkstore_jobs WHERE id IN {_IDS}
UNION SELECT id FROM __alkstore_waiting WHERE id IN {_IDS}
"""
PARENTS_DEAD = f"SELECT id FROM __alkstore_dead WHERE id IN {_IDS} ORDER BY id"
# New rows written to the jobs table (for their ids) move to the waiting table.
JOBS_TO_WAITING = f"""
INSERT INTO __alkstore_waiting ({_ROW_COLUMNS}, delay_us, unfinished)
SELECT {_ROW_COLUMNS}, :delay_us, :unfinished FROM __alkstore_jobs WHERE id IN {_IDS}
"""
DELETE_JOB_IDS = f"DELETE FROM __alkstore_jobs WHERE id IN {_IDS}"
INSERT_DEPS = """
INSERT OR IGNORE INTO __alkstore_deps (parent, child)
SELECT p.value, c.value FROM json_each(:parents) p, json_each(:ids) c
"""
# WF-2: a finished parent's children count one unfinished parent less; the
# parent's rows go (reading only the parent's own entries of the key).
CHILDREN_FINISHED = f"""
UPDATE __alkstore_waiting
SET unfinished = unfinished - (SELECT count(*) FROM __alkstore_deps d
                               WHERE d.child = __alkstore_waiting.id AND d.parent IN {_IDS})
WHERE id IN (SELECT child FROM __alkstore_deps WHERE parent IN {_IDS})
RETURNING id, unfinished
"""
DELETE_DEPS_OF = f"DELETE FROM __alkstore_deps WHERE parent IN {_IDS}"
# Released: into the claim's table, ready now or at its own time (delay_s
# counts from the release, run_at stays absolute).
RELEASE_WAITING = f"""
INSERT INTO __alkstore_jobs (
    id, queue, state, payload, priority, run_at, ready_at, created_at, attempts, claims,
    max_attempts, visibility_timeout_s, backoff_base_s, dead_letter_retention_s, expires_at,
    unique_key, grp, group_limit, parked, trace_context, result_ttl_s, parents)
SELECT id, queue, 'pending', payload, priority, at, at, created_at, attempts, claims,
    max_attempts, visibility_timeout_s, backoff_base_s, dead_letter_retention_s, expires_at,
    unique_key, grp, group_limit, 0, trace_context, result_ttl_s, parents
FROM (SELECT *, CASE WHEN delay_us IS NULL THEN run_at ELSE :now + delay_us END AS at
      FROM __alkstore_waiting WHERE id IN {_IDS} ORDER BY id)
RETURNING id, queue, grp
"""
DELETE_WAITING_IDS = f"DELETE FROM __alkstore_waiting WHERE id IN {_IDS}"
# WF-3: the waiting children of failed parents die, each naming its own
# failed parent (the lowest when several failed at once).
WAITING_TO_DEAD = f"""
INSERT INTO __alkstore_dead ({_ROW_COLUMNS}, last_error, died_at, purge_at, failed_dep)
SELECT {", ".join("w." + c.strip() for c in _ROW_COLUMNS.split(","))},
    'dependency ' || f.parent || ' failed', :now,
    CASE WHEN w.dead_letter_retention_s IS NULL THEN NULL
    ELSE :now + CAST(w.dead_letter_retention_s * 1000000 AS INTEGER) END, f.parent
FROM __alkstore_waiting w
JOIN (SELECT child, MIN(parent) AS parent FROM __alkstore_deps
      WHERE parent IN {_IDS} GROUP BY child) f ON f.child = w.id
RETURNING id
"""
# A job enqueued after a dead job is written dead (rows just inserted).
JOBS_TO_DEAD_DEP = (
    f"INSERT INTO __alkstore_dead ({_ROW_COLUMNS}, last_error, died_at, purge_at, failed_dep) "
    f"SELECT {_ROW_COLUMNS}, 'dependency ' || :parent || ' failed', :now, "
    "CASE WHEN dead_letter_retention_s IS NULL THEN NULL "
    "ELSE :now + CAST(dead_letter_retention_s * 1000000 AS INTEGER) END, :parent "
    f"FROM __alkstore_jobs WHERE id IN {_IDS}"
)
# WF-3 redrive: the jobs that died by these parents' cascade, back to waiting.
CASCADE_VICTIMS = f"SELECT id FROM __alkstore_dead WHERE failed_dep IN {_IDS} ORDER BY id"
DEAD_TO_WAITING = f"""
INSERT OR IGNORE INTO __alkstore_waiting ({_ROW_COLUMNS}, delay_us, unfinished)
SELECT {_ROW_COLUMNS}, 0, (SELECT count(*) FROM __alkstore_deps d WHERE d.child = x.id)
FROM __alkstore_dead x WHERE id IN {_IDS}
RETURNING id
"""
CANCEL_WAITING = (
    "DELETE FROM __alkstore_waiting WHERE id = :id AND queue = :queue RETURNING queue, grp"
)
DELETE_DEPS_OF_CHILD = "DELETE FROM __alkstore_deps WHERE child = :id"
# WF-4: the kept results of a job's parents, one key probe each.
PARENT_RESULTS = """
SELECT r.id, r.result FROM json_each(
    (SELECT parents FROM __alkstore_jobs WHERE id = :id)) p
JOIN __alkstore_results r ON r.id = p.value AND r.keep_until > :now
"""
WAITING_ON = "SELECT parent FROM __alkstore_deps WHERE child = :id ORDER BY parent"

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
STREAM_STATS = """
SELECT s.name, s.last_seq,
    (SELECT COUNT(*) FROM __alkstore_events e WHERE e.stream = s.name)
FROM __alkstore_streams s ORDER BY s.name
"""
CONSUMERS = "SELECT stream, consumer, seq FROM __alkstore_consumers ORDER BY stream, consumer"

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
HELD_LOCKS = """
SELECT name, owner, token, expires_at FROM __alkstore_locks
WHERE owner IS NOT NULL AND expires_at > :now ORDER BY name
"""

# ---------------------------------------------------------- workers (O-5)

UPSERT_WORKER = """
INSERT INTO __alkstore_workers
    (id, host, pid, queues, concurrency, started_at, version, last_seen)
VALUES (:id, :host, :pid, :queues, :concurrency, :started_at, :version, :now)
ON CONFLICT (id) DO UPDATE SET
    host = excluded.host, pid = excluded.pid, queues = excluded.queues,
    concurrency = excluded.concurrency, started_at = excluded.started_at,
    version = excluded.version, last_seen = excluded.last_seen
"""
DELETE_WORKER = "DELETE FROM __alkstore_workers WHERE id = :id"
ADD_WORKER_COUNT = """
INSERT INTO __alkstore_worker_counts (minute, worker_id, queue, outcome, n)
VALUES (:minute, :worker_id, :queue, :outcome, :n)
ON CONFLICT (minute, worker_id, queue, outcome) DO UPDATE SET n = n + excluded.n
"""
FORGET_WORKERS = "DELETE FROM __alkstore_workers WHERE last_seen < :cutoff AND id <> :id"
FORGET_COUNTS = "DELETE FROM __alkstore_worker_counts WHERE minute < :cutoff"
LIST_WORKERS = """
SELECT id, host, pid, queues, concurrency, started_at, version, last_seen
FROM __alkstore_workers WHERE last_seen >= :cutoff ORDER BY id
"""
WORKER_COUNTS = """
SELECT minute, worker_id, queue, outcome, n FROM __alkstore_worker_counts
WHERE minute >= :since ORDER BY minute, worker_id, queue, outcome
"""

# ------------------------------------------------------------------ rate limits

# GCRA in one statement: take :cost (n * interval) when the arrival
# time, moved past now, stays within :burst_t (burst * interval) of now.
# The row always comes back, with whether the units were granted (both SET
# expressions see the row as it was).
ACQUIRE_RATE = """
INSERT INTO __alkstore_rate_limits (name, tat, granted) VALUES (:name, :now + :cost, 1)
ON CONFLICT (name) DO UPDATE SET
    tat = CASE WHEN max(tat, :now) + :cost - :burst_t <= :now
               THEN max(tat, :now) + :cost ELSE tat END,
    granted = max(tat, :now) + :cost - :burst_t <= :now
RETURNING tat, granted
"""
RATE_TAT = "SELECT tat FROM __alkstore_rate_limits WHERE name = :name"
SET_RATE_TAT = """
INSERT INTO __alkstore_rate_limits (name, tat) VALUES (:name, :tat)
ON CONFLICT (name) DO UPDATE SET tat = excluded.tat
"""

# ---------------------------------------------------------------- notifications

NOTIFY = """
INSERT INTO __alkstore_notifications (channel, payload, created_at)
VALUES (:channel, :payload, :now)
RETURNING id
"""
LAST_NOTIFICATION = "SELECT COALESCE(MAX(id), 0) FROM __alkstore_notifications"
NOTIFICATIONS_AFTER = """
SELECT id, channel, payload FROM __alkstore_notifications WHERE id > :after ORDER BY id
"""
NOTIFICATIONS_EXCESS = """
SELECT EXISTS (SELECT 1 FROM __alkstore_notifications
               WHERE id <= (SELECT COALESCE(MAX(id), 0) FROM __alkstore_notifications) - :cap)
"""
# N-3, EN-1: keep the newest :cap rows.
PRUNE_NOTIFICATIONS = """
DELETE FROM __alkstore_notifications
WHERE id <= (SELECT COALESCE(MAX(id), 0) FROM __alkstore_notifications) - :cap
"""
PRUNE_NOTIFICATIONS_BELOW = "DELETE FROM __alkstore_notifications WHERE id <= :below"

# -------------------------------------------------------------------- schedules

_SCHEDULE_COLUMNS = "name, spec, queue, payload, opts, tz, next_fire_at, last_fire_at"
GET_SCHEDULE = f"SELECT {_SCHEDULE_COLUMNS} FROM __alkstore_schedules WHERE name = :name"
# SC-2: an unchanged spec and zone keep the stored next fire time.
UPSERT_SCHEDULE = f"""
INSERT INTO __alkstore_schedules (
    name, spec, queue, payload, opts, tz, next_fire_at, created_at, updated_at)
VALUES (:name, :spec, :queue, :payload, :opts, :tz, :next_fire_at, :now, :now)
ON CONFLICT (name) DO UPDATE SET
    spec = excluded.spec, queue = excluded.queue, payload = excluded.payload,
    opts = excluded.opts, tz = excluded.tz,
    next_fire_at = CASE WHEN __alkstore_schedules.spec = excluded.spec
                         AND __alkstore_schedules.tz = excluded.tz
                        THEN __alkstore_schedules.next_fire_at ELSE excluded.next_fire_at END,
    updated_at = excluded.updated_at
RETURNING {_SCHEDULE_COLUMNS}
"""
DELETE_SCHEDULE = "DELETE FROM __alkstore_schedules WHERE name = :name"
LIST_SCHEDULES = f"SELECT {_SCHEDULE_COLUMNS} FROM __alkstore_schedules ORDER BY name"
DUE_SCHEDULES = f"""
SELECT {_SCHEDULE_COLUMNS}
FROM __alkstore_schedules WHERE next_fire_at <= :now ORDER BY next_fire_at, name
"""
# SC-3: the fire happens only for the tick whose compare-and-set matched.
ADVANCE_SCHEDULE = """
UPDATE __alkstore_schedules SET next_fire_at = :next_fire_at, last_fire_at = :last_fire_at
WHERE name = :name AND next_fire_at = :expected
"""
NEXT_FIRE = "SELECT MIN(next_fire_at) FROM __alkstore_schedules"
