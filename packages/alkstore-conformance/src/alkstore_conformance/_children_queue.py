"""Entry points of the child processes of the queue contract's cross-process
tests (Q-3, Q-5, Q-6, Q-19).

They run under the ``spawn`` start method, so each is a module-level function
taking picklable arguments: a :class:`StoreFactory` and plain values. Each
reports to the parent through a ``multiprocessing`` queue, and turns its own
failures into a report, so that the parent fails the test with the reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from multiprocessing.queues import Queue as MPQueue
from multiprocessing.synchronize import Event as MPEvent
from typing import Any, ParamSpec, TypeVar

from alkstore import Store
from alkstore.errors import TransientError

from ._children import describe, in_store, wait_for_go
from ._factory import StoreFactory

T = TypeVar("T")
P = ParamSpec("P")

#: How long a child retries a call that raised ``TransientError`` (E-2).
RETRY_S = 60.0

__all__ = ["claim_and_hang", "claim_blocking", "drain_queue"]


def _retrying(call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """*call*, again while it raises ``TransientError``, as E-2 tells a caller
    to: on a loaded machine one writer's slow commit (an fsync behind other
    programs' writes) can outlast another's busy timeout."""
    deadline = time.monotonic() + RETRY_S
    while True:
        try:
            return call(*args, **kwargs)
        except TransientError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def drain_queue(
    factory: StoreFactory, queue: str, worker: str, go: MPEvent, results: MPQueue[Any]
) -> None:
    """Q-3: open a store, report ``("ready", worker)``, wait for *go*, then claim
    and ack until the queue stays empty; report ``("ok", worker, ids)``.

    Batch sizes vary from 1 to 31 and acks alternate between ``ack_batch`` and
    ``job.ack`` so that every claim path takes part. An ack that does not land
    means another process held the job: reported as an error. A call that
    raises ``TransientError`` is retried (E-2), as any worker would.
    """

    def body(store: Store) -> tuple[Any, ...]:
        ids: list[int] = []
        results.put(("ready", worker))
        wait_for_go(go, 120)
        q = store.queue(queue)
        empty = 0
        i = 0
        while empty < 3 and i < 10_000:  # bounded, in case claims repeat
            i += 1
            size = (i % 7) * 5 + 1
            jobs = _retrying(q.claim_batch, worker, size, wait_s=0.2)
            if not jobs:
                empty += 1
                continue
            empty = 0
            ids.extend(j.id for j in jobs)
            if i % 2:
                landed = _retrying(q.ack_batch, jobs)
            else:
                landed = sum(1 for j in jobs if _retrying(j.ack))
            if landed != len(jobs):
                raise AssertionError(f"{len(jobs) - landed} acks of fresh claims were refused")
        return ("ok", worker, ids)

    in_store(factory, results, body, worker)


def claim_and_hang(factory: StoreFactory, queue: str, worker: str, report: MPQueue[Any]) -> None:
    """Q-5, Q-6: claim one job, report ``("claimed", id, attempts, deadline)``,
    then hold the claim until the parent kills this process with SIGKILL."""
    try:
        store = factory.open()
        job = store.queue(queue).claim(worker)
        if job is None:
            report.put(("nothing to claim",))
            store.close()
            return
        report.put(("claimed", job.id, job.attempts, job.deadline))
    except BaseException as exc:
        report.put(("error", describe(exc)))
        return
    time.sleep(600)  # never acks: the parent kills this process first


def claim_blocking(
    factory: StoreFactory, queue: str, worker: str, wait_s: float, report: MPQueue[Any]
) -> None:
    """Q-19: report ``("ready",)``, block in ``claim(wait_s=...)``, then report
    ``("claimed", id or None, seconds waited)`` and ack what it got."""

    def body(store: Store) -> None:
        q = store.queue(queue)
        report.put(("ready",))
        started = time.monotonic()
        job = q.claim(worker, wait_s=wait_s)
        waited = time.monotonic() - started
        report.put(("claimed", None if job is None else job.id, waited))
        if job is not None:
            job.ack()

    in_store(factory, report, body)
