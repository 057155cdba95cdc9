"""The event loop the sync worker runs coroutine handlers on (W-8).

The sync worker (``_threads``) is generated from the async one (``_tasks``)
and so holds no coroutine of its own: the loop on its thread and the two
coroutines it runs there are here.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from . import _hooks
from ._rules import Running

__all__ = ["HandlerLoop", "await_result", "call_coroutine"]


class HandlerLoop:
    """An event loop on a daemon thread of its own, for a sync worker's
    ``async def`` handlers (W-8)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="alkstore-worker-loop", daemon=True
        )
        self._thread.start()

    def submit(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self.loop.close()


async def call_coroutine(
    handler: Callable[[Any], Any],
    entry: Running,
    ended: Callable[[Running, BaseException | None, Any], None],
) -> None:
    """Await ``handler(entry.view)`` in its span, then tell *ended* how it
    ended and what it returned (RS-1)."""
    outcome: BaseException | None = None
    value: Any = None
    try:
        with _hooks.handler_span(entry.job):
            value = await handler(entry.view)
    except BaseException as exc:  # CancelledError too: a timeout or a stop
        outcome = exc
    ended(entry, outcome, value)


async def await_result(awaitable: Awaitable[Any]) -> Any:
    """What a plain handler returned, awaited (W-8)."""
    return await awaitable
