"""Q-27 on SQLite (docs/adr/0023): version 5 upgraded in place, and the
claim statements read the paused table by its primary key, once each."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import pytest

from alkstore_sqlite import SQLiteStore, _sql


def _plan(conn: sqlite3.Connection, sql: str, params: dict[str, object]) -> list[str]:
    return [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]


@pytest.mark.clause("Q-27", "ST-1")
def test_version_5_is_upgraded_keeping_its_jobs(
    old_file: Callable[[int], None], db_path: str
) -> None:
    """The upgrade to 6 adds the paused table; the old job is paused with its queue."""
    old_file(5)
    with SQLiteStore(db_path) as store:
        q = store.queue("q")
        assert not q.is_paused() and q.pause() and q.is_paused()
        assert q.claim("w") is None
        assert q.resume()
        old = q.claim("w")
        assert old is not None and old.id == 1 and old.payload == "old"
    conn = sqlite3.connect(db_path)
    try:
        (version,) = conn.execute(_sql.GET_VERSION).fetchone()
    finally:
        conn.close()
    assert int(version) == _sql.SCHEMA_VERSION == 6


@pytest.mark.clause("Q-27", "C-8")
def test_claim_statements_probe_the_paused_table_by_its_key(
    store: SQLiteStore, db_path: str
) -> None:
    """Each claim statement (and the pure reads of a blocked claim) searches the paused
    table on its primary key, as an uncorrelated subquery, with 1,000 queues paused;
    CLAIM_AT takes a level those found, so it needs no probe of its own."""
    for i in range(1000):
        store.queue(f"p{i}").pause()
    store.queue("q").enqueue_many(list(range(100)))
    conn = sqlite3.connect(db_path)
    params = {"queue": "q", "now": 10**16, "n": 32, "worker_id": "w", "p": 0}
    try:
        conn.execute("ANALYZE")
        for sql in (
            _sql.CLAIM_FLAGGED,
            _sql.CLAIM,
            _sql.TOP_PRIORITY,
            _sql.NEXT_PRIORITY,
            _sql.CLAIM_PRECHECK,
            _sql.NEXT_READY,
        ):
            plan = _plan(conn, sql, params)
            paused = [step for step in plan if "__alkstore_paused" in step]
            assert paused and all(step.startswith("SEARCH") for step in paused), plan
            assert not any(step.startswith("SCAN __alkstore") for step in plan), plan
        assert not any("__alkstore_paused" in step for step in _plan(conn, _sql.CLAIM_AT, params))
    finally:
        conn.close()
