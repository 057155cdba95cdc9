"""The asyncio face (A-1..A-5), driven directly.

Every contract test of the suite also runs through the async API behind a
sync facade (A-1's parity, proven rule by rule). What the facade cannot
show is here, in tests that open ``alkstore.open_async`` themselves and run
their own event loop: that the async surface matches the sync one name for
name and parameter for parameter (A-1), that nothing blocks the loop (A-2),
the native handles ``tx=`` takes (A-3), cancellation (A-4), and the
``AsyncWorker`` (A-5). They speak the async API, so they run once, under
the suite's sync face (``sync_only``).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import inspect
import os
import random
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

import alkstore
from alkstore import (
    AsyncQueue,
    AsyncStore,
    AsyncWorker,
    Capability,
    EnqueueOpts,
    Fail,
    InvalidArgument,
    JobState,
    QueueOpts,
    Retry,
    Store,
    protocols,
)

from ._base import ContractBase, mark_each_test, unique
from ._factory import StoreFactory
from ._queue_helpers import LONG_S

__all__ = ["AsyncContract", "cancel_inside_a_transaction"]

T = TypeVar("T")

ASYNC_ONLY = pytest.mark.sync_only("drives the async API itself")

#: A-2: the largest pause a 1 ms ticker on the loop may see.
MAX_TICK_GAP_S = 0.020

#: The sync protocols and their async faces (A-1).
PROTOCOL_PAIRS: list[tuple[type, type]] = [
    (protocols.Store, protocols.AsyncStore),
    (protocols.Queue, protocols.AsyncQueue),
    (protocols.Job, protocols.AsyncJob),
    (protocols.Outbox, protocols.AsyncOutbox),
    (protocols.Stream, protocols.AsyncStream),
    (protocols.Lock, protocols.AsyncLock),
    (protocols.Listener, protocols.AsyncListener),
    (protocols.RateLimit, protocols.AsyncRateLimit),
    (protocols.Tx, protocols.AsyncTx),
    (protocols.CursorLike, protocols.AsyncCursorLike),
]
#: Which protocols the objects of the A-1 object test implement.
OBJECT_PROTOCOLS: dict[str, tuple[type, type]] = {
    "store": (protocols.Store, protocols.AsyncStore),
    "queue": (protocols.Queue, protocols.AsyncQueue),
    "job": (protocols.Job, protocols.AsyncJob),
    "outbox": (protocols.Outbox, protocols.AsyncOutbox),
    "stream": (protocols.Stream, protocols.AsyncStream),
    "lock": (protocols.Lock, protocols.AsyncLock),
    "listener": (protocols.Listener, protocols.AsyncListener),
    "rate_limit": (protocols.RateLimit, protocols.AsyncRateLimit),
    "tx": (protocols.Tx, protocols.AsyncTx),
}
#: Where Python demands another name: ``with`` -> ``async with``, ``for`` -> ``async for``.
ASYNC_NAME = {"__enter__": "__aenter__", "__exit__": "__aexit__", "__iter__": "__aiter__"}
#: Async methods that do no I/O and so are plain functions: handle factories,
#: ``should_stop`` (a flag) and ``__aiter__``.
NO_IO = frozenset(
    {"queue", "outbox", "stream", "rate_limit", "listen", "transaction", "should_stop", "__aiter__"}
)


def _handles(store: Store | AsyncStore, queue: object, job: object, name: str) -> dict[str, Any]:
    """*store*, its *queue* and claimed *job*, and the handles it gives out at
    once for *name*, by their keys in :data:`OBJECT_PROTOCOLS`."""
    return {
        "store": store,
        "queue": queue,
        "job": job,
        "outbox": store.outbox(name),
        "stream": store.stream(name),
        "rate_limit": store.rate_limit(name, 10, 1),
    }


def _surface(cls: type) -> dict[str, Any]:
    """The public members of *cls* (a protocol or an object's class): methods,
    properties, and the context-manager and iterator dunders."""
    members: dict[str, Any] = {}
    for name in dir(cls):
        if name.startswith("_") and name not in (*ASYNC_NAME, *ASYNC_NAME.values()):
            continue
        members[name] = inspect.getattr_static(cls, name)
    return members


def _params(fn: Any) -> list[tuple[str, Any, Any]]:
    """Parameter names, kinds and defaults (annotations differ by design:
    ``asyncio.Event`` for ``threading.Event``, async handles for sync ones)."""
    if isinstance(fn, (staticmethod, classmethod)):
        fn = fn.__func__
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


def _compare(
    reference: type,
    candidate: type,
    *,
    to_async: bool,
    names: frozenset[str] | None = None,
    instance: object = None,
) -> list[str]:
    """What *candidate* lacks or spells differently from *reference* (only
    *names*, when given: the contract's operations, not an engine's extras).

    *to_async*: *reference* is a sync face and *candidate* an async one, so
    ``__enter__`` is ``__aenter__`` there and every operation doing I/O must
    be a coroutine function; otherwise both are the same face and each
    operation is a coroutine function on both or on neither. A property of
    *reference* may be a plain attribute of *instance* (an object of
    *candidate*)."""
    problems: list[str] = []
    theirs = _surface(candidate)
    for name, member in _surface(reference).items():
        if names is not None and name not in names:
            continue
        if to_async and name in ASYNC_NAME.values():
            continue
        twin_name = ASYNC_NAME.get(name, name) if to_async else name
        where = f"{candidate.__name__}.{twin_name}"
        if isinstance(member, property):
            twin = theirs.get(twin_name)
            if isinstance(twin, property) or (
                instance is not None and hasattr(instance, twin_name) and not callable(twin)
            ):
                continue
            problems.append(f"{where} is not a property or attribute")
            continue
        if twin_name not in theirs:
            problems.append(f"{where} is missing")
            continue
        twin = theirs[twin_name]
        if not callable(member) and not isinstance(member, (staticmethod, classmethod)):
            continue
        if not callable(twin) and not isinstance(twin, (staticmethod, classmethod)):
            problems.append(f"{where} is not callable")
            continue
        dunder = name in ASYNC_NAME or name in ASYNC_NAME.values()
        if not dunder and _params(member) != _params(twin):
            problems.append(f"{where}{inspect.signature(twin)} != {inspect.signature(member)}")
        if dunder:
            continue
        is_coroutine = inspect.iscoroutinefunction(twin)
        if to_async and name not in NO_IO and not is_coroutine:
            problems.append(f"{where} does I/O but is not a coroutine function")
        if not to_async and is_coroutine != inspect.iscoroutinefunction(member):
            problems.append(f"{where}: coroutine function or not, unlike {reference.__name__}")
    return problems


async def cancel_inside_a_transaction(store: AsyncStore, q: AsyncQueue, payload: Any) -> None:
    """Run a task that enqueues *payload* on *q* in a transaction of *store*
    and then waits inside it; cancel the task there and check that it ends
    cancelled. What the transaction leaves behind is the caller's to check
    (A-4: nothing)."""
    inside = asyncio.Event()

    async def work() -> None:
        async with store.transaction() as tx:
            await q.enqueue(payload, tx=tx)
            inside.set()
            await asyncio.sleep(30)

    task = asyncio.ensure_future(work())
    await asyncio.wait_for(inside.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def run_async(factory: StoreFactory, body: Callable[[AsyncStore], Awaitable[T]]) -> T:
    """``body(store)`` on a fresh event loop with an async store on the
    test's database, closed afterwards."""

    async def main() -> T:
        store = await alkstore.open_async(factory.url, **factory.opts)
        try:
            return await body(store)
        finally:
            await store.close()

    return asyncio.run(main())


def _cpu_waits() -> dict[str, int]:
    """Nanoseconds each thread of this process has spent ready to run but
    without a CPU (Linux's ``schedstat``); empty where the kernel does not
    say."""
    waits: dict[str, int] = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return waits
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/schedstat", "rb") as f:
                waits[tid] = int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return waits


def _machine_share(before: dict[str, int], after: dict[str, int], loop_tid: str) -> float:
    """What of a pause the machine caused, not the store: the time the loop's
    thread waited for a CPU, plus the longest such wait of another thread
    (one holding the GIL the loop needs), in seconds."""
    loop = after.get(loop_tid, 0) - before.get(loop_tid, 0)
    others = [after[t] - before[t] for t in after if t != loop_tid and t in before]
    return (loop + max(others, default=0)) / 1e9


class Ticker:
    """A task that sleeps 1 ms at a time and keeps the longest pause it saw (A-2).

    A pause counts what the store cost the loop: the wall time of a tick less
    the time the process's threads were ready to run and had no CPU, since
    that is another process's doing on a busy machine (CI runs many). A call
    that blocks the loop counts in full, whether it sleeps or runs, and so
    does a thread that keeps the GIL while it runs."""

    def __init__(self) -> None:
        self.longest = 0.0
        self.ticks = 0
        self._task: asyncio.Task[None] | None = None
        self._gc_was_enabled = True

    async def _run(self) -> None:
        loop_tid = str(threading.get_native_id())
        while True:
            waits = _cpu_waits()
            before = time.perf_counter()
            await asyncio.sleep(0.001)
            wall = time.perf_counter() - before
            pause = max(0.0, wall - _machine_share(waits, _cpu_waits(), loop_tid))
            self.longest = max(self.longest, pause)
            self.ticks += 1

    async def __aenter__(self) -> Ticker:
        # A full collection of the cyclic garbage collector stops every thread
        # for as long as it runs, whatever the store does; measured with it
        # on, a test would time the collector (10-20 ms after big payloads).
        gc.collect()
        self._gc_was_enabled = gc.isenabled()
        gc.disable()
        self._task = asyncio.ensure_future(self._run())
        await asyncio.sleep(0.01)
        self.longest = 0.0  # the first ticks pay for starting the task
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        if self._gc_was_enabled:
            gc.enable()


async def idle_pause(seconds: float = 0.3) -> float:
    """The longest pause the ticker sees with nothing else on the loop: what
    the machine itself costs (another process on the CPU, the scheduler)."""
    async with Ticker() as ticker:
        await asyncio.sleep(seconds)
    return ticker.longest


def assert_loop_kept_ticking(measure: Callable[[], tuple[float, float]], runs: int = 3) -> None:
    """A-2: *measure* returns the longest pause of the loop's ticker while the
    store works, and while it idles just before (:func:`idle_pause`). The
    store may add less than the bound to what the idle loop sees, in one of
    *runs* runs: a blocking call stalls every run, a busy machine's scheduler
    only now and then."""
    seen: list[tuple[float, float]] = []
    for _ in range(runs):
        working, idle = measure()
        seen.append((working, idle))
        if working < MAX_TICK_GAP_S + idle:
            return
    shown = ", ".join(f"{w * 1000:.1f} (idle {i * 1000:.1f})" for w, i in seen)
    pytest.fail(f"the event loop stalled in every run: longest pauses {shown} ms")


@mark_each_test(pytest.mark.requires(Capability.QUEUES, Capability.ASYNC), ASYNC_ONLY)
class AsyncContract(ContractBase):
    """The asyncio face (A-1..A-5), driven directly."""

    # -----------------------------------------------------------------

    @pytest.mark.clause("A-1")
    def test_async_protocols_offer_every_sync_operation_with_the_same_parameters(self) -> None:
        problems = [p for sync, aio in PROTOCOL_PAIRS for p in _compare(sync, aio, to_async=True)]
        assert problems == [], "\n".join(problems)

    @pytest.mark.clause("A-1")
    @pytest.mark.requires(
        Capability.OUTBOX,
        Capability.STREAMS,
        Capability.LOCKS,
        Capability.NOTIFICATIONS,
        Capability.RATE_LIMITS,
    )
    def test_async_store_objects_offer_every_sync_operation_with_the_same_parameters(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """The engine's own objects, sync against async: the store and every
        handle it gives out."""
        name = unique()
        q = store.queue(name, QueueOpts(visibility_timeout_s=LONG_S))
        q.enqueue_many(["for sync", "for async"])
        sync_job = q.claim("w")
        assert sync_job is not None
        sync_objects = _handles(store, q, sync_job, name)
        sync_lock = store.lock(unique("lock"), 60)
        assert sync_lock is not None
        sync_objects["lock"] = sync_lock
        with store.listen(name) as sync_listener, store.transaction() as sync_tx:
            sync_objects["listener"] = sync_listener
            sync_objects["tx"] = sync_tx

        async def gather(astore: AsyncStore) -> dict[str, Any]:
            aq = astore.queue(name)
            job = await aq.claim("w")
            assert job is not None
            found = _handles(astore, aq, job, name)
            lock = await astore.lock(unique("lock"), 60)
            assert lock is not None
            found["lock"] = lock
            async with astore.listen(name) as listener, astore.transaction() as tx:
                found["listener"] = listener
                found["tx"] = tx
            await job.ack()
            await lock.release()
            return found

        async_objects = run_async(store_factory, gather)
        assert sync_job.ack() and sync_lock.release()
        problems: list[str] = []
        for key, sync_obj in sync_objects.items():
            sync_protocol, async_protocol = OBJECT_PROTOCOLS[key]
            names = frozenset(_surface(sync_protocol))
            # The engine's objects match the protocols, and each other.
            sync_cls, async_cls = type(sync_obj), type(async_objects[key])
            problems += _compare(sync_protocol, sync_cls, to_async=False, instance=sync_obj)
            problems += _compare(
                async_protocol, async_cls, to_async=False, instance=async_objects[key]
            )
            problems += _compare(
                sync_cls, async_cls, to_async=True, names=names, instance=async_objects[key]
            )
        assert problems == [], "\n".join(problems)

    # -----------------------------------------------------------------

    @pytest.mark.clause("A-2", "Q-19", "N-2")
    @pytest.mark.requires(Capability.NOTIFICATIONS)
    @pytest.mark.alone
    def test_loop_keeps_ticking_while_claims_listeners_and_commits_wait(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        def one_run() -> tuple[float, float]:
            name = unique()
            held, release = threading.Event(), threading.Event()

            def hold_the_write_lock() -> None:
                # Another writer of the database holds a transaction open:
                # the async commit below has to wait for it.
                with store.transaction() as tx:
                    store.queue(unique()).enqueue("holding", tx=tx)
                    held.set()
                    release.wait(10)

            holder = threading.Thread(target=hold_the_write_lock, daemon=True)

            async def body(astore: AsyncStore) -> tuple[float, float]:
                q = astore.queue(name)
                idle = await idle_pause()
                async with Ticker() as ticker, astore.listen(name) as listener:
                    started = time.monotonic()
                    claimed, heard = await asyncio.gather(
                        q.claim("w", wait_s=0.5), listener.get(timeout_s=0.5)
                    )
                    waited = time.monotonic() - started
                    holder.start()
                    assert await asyncio.to_thread(held.wait, 10)
                    asyncio.get_running_loop().call_later(0.3, release.set)
                    async with astore.transaction() as tx:  # waits for the holder
                        await q.enqueue("after the wait", tx=tx)
                        await astore.notify(name, "committed", tx=tx)
                    note = await listener.get(timeout_s=5)
                    job = await q.claim("w", wait_s=5)
                    ticks = ticker.ticks
                assert claimed is None and heard is None and waited >= 0.45
                assert note is not None and note.payload == "committed"
                assert job is not None and job.payload == "after the wait"
                assert await job.ack()
                assert ticks > 100
                return ticker.longest, idle

            try:
                return run_async(store_factory, body)
            finally:
                release.set()
                holder.join(10)

        assert_loop_kept_ticking(one_run)

    @pytest.mark.clause("A-2", "C-3")
    @pytest.mark.alone
    def test_loop_keeps_ticking_while_a_large_payload_is_enqueued_and_claimed(
        self, store_factory: StoreFactory
    ) -> None:
        # About 1 MiB of JSON in records, as an application would send it.
        payload = {"rows": [{"i": i, "text": "t" * 110} for i in range(8_000)]}

        async def body(astore: AsyncStore) -> tuple[float, float]:
            q = astore.queue(unique())
            idle = await idle_pause()
            async with Ticker() as ticker:
                job_id = await q.enqueue(payload)
                ids = await q.enqueue_many([payload, payload])
                job = await q.claim("w")
                rest = await q.claim_batch("w", 2)
                info = await q.get_job(ids[0])
                acked = await astore.ack_each([j for j in (job, *rest) if j is not None])
            assert job is not None and job.id == job_id
            assert [j.id for j in rest] == ids
            assert job.payload == payload and rest[1].payload == payload
            assert info is not None and info.payload == payload
            assert acked == [True, True, True]
            return ticker.longest, idle

        assert_loop_kept_ticking(lambda: run_async(store_factory, body))

    # -----------------------------------------------------------------

    @pytest.mark.clause("A-3", "T-1", "T-2")
    def test_tx_takes_the_async_stores_transaction(self, store_factory: StoreFactory) -> None:
        class Rollback(Exception):
            pass

        async def body(astore: AsyncStore) -> None:
            q = astore.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
            claimed_id = await q.enqueue("to ack")
            job = await q.claim("w")
            assert job is not None
            try:
                async with astore.transaction() as tx:
                    await q.enqueue("rolled back", tx=tx)
                    assert await job.ack(tx=tx)
                    await tx.execute("SELECT 1")
                    raise Rollback
            except Rollback:
                pass
            assert (await q.stats()).pending == 0
            info = await q.get_job(claimed_id)
            assert info is not None and info.state is JobState.PROCESSING
            async with astore.transaction() as tx:
                kept = await q.enqueue("committed", tx=tx)
                assert await astore.ack_each([job], tx=tx) == [True]
                cursor = await tx.execute("SELECT 1")
                assert cursor is not None
            assert await q.get_job(claimed_id) is None
            info = await q.get_job(kept)
            assert info is not None and info.payload == "committed"

        run_async(store_factory, body)

    @pytest.mark.clause("A-3", "T-2")
    def test_tx_takes_the_drivers_async_connection(self, store_factory: StoreFactory) -> None:
        """PostgreSQL: a ``psycopg.AsyncConnection``; SQLite: an
        ``aiosqlite.Connection`` (when that package is installed)."""
        if store_factory.scheme in ("postgresql", "postgres"):
            run_async(store_factory, _with_psycopg_async_connection)
        elif store_factory.scheme == "sqlite":
            pytest.importorskip("aiosqlite", reason="aiosqlite is not installed")
            run_async(store_factory, _with_aiosqlite_connection)
        else:
            pytest.skip(f"no native async driver known for {store_factory.scheme!r}")

    # -----------------------------------------------------------------

    @pytest.mark.clause("A-4", "Q-26", "Q-5")
    def test_claims_cancelled_at_random_moments_leave_no_job_claimed(
        self, store_factory: StoreFactory
    ) -> None:
        """A thousand claims, each cancelled after a random few hundred
        microseconds (before it starts, while its statement runs, after it
        committed, while it waits for a wake). What a cancelled claim took is
        given back; afterwards every job is pending with no attempt spent."""
        rounds = 1000
        rng = random.Random(20261201)

        async def body(astore: AsyncStore) -> tuple[int, int, list[Any]]:
            q = astore.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S, max_attempts=1))
            ids = await q.enqueue_many(list(range(50)))
            cancelled = returned = 0
            for i in range(rounds):
                n = 1 + i % 3
                wait = 0 if i % 4 else 5
                task = asyncio.ensure_future(q.claim_batch(f"w{i}", n, wait_s=wait))
                # Every 25th claim has time to finish (behind a pooler none
                # of the others may): those are given back by the caller.
                pause = rng.choice([0, 0, 0.0002, 0.0005, 0.001, 0.002]) if i % 25 else 0.05
                await asyncio.sleep(pause)
                task.cancel()
                try:
                    jobs = await task
                except asyncio.CancelledError:
                    cancelled += 1
                    continue
                returned += 1
                # The claim finished before the cancel reached it: ours to give back.
                for job in jobs:
                    assert await job.release()

            async def all_given_back() -> bool:
                # A claim cancelled while its statement ran commits after the
                # cancel, and its jobs are released once it did: give the
                # last statements a moment to end before looking.
                await asyncio.sleep(0.3)
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    stats = await q.stats()
                    if stats.processing == 0 and stats.pending == len(ids):
                        return True
                    await asyncio.sleep(0.02)
                return False

            assert await all_given_back(), "a cancelled claim kept its job"
            infos = [await q.get_job(i) for i in ids]
            # Every claim of a budget of one was given back: all claimable still.
            again = await q.claim_batch("final", 100)
            assert sorted(j.id for j in again) == sorted(ids)
            assert await astore.ack_each(again) == [True] * len(ids)
            return cancelled, returned, infos

        cancelled, returned, infos = run_async(store_factory, body)
        assert cancelled > 100 and returned > 0, (cancelled, returned)
        for info in infos:
            assert info is not None
            assert (info.state, info.attempts) == (JobState.PENDING, 0), info

    @pytest.mark.clause("A-4", "T-1", "C-6")
    def test_task_cancelled_inside_a_transaction_rolls_it_back(
        self, store_factory: StoreFactory
    ) -> None:
        async def body(astore: AsyncStore) -> None:
            q = astore.queue(unique())
            await cancel_inside_a_transaction(astore, q, "never")
            assert (await q.stats()).pending == 0
            # The transaction ended: writing needs no wait for it.
            started = time.monotonic()
            await q.enqueue("after", opts=EnqueueOpts(priority=1))
            assert time.monotonic() - started < 2.0
            assert (await q.stats()).pending == 1

        run_async(store_factory, body)

    @pytest.mark.clause("A-4", "T-1", "C-6")
    def test_transactions_cancelled_at_random_moments_land_whole_or_not_at_all(
        self, store_factory: StoreFactory
    ) -> None:
        """Transactions of two enqueues, cancelled at random moments (opening,
        inside, committing): each lands whole or not at all, a task cancelled
        before its block ended leaves nothing, and the store is never left
        holding a transaction."""
        rounds = 200
        rng = random.Random(7)

        async def body(astore: AsyncStore) -> None:
            q = astore.queue(unique())
            body_done: set[int] = set()
            cancelled_early: list[int] = []

            async def work(i: int) -> None:
                async with astore.transaction() as tx:
                    await q.enqueue(i, tx=tx)
                    await q.enqueue(i, tx=tx)
                    body_done.add(i)

            for i in range(rounds):
                task = asyncio.ensure_future(work(i))
                await asyncio.sleep(rng.choice([0, 0.0002, 0.0005, 0.001, 0.002, 0.004]))
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    if i not in body_done:
                        cancelled_early.append(i)
            rows = await q.list_jobs(JobState.PENDING, limit=1000)
            per_round: dict[int, int] = {}
            for info in rows:
                per_round[info.payload] = per_round.get(info.payload, 0) + 1
            assert set(per_round.values()) <= {2}, "a transaction landed in part"
            assert not set(cancelled_early) & set(per_round), "a cancelled transaction committed"
            assert set(per_round) <= body_done
            assert cancelled_early, "no cancellation landed inside a transaction"
            started = time.monotonic()
            await q.enqueue("after")
            assert time.monotonic() - started < 2.0, "a cancelled transaction kept the lock"

        run_async(store_factory, body)

    # -----------------------------------------------------------------

    @pytest.mark.clause("A-5", "W-1")
    def test_async_worker_follows_the_handler_outcomes(self, store_factory: StoreFactory) -> None:
        async def body(astore: AsyncStore) -> None:
            q = astore.queue(unique(), QueueOpts(max_attempts=2, backoff_base_s=100))
            ok, later, failed, broken = await q.enqueue_many(["ok", "later", "fail", "boom"])
            last = await q.enqueue("boom", EnqueueOpts(max_attempts=1))

            async def handler(job: Any) -> None:
                await asyncio.sleep(0.01)
                if job.payload == "later":
                    raise Retry(delay_s=60)
                if job.payload == "fail":
                    raise Fail("refused")
                if job.payload == "boom":
                    raise ValueError("kaput")

            assert await AsyncWorker(astore, q, handler, concurrency=2).run_until_empty() == 5
            assert await q.get_job(ok) is None
            for job_id in (later, broken):
                info = await q.get_job(job_id)
                assert info is not None and (info.state, info.attempts) == (JobState.PENDING, 1)
            info = await q.get_job(failed)
            assert info is not None and (info.state, info.last_error) == (JobState.DEAD, "refused")
            info = await q.get_job(last)
            assert info is not None
            assert (info.state, info.last_error) == (JobState.DEAD, "ValueError: kaput")

        run_async(store_factory, body)

    @pytest.mark.clause("A-5", "W-8")
    def test_async_worker_concurrency_counts_tasks_on_the_callers_loop(
        self, store_factory: StoreFactory
    ) -> None:
        async def body(astore: AsyncStore) -> None:
            q = astore.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
            await q.enqueue_many(list(range(12)))
            loop = asyncio.get_running_loop()
            running_now = most = 0
            loops: set[int] = set()

            async def handler(job: Any) -> None:
                nonlocal running_now, most
                loops.add(id(asyncio.get_running_loop()))
                running_now += 1
                most = max(most, running_now)
                await asyncio.sleep(0.05)
                running_now -= 1

            assert await AsyncWorker(astore, q, handler, concurrency=4).run_until_empty() == 12
            assert loops == {id(loop)}, "a handler ran on another loop than the caller's"
            assert 2 <= most <= 4, f"{most} handler tasks at once with concurrency 4"
            assert (await q.stats()).pending == 0

        run_async(store_factory, body)

    @pytest.mark.clause("A-5", "A-2")
    def test_async_worker_runs_plain_handlers_in_threads(self, store_factory: StoreFactory) -> None:
        handler_s = 0.5

        async def body(astore: AsyncStore) -> float:
            q = astore.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
            await q.enqueue_many(list(range(6)))
            loop_thread = threading.get_ident()
            threads: set[int] = set()
            running_now = most = 0
            lock = threading.Lock()

            def handler(job: Any) -> None:
                nonlocal running_now, most
                with lock:
                    threads.add(threading.get_ident())
                    running_now += 1
                    most = max(most, running_now)
                time.sleep(handler_s)  # blocks its thread, never the loop
                with lock:
                    running_now -= 1

            async with Ticker() as ticker:
                worker = AsyncWorker(astore, q, handler, concurrency=3)
                assert await worker.run_until_empty() == 6
            assert loop_thread not in threads
            assert 2 <= most <= 3
            assert len(threads) <= 3
            assert (await q.stats()).pending == 0
            return ticker.longest

        longest = run_async(store_factory, body)
        # A handler run on the loop would pause it for all of handler_s; the
        # bound leaves a loaded machine room to deschedule the process.
        assert longest < handler_s * 0.8, f"a handler blocked the loop for {longest * 1000:.0f} ms"

    @pytest.mark.clause("A-5", "W-11")
    def test_async_worker_timeout_cancels_the_handler_task(
        self, store_factory: StoreFactory
    ) -> None:
        async def body(astore: AsyncStore) -> None:
            q = astore.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S, max_attempts=1))
            job_id = await q.enqueue("slow")
            cancelled = asyncio.Event()
            saw_stop: list[bool] = []

            async def handler(job: Any) -> None:
                try:
                    await asyncio.sleep(30)
                except asyncio.CancelledError:
                    saw_stop.append(job.should_stop())
                    cancelled.set()
                    raise

            started = time.monotonic()
            worker = AsyncWorker(astore, q, handler, timeout_s=0.3)
            assert await worker.run_until_empty() == 1
            assert cancelled.is_set()
            assert saw_stop == [True]
            assert time.monotonic() - started < 10
            info = await q.get_job(job_id)
            assert info is not None
            assert (info.state, info.last_error) == (JobState.DEAD, "timeout after 0.3 s")

        run_async(store_factory, body)

    @pytest.mark.clause("A-5", "W-3", "W-12")
    def test_async_worker_stops_gracefully(self, store_factory: StoreFactory) -> None:
        async def body(astore: AsyncStore) -> None:
            q = astore.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
            ids = await q.enqueue_many(list(range(5)))
            started = asyncio.Event()
            noticed: list[float] = []

            async def handler(job: Any) -> None:
                started.set()
                while not job.should_stop():
                    await asyncio.sleep(0.005)
                noticed.append(time.monotonic())

            stop = asyncio.Event()
            worker = AsyncWorker(astore, q, handler, concurrency=1, claim_wait_s=5.0)
            run = asyncio.ensure_future(worker.run(stop))
            await asyncio.wait_for(started.wait(), 10)
            stopped = time.monotonic()
            stop.set()
            await asyncio.wait_for(run, 20)
            assert len(noticed) == 1 and noticed[0] - stopped < 1.0
            infos = [await q.get_job(i) for i in ids]
            assert infos[0] is None, "the running handler's job was not acked"
            for info in infos[1:]:
                assert info is not None
                assert (info.state, info.attempts) == (JobState.PENDING, 0), info
            assert (await q.stats()).processing == 0

        run_async(store_factory, body)

    @pytest.mark.clause("A-5", "W-10")
    def test_async_worker_over_several_queues_serves_them_in_strict_order(
        self, store_factory: StoreFactory
    ) -> None:
        async def body(astore: AsyncStore) -> None:
            a = astore.queue(unique("a"))
            b = astore.queue(unique("b"))
            await b.enqueue_many(["b1", "b2"])
            await a.enqueue_many(["a1", "a2"])
            handled: list[Any] = []

            async def handler(job: Any) -> None:
                handled.append(job.payload)
                if job.payload == "b1":
                    await a.enqueue("a-late")

            worker = AsyncWorker(astore, [a.name, b], handler, concurrency=1)
            assert await worker.run_until_empty() == 5
            assert handled == ["a1", "a2", "b1", "a-late", "b2"]

        run_async(store_factory, body)

    @pytest.mark.clause("A-5", "W-8", "Q-20")
    @pytest.mark.requires(Capability.OUTBOX)
    def test_async_worker_and_outbox_refuse_a_handler_that_is_not_callable(
        self, store_factory: StoreFactory
    ) -> None:
        async def body(astore: AsyncStore) -> None:
            q = astore.queue(unique())
            job_id = await q.enqueue("x")
            box = astore.outbox(unique("box"))
            message = await box.put("m")
            for bad in (None, 42, "handler"):
                with pytest.raises(InvalidArgument):
                    AsyncWorker(astore, q, bad)  # type: ignore[arg-type]
                with pytest.raises(InvalidArgument):
                    await box.run(bad)  # type: ignore[arg-type]
            info = await q.get_job(job_id)
            assert info is not None and info.attempts == 0
            info = await box.queue.get_job(message)
            assert info is not None and info.attempts == 0

        run_async(store_factory, body)


