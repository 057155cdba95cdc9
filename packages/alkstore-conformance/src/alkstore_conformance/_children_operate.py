"""Entry points of the child processes of the operating contract's
cross-process tests (Q-27).

They run under the ``spawn`` start method, so each is a module-level function
taking picklable arguments, reporting to the parent through a
``multiprocessing`` queue (failures included, so the parent fails the test
with the reason).
"""

from __future__ import annotations

from multiprocessing.queues import Queue as MPQueue
from typing import Any

from alkstore import Job, Store, Worker

from ._children import in_store
from ._factory import StoreFactory

__all__ = ["worker_until_stop"]


def worker_until_stop(
    factory: StoreFactory, queue: str, claim_wait_s: float, report: MPQueue[Any]
) -> None:
    """Q-27: run a ``Worker`` (one slot, claims blocking *claim_wait_s*) on
    *queue*, reporting ``("ready",)`` once it runs and ``("handled", id,
    payload)`` for every job; the job whose payload is ``"stop"`` stops it."""

    def body(store: Store) -> tuple[Any, ...]:
        worker: Worker | None = None

        def handler(job: Job) -> None:
            report.put(("handled", job.id, job.payload))
            if job.payload == "stop" and worker is not None:
                worker.stop()

        worker = Worker(store, queue, handler, concurrency=1, claim_wait_s=claim_wait_s)
        report.put(("ready",))
        worker.run()
        return ("stopped",)

    in_store(factory, report, body)
