"""Opening, schema versions, closing and threads (ST-1..ST-4), and capabilities (CF-1)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from alkstore import (
    Capability,
    EnqueueOpts,
    JobState,
    SchemaVersionError,
    Store,
    StoreClosed,
    UnsupportedOperation,
)

from . import _children
from ._base import ContractBase, signals, spawn, unique
from ._factory import StoreFactory, hooks_for

# One representative call per capability: what an engine that does not
# declare the capability must refuse with UnsupportedOperation (CF-1).
CAPABILITY_CALLS: dict[Capability, Callable[[Store], object]] = {
    Capability.QUEUES: lambda s: s.queue("cf1").enqueue(1),
    Capability.OUTBOX: lambda s: s.outbox("cf1").put(1),
    Capability.STREAMS: lambda s: s.stream("cf1").publish(1),
    Capability.LOCKS: lambda s: s.lock("cf1", 1.0),
    Capability.NOTIFICATIONS: lambda s: s.notify("cf1", 1),
    Capability.SCHEDULER: lambda s: s.schedule("cf1", "@hourly", "cf1"),
    Capability.REPLACE_DEBOUNCE: lambda s: s.queue("cf1").enqueue_unique(
        "k", 1, on_conflict="replace"
    ),
    Capability.PAUSE: lambda s: s.queue("cf1").pause(),
    Capability.RUN_NOW: lambda s: s.queue("cf1").run_now(1),
}


def _is_open(store: Store) -> bool:
    return not store.closed


class LifecycleContract(ContractBase):
    """ST-1..ST-4 and CF-1."""

    @pytest.mark.clause("ST-1")
    def test_open_twice_is_idempotent(self, store_factory: StoreFactory) -> None:
        first = store_factory.open()
        second = store_factory.open()
        try:
            if Capability.QUEUES in first.capabilities:
                q = unique()
                job_id = first.queue(q).enqueue({"kept": True})
                third = store_factory.open()
                try:
                    info = third.queue(q).get_job(job_id)
                    assert info is not None and info.payload == {"kept": True}
                finally:
                    third.close()
        finally:
            first.close()
            second.close()

    @pytest.mark.clause("ST-1")
    @pytest.mark.cross_process
    def test_processes_opening_a_fresh_database_at_once_all_succeed(
        self, store_factory: StoreFactory
    ) -> None:
        go, results = signals()
        procs = [
            spawn(_children.open_store_at_signal, store_factory, go, results) for _ in range(4)
        ]
        go.set()
        outcomes = [results.get(timeout=60) for _ in procs]
        for proc in procs:
            proc.join(30)
        assert outcomes == ["ok"] * 4
        store = store_factory.open()
        store.close()

    @pytest.mark.clause("ST-2")
    def test_newer_schema_is_refused_and_left_untouched(self, store_factory: StoreFactory) -> None:
        hooks = hooks_for(store_factory.scheme)
        try:
            cm = hooks.future_schema(store_factory.url, store_factory.opts)
        except NotImplementedError as exc:
            pytest.fail(str(exc))
        with cm as snapshot:
            before = snapshot()
            with pytest.raises(SchemaVersionError) as info:
                store_factory.open()
            assert info.value.found > info.value.supported
            assert snapshot() == before

    @pytest.mark.clause("ST-3")
    def test_every_call_after_close_raises_store_closed(self, store_factory: StoreFactory) -> None:
        store = store_factory.open()
        caps = store.capabilities
        calls: list[Callable[[], object]] = [
            store.queue_stats,
            store.transaction,
            lambda: store.transaction().__enter__(),
        ]
        if Capability.QUEUES in caps:
            q = store.queue(unique())
            q.enqueue(1)
            q.enqueue(2)
            job = q.claim("w")
            assert job is not None
            calls += [
                lambda: store.queue("other"),
                lambda: q.enqueue(1),
                lambda: q.enqueue_many([1]),
                lambda: q.claim("w"),
                lambda: q.claim_batch("w", 2),
                lambda: q.get_job(job.id),
                lambda: q.cancel(job.id),
                q.stats,
                q.sweep_expired,
                lambda: q.list_jobs(JobState.PENDING),
                job.ack,
                lambda: job.retry("x"),
                lambda: job.fail("x"),
                job.heartbeat,
                lambda: q.ack_batch([job]),
            ]
        if Capability.STREAMS in caps:
            s = store.stream(unique("s"))
            calls += [
                lambda: s.publish(1),
                s.read,
                lambda: s.commit("c", 1),
                lambda: s.offset("c"),
                lambda: s.wait(0, 0.01),
                lambda: s.trim(1),
            ]
        if Capability.LOCKS in caps:
            lock = store.lock(unique("l"), 30)
            assert lock is not None
            calls += [lambda: store.lock("x", 1), lock.renew, lock.release]
        if Capability.NOTIFICATIONS in caps:
            calls += [lambda: store.notify("c", 1), lambda: store.listen("c")]
        if Capability.SCHEDULER in caps:
            calls += [
                lambda: store.schedule("s", "@hourly", "q"),
                lambda: store.unschedule("s"),
                store.schedules,
                store.tick_schedules,
                store.run_schedules,
            ]
        if Capability.OUTBOX in caps:
            calls += [lambda: store.outbox("o"), lambda: store.outbox("o").put(1)]
        store.close()
        assert store.closed
        store.close()  # closing twice is harmless
        for call in calls:
            with pytest.raises(StoreClosed):
                call()

    @pytest.mark.clause("ST-3")
    def test_store_is_a_context_manager(self, store_factory: StoreFactory) -> None:
        with store_factory.open() as store:
            assert _is_open(store)
        assert not _is_open(store)
        with pytest.raises(StoreClosed):
            store.queue_stats()

    @pytest.mark.clause("ST-4", "Q-3")
    @pytest.mark.requires(Capability.QUEUES)
    def test_threads_share_one_store(self, store: Store) -> None:
        q = store.queue(unique())
        per_thread, threads_n = 40, 6
        enqueued: list[int] = []
        claimed: list[int] = []
        errors: list[BaseException] = []
        lock = threading.Lock()

        def produce(n: int) -> None:
            try:
                ids = [q.enqueue({"t": n, "i": i}) for i in range(per_thread)]
                ids += q.enqueue_many([{"t": n, "batch": i} for i in range(per_thread)])
                with lock:
                    enqueued.extend(ids)
            except BaseException as exc:
                errors.append(exc)

        def consume() -> None:
            try:
                idle = 0
                while idle < 20:
                    jobs = q.claim_batch(threading.current_thread().name, 7, wait_s=0.05)
                    if not jobs:
                        idle += 1
                        continue
                    idle = 0
                    assert q.ack_batch(jobs) == len(jobs)
                    with lock:
                        claimed.extend(j.id for j in jobs)
            except BaseException as exc:
                errors.append(exc)

        workers = [threading.Thread(target=produce, args=(n,)) for n in range(threads_n)]
        workers += [threading.Thread(target=consume, name=f"c{n}") for n in range(threads_n)]
        for t in workers:
            t.start()
        for t in workers:
            t.join(120)
        assert errors == []
        assert len(set(enqueued)) == len(enqueued) == per_thread * 2 * threads_n
        assert sorted(claimed) == sorted(enqueued)

    @pytest.mark.clause("CF-1")
    def test_capabilities_are_declared_and_honoured(self, store: Store) -> None:
        caps = store.capabilities
        assert isinstance(caps, frozenset)
        assert caps, "an engine declares at least one capability"
        assert all(isinstance(c, Capability) for c in caps)
        for capability, call in CAPABILITY_CALLS.items():
            if capability in caps:
                continue
            with pytest.raises(UnsupportedOperation):
                call(store)

    @pytest.mark.clause("CF-1")
    @pytest.mark.requires(Capability.QUEUES)
    def test_requires_marker_runs_tests_of_declared_capabilities(self, store: Store) -> None:
        # This test carries a `requires` marker; it runs only because the
        # engine declares queues, and the declaration must be true.
        assert Capability.QUEUES in store.capabilities
        assert store.queue(unique()).enqueue(1, EnqueueOpts(priority=1)) > 0
