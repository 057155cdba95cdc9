"""The SQLite engine's write queue: one per file per process (W-7), group
commit, and the refusal of writes beside an open transaction (E-5).

Commits are counted with a statement trace on the engine's connections: a
``COMMIT``, or a write run in autocommit, is one commit. Every caller's row
is looked for from a connection of the test's own the moment the call
returns, so "returns only after its own commit" is checked, not assumed.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

import alkstore
from alkstore import InvalidArgument, QueueOpts, TransientError
from alkstore_conformance._base import run_threads
from alkstore_sqlite import SQLiteStore, _conn

#: The busy timeout of these tests: every "at once" is far below it.
BUSY_S = 3.0
#: "At once": well under the busy timeout, generous for a loaded machine.
AT_ONCE_S = 1.0

_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


@dataclass
class CommitCounter:
    """Counts commits on the engine's connections from their statement trace."""

    commits: int = 0
    _in_tx: dict[int, bool] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def watch(self, conn: sqlite3.Connection) -> None:
        key = id(conn)

        def trace(sql: str) -> None:
            word = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
            with self._lock:
                if word == "BEGIN":
                    self._in_tx[key] = True
                elif word in ("COMMIT", "END"):
                    self._in_tx[key] = False
                    self.commits += 1
                elif word == "ROLLBACK" and "TO" not in sql.upper().split():
                    self._in_tx[key] = False
                elif word in _WRITES and not self._in_tx.get(key, False):
                    self.commits += 1  # autocommit: the statement is its own transaction

        conn.set_trace_callback(trace)


@pytest.fixture
def commits(monkeypatch: pytest.MonkeyPatch) -> CommitCounter:
    counter = CommitCounter()
    real_connect = _conn.connect

    def traced(path: str, busy: float, sync: str) -> sqlite3.Connection:
        conn = real_connect(path, busy, sync)
        counter.watch(conn)
        return conn

    monkeypatch.setattr(_conn, "connect", traced)
    return counter


@pytest.fixture
def stores(db_path: str) -> Iterator[Callable[..., SQLiteStore]]:
    """Opens stores on the test's file; closes them afterwards."""
    opened: list[SQLiteStore] = []

    def open_store(**opts: Any) -> SQLiteStore:
        store = SQLiteStore(db_path, **{"busy_timeout_s": BUSY_S, **opts})
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        store.close()


def committed(db_path: str) -> Callable[[int], bool]:
    """A probe on a connection of the caller's thread: is job *id* committed?"""
    local = threading.local()

    def probe(job_id: int) -> bool:
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = sqlite3.connect(db_path, isolation_level=None)
        row = conn.execute("SELECT 1 FROM __alkstore_jobs WHERE id = ?", (job_id,)).fetchone()
        return row is not None

    return probe


# ------------------------------------------------------------------ E-5


@pytest.mark.clause("E-5")
def test_writes_without_tx_beside_an_open_transaction_are_refused_at_once(
    stores: Callable[..., SQLiteStore],
) -> None:
    store = stores()
    q = store.queue("q", QueueOpts(visibility_timeout_s=60))
    q.enqueue("held")
    job = q.claim("w")
    assert job is not None
    calls: dict[str, Callable[[], object]] = {
        "enqueue": lambda: q.enqueue("x"),
        "enqueue_many": lambda: q.enqueue_many(["x", "y"]),
        "claim": lambda: q.claim("w"),
        "ack": lambda: job.ack(),
        "heartbeat": lambda: job.heartbeat(),
        "retry": lambda: job.retry("x", delay_s=60),
        "release": lambda: job.release(),
        "ack_each": lambda: store.ack_each([job]),
        "cancel": lambda: q.cancel(job.id),
        "sweep": lambda: q.sweep_expired(),
        "lock": lambda: store.lock("l", 10),
        "publish": lambda: store.stream("s").publish("e"),
        "notify": lambda: store.notify("ch", "n"),
        "rate limit": lambda: store.rate_limit("r", 10, 1).acquire(),
        "nested transaction": lambda: store.transaction().__enter__(),
    }
    with store.transaction() as tx:
        q.enqueue("joined", tx=tx)
        for what, call in calls.items():
            started = time.monotonic()
            with pytest.raises(InvalidArgument) as info:
                call()
            assert not isinstance(info.value, TransientError)
            assert time.monotonic() - started < AT_ONCE_S, f"{what} waited"
            assert "tx=" in str(info.value)
    # The transaction committed what joined it; the refused calls left nothing.
    assert q.stats().pending == 1
    assert q.stats().processing == 1
    assert job.ack() is True


