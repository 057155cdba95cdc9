"""Producer group commit (docs/adr/0008): plain enqueues without ``tx=`` that
arrive while another runs share the next statement and commit, on the sync
store's threads and on the async store's tasks. Each caller gets its own
ids, only after the commit that holds them; a failed combined statement
fails each of its callers and writes none of their rows; a cancelled task
whose request was not taken yet writes nothing."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest

import alkstore
from alkstore import QueueOpts, TransientError
from alkstore.engine import Inserted, NewJob
from alkstore_postgres import AsyncPostgresStore, PostgresStore


def run(make: Callable[[AsyncPostgresStore], Awaitable[None]], url: str, **opts: Any) -> None:
    """Open the async store, run *make* with it on a fresh loop, close it."""

    async def main() -> None:
        store = await alkstore.open_async(url, **opts)
        assert isinstance(store, AsyncPostgresStore)
        try:
            await make(store)
        finally:
            await store.close()

    asyncio.run(main())


class _SlowFirst:
    """Wraps a combiner's single-request call: the first one waits until
    *release* is set, so that the callers behind it queue up."""

    def __init__(self, inner: Callable[..., Any], release: threading.Event) -> None:
        self.inner = inner
        self.release = release
        self.calls = 0

    def __call__(self, queue: str, jobs: Sequence[NewJob]) -> Any:
        self.calls += 1
        if self.calls == 1:
            assert self.release.wait(10)
        return self.inner(queue, jobs)


def test_threads_arriving_during_an_enqueue_share_the_next_commit(store: PostgresStore) -> None:
    combiner = store.executor._combiner  # type: ignore[attr-defined]
    release = threading.Event()
    combiner._single = _SlowFirst(combiner._single, release)
    batches: list[int] = []
    many = combiner._many

    def counting(requests: Sequence[tuple[str, Sequence[NewJob]]]) -> list[int]:
        batches.append(len(requests))
        return many(requests)  # type: ignore[no-any-return]

    combiner._many = counting
    q = store.queue("c")
    ids: dict[int, list[int]] = {}

    def produce(i: int) -> None:
        ids[i] = [q.enqueue({"producer": i}), *q.enqueue_many([{"producer": i}] * 2)]

    first = threading.Thread(target=produce, args=(0,))
    first.start()
    while combiner._single.calls == 0:
        time.sleep(0.001)
    others = [threading.Thread(target=produce, args=(i,)) for i in range(1, 16)]
    for t in others:
        t.start()
    deadline = time.monotonic() + 10
    while len(combiner._turns.waiting) < 15:
        assert time.monotonic() < deadline, "the producers did not queue up"
        time.sleep(0.001)
    release.set()
    for t in [first, *others]:
        t.join(10)
    # The fifteen that queued (and whatever came meanwhile) in one statement.
    assert batches and batches[0] >= 15, batches
    every = [i for got in ids.values() for i in got]
    assert len(every) == len(set(every)) == 48
    for i, got in ids.items():
        for job_id in got:
            info = q.get_job(job_id)
            assert info is not None and info.payload == {"producer": i}


def test_a_failed_combined_statement_fails_each_caller_and_writes_none(
    store: PostgresStore,
) -> None:
    combiner = store.executor._combiner  # type: ignore[attr-defined]
    release = threading.Event()
    combiner._single = _SlowFirst(combiner._single, release)

    def broken(requests: Sequence[tuple[str, Sequence[NewJob]]]) -> list[int]:
        raise TransientError("the database went away")

    combiner._many = broken
    q = store.queue("c")
    outcomes: dict[int, object] = {}

    def produce(i: int) -> None:
        try:
            outcomes[i] = q.enqueue(i)
        except TransientError as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=produce, args=(i,)) for i in range(4)]
    threads[0].start()
    while combiner._single.calls == 0:
        time.sleep(0.001)
    for t in threads[1:]:
        t.start()
    while len(combiner._turns.waiting) < 3:
        time.sleep(0.001)
    release.set()
    for t in threads:
        t.join(10)
    assert isinstance(outcomes[0], int)
    assert all(isinstance(outcomes[i], TransientError) for i in (1, 2, 3)), outcomes
    assert q.stats().pending == 1
    q.enqueue("after")  # the combiner is free again
    assert q.stats().pending == 2


def test_bounded_unique_and_tx_enqueues_are_never_combined(store: PostgresStore) -> None:
    combiner = store.executor._combiner  # type: ignore[attr-defined]
    seen: list[str] = []
    single = combiner._single

    def spy(queue: str, jobs: Sequence[NewJob]) -> list[Inserted]:
        seen.append(queue)
        return single(queue, jobs)  # type: ignore[no-any-return]

    combiner._single = spy
    store.queue("bounded", QueueOpts(max_depth=5)).enqueue(1)
    store.queue("unique").enqueue_unique("k", 1)
    with store.transaction() as tx:
        store.queue("tx").enqueue(1, tx=tx)
    store.queue("plain").enqueue(1)
    assert seen == ["plain"]


def _async_slow_first(
    inner: Callable[..., Awaitable[Any]], release: asyncio.Event, calls: list[int]
) -> Callable[..., Awaitable[Any]]:
    async def slow(queue: str, jobs: Sequence[NewJob]) -> Any:
        calls.append(1)
        if len(calls) == 1:
            await release.wait()
        return await inner(queue, jobs)

    return slow


def test_tasks_arriving_during_an_enqueue_share_the_next_commit(pg_url: str, schema: str) -> None:
    async def body(store: AsyncPostgresStore) -> None:
        combiner = store.executor._combiner  # type: ignore[attr-defined]
        release = asyncio.Event()
        calls: list[int] = []
        batches: list[int] = []
        combiner._single = _async_slow_first(combiner._single, release, calls)
        many = combiner._many

        async def counting(requests: Sequence[tuple[str, Sequence[NewJob]]]) -> list[int]:
            batches.append(len(requests))
            return await many(requests)  # type: ignore[no-any-return]

        combiner._many = counting
        q = store.queue("c")
        first = asyncio.ensure_future(q.enqueue(0))
        while not calls:
            await asyncio.sleep(0)
        rest = [asyncio.ensure_future(q.enqueue_many([i, i])) for i in range(1, 16)]
        while len(combiner._turns.waiting) < 15:
            await asyncio.sleep(0)
        release.set()
        ids = [await first] + [i for got in await asyncio.gather(*rest) for i in got]
        assert batches == [15]
        assert len(ids) == len(set(ids)) == 31
        assert (await q.stats()).pending == 31

    run(body, pg_url, schema=schema)


def test_a_cancelled_waiting_task_writes_nothing(pg_url: str, schema: str) -> None:
    async def body(store: AsyncPostgresStore) -> None:
        combiner = store.executor._combiner  # type: ignore[attr-defined]
        release = asyncio.Event()
        calls: list[int] = []
        combiner._single = _async_slow_first(combiner._single, release, calls)
        q = store.queue("c")
        first = asyncio.ensure_future(q.enqueue("first"))
        while not calls:
            await asyncio.sleep(0)
        kept = asyncio.ensure_future(q.enqueue("kept"))
        dropped = asyncio.ensure_future(q.enqueue("dropped"))
        while len(combiner._turns.waiting) < 2:
            await asyncio.sleep(0)
        dropped.cancel()
        with pytest.raises(asyncio.CancelledError):
            await dropped
        release.set()
        await first
        kept_id = await kept
        jobs = await q.claim_batch("w", 10)
        assert sorted(j.payload for j in jobs) == ["first", "kept"]
        assert kept_id in [j.id for j in jobs]
        # A cancelled leader cancels only its own statement: the others run.
        combiner._single = _async_slow_first(combiner._single, asyncio.Event(), [])
        leader = asyncio.ensure_future(q.enqueue("leader"))
        await asyncio.sleep(0.05)
        follower = asyncio.ensure_future(q.enqueue("follower"))
        await asyncio.sleep(0.01)
        leader.cancel()
        with pytest.raises(asyncio.CancelledError):
            await leader
        follower_id = await asyncio.wait_for(follower, 10)
        info = await q.get_job(follower_id)
        assert info is not None and info.payload == "follower"

    run(body, pg_url, schema=schema)
