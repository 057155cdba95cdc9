"""T-1/T-2 with native sqlite3 connections, in every transaction mode."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from alkstore import InvalidArgument
from alkstore_sqlite import SQLiteStore


def _in_tx(conn: sqlite3.Connection) -> bool:
    return conn.in_transaction


def _count(store: SQLiteStore, queue: str) -> int:
    stats = store.queue(queue).stats()
    return stats.pending + stats.scheduled + stats.processing


def test_legacy_implicit_transaction_is_joined_not_committed(
    store: SQLiteStore, db_path: str
) -> None:
    conn = sqlite3.connect(db_path)  # legacy mode: implicit BEGIN before DML
    assert not _in_tx(conn)
    store.queue("q").enqueue(1, tx=conn)
    # The enqueue opened the transaction the caller will commit; nobody else sees it.
    assert _in_tx(conn)
    assert _count(store, "q") == 0
    conn.rollback()
    assert _count(store, "q") == 0
    store.queue("q").enqueue(2, tx=conn)
    conn.commit()
    assert _count(store, "q") == 1
    conn.close()


def test_explicit_transaction_on_an_autocommit_connection(store: SQLiteStore, db_path: str) -> None:
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT)")
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO orders (item) VALUES ('book')")
    job_id = store.queue("q").enqueue({"order": 1}, tx=conn)
    assert store.queue("q").get_job(job_id) is None
    conn.execute("COMMIT")
    assert store.queue("q").get_job(job_id) is not None
    assert conn.execute("SELECT COUNT(*) FROM orders").fetchone()[0] == 1
    conn.close()


def test_autocommit_connection_without_transaction_commits_each_write(
    store: SQLiteStore, db_path: str
) -> None:
    conn = sqlite3.connect(db_path, isolation_level=None)
    ids = store.queue("q").enqueue_many([1, 2, 3], tx=conn)
    assert not conn.in_transaction
    assert [store.queue("q").get_job(i) is not None for i in ids] == [True] * 3
    conn.close()


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sqlite3 autocommit attribute is 3.12+")
def test_python312_autocommit_false_is_joined(store: SQLiteStore, db_path: str) -> None:
    mode: dict[str, Any] = {"autocommit": False}  # not in the 3.10 stubs mypy checks against
    conn = sqlite3.connect(db_path, **mode)
    store.queue("q").enqueue(1, tx=conn)
    assert _count(store, "q") == 0
    conn.commit()
    assert _count(store, "q") == 1
    conn.close()


def test_failed_operation_leaves_the_callers_transaction_usable(
    store: SQLiteStore, db_path: str
) -> None:
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.execute("BEGIN")
    store.queue("q").enqueue("kept", tx=conn)
    with pytest.raises(InvalidArgument):
        store.queue("q").enqueue(float("nan"), tx=conn)
    store.queue("q").enqueue("also kept", tx=conn)
    conn.execute("COMMIT")
    assert _count(store, "q") == 2
    conn.close()


def test_connection_to_another_file_is_refused(store: SQLiteStore, tmp_path: Path) -> None:
    other = sqlite3.connect(str(tmp_path / "other.db"))
    with pytest.raises(InvalidArgument):
        store.queue("q").enqueue(1, tx=other)
    other.close()
    for bad in ("not a tx", 42, object()):
        with pytest.raises(InvalidArgument):
            store.queue("q").enqueue(1, tx=bad)
    assert _count(store, "q") == 0


def test_store_transaction_cannot_be_used_after_it_ended(store: SQLiteStore) -> None:
    with store.transaction() as tx:
        store.queue("q").enqueue(1, tx=tx)
    with pytest.raises(InvalidArgument):
        store.queue("q").enqueue(2, tx=tx)
    with pytest.raises(InvalidArgument):
        tx.execute("SELECT 1")
    assert _count(store, "q") == 1


def test_transaction_of_a_second_store_on_the_same_file_is_accepted(
    store: SQLiteStore, db_path: str
) -> None:
    other = SQLiteStore(db_path)
    with other.transaction() as tx:
        store.queue("q").enqueue(1, tx=tx)
    other.close()
    assert _count(store, "q") == 1
