"""SQLite engine specifics: URLs and options, the notification cap (N-3),
durability settings, reads without the write lock, idle stores."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fix_trace import Traced

import alkstore
from alkstore import InvalidArgument, TransientError
from alkstore_sqlite import SQLiteStore
from alkstore_sqlite._url import parse_url


@pytest.mark.parametrize(
    ("url", "path", "opts"),
    [
        ("sqlite:///app.db", "app.db", {}),
        ("sqlite:////tmp/x/app.db", "/tmp/x/app.db", {}),
        ("sqlite://localhost/data/app.db", "data/app.db", {}),
        ("sqlite:///a%20b.db?synchronous=normal", "a b.db", {"synchronous": "normal"}),
        (
            "sqlite:///a.db?busy_timeout_s=0.5&notifications_cap=10",
            "a.db",
            {"busy_timeout_s": 0.5, "notifications_cap": 10},
        ),
    ],
)
def test_urls_are_parsed(url: str, path: str, opts: dict[str, Any]) -> None:
    assert parse_url(url) == (path, opts)


@pytest.mark.parametrize(
    "url",
    [
        "sqlite://",
        "sqlite:///",
        "sqlite://host/app.db",
        "sqlite:///app.db?nope=1",
        "sqlite:///app.db?busy_timeout_s=soon",
        "sqlite:///app.db?busy_timeout_s=nan",
        "sqlite:///:memory:",
        "sqlite:///file::memory:?cache=shared",
    ],
)
def test_bad_urls_are_refused(url: str) -> None:
    with pytest.raises(InvalidArgument):
        alkstore.open(url)


def test_memory_database_is_refused_with_a_reason() -> None:
    with pytest.raises(InvalidArgument, match="file"):
        SQLiteStore(":memory:")


@pytest.mark.parametrize(
    "opts",
    [
        {"synchronous": "off"},
        {"busy_timeout_s": -1},
        {"poll_interval_s": 0},
        {"notifications_cap": -1},
        {"unknown": 1},
    ],
)
def test_bad_engine_options_are_refused(tmp_path: Path, opts: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument):
        alkstore.open(f"sqlite:///{tmp_path / 'x.db'}", **opts)
    assert not (tmp_path / "x.db").exists()


def test_wal_and_synchronous_full_by_default(store: SQLiteStore, db_path: str) -> None:
    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    with store._sqlite.core.read() as own:
        assert own.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    fast = SQLiteStore(db_path, synchronous="normal")
    with fast._sqlite.core.read() as own:
        assert own.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    fast.close()


def test_tables_live_in_the_callers_file_under_the_prefix(store: SQLiteStore, db_path: str) -> None:
    conn = sqlite3.connect(db_path)
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    conn.close()
    ours = [n for n in names if n != "sqlite_sequence"]
    assert ours and all(n.startswith("__alkstore_") for n in ours)


def test_notification_table_is_capped_at_open(db_path: str) -> None:
    """N-3: the newest `notifications_cap` rows survive the next open."""
    store = SQLiteStore(db_path)
    for i in range(50):
        store.notify("ch", i)
    store.close()
    SQLiteStore(db_path, notifications_cap=10).close()
    conn = sqlite3.connect(db_path)
    rows = [r[0] for r in conn.execute("SELECT payload FROM __alkstore_notifications ORDER BY id")]
    conn.close()
    assert rows == [str(i) for i in range(40, 50)]


def test_reads_do_not_wait_for_a_writer(store: SQLiteStore, db_path: str) -> None:
    """C-8: pure reads take no write lock, so a held write lock cannot stall them."""
    q = store.queue("q")
    job_id = q.enqueue("x")
    store.stream("s").publish("e")
    holder = sqlite3.connect(db_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("DELETE FROM __alkstore_jobs")
    started = time.monotonic()
    assert q.get_job(job_id) is not None
    assert q.stats().pending == 1
    assert len(q.list_jobs(alkstore.JobState.PENDING)) == 1
    assert store.queue_stats()[0].pending == 1
    assert len(store.stream("s").read()) == 1
    assert store.schedules() == []
    assert time.monotonic() - started < 2.0  # the busy timeout is 5 s
    holder.execute("ROLLBACK")
    holder.close()


def test_writer_past_busy_timeout_gets_transient_error(db_path: str) -> None:
    store = SQLiteStore(db_path, busy_timeout_s=0.05)
    holder = sqlite3.connect(db_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    with pytest.raises(TransientError):
        store.queue("q").enqueue(1)
    holder.execute("ROLLBACK")
    holder.close()
    assert store.queue("q").enqueue(1) > 0
    store.close()


def test_idle_blocked_claim_reads_no_table(db_path: str, traced: Traced) -> None:
    """Q-19/LESSONS: while nothing commits, a blocked claim runs no SELECT."""
    store = SQLiteStore(db_path)
    q = store.queue("idle")
    done = threading.Event()

    def block() -> None:
        assert q.claim("w", wait_s=1.5) is None
        done.set()

    thread = threading.Thread(target=block)
    thread.start()
    time.sleep(0.4)  # past the first attempts and the watcher start
    traced.clear()
    time.sleep(0.8)
    statements = traced.seen()
    idle = [s for s in statements if "data_version" not in s]
    polls = sum("data_version" in s for s in statements)
    thread.join()
    store.close()
    assert done.is_set()
    assert idle == []
    assert polls > 10  # the watcher polls; nothing else runs


def test_watcher_starts_only_when_something_blocks(store: SQLiteStore) -> None:
    before = {t.name for t in threading.enumerate()}
    q = store.queue("q")
    q.enqueue(1)
    assert q.claim("w") is not None
    assert "alkstore-sqlite-watcher" not in {t.name for t in threading.enumerate()} - before
    # Blocked: the watcher starts once the first attempt finds nothing within
    # the wait (a wait that a loaded machine cannot use up in one attempt).
    assert q.claim("w", wait_s=1.0) is None
    assert any(t.name == "alkstore-sqlite-watcher" for t in threading.enumerate())
    store.close()
    assert not any(
        t.name == "alkstore-sqlite-watcher" and t.is_alive() for t in threading.enumerate()
    )


def test_store_is_a_typed_alkstore_store(db_path: str) -> None:
    store: alkstore.Store = SQLiteStore(db_path)  # mypy proves the Protocol
    store.close()