# ------------------------------------------------------------------ A-3 drivers


async def _with_psycopg_async_connection(astore: AsyncStore) -> None:
    psycopg = pytest.importorskip("psycopg")
    dsn = getattr(astore, "dsn", None)
    if not isinstance(dsn, str):
        pytest.skip("the async store shows no libpq DSN (store.dsn) to connect with")
    q = astore.queue(unique())
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        # Not in autocommit: the enqueue joins the connection's transaction.
        await q.enqueue("rolled back", tx=conn)
        await conn.rollback()
        kept = await q.enqueue("committed", tx=conn)
        await conn.commit()
        # Inside a transaction block.
        async with conn.transaction():
            also = await q.enqueue("in a block", tx=conn)
    assert (await q.stats()).pending == 2
    for job_id in (kept, also):
        assert await q.get_job(job_id) is not None


async def _with_aiosqlite_connection(astore: AsyncStore) -> None:
    import aiosqlite  # type: ignore[import-not-found, unused-ignore]

    path = getattr(astore, "path", None) or astore.url.partition("sqlite:///")[2].split("?")[0]
    q = astore.queue(unique())
    async with aiosqlite.connect(path) as conn:
        await q.enqueue("rolled back", tx=conn)
        await conn.rollback()
        kept = await q.enqueue("committed", tx=conn)
        await conn.commit()
    assert (await q.stats()).pending == 1
    info = await q.get_job(kept)
    assert info is not None and info.payload == "committed"