@pytest.mark.clause("E-5", "W-7")
def test_write_through_another_store_on_the_file_is_refused_too(
    stores: Callable[..., SQLiteStore],
) -> None:
    first, second = stores(), stores()
    with first.transaction() as tx:
        first.queue("q").enqueue("in tx", tx=tx)
        started = time.monotonic()
        with pytest.raises(InvalidArgument):
            second.queue("q").enqueue("beside")
        with pytest.raises(InvalidArgument):
            second.transaction().__enter__()
        assert time.monotonic() - started < AT_ONCE_S
        # Joining the first store's transaction through the second store works.
        second.queue("q").enqueue("joined", tx=tx)
    assert second.queue("q").stats().pending == 2


@pytest.mark.clause("E-5", "W-7")
def test_another_threads_write_waits_for_the_transaction_instead(
    stores: Callable[..., SQLiteStore],
) -> None:
    store = stores()
    q = store.queue("q")
    done: list[float] = []

    def other_thread() -> None:
        q.enqueue("after the commit")
        done.append(time.monotonic())

    with store.transaction() as tx:
        q.enqueue("first", tx=tx)
        thread = threading.Thread(target=other_thread)
        thread.start()
        time.sleep(0.3)
        assert done == [], "a write of another thread went past the open transaction"
        committing = time.monotonic()
    thread.join(10)
    assert done and done[0] >= committing
    assert [i.payload for i in q.list_jobs(alkstore.JobState.PENDING)] == [
        "first",
        "after the commit",
    ]


@pytest.mark.clause("E-5", "A-4")
def test_task_holding_an_async_transaction_is_refused_at_once_others_wait(
    db_path: str,
) -> None:
    async def main() -> None:
        store = await alkstore.open_async(f"sqlite:///{db_path}", busy_timeout_s=BUSY_S)
        try:
            q = store.queue("q")
            job_id = await q.enqueue("held")
            job = await q.claim("w")
            assert job is not None and job.id == job_id
            order: list[str] = []
            go = asyncio.Event()

            async def other_task() -> None:
                await go.wait()
                await q.enqueue("other task")
                order.append("other task")

            # Started before the transaction: a task created inside it would
            # inherit the marker of the open transaction (a context variable)
            # and be refused like its parent.
            waiting = asyncio.ensure_future(other_task())
            await asyncio.sleep(0)
            async with store.transaction() as tx:
                await q.enqueue("joined", tx=tx)
                go.set()
                for call in (
                    lambda: q.enqueue("beside"),
                    lambda: q.claim("w"),
                    lambda: job.heartbeat(),
                    lambda: store.lock("l", 10),
                    lambda: q.sweep_expired(),
                ):
                    started = time.monotonic()
                    with pytest.raises(InvalidArgument):
                        await call()
                    assert time.monotonic() - started < AT_ONCE_S
                await asyncio.sleep(0.2)
                assert order == [], "another task's write went past the open transaction"
                order.append("commit")
            await asyncio.wait_for(waiting, 10)
            assert order == ["commit", "other task"]
            assert (await q.stats()).pending == 2
            assert await job.ack()
        finally:
            await store.close()

    asyncio.run(main())


# ------------------------------------------------------------------ W-7


