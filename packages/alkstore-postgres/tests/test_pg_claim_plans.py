"""C-8 with many queues (issue 24, docs/adr/0029): the prepared claim
settles on its generic plan however many queue names the ``queue`` column's
statistics hold, instead of being planned afresh on every call."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg import sql

from alkstore_postgres import PostgresStore
from alkstore_postgres._sql import Statements

Admin = psycopg.Connection[tuple[Any, ...]]

#: Claims after the first ten: psycopg prepares on the 6th execution, and
#: PostgreSQL tries five custom plans before it compares them with the
#: generic one.
CLAIMS = 40


def _claim_plans(store: PostgresStore) -> tuple[int, int]:
    """(generic, custom) plans of the prepared claim statement on the
    store's only pooled connection."""
    with store.executor._pool.connection() as conn:  # type: ignore[attr-defined]
        rows = conn.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
            "WHERE statement LIKE %s",
            ["%claimed AS (%"],
        ).fetchall()
    assert len(rows) == 1, rows
    return int(rows[0][0]), int(rows[0][1])


@pytest.mark.clause("C-8")
@pytest.mark.parametrize("queues", [1, 1000])
def test_the_prepared_claim_runs_its_generic_plan_with_many_queues(
    pg_url: str, admin: Admin, schema: str, queues: int
) -> None:
    with PostgresStore(pg_url, schema=schema, min_size=1, max_size=1) as store:
        q = store.queue("q")
        q.enqueue_many(list(range(CLAIMS + 10)))
        for i in range(queues - 1):
            store.queue(f"other-{i:04d}").enqueue_many(list(range(10)))
        admin.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(schema, "jobs")))
        for _ in range(CLAIMS):
            job = q.claim("w")
            assert job is not None and job.ack()
        generic, custom = _claim_plans(store)
    # Prepared after 5 runs; of the other 35, at most 5 custom plans.
    assert custom <= 5 and generic >= CLAIMS - 10, (generic, custom)


def test_only_the_claim_statements_hide_the_queue_name(schema: str) -> None:
    """The other statements keep their parameters in the planner's sight
    (the dependency functions even plan per call, docs/adr/0021)."""
    st = Statements(schema)
    hidden = "(SELECT %(queue)s::text)"
    assert hidden in st.claim(1) and hidden in st.claim_param and hidden in st.claim_pick
    assert "%(queue)s::text" not in st.claim(1).replace(hidden, "")
    assert hidden not in st.exhaust and hidden not in st.next_ready and hidden not in st.stats
