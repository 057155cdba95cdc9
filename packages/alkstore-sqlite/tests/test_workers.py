"""The workers' registry on SQLite (O-5; docs/adr/0024): schema version 5
upgraded in place, and a refresh that is one write transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import pytest

from alkstore.types import WorkerCount, WorkerInfo
from alkstore_sqlite import SQLiteStore, _sql
from alkstore_sqlite._executor import SQLiteExecutor
from alkstore_sqlite._workers import WorkerOps


def _info(wid: str = "w1") -> WorkerInfo:
    return WorkerInfo(wid, "host", 7, ("q",), 2, datetime.now(timezone.utc), "0.1.0")


@pytest.mark.clause("O-5", "ST-1")
def test_version_5_is_upgraded_keeping_its_jobs(
    old_file: Callable[[int], None], db_path: str
) -> None:
    """The upgrade to 6 adds the registry's tables; the old job is still there."""
    old_file(5)
    with SQLiteStore(db_path) as store:
        now = datetime.now(timezone.utc)
        store.report_worker(_info(), [WorkerCount(now, "w1", "q", "acked", 2)])
        assert [w.id for w in store.workers()] == ["w1"]
        assert [c.n for c in store.worker_counts()] == [2]
        job = store.queue("q").claim("w")
        assert job is not None and job.payload == "old"
    conn = sqlite3.connect(db_path)
    try:
        (version,) = conn.execute(_sql.GET_VERSION).fetchone()
    finally:
        conn.close()
    assert int(version) == _sql.SCHEMA_VERSION


@pytest.mark.clause("O-5")
def test_a_refresh_is_one_commit(store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """The row, the counts and both deletions commit together: one write
    transaction on the write queue, as one ack is."""
    ex = store.executor
    assert isinstance(ex, SQLiteExecutor)
    writes: list[object] = []
    original = ex.core.write

    def counting(tx: Any, fn: Any, **kw: Any) -> Any:
        writes.append(fn)
        return original(tx, fn, **kw)

    monkeypatch.setattr(ex.core, "write", counting)
    now = datetime.now(timezone.utc)
    counts = [WorkerCount(now, "w1", "q", o, 1) for o in ("acked", "retried", "dead")]
    WorkerOps(ex.core).report_worker(_info(), counts, False, 3600.0, 604800.0)
    assert len(writes) == 1
    assert len(store.worker_counts()) == 3
