"""The workers' registry on PostgreSQL (O-5; docs/adr/0024): schema version 5
upgraded in place, and a refresh that is one statement."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import psycopg
import pytest

from alkstore.types import WorkerCount, WorkerInfo
from alkstore_postgres import PostgresStore
from alkstore_postgres._sql import REPORT_WORKER, SCHEMA_VERSION, Statements

Admin = psycopg.Connection[tuple[Any, ...]]


def _info(wid: str = "w1") -> WorkerInfo:
    return WorkerInfo(wid, "host", 7, ("q",), 2, datetime.now(timezone.utc), "0.1.0")


@pytest.mark.clause("O-5", "ST-1")
def test_version_5_is_upgraded_keeping_its_jobs(
    pg_url: str, admin: Admin, schema: str, old_schema: Callable[..., None]
) -> None:
    old_schema(5, job=False)
    with PostgresStore(pg_url, schema=schema) as store:
        jid = store.queue("q").enqueue("old")
        now = datetime.now(timezone.utc)
        store.report_worker(_info(), [WorkerCount(now, "w1", "q", "acked", 2)])
        assert [w.id for w in store.workers()] == ["w1"]
        assert [c.n for c in store.worker_counts()] == [2]
        job = store.queue("q").claim("w")
        assert job is not None and job.id == jid
    row = admin.execute(Statements(schema).get_version, {}).fetchone()
    assert row is not None and int(row[0]) == SCHEMA_VERSION


@pytest.mark.clause("O-5")
def test_a_refresh_is_one_statement(open_store: Callable[..., PostgresStore]) -> None:
    """O-5: the row, the counts and both deletions in one statement."""
    assert REPORT_WORKER.count(";") == 0
    store = open_store()
    now = datetime.now(timezone.utc)
    counts = [WorkerCount(now, "w1", "q", o, 1) for o in ("acked", "retried", "dead")]
    ops = store.executor._ops  # type: ignore[attr-defined]
    op = ops.report_worker(_info(), counts, False, 3600.0, 604800.0)
    assert not op.atomic  # one statement needs no transaction of its own
    steps = op.make()
    first = next(steps)
    assert first.text == ops.st.report_worker
    with pytest.raises(StopIteration):
        steps.send(1)
    store.report_worker(_info(), counts)
    assert len(store.worker_counts()) == 3
