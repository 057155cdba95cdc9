"""Child-process entry points of the scheduler tests (SC-3, SC-5).

They run under the ``spawn`` start method, so each is a module-level function
taking picklable arguments: a :class:`StoreFactory` and plain values. Every
child reports through a multiprocessing queue as tuples whose first item is
``"ready"``, ``"ok"`` or ``"error"``; an ``"error"`` carries the exception
text so that the parent fails the test with it.

:func:`tick_for` is also called from threads by the scheduler tests, so the
threaded and the cross-process variants of SC-3 run the same workload.
"""

from __future__ import annotations

import time
from multiprocessing.queues import Queue as MPQueue
from multiprocessing.synchronize import Event as MPEvent
from typing import Any

from alkstore import Store

from ._children import describe, in_store, wait_for_go
from ._factory import StoreFactory

__all__ = ["run_schedules_until_killed", "tick_for", "tick_schedules_for"]

#: Pause between two ticks of one ticker: short enough that several tickers
#: pile onto every due fire, long enough not to starve a 2-core machine.
TICK_PAUSE_S = 0.002


def tick_for(store: Store, seconds: float) -> tuple[int, list[float]]:
    """Call ``tick_schedules()`` in a loop for *seconds*; return the sum of its
    return values and the wall-clock time (``time.time()``) each tick started,
    so that the caller can tell whether the tickers left a gap long enough for
    a fire to be coalesced (SC-4) rather than fired on time."""
    fired = 0
    started: list[float] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started.append(time.time())
        fired += store.tick_schedules()
        time.sleep(TICK_PAUSE_S)
    return fired, started


def tick_schedules_for(
    factory: StoreFactory, seconds: float, go: MPEvent, results: MPQueue[Any]
) -> None:
    """SC-3 across processes: open a store, report ``("ready",)``, wait for
    *go*, run :func:`tick_for`, report ``("ok", fired, tick_start_times)``."""

    def body(store: Store) -> tuple[Any, ...]:
        results.put(("ready",))
        wait_for_go(go, 60)
        return ("ok", *tick_for(store, seconds))

    in_store(factory, results, body)


def run_schedules_until_killed(
    factory: StoreFactory,
    owner: str,
    lock_ttl_s: float,
    ready: MPEvent,
    results: MPQueue[Any],
) -> None:
    """SC-5 across processes: open a store, set *ready*, and run the scheduler
    loop with no stop event, so that only a kill ends it. Reports
    ``("error", text)`` if the loop raises and ``("returned",)`` if it ever
    returns by itself."""
    try:
        store = factory.open()
        ready.set()
        store.run_schedules(owner=owner, lock_ttl_s=lock_ttl_s)
    except BaseException as exc:  # reported to the parent, which fails the test
        results.put(("error", describe(exc)))
    else:
        results.put(("returned",))
