"""Child-process entry points of the worker tests (W-3, W-6).

They run under the ``spawn`` start method, so each is a module-level function
taking picklable arguments. The worker runs in the child's main thread, where
it installs its SIGINT/SIGTERM handlers, exactly as the ``alkstore worker``
command does.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from multiprocessing.queues import Queue as MPQueue
from pathlib import Path
from typing import Any, NoReturn

from alkstore import Job, Store, Worker

from ._factory import StoreFactory

__all__ = ["run_worker_until_signalled", "run_worker_with_stuck_settles", "sleepy_handler"]


def sleepy_handler(job: Job) -> None:
    """Sleep ``payload["sleep_s"]`` seconds, then return (the job is acked).
    With ``payload["started"]``, a path, first create that file: how a test
    in another process knows the handler runs (a claim alone is not that)."""
    started = job.payload.get("started")
    if started:
        Path(started).touch()
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


class StuckSettles:
    """A store whose settling never returns: ``ack_each`` and
    ``transaction()`` block for good, everything else passes through. A
    worker over it is one frozen between its handlers' return and the commit
    of their outcomes (W-6)."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def ack_each(self, jobs: Sequence[Job], tx: object | None = None) -> NoReturn:
        threading.Event().wait()
        raise AssertionError("unreachable")

    def transaction(self) -> NoReturn:
        threading.Event().wait()
        raise AssertionError("unreachable")


def run_worker_with_stuck_settles(
    factory: StoreFactory, queue: str, concurrency: int, results: MPQueue[Any]
) -> None:
    """Run a worker whose settles never commit; report ``("handled", id)``
    as each handler returns. The parent kills the process."""
    try:
        store = factory.open()
        results.put(("ready", None))

        def handler(job: Job) -> None:
            results.put(("handled", job.id))

        stuck: Any = StuckSettles(store)
        Worker(stuck, queue, handler, concurrency=concurrency, claim_wait_s=0.2).run()
    except BaseException as exc:  # reported to the parent, which fails the test
        results.put(("error", f"{type(exc).__name__}: {exc}"))
