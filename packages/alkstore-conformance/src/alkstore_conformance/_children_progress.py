"""Entry points of the child processes of the progress contract's crash test
(Q-28).

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

__all__ = ["checkpoint_and_hang_in_worker"]


def checkpoint_and_hang_in_worker(
    factory: StoreFactory, queue: str, steps: int, report: MPQueue[Any]
) -> None:
    """Q-28: run a ``Worker`` whose handler stores a checkpoint after each of
    *steps* steps (reporting ``("progressed", id, attempts, step, landed)``),
    then hangs, its claim kept alive by the worker's heartbeats, until the
    parent SIGKILLs the process."""

    def body(store: Store) -> None:
        def handler(job: Job) -> None:
            for step in range(1, steps + 1):
                landed = job.progress({"step": step, "of": steps})
                report.put(("progressed", job.id, job.attempts, step, landed))
            time.sleep(600)  # never returns: the parent kills this process first

        Worker(store, queue, handler, claim_wait_s=0.2).run()

    in_store(factory, report, body)