@pytest.mark.clause("W-7", "ST-4")
@pytest.mark.parametrize("store_count", [1, 2])
def test_32_threads_all_write_within_the_busy_timeout_in_fewer_commits(
    stores: Callable[..., SQLiteStore],
    commits: CommitCounter,
    db_path: str,
    store_count: int,
) -> None:
    """32 threads (through one store, or 16 through each of two on one file)
    enqueue 25 jobs each, one call at a time: none waits out the busy
    timeout, each sees its job committed the moment the call returns, and
    the writes go out in fewer commits than there are writes."""
    per_thread = 25
    opened = [stores() for _ in range(store_count)]
    probe = committed(db_path)
    slowest: list[float] = []
    ids: list[int] = []
    lock = threading.Lock()

    def writer(store: SQLiteStore, n: int) -> Callable[[], None]:
        def run() -> None:
            q = store.queue("shared")
            for i in range(per_thread):
                started = time.monotonic()
                job_id = q.enqueue({"thread": n, "i": i})
                took = time.monotonic() - started
                assert probe(job_id), "the call returned before its write committed"
                with lock:
                    ids.append(job_id)
                    slowest.append(took)

        return run

    before = commits.commits
    opened[-1].queue("alone").enqueue("one write")
    assert commits.commits - before == 1, "the counter misses commits"
    before = commits.commits
    run_threads([writer(opened[n % store_count], n) for n in range(32)])
    writes = 32 * per_thread
    assert len(set(ids)) == writes
    assert max(slowest) < BUSY_S, f"a write waited {max(slowest):.2f} s"
    assert opened[0].queue("shared").stats().pending == writes
    made = commits.commits - before
    assert 0 < made < writes, f"{made} commits for {writes} writes: no group commit"


@pytest.mark.clause("W-7", "E-2")
def test_writer_behind_another_threads_transaction_waits_then_gets_transient_error(
    stores: Callable[..., SQLiteStore],
) -> None:
    busy = 0.5
    store = stores(busy_timeout_s=busy)
    other = stores(busy_timeout_s=busy)  # a second store on the file: the same queue
    q = store.queue("q")
    holding, release = threading.Event(), threading.Event()

    def hold(seconds_before_release: float | None) -> None:
        with store.transaction() as tx:
            q.enqueue("holder", tx=tx)
            holding.set()
            release.wait(seconds_before_release)

    # Held shorter than the busy timeout: the waiter waits, then succeeds.
    holder = threading.Thread(target=hold, args=(0.2,))
    holder.start()
    assert holding.wait(10)
    started = time.monotonic()
    assert other.queue("q").enqueue("waited") > 0
    waited = time.monotonic() - started
    holder.join(10)
    assert 0.1 <= waited < busy + AT_ONCE_S
    # Held past it: TransientError, only once the busy timeout is over.
    holding.clear()
    holder = threading.Thread(target=hold, args=(10,))
    holder.start()
    try:
        assert holding.wait(10)
        for writer in (store, other):
            started = time.monotonic()
            with pytest.raises(TransientError):
                writer.queue("q").enqueue("too late")
            waited = time.monotonic() - started
            assert busy * 0.9 <= waited < busy + AT_ONCE_S, f"gave up after {waited:.2f} s"
    finally:
        release.set()
        holder.join(10)
    assert q.stats().pending == 3


@pytest.mark.clause("W-7")
def test_a_failing_write_in_a_group_leaves_the_others_whole(
    stores: Callable[..., SQLiteStore], db_path: str
) -> None:
    """Writes grouped into one commit are each atomic on their own (C-6):
    bounded enqueues that find the queue full fail alone."""
    store = stores()
    bounded = store.queue("bounded", QueueOpts(max_depth=8))
    free = store.queue("free")
    probe = committed(db_path)
    outcomes: list[str] = []
    lock = threading.Lock()

    def writer(n: int) -> Callable[[], None]:
        def run() -> None:
            for i in range(10):
                try:
                    job_id = bounded.enqueue({"n": n, "i": i})
                    assert probe(job_id)
                    result = "bounded"
                except alkstore.QueueFull:
                    result = "full"
                assert probe(free.enqueue({"n": n, "i": i}))
                with lock:
                    outcomes.append(result)

        return run

    run_threads([writer(n) for n in range(16)])
    assert outcomes.count("bounded") == 8
    assert bounded.stats().pending == 8
    assert free.stats().pending == 160


