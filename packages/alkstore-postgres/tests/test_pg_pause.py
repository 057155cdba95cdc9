"""Q-27 on PostgreSQL (docs/adr/0023): version 5 upgraded in place."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg import sql

from alkstore_postgres import PostgresStore
from alkstore_postgres._sql import SCHEMA_VERSION, Statements

Admin = psycopg.Connection[tuple[Any, ...]]


@pytest.mark.clause("Q-27", "ST-1")
def test_version_5_is_upgraded_keeping_its_jobs(
    pg_url: str, admin: Admin, schema: str, old_schema: Callable[..., None]
) -> None:
    old_schema(5)
    with PostgresStore(pg_url, schema=schema) as store:
        q = store.queue("q")
        assert not q.is_paused() and q.pause() and q.stats().paused
        assert q.claim("w") is None
        assert q.resume()
        job = q.claim("w")
        assert job is not None and job.payload == "old"
    row = admin.execute(Statements(schema).get_version, {}).fetchone()
    assert row == (str(SCHEMA_VERSION),) and SCHEMA_VERSION >= 6


@pytest.mark.clause("Q-27", "C-8")
def test_the_claim_probes_the_paused_table_once_by_its_key(
    pg_url: str, admin: Admin, schema: str
) -> None:
    """The claim's first level carries the pause as a one-time filter: an index probe of
    the paused table's key, with 1,000 queues paused."""
    with PostgresStore(pg_url, schema=schema) as store:
        store.queue("q").enqueue_many(list(range(500)))
        for i in range(1000):
            store.queue(f"p{i}").pause()
    st = Statements(schema)
    admin.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(schema, "paused")))
    rows = admin.execute(
        "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) " + st.claim_pick, {"queue": "q", "n": 1}
    ).fetchall()
    plan = "\n".join(str(r[0]) for r in rows)
    assert plan.count("paused_pkey on paused") == 1, plan
    assert "One-Time Filter" in plan and "Seq Scan" not in plan, plan
