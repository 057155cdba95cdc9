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


PARAMS = {"queue": "busy", "now": 10**16, "n": 32, "worker": "w", "id": 1, "attempt": 1}


def test_claim_walks_the_claim_index_without_sorting(busy_file: sqlite3.Connection) -> None:
    for sql in (_sql.CLAIM, _sql.CLAIM_SELECT):
        plan = _plan(busy_file, sql, PARAMS)
        assert any("USING INDEX __alkstore_jobs_claim" in step for step in plan), plan
        assert not any("TEMP B-TREE" in step for step in plan), plan
        assert not any(step.startswith("SCAN") for step in plan), plan


@pytest.mark.parametrize(
    ("sql", "index"),
    [
        (_sql.CLAIM_PRECHECK, "__alkstore_jobs_ready"),
        (_sql.CLAIM_PRECHECK, "__alkstore_jobs_exhausted"),
        (_sql.NEXT_READY, "__alkstore_jobs_ready"),
        (_sql.EXHAUSTED_DELETE, "__alkstore_jobs_exhausted"),
        (_sql.EXPIRED_DELETE, "__alkstore_jobs_expires"),
        (_sql.PURGE_DEAD, "__alkstore_dead_purge"),
    ],
)
def test_wait_and_sweep_statements_use_their_index(
    busy_file: sqlite3.Connection, sql: str, index: str
) -> None:
    plan = _plan(busy_file, sql, PARAMS)
    assert any(index in step for step in plan), plan
    assert not any("TEMP B-TREE" in step for step in plan), plan


@pytest.mark.parametrize("sql", [_sql.ACK, _sql.HEARTBEAT, _sql.RETRY_PENDING, _sql.FENCED_TO_DEAD])
def test_handle_operations_find_the_row_by_primary_key(
    busy_file: sqlite3.Connection, sql: str
) -> None:
    plan = _plan(busy_file, sql, {**PARAMS, "deadline": 1, "run_at": 1, "error": "x"})
    assert any("INTEGER PRIMARY KEY" in step for step in plan), plan
    assert not any(step.startswith("SCAN __alkstore_jobs") for step in plan), plan
