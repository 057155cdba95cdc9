"""The transactional outbox (Q-20): a queue on a reserved name, delivered by
a one-slot worker, sync and async side by side."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from alkstore.errors import InvalidArgument
from alkstore.names import validate_name
from alkstore.types import QueueOpts

if TYPE_CHECKING:
    from .queue import AsyncKitQueue, KitQueue

__all__ = ["OUTBOX_OPTS", "OUTBOX_PREFIX", "AsyncKitOutbox", "KitOutbox", "outbox_queue_name"]

#: Outbox ``name`` is backed by the queue ``OUTBOX_PREFIX + name`` (Q-20).
OUTBOX_PREFIX = "__alkstore.outbox."
#: The fixed opts of every outbox's backing queue (Q-20).
OUTBOX_OPTS = QueueOpts(visibility_timeout_s=60.0, max_attempts=5, backoff_base_s=5.0)


def outbox_queue_name(name: str) -> str:
    """The reserved queue that backs outbox *name* (Q-20)."""
    return OUTBOX_PREFIX + validate_name(name, "outbox")


def _check_deliver(deliver: object) -> None:
    # W-8: refused before anything is claimed.
    if not callable(deliver):
        raise InvalidArgument(f"deliver must be callable, not {type(deliver).__name__}")


def _handler_for(deliver: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A job handler that hands the payload to *deliver*, and is a coroutine
    function exactly when *deliver* is one (so the worker awaits it, W-8)."""
    if inspect.iscoroutinefunction(deliver):

        async def deliver_async(job: Any) -> object:
            return await deliver(job.payload)

        return deliver_async
    return lambda job: deliver(job.payload)


class KitOutbox:
    """An :class:`~alkstore.protocols.Outbox` over its backing queue."""

    def __init__(self, name: str, queue: KitQueue) -> None:
        self._name = name
        self._queue = queue

    def __repr__(self) -> str:
        return f"KitOutbox({self._name!r})"

    @property
    def name(self) -> str:
        return self._name

    @property
    def queue(self) -> KitQueue:
        return self._queue

    def put(self, payload: Any, tx: object | None = None) -> int:
        """Enqueue *payload* for delivery, in *tx* when given (T-1)."""
        return self._queue.enqueue(payload, tx=tx)

    def run(
        self,
        deliver: Callable[[Any], object],
        stop: threading.Event | None = None,
        worker_id: str | None = None,
    ) -> None:
        """Claim, ``deliver(payload)``, ack on return; retry by the curve when
        *deliver* raises (Q-20), until *stop* is set (or SIGINT/SIGTERM in the
        main thread). A coroutine function runs on the worker's loop (W-8).
        Deliveries run on a one-slot :class:`~alkstore.worker.Worker`: a slow
        delivery keeps its claim by heartbeats, a busy database is retried."""
        from alkstore.worker import Worker

        class OutboxWorker(Worker):
            _hold_slots = True  # strictly one delivery after the other

        _check_deliver(deliver)
        OutboxWorker(None, self._queue, _handler_for(deliver), 1, worker_id).run(stop)


class AsyncKitOutbox:
    """An :class:`~alkstore.protocols.AsyncOutbox` over its backing queue."""

    def __init__(self, name: str, queue: AsyncKitQueue) -> None:
        self._name = name
        self._queue = queue

    def __repr__(self) -> str:
        return f"AsyncKitOutbox({self._name!r})"

    @property
    def name(self) -> str:
        return self._name

    @property
    def queue(self) -> AsyncKitQueue:
        return self._queue

    async def put(self, payload: Any, tx: object | None = None) -> int:
        return await self._queue.enqueue(payload, tx=tx)

    async def run(
        self,
        deliver: Callable[[Any], object] | Callable[[Any], Awaitable[object]],
        stop: asyncio.Event | None = None,
        worker_id: str | None = None,
    ) -> None:
        """Deliver until *stop* is set: a coroutine function is awaited on this
        loop, a plain callable runs in a thread (A-1)."""
        from alkstore.worker import AsyncWorker

        class OutboxWorker(AsyncWorker):
            _hold_slots = True  # strictly one delivery after the other

        _check_deliver(deliver)
        await OutboxWorker(None, self._queue, _handler_for(deliver), 1, worker_id).run(stop)
