"""Entry points of the child processes of the kept-results contract's
cross-process tests (RS-1, RS-2).

They run under the ``spawn`` start method, so each is a module-level function
taking picklable arguments, reporting to the parent through a
``multiprocessing`` queue (failures included, so the parent fails the test
with the reason).
"""

from __future__ import annotations

import time
from multiprocessing.queues import Queue as MPQueue
from typing import Any

from alkstore import Job, Store, Worker

from ._children import in_store
from ._factory import StoreFactory

__all__ = ["double_in_worker", "wait_for_result"]


def wait_for_result(
    factory: StoreFactory, queue: str, job_id: int, wait_s: float, report: MPQueue[Any]
) -> None:
    """RS-2: report ``("ready",)``, block in ``q.result(job_id, wait_s)``, then
    report ``("result", state, value, seconds waited)`` (state ``None`` when
    the wait ran out)."""

    def body(store: Store) -> tuple[Any, ...]:
        q = store.queue(queue)
        report.put(("ready",))
        started = time.monotonic()
        got = q.result(job_id, wait_s=wait_s)
        waited = time.monotonic() - started
        if got is None:
            return ("result", None, None, waited)
        return ("result", got.state.value, got.value, waited)

    in_store(factory, report, body)


def double_in_worker(factory: StoreFactory, queue: str, report: MPQueue[Any]) -> None:
    """RS-1: run a ``Worker`` whose handler returns ``{"doubled": 2 * payload}``
    (reporting ``("handled", id)`` as it returns) until the parent kills the
    process."""

    def body(store: Store) -> None:
        report.put(("ready",))

        def handler(job: Job) -> dict[str, int]:
            report.put(("handled", job.id))
            return {"doubled": 2 * int(job.payload)}

        Worker(store, queue, handler, claim_wait_s=0.2).run()

    in_store(factory, report, body)
