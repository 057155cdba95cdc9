# Async source of listener.py (scripts/async_to_sync.py makes it: edit this file).
# mypy: warn-unreachable=False
"""Listeners (N-1, N-2): what ``store.listen`` returns.

A listener is a :class:`~alkstore.engine.seam_base.NoteSink` its engine
delivers to from any thread; it decodes the payload (a payload that cannot
be decoded arrives as ``None``, C-3) and keeps notifications in memory until
the consumer takes them. On the sync face the consumer waits on a condition;
on the async face deliveries reach the loop through ``call_soon_threadsafe``,
so the loop never polls (A-2).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from alkstore.errors import StoreClosed
from alkstore.types import Notification, check_duration

from .codec import decode_or_none
from .wakes import CLOSE_CHECK_S

__all__ = ["AsyncQueueListener"]


class AsyncQueueListener:
    """A :class:`~alkstore.protocols.AsyncListener`: ``async with`` (or the
    first ``get``) starts listening (*subscribe*), ``async for`` and ``get()``
    take notifications, ``close()`` or leaving the block stops (*unsubscribe*).
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
        self._state = "new"  # new -> listening -> closed
        if True:  # ASYNC
            self._loop: asyncio.AbstractEventLoop | None = None
            self._items: asyncio.Queue[Notification | None] | None = None
        else:
            self._notes: collections.deque[Notification] = collections.deque()
            self._cond = threading.Condition()

    @property
    def channels(self) -> frozenset[str]:
        """The channels this listener receives."""
        return self._channels

    @property
    def closed(self) -> bool:
        """Whether the listener (or its store) was closed."""
        return self._state == "closed"

    def deliver(self, channel: str, payload: str) -> None:
        """Called by the engine, from any thread, once per notification."""
        if self._state != "listening":
            return
        note = Notification(channel, decode_or_none(payload))
        if True:  # ASYNC
            loop, items = self._loop, self._items
            if loop is not None and items is not None:
                with contextlib.suppress(RuntimeError):  # the loop is closed
                    loop.call_soon_threadsafe(items.put_nowait, note)
        else:
            with self._cond:
                if self._state == "listening":
                    self._notes.append(note)
                    self._cond.notify_all()

    async def start(self) -> AsyncQueueListener:
        """Start listening; returns once everything committed from now on will
        arrive (N-1). The sync face's ``listen`` and ``async with`` call it."""
        if self._state != "new":
            raise StoreClosed("this listener was already started or closed")
        if True:  # ASYNC
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
        """The next notification, ``None`` after *timeout_s* (``None``: wait
        forever) or once the listener is closed and drained."""
        limit = None if timeout_s is None else check_duration("timeout_s", timeout_s)
        if self._state == "new":
            await self.start()
        if True:  # ASYNC
            items = self._items
            assert items is not None
            if self._state == "closed" and items.empty():
                return None
            try:
                return await asyncio.wait_for(items.get(), limit)
            except asyncio.TimeoutError:
                return None
        else:
            deadline = None if limit is None else time.monotonic() + limit
            with self._cond:
                while not self._notes:
                    if self._state == "closed":
                        return None
                    if deadline is None:
                        self._cond.wait(CLOSE_CHECK_S)
                        continue
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return None
                    self._cond.wait(min(remaining, CLOSE_CHECK_S))
                return self._notes.popleft()

    def __aiter__(self) -> AsyncIterator[Notification]:
        """Notifications until the listener (or its store) is closed."""
        return self

    async def __anext__(self) -> Notification:
        note = await self.get(None)
        if note is None:
            raise StopAsyncIteration
        return note

    def end(self) -> None:
        """End iteration without unsubscribing (the store is closing); safe
        from any thread."""
        if self._state == "closed":
            return
        self._state = "closed"
        if True:  # ASYNC
            loop, items = self._loop, self._items
            if loop is not None and items is not None:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(items.put_nowait, None)
        else:
            with self._cond:
                self._cond.notify_all()

    async def close(self) -> None:
        """Stop listening; what arrived before stays readable."""
        if self._state == "closed":
            return
        was_listening = self._state == "listening"
        self.end()
        if was_listening:
            await self._unsubscribe(self)

    async def __aenter__(self) -> AsyncQueueListener:
        if self._state == "new":
            await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
