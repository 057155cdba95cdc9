"""C-8: the hot statements use their indexes and never sort (docs/adr/0002).

The tables hold 100,000 rows of the queue under test (pending, scheduled and
in flight), dead rows and another queue, analyzed, before the plans are read.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

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
    "queues": ["busy", "other"],
    "n": 32,
    "worker_id": "w",
    "id": 1,
    "claim": 1,
    "ids": [1, 2, 3],
    "claims": [1, 1, 1],
    "extend_s": 1.0,
    "delay_s": 1.0,
    "older_than_s": 60.0,
    "last_error": "x",
    "wake": "c",
    "prefix": "result:",
    "progress": None,
}


def _statement(store: PostgresStore, name: str) -> str:
    st = store.executor._ops.st  # type: ignore[attr-defined]
    if name == "claim":
        return str(st.claim(32))
    if name.startswith("purge_dead"):
        by_ids, by_age = name.endswith("ids"), name.endswith("age")
        return str(st.purge_dead[(by_ids, by_age)])
    return str(getattr(st, name))


def _conn(store: PostgresStore) -> Any:
    return store.executor._pool.connection()  # type: ignore[attr-defined]


def _index_names(conn: Any, schema: str, index: str) -> set[str]:
    """*index* and, for a partitioned index (dead letters, docs/adr/0026), the
    partitions' indexes attached to it."""
    rows = conn.execute(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "JOIN pg_class p ON p.oid = i.inhparent JOIN pg_namespace n ON n.oid = p.relnamespace "
        "WHERE n.nspname = %s AND p.relname = %s",
        (schema, index),
    ).fetchall()
    return {index} | {str(r[0]) for r in rows}


def _scanned_whole(conn: Any, schema: str, nodes: list[Plan], tables: tuple[str, ...]) -> bool:
    """Whether a plan reads a non-empty table of *tables* (or a partition of
    one) whole; an empty partition (the default one) may be read so."""
    rows = conn.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relpages > 0",
        (schema,),
    ).fetchall()
    full = {str(r[0]) for r in rows}
    return any(
        n["Node Type"] == "Seq Scan"
        and n.get("Relation Name") in full
        and any(n["Relation Name"] == t or n["Relation Name"].startswith(t + "_") for t in tables)
        for n in nodes
    )


@pytest.mark.parametrize("name", ["claim", "claim_pick", "claim_param"])
def test_claim_walks_the_claim_index_without_sorting(busy: PostgresStore, name: str) -> None:
    with _conn(busy) as conn:
        nodes = _explain(conn, _statement(busy, name), PARAMS)
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
        ("bury_stale", "jobs_expires"),
        ("bury_stale", "jobs_exhausted"),
        ("count_unfinished", "jobs_exhausted"),
        ("count_unfinished", "jobs_parked"),
        ("purge_dead_age", "dead_died"),
    ],
)
def test_wait_and_sweep_statements_use_their_index(
    busy: PostgresStore, name: str, index: str
) -> None:
    with _conn(busy) as conn:
        nodes = _explain(conn, _statement(busy, name), PARAMS)
        names = _index_names(conn, busy.schema, index)
        whole = _scanned_whole(conn, busy.schema, nodes, ("jobs", "dead"))
    assert any(n.get("Index Name") in names for n in nodes), nodes
    assert not whole, nodes


def test_the_wait_loop_probes_one_entry_of_the_ready_index_per_queue(busy: PostgresStore) -> None:
    with _conn(busy) as conn:
        nodes = _explain(conn, _statement(busy, "next_ready"), PARAMS)
    scans = [n for n in nodes if n.get("Index Name") == "jobs_ready"]
    assert scans and all(n["Node Type"] in {"Index Scan", "Index Only Scan"} for n in scans), nodes
    limits = [n for n in nodes if n["Node Type"] == "Limit"]
    assert limits, nodes
    assert not any(n["Node Type"] in {"Sort", "Seq Scan"} for n in nodes), nodes


def test_the_bounded_count_reads_a_limited_number_of_entries(busy: PostgresStore) -> None:
    with _conn(busy) as conn:
        nodes = _explain(conn, _statement(busy, "count_unfinished"), PARAMS)
    assert sum(n["Node Type"] == "Limit" for n in nodes) == 3, nodes
    assert not any(n["Node Type"] in {"Sort", "Seq Scan"} for n in nodes), nodes


