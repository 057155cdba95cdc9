"""SQLite under faults and hostile input: E-2 (every busy code), E-3, E-5,
EN-1, many processes on one file, and processes killed mid-transaction."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import alkstore
from alkstore import AlkstoreError, EngineError, InvalidArgument, QueueOpts, TransientError
from alkstore_sqlite import SQLiteStore
from alkstore_sqlite._errors import BUSY_CODES, translate_errors
from alkstore_sqlite._url import parse_url

SPAWN = multiprocessing.get_context("spawn")

# ---------------------------------------------------------------- E-2 codes


def _driver_error(code: int | None, message: str) -> sqlite3.OperationalError:
    exc = sqlite3.OperationalError(message)
    if code is not None:
        exc.sqlite_errorcode = code  # type: ignore[attr-defined]
        exc.sqlite_errorname = "SQLITE_TEST"  # type: ignore[attr-defined]
    return exc


@pytest.mark.parametrize("code", sorted(BUSY_CODES))
def test_every_busy_and_locked_code_is_transient(code: int) -> None:
    exc = _driver_error(code, "database is locked")
    with pytest.raises(TransientError) as info, translate_errors():
        raise exc
    assert info.value.__cause__ is exc


@pytest.mark.parametrize(
    "message", ["database is locked", "database is busy", "database table is locked: t"]
)
def test_busy_messages_without_a_code_are_transient(message: str) -> None:
    with pytest.raises(TransientError), translate_errors():
        raise _driver_error(None, message)


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (1, "no such table: x"),  # SQLITE_ERROR
        (11, "database disk image is malformed"),  # SQLITE_CORRUPT
        (13, "database or disk is full"),  # SQLITE_FULL
        (19, "UNIQUE constraint failed"),  # SQLITE_CONSTRAINT
        (8, "attempt to write a readonly database"),  # SQLITE_READONLY
        (None, "no such table: locked_rows"),  # "locked" in a name is not busy
    ],
)
def test_other_codes_are_engine_errors_not_transient(code: int | None, message: str) -> None:
    with pytest.raises(EngineError) as info, translate_errors():
        raise _driver_error(code, message)
    assert type(info.value) is EngineError


def test_a_stale_read_snapshot_is_transient_at_once(tmp_path: Path) -> None:
    """SQLITE_BUSY_SNAPSHOT: a native connection read in a deferred
    transaction, another connection wrote, and the first now writes. SQLite
    says so without waiting for the busy timeout."""
    path = str(tmp_path / "app.db")
    with SQLiteStore(path, busy_timeout_s=5.0) as store:
        q = store.queue("q")
        q.enqueue(1)
        conn = sqlite3.connect(path, isolation_level="DEFERRED")
        try:
            conn.execute("BEGIN")
            conn.execute("SELECT count(*) FROM __alkstore_jobs").fetchone()
            q.enqueue(2)
            started = time.monotonic()
            with pytest.raises(TransientError) as info:
                q.enqueue(3, tx=conn)
            assert time.monotonic() - started < 1.0
            cause = info.value.__cause__
            assert isinstance(cause, sqlite3.OperationalError)
            assert getattr(cause, "sqlite_errorcode", 517) == 517
        finally:
            conn.rollback()
            conn.close()
        assert q.stats().pending == 2


# ----------------------------------------------------------------- E-3 values


def test_values_sqlite3_cannot_bind_are_invalid_arguments() -> None:
    for exc in (UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates"), OverflowError("big")):
        with pytest.raises(InvalidArgument), translate_errors():
            raise exc


def test_caller_sql_with_unbindable_values_is_an_invalid_argument(store: SQLiteStore) -> None:
    with store.transaction() as tx:
        with pytest.raises(InvalidArgument):
            tx.execute("SELECT ?", (2**70,))
        with pytest.raises(InvalidArgument):
            tx.execute("SELECT ?", ("\ud800",))
        tx.execute("SELECT 1")


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///a\x00b.db",
        "sqlite:///a%00b.db",
        "sqlite://[/a.db",
        "sqlite://]x[/a.db",
        "sqlite:///a.db?busy_timeout_s=1&busy_timeout_s=2",
        "sqlite:///a.db?notifications_cap=" + "9" * 5000,
        "sqlite:///a.db?busy_timeout_s=1e999",
        "sqlite:///a.db?migrate=yes",
        "sqlite:///",
    ],
)
def test_malformed_urls_are_invalid_arguments(url: str) -> None:
    with pytest.raises(InvalidArgument):
        parse_url(url)
    with pytest.raises(InvalidArgument):
        alkstore.open(url)


@pytest.mark.parametrize(("text", "value"), [("true", True), ("1", True), ("FALSE", False)])
def test_boolean_options_in_urls(text: str, value: bool) -> None:
    assert parse_url(f"sqlite:///a.db?migrate={text}") == ("a.db", {"migrate": value})


# ------------------------------------------------------------------------ E-5


@pytest.mark.parametrize(
    "call",
    ["enqueue", "claim", "heartbeat", "lock", "sweep", "publish"],
)
def test_write_without_tx_inside_the_threads_own_transaction_is_refused_at_once(
    db_path: str, call: str
) -> None:
    with SQLiteStore(db_path, busy_timeout_s=1.2) as store:
        q = store.queue("q", QueueOpts(visibility_timeout_s=300))
        q.enqueue("x")
        job = q.claim("w") if call == "heartbeat" else None
        q.enqueue("y")
        calls: dict[str, Callable[[], object]] = {
            "enqueue": lambda: q.enqueue("z"),
            "claim": lambda: q.claim("w"),
            "heartbeat": lambda: job.heartbeat() if job else None,
            "lock": lambda: store.lock("l", 10),
            "sweep": q.sweep_expired,
            "publish": lambda: store.stream("s").publish(1),
        }
        started = time.monotonic()
        with store.transaction() as tx:
            tx.execute("SELECT 1")
            with pytest.raises(InvalidArgument):
                calls[call]()
        assert time.monotonic() - started < 0.8, "the refusal waited for the busy timeout"


def test_write_without_tx_from_another_thread_waits_for_the_transaction(db_path: str) -> None:
    """E-5 is about the thread's own transaction: another thread's write
    waits for the commit and then succeeds."""
    with SQLiteStore(db_path, busy_timeout_s=5.0) as store:
        q = store.queue("q")
        result: list[Any] = []
        with store.transaction() as tx:
            q.enqueue("in tx", tx=tx)
            other = threading.Thread(target=lambda: result.append(q.enqueue("other thread")))
            other.start()
            time.sleep(0.2)
        other.join(10)
        assert result and isinstance(result[0], int)
        assert q.stats().pending == 2


# ----------------------------------------------------------------------- EN-1


@pytest.mark.clause("EN-1")
def test_notifications_stay_within_their_cap_while_the_store_runs(db_path: str) -> None:
    cap = 100
    with SQLiteStore(db_path, notifications_cap=cap) as store:
        for i in range(1_000):
            store.notify("c", i)
        with store.transaction() as tx:
            for i in range(300):
                store.notify("c", i, tx=tx)
        rows = (
            sqlite3.connect(db_path)
            .execute("SELECT count(*) FROM __alkstore_notifications")
            .fetchone()[0]
        )
        assert rows <= cap + cap // 10, f"{rows} notification rows with a cap of {cap}"


@pytest.mark.clause("EN-1")
def test_a_listener_far_behind_may_miss_the_oldest_never_a_newer_one(db_path: str) -> None:
    cap = 50
    with SQLiteStore(db_path, notifications_cap=cap) as store, store.listen("c") as listener:
        sent = list(range(400))
        for i in sent:
            store.notify("c", i)
        got: list[int] = []
        while (note := listener.get(2.0)) is not None:
            got.append(note.payload)
            if got[-1] == sent[-1]:
                break
        # The store's delivery thread may read some early notifications while
        # the loop is still sending, so the missed ones can sit between two
        # delivered runs. What EN-1 pins: order kept, nothing twice, and the
        # newest `cap` (which pruning never deletes) all delivered.
        assert got, "the listener received nothing"
        assert got == sorted(set(got)), "delivered out of order or twice"
        assert got[-cap:] == sent[-cap:], "a newer notification was skipped"


# ------------------------------------------------- many processes, one file

#: Kinds of failure a contending process may see: the documented ones.
_ALLOWED = (TransientError,)


def _contend(path: str, seconds: float, seed: int, out: Any) -> None:
    """Run a mix of every kind of write and read on *path* for *seconds*;
    report counts of each outcome type."""
    import random

    rng = random.Random(seed)
    seen: Counter[str] = Counter()
    deadline = time.monotonic() + seconds
    try:
        store = SQLiteStore(path, busy_timeout_s=0.05)
    except AlkstoreError as exc:
        out.put({f"open:{type(exc).__name__}": 1})
        return
    q = store.queue("contended", QueueOpts(visibility_timeout_s=5))
    stream = store.stream("contended")
    while time.monotonic() < deadline:
        op = rng.choice(["enqueue", "batch", "claim", "tx", "publish", "lock", "notify", "read"])
        try:
            if op == "enqueue":
                q.enqueue({"seed": seed})
            elif op == "batch":
                q.enqueue_many([seed] * 20)
            elif op == "claim":
                jobs = q.claim_batch(f"w{seed}", 10)
                q.ack_batch(jobs)
            elif op == "tx":
                with store.transaction() as tx:
                    q.enqueue("tx", tx=tx)
                    stream.publish("tx", tx=tx)
            elif op == "publish":
                stream.publish(seed)
            elif op == "lock":
                lock = store.lock(f"l{rng.randrange(3)}", 1.0)
                if lock is not None:
                    lock.release()
            elif op == "notify":
                store.notify("contended", seed)
            else:
                q.stats()
                stream.read(0, 10)
            seen["ok"] += 1
        except _ALLOWED as exc:
            seen[type(exc).__name__] += 1
        except Exception as exc:  # the failure under test: report it by type
            seen[f"RAW {type(exc).__module__}.{type(exc).__name__}: {exc}"] += 1
    store.close()
    out.put(dict(seen))


def test_eight_processes_on_one_file_see_only_documented_errors(tmp_path: Path) -> None:
    path = str(tmp_path / "contended.db")
    SQLiteStore(path).close()
    out = SPAWN.Queue()
    procs = [SPAWN.Process(target=_contend, args=(path, 4.0, i, out)) for i in range(8)]
    for p in procs:
        p.start()
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
    total: Counter[str] = Counter()
    for r in results:
        total.update(r)
    raw = {k: v for k, v in total.items() if k.startswith(("RAW", "open:"))}
    assert raw == {}, f"raw driver errors escaped: {raw}"
    assert total["ok"] > 100, f"too little work got through: {dict(total)}"
    assert total["TransientError"] > 0, f"the processes never contended: {dict(total)}"
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()


# ------------------------------------------------ killed mid-transaction


def _write_and_hang(path: str, ready: Any, committed: Any) -> None:
    """Commit batches, report each, then open one more transaction, fill it
    and wait there to be killed."""
    store = SQLiteStore(path)
    q = store.queue("killed")
    for batch in range(5):
        q.enqueue_many([{"batch": batch, "n": n} for n in range(50)])
        committed.put(batch)
    with store.transaction() as tx:
        q.enqueue_many([{"batch": "doomed", "n": n} for n in range(500)], tx=tx)
        store.stream("killed").publish("doomed", tx=tx)
        tx.execute("CREATE TABLE app_rows (x)")
        tx.execute("INSERT INTO app_rows VALUES (1)")
        ready.set()
        time.sleep(60)


def _commit_forever(path: str, child: int, committed: Any) -> None:
    """Commit batches of 20 jobs as fast as possible, reporting each commit."""
    store = SQLiteStore(path)
    q = store.queue("killed")
    batch = 0
    while True:
        q.enqueue_many([{"child": child, "batch": batch, "n": n} for n in range(20)])
        committed.put(batch)
        batch += 1


def _batches(path: str) -> Counter[Any]:
    """How many jobs of each (child, batch) the queue holds."""
    with SQLiteStore(path) as store:
        q = store.queue("killed")
        jobs = []
        after = 0
        while page := q.list_jobs(alkstore.JobState.PENDING, limit=1000, after_id=after):
            jobs.extend(page)
            after = page[-1].id
        return Counter((j.payload.get("child", -1), j.payload["batch"]) for j in jobs)


def test_a_process_killed_inside_a_transaction_leaves_nothing_half_written(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "killed.db")
    SQLiteStore(path).close()
    ready, committed = SPAWN.Event(), SPAWN.Queue()
    proc = SPAWN.Process(target=_write_and_hang, args=(path, ready, committed))
    proc.start()
    assert ready.wait(60), "the child never reached its open transaction"
    assert proc.pid is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(10)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    conn.close()
    assert "app_rows" not in tables
    assert _batches(path) == {(-1, b): 50 for b in range(5)}
    with SQLiteStore(path) as store:
        assert store.stream("killed").read() == []
        assert store.queue("killed").enqueue("after") > 0


def test_processes_killed_at_random_points_lose_only_uncommitted_batches(
    tmp_path: Path,
) -> None:
    import queue as stdlib_queue
    import random

    path = str(tmp_path / "killed.db")
    SQLiteStore(path).close()
    rng = random.Random(10)
    reported: set[tuple[int, int]] = set()
    for child in range(6):
        committed = SPAWN.Queue()
        proc = SPAWN.Process(target=_commit_forever, args=(path, child, committed))
        proc.start()
        reported.add((child, committed.get(timeout=60)))  # it is writing
        time.sleep(rng.uniform(0.05, 0.4))
        assert proc.pid is not None
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(10)
        while True:
            try:
                reported.add((child, committed.get(timeout=0.5)))
            except stdlib_queue.Empty:
                break
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        conn.close()
    found = _batches(path)
    assert all(n == 20 for n in found.values()), f"a half-written batch: {found}"
    assert reported <= set(found), "a batch reported committed was lost"
