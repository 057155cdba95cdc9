"""Child-process entry points of the worker tests (W-3).

They run under the ``spawn`` start method, so each is a module-level function
taking picklable arguments. The worker runs in the child's main thread, where
it installs its SIGINT/SIGTERM handlers, exactly as the ``alkstore worker``
command does.
"""

from __future__ import annotations

import time
from multiprocessing.queues import Queue as MPQueue
from typing import Any

from alkstore import Job, Worker

from ._factory import StoreFactory

__all__ = ["run_worker_until_signalled", "sleepy_handler"]


def sleepy_handler(job: Job) -> None:
    """Sleep ``payload["sleep_s"]`` seconds, then return (the job is acked)."""
    time.sleep(float(job.payload["sleep_s"]))


def run_worker_until_signalled(
    factory: StoreFactory, queue: str, concurrency: int, results: MPQueue[Any]
) -> None:
    """Run a worker over *queue* until SIGTERM/SIGINT; report ``("ok", None)``
    when ``run`` returned, or ``("error", text)``."""
    try:
        store = factory.open()
        try:
            results.put(("ready", None))
            Worker(store, queue, sleepy_handler, concurrency=concurrency, claim_wait_s=0.2).run()
        finally:
            store.close()
    except BaseException as exc:  # reported to the parent, which fails the test
        results.put(("error", f"{type(exc).__name__}: {exc}"))
    else:
        results.put(("ok", None))
