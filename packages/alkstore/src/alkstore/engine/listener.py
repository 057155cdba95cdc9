"""Listeners (N-1, N-2): what ``store.listen`` returns, sync and async.

Both are :class:`~alkstore.engine.seam.NoteSink` objects an engine delivers
to from its delivery thread (or task); they decode the payload (a payload that
cannot be decoded arrives as ``None``, C-3) and keep notifications in memory
until the consumer takes them.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from types import TracebackType

from alkstore.errors import StoreClosed
from alkstore.types import Notification, check_duration

from .codec import decode_or_none
from .wakes import CLOSE_CHECK_S

__all__ = ["AsyncQueueListener", "QueueListener"]


class QueueListener:
    """A :class:`~alkstore.protocols.Listener` fed by its engine.

    ``get`` and iteration take from an in-memory queue; ``on_close`` lets the
    engine stop routing to this listener.
    """

    def __init__(self, channels: frozenset[str], on_close: Callable[[QueueListener], None]) -> None:
        self._channels = channels
        self._on_close = on_close
        self._items: collections.deque[Notification] = collections.deque()
        self._cond = threading.Condition()
        self._closed = False

    @property
    def channels(self) -> frozenset[str]:
        return self._channels

    @property
    def closed(self) -> bool:
        return self._closed

    def deliver(self, channel: str, payload: str) -> None:
        note = Notification(channel, decode_or_none(payload))
        with self._cond:
            if not self._closed:
                self._items.append(note)
                self._cond.notify_all()

    def get(self, timeout_s: float | None = None) -> Notification | None:
        """The next notification, ``None`` after *timeout_s* (``None``: wait
        forever) or once the listener is closed and drained."""
        limit = None if timeout_s is None else check_duration("timeout_s", timeout_s)
        deadline = None if limit is None else time.monotonic() + limit
        with self._cond:
            while not self._items:
                if self._closed:
                    return None
                if deadline is None:
                    self._cond.wait(CLOSE_CHECK_S)
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._cond.wait(min(remaining, CLOSE_CHECK_S))
            return self._items.popleft()

    def __iter__(self) -> Iterator[Notification]:
        """Yield notifications until the listener (or its store) is closed."""
        while True:
            note = self.get(None)
            if note is None:
                return
            yield note

    def close(self) -> None:
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        self._on_close(self)

    def __enter__(self) -> QueueListener:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncQueueListener:
    """A :class:`~alkstore.protocols.AsyncListener`: ``async with`` starts
    listening (*subscribe*), ``async for`` and ``await get()`` take
    notifications, leaving the block stops (*unsubscribe*).

    Deliveries may come from any thread: they reach the loop through
    ``call_soon_threadsafe``, so the loop never polls (A-2).
    """

    def __init__(
        self,
        channels: frozenset[str],
        subscribe: Callable[[AsyncQueueListener], Awaitable[None]],
        unsubscribe: Callable[[AsyncQueueListener], Awaitable[None]],
    ) -> None:
        self._channels = channels
        self._subscribe = subscribe
        self._unsubscribe = unsubscribe
        self._loop: asyncio.AbstractEventLoop | None = None
        self._items: asyncio.Queue[Notification | None] | None = None
        self._state = "new"  # new -> listening -> closed

    @property
    def channels(self) -> frozenset[str]:
        return self._channels

    @property
    def closed(self) -> bool:
        return self._state == "closed"

    def deliver(self, channel: str, payload: str) -> None:
        loop, items = self._loop, self._items
        if loop is None or items is None or self._state != "listening":
            return
        note = Notification(channel, decode_or_none(payload))
        with contextlib.suppress(RuntimeError):  # the loop is closed
            loop.call_soon_threadsafe(items.put_nowait, note)

    async def start(self) -> AsyncQueueListener:
        """Start listening; returns once everything committed from now on will
        arrive (N-1). ``async with`` calls it."""
        if self._state != "new":
            raise StoreClosed("this listener was already started or closed")
        self._loop = asyncio.get_running_loop()
        self._items = asyncio.Queue()
        self._state = "listening"
        try:
            await self._subscribe(self)
        except BaseException:
            self._state = "closed"
            raise
        return self

    async def get(self, timeout_s: float | None = None) -> Notification | None:
        """The next notification, or ``None`` after *timeout_s* or once closed."""
        limit = None if timeout_s is None else check_duration("timeout_s", timeout_s)
        if self._state == "new":
            await self.start()
        items = self._items
        assert items is not None
        if self._state == "closed" and items.empty():
            return None
        try:
            return await asyncio.wait_for(items.get(), limit)
        except asyncio.TimeoutError:
            return None

    async def __anext__(self) -> Notification:
        note = await self.get(None)
        if note is None:
            raise StopAsyncIteration
        return note

    def __aiter__(self) -> AsyncIterator[Notification]:
        return self

    def _closed_by_store(self) -> None:
        """The store closed: end iteration (safe from any thread)."""
        loop, items = self._loop, self._items
        if self._state == "closed":
            return
        self._state = "closed"
        if loop is not None and items is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(items.put_nowait, None)

    async def close(self) -> None:
        if self._state == "closed":
            return
        was_listening = self._state == "listening"
        self._closed_by_store()
        if was_listening:
            await self._unsubscribe(self)

    async def __aenter__(self) -> AsyncQueueListener:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
