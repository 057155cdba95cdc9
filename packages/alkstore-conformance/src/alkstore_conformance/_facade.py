"""A synchronous face over an :class:`~alkstore.protocols.AsyncStore` (A-1).

The suite proves sync/async parity by running every contract test through the
async API: :class:`SyncFacade` drives the async store on an event loop in a
thread of its own and looks like a sync :class:`~alkstore.protocols.Store`.
Handles that come back (queues, jobs, streams, locks, listeners,
transactions, rate limits, outboxes) are wrapped the same way, and wrapped
objects passed back in (a job to ``ack_batch``, a transaction as ``tx=``, a
``threading.Event`` as ``stop``) are unwrapped, so a test cannot tell the two
faces apart except by the engine's behaviour — which is what it checks.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from types import TracebackType
from typing import Any

__all__ = ["SyncFacade", "open_facade"]


class _Loop:
    """An event loop on a daemon thread; :meth:`run` waits for a coroutine."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._stopped = False
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="alkstore-facade-loop", daemon=True
        )
        self._thread.start()

    def run(self, coro: Any) -> Any:
        if threading.current_thread() is self._thread:  # pragma: no cover - a test bug
            raise RuntimeError("the sync facade was called from its own event loop")
        if self._stopped:
            # After close: calls only raise StoreClosed, on a loop of their own.
            return asyncio.run(_await(coro))
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result()

    def event(self, source: threading.Event) -> asyncio.Event:
        """An ``asyncio.Event`` set when *source* is set."""
        target: asyncio.Event = self.run(_make_event())

        def watch() -> None:
            source.wait()
            if not self._stopped:
                self.loop.call_soon_threadsafe(target.set)

        threading.Thread(target=watch, name="alkstore-facade-stop", daemon=True).start()
        return target

    def close(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        with contextlib.suppress(Exception):  # the loop's own threads (asyncio.to_thread)
            asyncio.run_coroutine_threadsafe(
                self.loop.shutdown_default_executor(), self.loop
            ).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self.loop.close()


async def _make_event() -> asyncio.Event:
    return asyncio.Event()


class _Wrapped:
    """Any async object, seen through the facade: attribute reads pass
    through (wrapped), calls run to completion on the loop."""

    __slots__ = ("_loop", "_target")

    def __init__(self, target: Any, loop: _Loop) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_loop", loop)

    def __repr__(self) -> str:
        return f"Facade({self._target!r})"

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if inspect.ismethod(value) or inspect.isfunction(value) or inspect.isbuiltin(value):
            return _method(value, self._loop)
        return _wrap(value, self._loop)

    @property
    def __alkstore_job__(self) -> Any:
        return getattr(self._target, "__alkstore_job__", self._target)

    def __eq__(self, other: object) -> bool:
        return bool(self._target == _unwrap(other, self._loop))

    def __hash__(self) -> int:
        return hash(self._target)

    def __bool__(self) -> bool:
        return True


def _method(fn: Callable[..., Any], loop: _Loop) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        args = tuple(_unwrap(a, loop) for a in args)
        kwargs = {k: _unwrap(v, loop) for k, v in kwargs.items()}
        if inspect.iscoroutinefunction(fn):
            return _wrap(loop.run(fn(*args, **kwargs)), loop)
        result = fn(*args, **kwargs)
        if inspect.isawaitable(result):
            result = loop.run(_await(result))
        return _wrap(result, loop)

    return call


async def _await(awaitable: Any) -> Any:
    return await awaitable


def _inner(value: Any) -> Any:
    return getattr(value, "_target", value) if isinstance(value, _FACADES) else value


def _unwrap(value: Any, loop: _Loop) -> Any:
    if isinstance(value, _FACADES):
        return _inner(value)
    if isinstance(value, threading.Event):
        return loop.event(value)
    if isinstance(value, (list, tuple)):
        # One level only (a list of handles); payloads pass through untouched,
        # however deep or cyclic they are.
        if any(isinstance(v, _FACADES) for v in value):
            items = [_inner(v) for v in value]
            return items if isinstance(value, list) else tuple(items)
        return value
    if callable(value) and not isinstance(value, type) and getattr(value, "__self__", None):
        owner = value.__self__
        if isinstance(owner, _Wrapped):  # pragma: no cover - bound methods of facades
            return getattr(owner._target, value.__name__)
    return value


_PLAIN = (str, bytes, int, float, bool, type(None))
_FACADES: tuple[type, ...] = ()


def _wrap(value: Any, loop: _Loop) -> Any:
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, list):
        return [_wrap(v, loop) for v in value]
    module = type(value).__module__ or ""
    if not module.startswith("alkstore"):
        # A driver's async cursor (what AsyncTx.execute returns) becomes sync;
        # any other value (a datetime, a sync cursor, a connection) passes.
        if inspect.iscoroutinefunction(getattr(value, "fetchall", None)):
            return _Wrapped(value, loop)
        return value
    if _is_value(value):
        return value
    if hasattr(value, "__aenter__") and hasattr(value, "__aexit__"):
        if hasattr(value, "__aiter__"):
            return _Listener(value, loop)
        if not hasattr(value, "release"):
            return _Transaction(value, loop)
        return _Lock(value, loop)
    return _Wrapped(value, loop)