def test_a_busy_follow_up_of_a_claim_returns_what_was_claimed(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim that took fewer jobs than asked tries the lower priority levels
    in a second write. The first write's claims are committed; when the
    second finds the database busy, the caller gets them rather than an error
    (else they would wait out their visibility timeout unseen)."""
    from alkstore_sqlite._queues import QueueOps

    q = store.queue("followup", QueueOpts(visibility_timeout_s=60))
    ids = q.enqueue_many([{"n": i} for i in range(3)])
    plain_claim = QueueOps.claim

    def busy_when_full(self: QueueOps, *args: Any, full: bool = False, **kw: Any) -> Any:
        if full:
            raise TransientError("SQLite is busy: database is locked")
        return plain_claim(self, *args, full=full, **kw)

    monkeypatch.setattr(QueueOps, "claim", busy_when_full)
    jobs = q.claim_batch("w", 10)
    assert sorted(j.id for j in jobs) == sorted(ids)
    assert q.stats().processing == 3
    monkeypatch.setattr(QueueOps, "claim", plain_claim)
    assert q.ack_batch(jobs) == 3
    # With nothing claimed first, the busy error is the caller's to retry (E-2).
    monkeypatch.setattr(QueueOps, "claim", busy_when_full)
    with pytest.raises(TransientError):
        q.claim_batch("w", 10)


def test_a_busy_dead_lettering_of_an_undecodable_row_keeps_the_good_claims(
    store: SQLiteStore, db_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claimed row whose payload does not decode is dead-lettered by a
    write of its own (C-3). When that write finds the database busy, the rows
    that did decode are still handed out, sync and async; the bad row's claim
    lapses for a later claim to deal with."""
    from alkstore_sqlite._queues import QueueOps

    q = store.queue("poisoned", QueueOpts(visibility_timeout_s=60))

    def plant(*payloads: str) -> list[int]:
        """Jobs of *payloads*; a payload "bad" is stored as text that does not decode."""
        ids = q.enqueue_many(list(payloads))
        raw = sqlite3.connect(db_path, isolation_level=None)
        try:
            for job_id, payload in zip(ids, payloads, strict=True):
                if payload == "bad":
                    raw.execute(
                        "UPDATE __alkstore_jobs SET payload = '{not json' WHERE id = ?", (job_id,)
                    )
        finally:
            raw.close()
        return ids

    def busy(*args: Any, **kw: Any) -> bool:
        raise TransientError("SQLite is busy: database is locked")

    # The executor binds its operations when it is built: the open store's
    # executor is patched, and the class for the stores opened below.
    monkeypatch.setattr(QueueOps, "fail", busy)
    monkeypatch.setattr(store._sqlite, "fail", busy)
    good_id, _ = plant("good", "bad")
    assert [j.id for j in q.claim_batch("w", 10)] == [good_id]
    assert q.stats().processing == 2  # the bad row is still claimed, not lost

    async def claim_async() -> list[int]:
        async with await alkstore.open_async(f"sqlite:///{db_path}") as astore:
            return [j.id for j in await astore.queue("poisoned").claim_batch("w", 10)]

    good_id, _ = plant("good", "bad")
    assert asyncio.run(claim_async()) == [good_id]
    # Nothing decodable claimed: the busy error is the caller's to retry (E-2).
    plant("bad")
    with pytest.raises(TransientError):
        q.claim_batch("w", 10)
