"""Child-process entry points of the workers' registry tests (O-5).

They run under the ``spawn`` start method, so each is a module-level function
taking picklable arguments, reporting to the parent through a
``multiprocessing`` queue.
"""

from __future__ import annotations

from multiprocessing.queues import Queue as MPQueue
from typing import Any

from alkstore import Job, Store, Worker

from ._children import in_store
from ._factory import StoreFactory

__all__ = ["registered_worker"]


def registered_worker(
    factory: StoreFactory, queue: str, worker_id: str, every_s: float, report: MPQueue[Any]
) -> None:
    """O-5: run a registered ``Worker`` (refreshing every *every_s*) whose
    handler acks, reporting ``("handled", id)`` for each job, until the
    parent kills the process."""

    def body(store: Store) -> None:
        def handler(job: Job) -> None:
            report.put(("handled", job.id))

        Worker(
            store, queue, handler, worker_id=worker_id, claim_wait_s=0.2, register_every_s=every_s
        ).run()

    in_store(factory, report, body)
