"""C-8: the hot statements use their indexes and never sort (docs/adr/0002).

The tables hold 100,000 rows of the queue under test (pending, scheduled and
in flight), dead rows and another queue, analyzed, before the plans are read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from alkstore import EnqueueOpts, QueueOpts
from alkstore_postgres import PostgresStore

Plan = dict[str, Any]


def _nodes(plan: Plan) -> Iterator[Plan]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def _explain(conn: psycopg.Connection[Any], sql: str, params: dict[str, object]) -> list[Plan]:
    row = conn.execute("EXPLAIN (FORMAT JSON) " + sql, params).fetchone()
    assert row is not None
    doc = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    return list(_nodes(doc[0]["Plan"]))


@pytest.fixture(scope="module")
def busy(pg_url: str) -> Iterator[PostgresStore]:
    """A schema with a large backlog, shared by this module's tests."""
    from alkstore_postgres.testing import HOOKS

    with HOOKS.isolated(pg_url, {}, "plans") as (url, opts):
        store = PostgresStore(url, **opts)
        try:
            q = store.queue("busy", QueueOpts(max_attempts=1))
            for _ in range(7):
                q.enqueue_many(list(range(10_000)))
            q.enqueue_many(list(range(10_000)), EnqueueOpts(priority=5, delay_s=3600))
            q.enqueue_many(list(range(10_000)), EnqueueOpts(delay_s=3600))
            for job in q.claim_batch("w", 5_000):
                job.fail("dead")
            q.claim_batch("w", 10_000)
            store.queue("other").enqueue_many(list(range(10_000)))
            with store.transaction() as tx:
                tx.execute(f'ANALYZE "{store.schema}".jobs')
                tx.execute(f'ANALYZE "{store.schema}".dead')
            yield store
        finally:
            store.close()


PARAMS: dict[str, object] = {
    "queue": "busy",
    "n": 32,
    "worker": "w",
    "id": 1,
    "attempt": 1,
    "extend_s": 1.0,
    "delay_s": 1.0,
    "error": "x",
    "wake": "c",
}


@pytest.mark.parametrize("name", ["claim", "claim_pick"])
def test_claim_walks_the_claim_index_without_sorting(busy: PostgresStore, name: str) -> None:
    with busy._pool.connection() as conn:
        nodes = _explain(conn, getattr(busy._sql, name), PARAMS)
    assert any(n.get("Index Name") == "jobs_claim" for n in nodes), nodes
    assert not any(n["Node Type"] in {"Sort", "Incremental Sort"} for n in nodes), nodes
    assert not any(
        n["Node Type"] == "Seq Scan" and n.get("Relation Name") == "jobs" for n in nodes
    ), nodes


@pytest.mark.parametrize(
    ("name", "index"),
    [
        ("next_ready", "jobs_ready"),
        ("claim", "jobs_exhausted"),
        ("sweep", "jobs_expires"),
        ("sweep", "jobs_exhausted"),
        ("sweep", "dead_purge"),
    ],
)
def test_wait_and_sweep_statements_use_their_index(
    busy: PostgresStore, name: str, index: str
) -> None:
    with busy._pool.connection() as conn:
        nodes = _explain(conn, getattr(busy._sql, name), PARAMS)
    assert any(n.get("Index Name") == index for n in nodes), nodes
    assert not any(n["Node Type"] == "Seq Scan" for n in nodes), nodes


def test_the_wait_loop_probes_one_entry_of_the_ready_index(busy: PostgresStore) -> None:
    with busy._pool.connection() as conn:
        nodes = _explain(conn, busy._sql.next_ready, PARAMS)
    assert nodes[0]["Node Type"] == "Limit", nodes
    scans = [n for n in nodes if n.get("Index Name") == "jobs_ready"]
    assert scans and all(n["Node Type"] in {"Index Scan", "Index Only Scan"} for n in scans), nodes
    assert not any(n["Node Type"] in {"Sort", "Aggregate", "Seq Scan"} for n in nodes), nodes


@pytest.mark.parametrize(
    "name", ["ack", "heartbeat", "retry_pending", "fenced_to_dead", "cancel", "get_job"]
)
def test_handle_operations_find_the_row_by_primary_key(busy: PostgresStore, name: str) -> None:
    with busy._pool.connection() as conn:
        nodes = _explain(conn, getattr(busy._sql, name), PARAMS)
    assert any(n.get("Index Name") == "jobs_pkey" for n in nodes), nodes
    assert not any(n["Node Type"] == "Seq Scan" for n in nodes), nodes