def _is_value(value: Any) -> bool:
    """The contract's value types (frozen dataclasses, enums) pass as they are."""
    import dataclasses
    import enum

    return (dataclasses.is_dataclass(value) and not isinstance(value, type)) or isinstance(
        value, enum.Enum
    )


class _Lock(_Wrapped):
    """A held lock: ``with lock:`` releases it."""

    __slots__ = ()

    def __enter__(self) -> _Lock:
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.run(self._target.release())


class _Transaction:
    """``store.transaction()`` of the async store, as a sync context manager."""

    def __init__(self, target: Any, loop: _Loop) -> None:
        self._target = target
        self._loop = loop
        self._tx: Any = None

    def __enter__(self) -> Any:
        self._tx = self._loop.run(self._target.__aenter__())
        return _Wrapped(self._tx, self._loop)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        swallowed = self._loop.run(self._target.__aexit__(exc_type, exc, tb))
        return bool(swallowed)


class _Listener:
    """An async listener, started at once (N-1: listening from the call on)."""

    def __init__(self, target: Any, loop: _Loop) -> None:
        self._target = target
        self._loop = loop
        loop.run(target.start())

    @property
    def channels(self) -> frozenset[str]:
        channels: frozenset[str] = self._target.channels
        return channels

    def get(self, timeout_s: float | None = None) -> Any:
        return self._loop.run(self._target.get(timeout_s))

    def __iter__(self) -> Iterator[Any]:
        while True:
            note = self.get(None)
            if note is None:
                return
            yield note

    def close(self) -> None:
        self._loop.run(self._target.close())

    def __enter__(self) -> _Listener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SyncFacade(_Wrapped):
    """A store opened with ``alkstore.open_async``, used like a sync one."""

    __slots__ = ()

    def transaction(self) -> _Transaction:
        return _Transaction(self._target.transaction(), self._loop)

    def listen(self, *channels: str) -> _Listener:
        return _Listener(self._target.listen(*channels), self._loop)

    def close(self) -> None:
        try:
            self._loop.run(self._target.close())
        finally:
            self._loop.close()

    def __enter__(self) -> SyncFacade:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_facade(url: str, **opts: Any) -> SyncFacade:
    """``alkstore.open_async(url, **opts)`` behind a :class:`SyncFacade`."""
    import alkstore

    loop = _Loop()
    try:
        store = loop.run(alkstore.open_async(url, **opts))
    except BaseException:
        loop.close()
        raise
    return SyncFacade(store, loop)


_FACADES = (_Wrapped, _Transaction, _Listener)
