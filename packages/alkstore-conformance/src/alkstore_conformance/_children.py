"""Entry points of child processes for the cross-process tests.

They run under the ``spawn`` start method, so each is a module-level function
taking picklable arguments: a :class:`StoreFactory` and plain values.
"""

from __future__ import annotations

from multiprocessing.queues import Queue as MPQueue
from multiprocessing.synchronize import Event as MPEvent
from typing import Any

from ._factory import StoreFactory


def open_store_at_signal(factory: StoreFactory, go: MPEvent, results: MPQueue[Any]) -> None:
    """ST-1: wait for *go*, open a store on a fresh database, report."""
    go.wait(30)
    try:
        store = factory.open()
        store.close()
    except BaseException as exc:  # reported to the parent, which fails the test
        results.put(f"{type(exc).__name__}: {exc}")
    else:
        results.put("ok")
