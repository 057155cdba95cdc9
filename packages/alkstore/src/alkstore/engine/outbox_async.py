# Async source of outbox.py (scripts/async_to_sync.py makes it: edit this file).
"""The transactional outbox (Q-20): a queue on a reserved name, delivered by
a one-slot worker."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from alkstore._acompat import AEvent

from .named import NamedHandle
from .outbox_base import check_deliver, handler_for

if TYPE_CHECKING:
    from .queue_async import AsyncKitQueue

__all__ = ["AsyncKitOutbox"]


class AsyncKitOutbox(NamedHandle):
    """An :class:`~alkstore.protocols.AsyncOutbox` over its backing queue."""

    def __init__(self, name: str, queue: AsyncKitQueue) -> None:
        super().__init__(name)
        self._queue = queue

    @property
    def queue(self) -> AsyncKitQueue:
        """The backing queue (``OUTBOX_PREFIX + name``), for stats, dead
        letters and redrive."""
        return self._queue

    async def put(self, payload: Any, tx: object | None = None) -> int:
        """Enqueue *payload* for delivery, in *tx* when given (T-1)."""
        return await self._queue.enqueue(payload, tx=tx)

    async def run(
        self,
        deliver: Callable[[Any], object] | Callable[[Any], Awaitable[object]],
        stop: AEvent | None = None,
        worker_id: str | None = None,
    ) -> None:
        """Claim, ``deliver(payload)``, ack on return; retry by the curve when
        *deliver* raises (Q-20), until *stop* is set (on the sync face also on
        SIGINT/SIGTERM in the main thread). Deliveries run on a one-slot
        worker: a slow delivery keeps its claim by heartbeats, a busy database
        is retried. A coroutine function is awaited (on the sync face, on the
        worker's own loop); a plain callable runs on a thread (A-1, W-8)."""
        from alkstore.worker import AsyncWorker

        class OutboxWorker(AsyncWorker):
            _hold_slots = True  # strictly one delivery after the other

        check_deliver(deliver)
        await OutboxWorker(None, self._queue, handler_for(deliver), 1, worker_id).run(stop)
