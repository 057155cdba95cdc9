"""Workflows on SQLite (WF-1..WF-3; docs/adr/0021): waiting jobs in a table
of their own that no claim statement reads, schema version 4 upgraded in
place, and a parent's ack that touches only its own children's rows."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import pytest

from alkstore import EnqueueOpts, JobState, QueueOpts
from alkstore_sqlite import SQLiteStore, _sql


@pytest.mark.clause("WF-1", "ST-1")
def test_version_4_is_upgraded_keeping_its_jobs(
    old_file: Callable[[int], None], db_path: str
) -> None:
    """The upgrade to 5 adds the waiting and edge tables; an old job can be a parent."""
    old_file(4)
    with SQLiteStore(db_path) as store:
        q = store.queue("q", QueueOpts(result_ttl_s=60))
        child = q.enqueue("new", EnqueueOpts(after=(1,)))
        info = q.get_job(child)
        assert info is not None and info.waiting_on == (1,)
        old = q.claim("w")
        assert old is not None and old.id == 1 and old.ack()
        job = q.claim("w")
        assert job is not None and job.id == child and job.parent_results() == {}
    conn = sqlite3.connect(db_path)
    try:
        (version,) = conn.execute(_sql.GET_VERSION).fetchone()
    finally:
        conn.close()
    assert int(version) == _sql.SCHEMA_VERSION


@pytest.mark.clause("WF-1", "WF-5")
def test_the_claim_reads_no_waiting_jobs(store: SQLiteStore, db_path: str) -> None:
    """WF-1 with C-8: no claim statement names the waiting or edge tables, so waiting jobs
    cannot cost a claim anything."""
    for text in (_sql.CLAIM, _sql.CLAIM_AT, _sql.CLAIM_FLAGGED, _sql.NEXT_READY):
        assert "__alkstore_waiting" not in text and "__alkstore_deps" not in text
    q = store.queue("q")
    parent = q.enqueue("p")
    q.enqueue_many(list(range(50)), EnqueueOpts(after=(parent,)))
    conn = sqlite3.connect(db_path)
    try:
        (live,) = conn.execute("SELECT count(*) FROM __alkstore_jobs").fetchone()
    finally:
        conn.close()
    assert live == 1  # the waiting jobs are not rows of the claim's table


@pytest.mark.clause("WF-2")
def test_a_parents_ack_reads_its_children_on_the_parent_key(db_path: str) -> None:
    """WF-2: the release statement finds a parent's children by the edge table's primary
    key (parent first), never by scanning the edges or the waiting table."""
    with SQLiteStore(db_path) as store:
        store.queue("q").enqueue("x")
    conn = sqlite3.connect(db_path)
    try:
        plan = conn.execute(
            "EXPLAIN QUERY PLAN " + _sql.CHILDREN_FINISHED, {"ids": "[1, 2]"}
        ).fetchall()
    finally:
        conn.close()
    steps = [str(step[-1]) for step in plan]
    assert any("__alkstore_deps" in s and "PRIMARY KEY" in s for s in steps), steps
    assert not any(s.startswith("SCAN __alkstore_deps") for s in steps), steps
    assert not any(s.startswith("SCAN __alkstore_waiting") for s in steps), steps


@pytest.mark.clause("WF-3")
def test_a_cascade_keeps_the_victims_edges_for_the_redrive(store: SQLiteStore) -> None:
    """WF-3: a victim of a cascade keeps its edge to each parent that had not finished,
    so the redrive of the failed one counts it back on those parents only."""
    q = store.queue("q")
    a, b = q.enqueue_many(["a", "b"])
    child = q.enqueue("c", EnqueueOpts(after=(a, b)))
    first = q.claim("w")
    assert first is not None and first.id == a and first.fail("boom")
    dead = q.get_job(child)
    assert dead is not None and dead.state is JobState.DEAD
    assert q.redrive([a]) == 1
    back = q.get_job(child)
    assert back is not None and back.waiting_on == (a, b)
