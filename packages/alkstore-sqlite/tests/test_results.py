"""Kept results on SQLite (RS-1, RS-3; docs/adr/0018): a table of their own,
schema version 4 upgraded in place, exact sweep counts, and a claim path that
never reads the results."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable

import pytest

from alkstore import JobState, QueueOpts
from alkstore_sqlite import SQLiteStore, _sql


@pytest.mark.clause("RS-1", "ST-1")
def test_version_3_is_upgraded_keeping_its_jobs(
    old_file: Callable[[int], None], db_path: str
) -> None:
    """The upgrade to 4 adds the stamp and the results table; the old job runs, and a
    stamped job keeps its result."""
    old_file(3)
    with SQLiteStore(db_path) as store:
        q = store.queue("q")
        old = q.claim("w")
        assert old is not None and old.payload == "old"
        before = q.get_job(old.id)
        assert before is not None and before.result_ttl_s is None
        assert old.ack()
        kept = store.queue("q", QueueOpts(result_ttl_s=60))
        job_id = kept.enqueue("new")
        job = kept.claim("w")
        assert job is not None and job.ack(result=[1])
        info = kept.get_job(job_id)
        assert info is not None and (info.state, info.result) == (JobState.DONE, [1])
    conn = sqlite3.connect(db_path)
    try:
        (version,) = conn.execute(_sql.GET_VERSION).fetchone()
    finally:
        conn.close()
    assert int(version) == _sql.SCHEMA_VERSION


@pytest.mark.clause("RS-3")
def test_the_sweep_counts_exactly_the_results_it_deletes(store: SQLiteStore) -> None:
    """RS-3 on SQLite: results past their time are deleted by the sweep of their queue,
    each counted once; results within their time and other queues' are not."""
    brief = store.queue("brief", QueueOpts(result_ttl_s=0.2))
    lasting = store.queue("brief", QueueOpts(result_ttl_s=300))
    other = store.queue("other", QueueOpts(result_ttl_s=0.2))
    brief.enqueue_many([1, 2])
    lasting.enqueue(3)
    other.enqueue(4)
    assert brief.ack_batch(brief.claim_batch("w", 3)) == 3
    assert other.ack_batch(other.claim_batch("w", 1)) == 1
    time.sleep(0.3)
    assert brief.sweep_expired().results == 2
    assert brief.sweep_expired().results == 0
    assert other.sweep_expired().results == 1
    assert len(brief.list_jobs(JobState.DONE)) == 1


@pytest.mark.clause("RS-3", "C-8")
def test_the_claim_reads_no_results(store: SQLiteStore, db_path: str) -> None:
    """RS-3 with C-8: the claim statements never name the results table, so kept results
    cannot cost a claim anything."""
    for text in (_sql.CLAIM, _sql.CLAIM_AT, _sql.CLAIM_FLAGGED, _sql.NEXT_READY):
        assert "__alkstore_results" not in text
    conn = sqlite3.connect(db_path)
    try:
        plan = conn.execute(
            "EXPLAIN QUERY PLAN " + _sql.CLAIM_SELECT,
            {"queue": "q", "now": 0, "n": 1},
        ).fetchall()
    finally:
        conn.close()
    assert not any("results" in str(step) for step in plan)
