"""Progress checkpoints on PostgreSQL (Q-28; docs/adr/0022): schema version
5 upgraded in place, and the checkpoint read by the claim's own statement."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from alkstore import JobState, QueueOpts
from alkstore_postgres import PostgresStore
from alkstore_postgres._sql import CLAIM, PROGRESS, SCHEMA_VERSION, Statements

Admin = psycopg.Connection[tuple[Any, ...]]


@pytest.mark.clause("Q-28", "ST-1")
def test_version_5_is_upgraded_keeping_its_jobs(
    pg_url: str, admin: Admin, schema: str, old_schema: Callable[..., None]
) -> None:
    """The upgrade to 6 adds the progress columns; an old job takes a checkpoint, keeps it
    through a retry, and carries it to dead and back (redrive)."""
    old_schema(5, max_attempts=2)
    with PostgresStore(pg_url, schema=schema) as store:
        q = store.queue("q", QueueOpts(max_attempts=2))
        job = q.claim("w")
        assert job is not None and job.payload == "old" and job.checkpoint is None
        assert job.progress({"step": 1})
        assert job.retry("again", 0)
        again = q.claim("w")
        assert again is not None and again.checkpoint == {"step": 1}
        assert again.fail("boom")
        info = q.get_job(job.id)
        assert info is not None and info.state is JobState.DEAD
        assert info.progress == {"step": 1}
        assert q.redrive([job.id]) == 1
        back = q.claim("w")
        assert back is not None and back.checkpoint == {"step": 1}
    row = admin.execute(Statements(schema).get_version, {}).fetchone()
    assert row is not None and int(row[0]) == SCHEMA_VERSION >= 6


@pytest.mark.clause("Q-28", "C-8")
def test_the_claim_returns_the_checkpoint_in_its_own_statement() -> None:
    """Q-28: the claim statement returns the checkpoint (no read after the claim), and
    the checkpoint write sets no indexed column (a HOT update)."""
    returning = CLAIM.split("RETURNING", 1)[1]
    assert "progress" in returning
    assert "deadline" not in PROGRESS.split("WHERE", 1)[0]
