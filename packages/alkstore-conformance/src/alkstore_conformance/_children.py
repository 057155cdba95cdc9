"""Entry points of child processes for the cross-process tests.

They run under the ``spawn`` start method, so each is a module-level function
taking picklable arguments: a :class:`StoreFactory` and plain values.
"""

from __future__ import annotations

from collections.abc import Callable
from multiprocessing.queues import Queue as MPQueue
from multiprocessing.synchronize import Event as MPEvent
from typing import Any

from alkstore import Store

from ._factory import StoreFactory


def describe(exc: BaseException) -> str:
    """*exc* as text that the parent can put in its failure."""
    return f"{type(exc).__name__}: {exc}"


def wait_for_go(go: MPEvent, timeout_s: float) -> None:
    """Wait for the parent's *go*; raise (to be reported) when it never comes."""
    if not go.wait(timeout_s):
        raise TimeoutError("the parent never said go")


def in_store(
    factory: StoreFactory,
    results: MPQueue[Any],
    body: Callable[[Store], tuple[Any, ...] | None],
    *tag: Any,
) -> None:
    """Open a store from *factory*, run *body* on it and close it; put the
    tuple *body* returns (if any) on *results*. Any failure, the opening
    included, is put there as ``("error", *tag, text)``, so that the parent
    fails the test with the reason."""
    try:
        store = factory.open()
        try:
            outcome = body(store)
        finally:
            store.close()
    except BaseException as exc:
        results.put(("error", *tag, describe(exc)))
    else:
        if outcome is not None:
            results.put(outcome)


def open_store_at_signal(factory: StoreFactory, go: MPEvent, results: MPQueue[Any]) -> None:
    """ST-1: wait for *go*, open a store on a fresh database, report."""
    go.wait(30)
    try:
        store = factory.open()
        store.close()
    except BaseException as exc:  # reported to the parent, which fails the test
        results.put(describe(exc))
    else:
        results.put("ok")
