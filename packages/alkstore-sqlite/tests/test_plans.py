"""C-8: the hot statements use their indexes and never sort (docs/adr/0002)."""

from __future__ import annotations

import sqlite3

import pytest

from alkstore import EnqueueOpts, QueueOpts
from alkstore_sqlite import SQLiteStore, _sql


def _plan(conn: sqlite3.Connection, sql: str, params: dict[str, object]) -> list[str]:
    return [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]


@pytest.fixture
def busy_file(store: SQLiteStore, db_path: str) -> sqlite3.Connection:
    """A file with pending, scheduled, in-flight and dead rows, analyzed."""
    q = store.queue("busy", QueueOpts(max_attempts=1))
    q.enqueue_many(list(range(3000)))
    q.enqueue_many(list(range(500)), EnqueueOpts(priority=5, delay_s=3600))
    for job in q.claim_batch("w", 1000):
        job.fail("dead")
    q.claim_batch("w", 500)
    store.queue("other").enqueue_many(list(range(1000)))
    conn = sqlite3.connect(db_path)
    conn.execute("ANALYZE")
    return conn


PARAMS = {"queue": "busy", "now": 10**16, "n": 32, "worker_id": "w", "id": 1, "claim": 1, "p": 0}


def test_claim_walks_the_claim_index_without_sorting(busy_file: sqlite3.Connection) -> None:
    for sql in (_sql.CLAIM, _sql.CLAIM_SELECT, _sql.CLAIM_AT, _sql.NEXT_PRIORITY):
        plan = _plan(busy_file, sql, PARAMS)
        assert any("USING INDEX __alkstore_jobs_claim" in step for step in plan), plan
        assert not any("TEMP B-TREE" in step for step in plan), plan
        assert not any(step.startswith("SCAN") for step in plan), plan


@pytest.mark.parametrize(
    ("sql", "index"),
    [
        (_sql.CLAIM_PRECHECK, "__alkstore_jobs_claim"),
        (_sql.CLAIM_PRECHECK, "__alkstore_jobs_exhausted"),
        (_sql.NEXT_READY, "__alkstore_jobs_claim"),
        (_sql.NEXT_READY, "__alkstore_jobs_group_expiry"),
        (_sql.CLAIM_FLAGGED, "__alkstore_jobs_exhausted"),
        (_sql.CLAIM_FLAGGED, "__alkstore_jobs_group_expiry"),
        (_sql.EXHAUSTED_ANY, "__alkstore_jobs_group_expiry"),
        (_sql.CLAIM_PRECHECK, "__alkstore_jobs_group_expiry"),
        (_sql.GROUP_EXPIRED_DELETE, "__alkstore_jobs_group_expiry"),
        (_sql.EXHAUSTED_DELETE, "__alkstore_jobs_exhausted"),
        (_sql.EXPIRED_DELETE, "__alkstore_jobs_expires"),
        (_sql.PURGE_RETAINED, "__alkstore_dead_purge"),
    ],
)
def test_wait_and_sweep_statements_use_their_index(
    busy_file: sqlite3.Connection, sql: str, index: str
) -> None:
    plan = _plan(busy_file, sql, PARAMS)
    assert any(index in step for step in plan), plan
    assert not any("TEMP B-TREE" in step for step in plan), plan


@pytest.mark.parametrize(
    "sql", [_sql.ACK, _sql.HEARTBEAT, _sql.RETRY_PENDING, _sql.FENCED_TO_DEAD, _sql.PROGRESS]
)
def test_handle_operations_find_the_row_by_primary_key(
    busy_file: sqlite3.Connection, sql: str
) -> None:
    plan = _plan(
        busy_file, sql, {**PARAMS, "deadline": 1, "run_at": 1, "last_error": "x", "progress": None}
    )
    assert any("INTEGER PRIMARY KEY" in step for step in plan), plan
    assert not any(step.startswith("SCAN __alkstore_jobs") for step in plan), plan


def _claim_steps(db_path: str, queue: str) -> tuple[int, int]:
    """How many rows a claim of 5 took and how many VM steps it ran, in a
    transaction rolled back afterwards."""
    from alkstore_sqlite._queues import QueueOps
    from alkstore_sqlite._time import now_us

    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    conn = sqlite3.connect(db_path, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.set_progress_handler(count, 1)
        params = {"queue": queue, "now": now_us(), "worker_id": "probe"}
        rows = QueueOps._claim_levels(conn, params, 5)
        conn.set_progress_handler(None, 1)
        conn.execute("ROLLBACK")
    finally:
        conn.close()
    return len(rows), steps


def test_claim_never_walks_rows_of_a_higher_priority_it_cannot_claim(
    store: SQLiteStore, db_path: str
) -> None:
    """C-8: in-flight and scheduled rows of a higher priority than the ready
    ones (a group's slot holders, Q-25) cost a claim one seek per priority
    level, not one step per row: 40 such rows or 4,000, the claim runs about
    the same number of VM steps."""
    for name, n in (("few", 40), ("many", 4000)):
        held = store.queue(name, QueueOpts(visibility_timeout_s=3600))
        held.enqueue_many(list(range(n // 2)), EnqueueOpts(priority=9))
        assert len(held.claim_batch("elsewhere", n // 2)) == n // 2
        held.enqueue_many(list(range(n // 2)), EnqueueOpts(priority=5, delay_s=3600))
        held.enqueue_many(list(range(10)))
    few_rows, few = _claim_steps(db_path, "few")
    many_rows, many = _claim_steps(db_path, "many")
    assert few_rows == many_rows == 5
    assert many < 2 * few + 200, (few, many)


def test_the_bound_reads_at_most_n_plus_one_index_entries(store: SQLiteStore, db_path: str) -> None:
    """Q-24: the bounded count stops after max_depth + 1 entries: 200 jobs
    waiting or 20,000, counting to 101 runs about the same VM steps."""
    store.queue("small").enqueue_many(list(range(200)))
    big = store.queue("big")
    for _ in range(20):
        big.enqueue_many(list(range(1000)))
    conn = sqlite3.connect(db_path)
    try:
        counted: dict[str, tuple[int, int]] = {}
        for name in ("small", "big"):
            steps = 0

            def count() -> int:
                nonlocal steps
                steps += 1
                return 0

            conn.set_progress_handler(count, 1)
            (n,) = conn.execute(_sql.COUNT_UNFINISHED, {"queue": name, "n": 101}).fetchone()
            conn.set_progress_handler(None, 1)
            counted[name] = (n, steps)
    finally:
        conn.close()
    assert counted["small"][0] == counted["big"][0] == 101
    assert counted["big"][1] < 2 * counted["small"][1] + 200, counted
