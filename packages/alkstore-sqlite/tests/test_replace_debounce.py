"""Q-29 on SQLite: a debounced key enqueued 10,000 times writes one row, and
each of those enqueues is one statement on the row (counted in the file's
tables and in the connection's trace); a replace in a caller's transaction
joins it."""

from __future__ import annotations

import sqlite3

from fix_trace import Traced

from alkstore import Enqueued, EnqueueOpts
from alkstore_sqlite import SQLiteStore


def _count(db_path: str, sql: str) -> int:
    conn = sqlite3.connect(db_path)
    try:
        return int(conn.execute(sql).fetchone()[0])
    finally:
        conn.close()


def test_a_key_debounced_10000_times_writes_one_row(store: SQLiteStore, db_path: str) -> None:
    q = store.queue("q")
    first = q.enqueue_unique("hot", 0, debounce_s=60, on_conflict="replace")
    assert first.created
    for i in range(1, 10_000):
        assert q.enqueue_unique("hot", i, debounce_s=60, on_conflict="replace") == Enqueued(
            first.id, False
        )
    assert _count(db_path, "SELECT count(*) FROM __alkstore_jobs") == 1
    assert _count(db_path, "SELECT count(*) FROM __alkstore_dead") == 0
    # No id was spent on the 9,999 that found the holder.
    assert _count(db_path, "SELECT seq FROM sqlite_sequence WHERE name = '__alkstore_jobs'") == (
        first.id
    )
    info = q.get_job(first.id)
    assert info is not None and info.payload == 9_999


def test_a_debounce_of_a_pending_holder_is_one_statement(db_path: str, traced: Traced) -> None:
    """The enqueue that finds its key's pending holder runs one statement, the
    UPDATE, in autocommit: no BEGIN, no other read or write."""
    with SQLiteStore(db_path) as store:
        q = store.queue("q")
        held = q.enqueue_unique("k", 1, debounce_s=60)
        traced.clear()
        got = q.enqueue_unique("k", 2, debounce_s=60, on_conflict="replace")
        assert got == Enqueued(held.id, False)
        ran = [s for s in traced.seen() if "data_version" not in s]
    assert len(ran) == 1 and ran[0].lstrip().startswith("UPDATE __alkstore_jobs"), ran


def test_a_replace_in_a_native_transaction_joins_it(store: SQLiteStore, db_path: str) -> None:
    q = store.queue("q")
    held = q.enqueue_unique("k", "old", EnqueueOpts(delay_s=60))
    conn = sqlite3.connect(db_path, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        got = q.enqueue_unique("k", "new", tx=conn, on_conflict="replace")
        assert got == Enqueued(held.id, False)
        conn.execute("ROLLBACK")
    finally:
        conn.close()
    info = q.get_job(held.id)
    assert info is not None and info.payload == "old"
