"""Child-process entry points of the job-control tests (Q-23, R-2).

They run under the ``spawn`` start method, so each is a module-level function
taking picklable arguments: a :class:`StoreFactory` and plain values. Each
reports ``("ready", ...)`` once its store is open, waits for the parent's
*go*, does its part and reports ``("ok", ...)``, or ``("error", text)``.
"""

from __future__ import annotations

import time
from multiprocessing.queues import Queue as MPQueue
from multiprocessing.synchronize import Event as MPEvent
from typing import Any

from alkstore import Store

from ._children import in_store, wait_for_go
from ._factory import StoreFactory

__all__ = ["acquire_until", "enqueue_unique_at_signal"]


def enqueue_unique_at_signal(
    factory: StoreFactory, queue: str, key: str, tag: int, go: MPEvent, results: MPQueue[Any]
) -> None:
    """Q-23: at *go*, ``enqueue_unique(key, {"tag": tag})``; report
    ``("ok", tag, id, created)``."""

    def body(store: Store) -> tuple[Any, ...]:
        q = store.queue(queue)
        results.put(("ready", tag))
        wait_for_go(go, 120)
        got = q.enqueue_unique(key, {"tag": tag})
        return ("ok", tag, got.id, got.created)

    in_store(factory, results, body)


def acquire_until(
    factory: StoreFactory,
    name: str,
    rate: float,
    per_s: float,
    burst: int,
    go: MPEvent,
    start_at: Any,
    duration_s: float,
    results: MPQueue[Any],
) -> None:
    """R-2: at *go*, sleep until the wall-clock time ``start_at.value``, then
    call ``acquire()`` on the limiter until *duration_s* later, as fast as
    refusals allow; report ``("ok", granted, refused, first_start, last_end,
    answered)`` (wall-clock seconds of the first call, of the end of the last,
    and of the end of every call)."""

    def body(store: Store) -> tuple[Any, ...]:
        limiter = store.rate_limit(name, rate, per_s, burst)
        results.put(("ready",))
        wait_for_go(go, 120)
        start = float(start_at.value)
        time.sleep(max(0.0, start - time.time()))
        end = start + duration_s
        granted = refused = 0
        first_start = time.time()
        last_end = first_start
        answered: list[float] = []
        while time.time() < end:
            ok = limiter.acquire()
            last_end = time.time()
            answered.append(last_end)
            if ok:
                granted += 1
            else:
                refused += 1
                time.sleep(0.002)
        return ("ok", granted, refused, first_start, last_end, answered)

    in_store(factory, results, body)
