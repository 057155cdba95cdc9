"""Q-23 on SQLite: an enqueue that finds its key held writes nothing to the
file, so the wake watcher of every store on it sees no commit (no wake)."""

from __future__ import annotations

import sqlite3

from alkstore import Enqueued
from alkstore_sqlite import SQLiteStore


def _version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


def test_an_enqueue_of_a_held_key_leaves_the_file_unchanged(
    store: SQLiteStore, db_path: str
) -> None:
    q = store.queue("q")
    held = q.enqueue_unique("k", 1)
    watcher = sqlite3.connect(db_path)
    try:
        before = _version(watcher)
        assert q.enqueue_unique("k", 2) == Enqueued(held.id, False)
        assert q.enqueue_many_unique([("k", 3), ("k", 4)]) == [Enqueued(held.id, False)] * 2
        assert _version(watcher) == before, "a call that wrote nothing changed the file"
        got = q.enqueue_many_unique([("k", 5), ("new", 6), ("new", 7)])
        assert [g.created for g in got] == [False, True, False]
        assert got[1].id == got[2].id
        assert _version(watcher) != before
    finally:
        watcher.close()
