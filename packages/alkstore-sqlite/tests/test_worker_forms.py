"""Every way to run a worker settles through the group commit (W-6, issue 24,
docs/adr/0029): a worker given only a queue handle, on both faces, and the
outbox's delivery settle their acks through the store's ``ack_each``, one
statement per flush, never one ``job.ack()`` per job."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any

import pytest
from fix_trace import Traced

import alkstore
from alkstore import AsyncWorker, Worker
from alkstore.engine.jobs import KitJob
from alkstore.engine.jobs_async import AsyncKitJob
from alkstore.engine.store import KitStore
from alkstore.engine.store_async import AsyncKitStore
from alkstore_sqlite import SQLiteStore

JOBS = 1000


@dataclass
class Settles:
    """What the kit's settling calls saw: the size of each ``ack_each`` and
    the ids acked one by one through ``job.ack()``."""

    each: list[int] = field(default_factory=list)
    single: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


@pytest.fixture
def settles(monkeypatch: pytest.MonkeyPatch) -> Settles:
    seen = Settles()
    sync_each, async_each = KitStore.ack_each, AsyncKitStore.ack_each
    sync_ack, async_ack = KitJob.ack, AsyncKitJob.ack

    def each(self: KitStore, jobs: Any, *a: Any, **kw: Any) -> list[bool]:
        with seen.lock:
            seen.each.append(len(jobs))
        return sync_each(self, jobs, *a, **kw)

    async def aeach(self: AsyncKitStore, jobs: Any, *a: Any, **kw: Any) -> list[bool]:
        with seen.lock:
            seen.each.append(len(jobs))
        return await async_each(self, jobs, *a, **kw)

    def ack(self: KitJob, *a: Any, **kw: Any) -> bool:
        with seen.lock:
            seen.single.append(self.id)
        return sync_ack(self, *a, **kw)

    async def aack(self: AsyncKitJob, *a: Any, **kw: Any) -> bool:
        with seen.lock:
            seen.single.append(self.id)
        return await async_ack(self, *a, **kw)

    monkeypatch.setattr(KitStore, "ack_each", each)
    monkeypatch.setattr(AsyncKitStore, "ack_each", aeach)
    monkeypatch.setattr(KitJob, "ack", ack)
    monkeypatch.setattr(AsyncKitJob, "ack", aack)
    return seen


def _noop(job: object) -> None:
    pass


async def _anoop(job: object) -> None:
    pass


def _ack_statements(traced: Traced) -> list[str]:
    return [s for s in traced.seen() if s.lstrip().startswith("DELETE FROM __alkstore_jobs")]


def test_a_worker_given_only_a_queue_handle_acks_in_groups(
    db_path: str, traced: Traced, settles: Settles
) -> None:
    """The documented ``Worker(None, handle, ...)``: every ack goes through
    ``ack_each`` (the handle's store), one DELETE per flush, as many jobs
    per statement as finished meanwhile (W-6's bar: 1,000 jobs at
    concurrency 16 in fewer than 500 settles)."""
    with SQLiteStore(db_path) as store:
        q = store.queue("q")
        q.enqueue_many(list(range(JOBS)))
        traced.clear()
        ran = Worker(None, q, _noop, concurrency=16).run_until_empty()
        assert ran == JOBS
        assert q.stats().pending == q.stats().processing == 0
    assert settles.single == [], "a job was acked alone, outside the group commit"
    assert sum(settles.each) == JOBS
    assert len(_ack_statements(traced)) == len(settles.each) < JOBS // 2


def test_an_async_worker_given_only_a_queue_handle_acks_in_groups(
    db_path: str, settles: Settles
) -> None:
    async def main() -> int:
        astore = await alkstore.open_async(f"sqlite:///{db_path}")
        try:
            q = astore.queue("q")
            await q.enqueue_many(list(range(JOBS)))
            return await AsyncWorker(None, q, _anoop, concurrency=16).run_until_empty()
        finally:
            await astore.close()

    assert asyncio.run(main()) == JOBS
    assert settles.single == []
    assert sum(settles.each) == JOBS
    assert len(settles.each) < JOBS // 2


def test_the_outbox_delivery_acks_through_ack_each(db_path: str, settles: Settles) -> None:
    """The outbox's one-slot worker (built on its queue handle) settles each
    delivery through ``ack_each`` too: one delivery after the other, so one
    job per settle (Q-20)."""
    with SQLiteStore(db_path) as store:
        box = store.outbox("mail")
        for i in range(20):
            box.put({"n": i})
        stop = threading.Event()
        got: list[object] = []

        def deliver(payload: object) -> None:
            got.append(payload)
            if len(got) == 20:
                stop.set()

        box.run(deliver, stop)
        assert box.queue.stats().pending == box.queue.stats().processing == 0
    assert got == [{"n": i} for i in range(20)]
    assert settles.single == []
    assert settles.each == [1] * 20
