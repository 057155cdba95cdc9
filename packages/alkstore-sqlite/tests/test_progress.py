"""Progress checkpoints on SQLite (Q-28; docs/adr/0022): schema version 5
upgraded in place, and the checkpoint read by the claim's own statement."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import pytest

from alkstore import JobState, QueueOpts
from alkstore_sqlite import SQLiteStore, _sql


@pytest.mark.clause("Q-28", "ST-1")
def test_version_5_is_upgraded_keeping_its_jobs(
    old_file: Callable[[int], None], db_path: str
) -> None:
    """The upgrade to 6 adds the progress columns; an old job takes a checkpoint, keeps it
    through a retry, and carries it to dead."""
    old_file(5)
    with SQLiteStore(db_path) as store:
        q = store.queue("q", QueueOpts(max_attempts=2))
        job = q.claim("w")
        assert job is not None and job.id == 1 and job.checkpoint is None
        assert job.progress({"step": 1})
        assert job.retry("again", 0)
        again = q.claim("w")
        assert again is not None and again.checkpoint == {"step": 1}
        assert again.fail("boom")
        info = q.get_job(1)
        assert info is not None and info.state is JobState.DEAD
        assert info.progress == {"step": 1}
    conn = sqlite3.connect(db_path)
    try:
        (version,) = conn.execute(_sql.GET_VERSION).fetchone()
        columns = {
            table: {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
            for table in ("__alkstore_jobs", "__alkstore_dead")
        }
    finally:
        conn.close()
    assert int(version) == _sql.SCHEMA_VERSION >= 6
    assert all("progress" in names for names in columns.values())


@pytest.mark.clause("Q-28", "C-8")
def test_the_claim_returns_the_checkpoint_in_its_own_statement() -> None:
    """Q-28: every claim statement returns the checkpoint (no read after the claim), and
    the checkpoint write touches no indexed column."""
    for text in (_sql.CLAIM, _sql.CLAIM_AT, _sql.CLAIM_FLAGGED):
        returning = text.split("RETURNING", 1)[1]
        assert "progress" in returning
    assert "deadline" not in _sql.PROGRESS.split("WHERE", 1)[0]