@pytest.mark.parametrize(
    "name",
    [
        "ack",
        "heartbeat",
        "retry",
        "fenced_to_dead",
        "release",
        "cancel",
        "get_job",
        "ack_many",
        "progress",
    ],
)
def test_handle_operations_find_the_row_by_primary_key(busy: PostgresStore, name: str) -> None:
    with _conn(busy) as conn:
        nodes = _explain(conn, _statement(busy, name), PARAMS)
        whole = _scanned_whole(conn, busy.schema, nodes, ("jobs", "dead", "results", "waiting"))
    assert any(n.get("Index Name") == "jobs_pkey" for n in nodes), nodes
    assert not whole, nodes


@pytest.mark.parametrize("name", ["redrive_ids", "purge_dead_ids"])
def test_dead_letter_operations_on_ids_find_them_by_primary_key(
    busy: PostgresStore, name: str
) -> None:
    with _conn(busy) as conn:
        nodes = _explain(conn, _statement(busy, name), PARAMS)
        names = _index_names(conn, busy.schema, "dead_id")
        whole = _scanned_whole(conn, busy.schema, nodes, ("dead",))
    # The dead letters are partitioned by die time (docs/adr/0026): an id is
    # one probe of each partition's id index.
    assert any(n.get("Index Name") in names for n in nodes), nodes
    assert not whole, nodes


@contextmanager
def _own_database(pg_url: str) -> Iterator[str]:
    """A database of the caller's own, dropped afterwards. VACUUM removes
    dead rows only when no transaction of the same database may still see
    them, and the rest of the suite runs in the server's default database."""
    name = f"alkstore_plans_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name)))
    try:
        yield urlunsplit(urlsplit(pg_url)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(
                psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    psycopg.sql.Identifier(name)
                )
            )


def _claim_index_pages(store: PostgresStore, pg_url: str, params: dict[str, object]) -> int:
    """Pages of the claim index the claim's row selection reads (run, then
    rolled back), after a VACUUM: no dead entries, nothing from the heap."""
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'VACUUM ANALYZE "{store.schema}".jobs')
    with _conn(store) as conn, conn.transaction(force_rollback=True):
        sql = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + _statement(store, "claim_pick")
        row = conn.execute(sql, params).fetchone()
    assert row is not None
    doc = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    return sum(
        int(n.get("Shared Hit Blocks", 0)) + int(n.get("Shared Read Blocks", 0))
        for n in _nodes(doc[0]["Plan"])
        if n.get("Index Name") == "jobs_claim"
    )


@pytest.mark.clause("C-8", "Q-2", "Q-25")
def test_a_claim_never_walks_the_rows_in_flight_above_the_first_ready_one(
    pg_url: str,
) -> None:
    """Rows in flight at a higher priority than the first ready row (a full
    group's slot holders are exactly that) cost a claim one probe per
    priority level, however many they are: a single walk in claim order
    would read every one of their index entries."""
    from alkstore_postgres.testing import HOOKS

    pages: dict[int, int] = {}
    with _own_database(pg_url) as own:
        for blocked in (40, 20_000):
            with (
                HOOKS.isolated(own, {}, "levels") as (url, opts),
                PostgresStore(url, **opts) as store,
            ):
                q = store.queue("q", QueueOpts(visibility_timeout_s=3600))
                for start in range(0, blocked, 5_000):
                    q.enqueue_many(
                        list(range(min(5_000, blocked - start))), EnqueueOpts(priority=5)
                    )
                held = 0
                while held < blocked:
                    held += len(q.claim_batch("hold", 5_000))
                q.enqueue_many(list(range(100)), EnqueueOpts(priority=1))
                q.enqueue_many(list(range(100)))
                pages[blocked] = _claim_index_pages(store, url, {**PARAMS, "queue": "q"})
                got = q.claim_batch("w", 150)
                assert [j.priority for j in got] == [1] * 100 + [0] * 50
    # 20,000 entries fill about a hundred leaf pages of the index.
    assert pages[20_000] <= pages[40] + 4, pages
