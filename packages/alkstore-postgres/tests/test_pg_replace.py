"""Q-29 on PostgreSQL: a debounced key enqueued 10,000 times writes one row
and spends no id after the first; an enqueue that finds the pending holder is
one statement; the commit wakes the queue only when the holder became ready
earlier."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg import sql

from alkstore import Enqueued, EnqueueOpts
from alkstore_postgres import PostgresStore
from alkstore_postgres._ops import wake_channel


def _one(admin: psycopg.Connection[tuple[Any, ...]], text: str, schema: str) -> Any:
    query = sql.SQL(text).format(s=sql.Identifier(schema))
    row = admin.execute(query).fetchone()
    assert row is not None
    return row[0]


def test_a_key_debounced_10000_times_writes_one_row(
    store: PostgresStore, schema: str, admin: psycopg.Connection[tuple[Any, ...]]
) -> None:
    q = store.queue("q")
    first = q.enqueue_unique("hot", 0, debounce_s=60, on_conflict="replace")
    assert first.created
    for i in range(1, 10_000):
        assert q.enqueue_unique("hot", i, debounce_s=60, on_conflict="replace") == Enqueued(
            first.id, False
        )
    assert _one(admin, "SELECT count(*) FROM {s}.jobs", schema) == 1
    assert _one(admin, "SELECT count(*) FROM {s}.dead", schema) == 0
    # The 9,999 that found the holder took no value of the id sequence.
    assert _one(admin, "SELECT last_value FROM {s}.jobs_id_seq", schema) == first.id
    info = q.get_job(first.id)
    assert info is not None and info.payload == 9_999


def test_finding_the_pending_holder_is_one_statement(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The enqueue that finds its key's pending holder sends one statement
    (on our autocommit connection: no BEGIN, nothing else)."""
    q = store.queue("q")
    held = q.enqueue_unique("k", 1, debounce_s=60)
    sent: list[str] = []
    real = psycopg.Cursor.execute

    def counting(self: psycopg.Cursor[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(str(query))
        return real(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", counting)
    for n in range(5):
        assert q.enqueue_unique("k", n, debounce_s=60, on_conflict="replace") == Enqueued(
            held.id, False
        )
    monkeypatch.undo()
    assert len(sent) == 5, sent
    assert all(s.lstrip().startswith("WITH") and "UPDATE" in s for s in sent), sent


def test_only_a_holder_made_ready_earlier_wakes_its_queue(
    store: PostgresStore, schema: str, pg_url: str
) -> None:
    q = store.queue("q")
    held = q.enqueue_unique("k", 1, EnqueueOpts(delay_s=600))
    with psycopg.connect(pg_url, autocommit=True) as listener:
        listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(wake_channel(schema))))

        def wakes() -> list[str]:
            return [n.payload for n in listener.notifies(timeout=0.5)]

        assert q.enqueue_unique("k", 2, debounce_s=900) == Enqueued(held.id, False)
        assert wakes() == [], "a debounce that pushed the job later woke its queue"
        assert q.enqueue_unique("k", 3, debounce_s=5) == Enqueued(held.id, False)
        assert wakes() == ["q"]
        assert q.enqueue_unique("k", 4, on_conflict="replace") == Enqueued(held.id, False)
        assert wakes() == ["q"]
