"""Entry points of the child processes of the queue contract's cross-process
tests (Q-3, Q-5, Q-6, Q-19).

They run under the ``spawn`` start method, so each is a module-level function
taking picklable arguments: a :class:`StoreFactory` and plain values. Each
reports to the parent through a ``multiprocessing`` queue, and turns its own
failures into a report, so that the parent fails the test with the reason.
"""

from __future__ import annotations

import time
from multiprocessing.queues import Queue as MPQueue
from multiprocessing.synchronize import Event as MPEvent
from typing import Any

from ._factory import StoreFactory

__all__ = ["claim_and_hang", "claim_blocking", "drain_queue"]


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def drain_queue(
    factory: StoreFactory, queue: str, worker: str, go: MPEvent, results: MPQueue[Any]
) -> None:
    """Q-3: open a store, report ``("ready", worker)``, wait for *go*, then claim
    and ack until the queue stays empty; report ``("ok", worker, ids)``.

    Batch sizes vary from 1 to 31 and acks alternate between ``ack_batch`` and
    ``job.ack`` so that every claim path takes part. An ack that does not land
    means another process held the job: reported as an error.
    """
    try:
        store = factory.open()
    except BaseException as exc:
        results.put(("error", worker, _describe(exc)))
        return
    ids: list[int] = []
    try:
        results.put(("ready", worker))
        if not go.wait(120):
            raise TimeoutError("the parent never said go")
        q = store.queue(queue)
        empty = 0
        i = 0
        while empty < 3 and i < 10_000:  # bounded, in case claims repeat
            i += 1
            jobs = q.claim_batch(worker, (i % 7) * 5 + 1, wait_s=0.2)
            if not jobs:
                empty += 1
                continue
            empty = 0
            ids.extend(j.id for j in jobs)
            landed = q.ack_batch(jobs) if i % 2 else sum(1 for j in jobs if j.ack())
            if landed != len(jobs):
                raise AssertionError(f"{len(jobs) - landed} acks of fresh claims were refused")
    except BaseException as exc:
        results.put(("error", worker, _describe(exc)))
    else:
        results.put(("ok", worker, ids))
    finally:
        store.close()


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
        report.put(("error", _describe(exc)))
        return
    time.sleep(600)  # never acks: the parent kills this process first


def claim_blocking(
    factory: StoreFactory, queue: str, worker: str, wait_s: float, report: MPQueue[Any]
) -> None:
    """Q-19: report ``("ready",)``, block in ``claim(wait_s=...)``, then report
    ``("claimed", id or None, seconds waited)`` and ack what it got."""
    try:
        store = factory.open()
    except BaseException as exc:
        report.put(("error", _describe(exc)))
        return
    try:
        q = store.queue(queue)
        report.put(("ready",))
        started = time.monotonic()
        job = q.claim(worker, wait_s=wait_s)
        waited = time.monotonic() - started
        report.put(("claimed", None if job is None else job.id, waited))
        if job is not None:
            job.ack()
    except BaseException as exc:
        report.put(("error", _describe(exc)))
    finally:
        store.close()
