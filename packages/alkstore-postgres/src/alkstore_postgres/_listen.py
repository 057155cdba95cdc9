"""Wakes and notifications in: the listener connection, and the poller that
replaces it behind a transaction pooler (docs/adr/0003, docs/adr/0008).

**The listener.** One connection per store, outside the pool, in autocommit,
LISTENs on the schema's wake channel and on the channels of the store's
listeners. Its life is one plan, :meth:`ListenerCore.plan` (connect, LISTEN,
wait for notifications, route them, reconnect with backoff), run by
:class:`ThreadListener` on a thread of its own for the sync store and by
:class:`TaskListener` as a task on the event loop for the async store.
psycopg holds the connection while it waits for notifications, so
``LISTEN``/``UNLISTEN`` requests are queued to the runner and served between
two waits; a requester interrupts the wait with an empty NOTIFY on the
listener's private control channel. Wake payloads bump the store's
:class:`~alkstore.engine.WakeBoard`; other channels go to their sinks.

When the connection drops, the runner reconnects with backoff, re-issues
every ``LISTEN`` and bumps every wake key: notifications sent meanwhile are
lost, so sleepers must look again. Blocked calls also poll, so a dead
listener slows wakes down but never loses work (Q-19).

**The poller** (EN-4, a transaction pooler without ``listen_url``): a pooled
connection cannot LISTEN, so one probe per store every ``poll_s``
(:data:`._sql.WAKE_PROBE`) reads a fingerprint of every watched key and
bumps the keys whose fingerprint moved.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from alkstore.engine import NoteSink, Step, WakeBoard
from alkstore.errors import StoreClosed, TransientError

__all__ = [
    "ListenerCore",
    "PollCore",
    "TaskListener",
    "TaskPoller",
    "ThreadListener",
    "ThreadPoller",
    "WatchedWakeBoard",
]

log = logging.getLogger("alkstore.postgres")

#: Longest wait for notifications before the runner looks at its queue again
#: without being poked (unsubscribes do not poke).
IDLE_S = 1.0
RECONNECT_MIN_S = 0.05
RECONNECT_MAX_S = 5.0
#: TCP keepalives, so that a silently dead network is noticed by the kernel.
KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
}
#: Errors of the listener connection: reconnect.
_LOST = (psycopg.Error, OSError)


#: Open the listener connection.
CONNECT = Step("connect")
#: Close it (if open).
CLOSE = Step("close")


@dataclass(frozen=True)
class Run:
    """Run a LISTEN or UNLISTEN on the listener connection."""

    text: str


@dataclass(frozen=True)
class Wait:
    """Wait up to *timeout_s* for notifications; returns ``[(channel, payload)]``."""

    timeout_s: float


@dataclass(frozen=True)
class Pause:
    """Sleep *seconds*, or less when stopping."""

    seconds: float


ListenerPlan = Generator["Step | Run | Wait | Pause", Any, None]


@dataclass(eq=False)
class _Request:
    """A LISTEN (``add``) or UNLISTEN (``remove``) for the runner to serve;
    *done* is called once with ``None`` or the error."""

    add: bool
    sink: NoteSink
    done: Callable[[BaseException | None], None]


def _listen(channel: str) -> Run:
    return Run(sql.SQL("LISTEN {}").format(sql.Identifier(channel)).as_string(None))


def _unlisten(channel: str) -> Run:
    return Run(sql.SQL("UNLISTEN {}").format(sql.Identifier(channel)).as_string(None))


class ListenerCore:
    """What the listener knows and does, whatever runs it. Requests come from
    any thread; routes are touched only by the runner."""

    def __init__(
        self,
        *,
        wake_channel: str,
        channel_for: Callable[[str], str],
        wakes: WakeBoard,
        on_state: Callable[[bool], None],
    ) -> None:
        self.wake_channel = wake_channel
        self.ctl_channel = f"alkstore_ctl_{uuid.uuid4().hex[:20]}"
        self._channel_for = channel_for
        self._wakes = wakes
        self._on_state = on_state
        self._lock = threading.Lock()
        self._requests: deque[_Request] = deque()
        self._stopping = False
        self.connected = False
        #: Called after the first connection attempt, whatever its outcome.
        self.on_attempt: Callable[[], None] = lambda: None
        # PostgreSQL channel -> (channel name, sinks).
        self._routes: dict[str, tuple[str, set[NoteSink]]] = {}

    @property
    def stopping(self) -> bool:
        return self._is_stopping()

    def _is_stopping(self) -> bool:
        # A method, not the attribute: stop() may flip it at any step.
        return self._stopping

    def stop(self) -> None:
        with self._lock:
            self._stopping = True

    def submit(
        self, add: bool, sink: NoteSink, done: Callable[[BaseException | None], None]
    ) -> None:
        with self._lock:
            if self._stopping:
                raise StoreClosed("the store was closed")
            self._requests.append(_Request(add, sink, done))

    def _set_connected(self, up: bool) -> None:
        if self.connected != up:
            self.connected = up
            self._on_state(up)

    def plan(self) -> ListenerPlan:
        delay = RECONNECT_MIN_S
        ever = False
        first = True
        while not self._is_stopping():
            try:
                if not self.connected:
                    try:
                        yield CONNECT
                        for channel in (self.wake_channel, self.ctl_channel, *self._routes):
                            yield _listen(channel)
                    finally:
                        if first:
                            first = False
                            self.on_attempt()
                    self._set_connected(True)
                    if ever:
                        log.info("listener connection re-established")
                        # Wakes sent while disconnected are lost: look again.
                        self._wakes.bump_all()
                    ever = True
                    delay = RECONNECT_MIN_S
                yield from self._serve()
                notes = yield Wait(IDLE_S)
                for channel, payload in notes:
                    self._route(channel, payload)
            except _LOST as exc:
                self._set_connected(False)
                if self._is_stopping():
                    break
                log.warning("listener connection lost (%s); reconnecting in %.2f s", exc, delay)
                yield CLOSE
                yield Pause(delay)
                delay = min(delay * 2, RECONNECT_MAX_S)
        self._set_connected(False)
        yield CLOSE
        self._fail_pending()

    def _serve(self) -> Generator[Run, Any, None]:
        """Run the queued requests in order. A request leaves the queue only
        once done, so a connection lost half-way leaves it to be run again
        (each step is idempotent) after the reconnect."""
        while True:
            with self._lock:
                if not self._requests:
                    return
                request = self._requests[0]
            if request.add:
                yield from self._add(request.sink)
            else:
                yield from self._remove(request.sink)
            with self._lock:
                self._requests.popleft()
            request.done(None)

    def _add(self, sink: NoteSink) -> Generator[Run, Any, None]:
        if getattr(sink, "closed", False):
            return
        pairs = [(self._channel_for(name), name) for name in sorted(sink.channels)]
        for pg_channel, _ in pairs:
            if pg_channel not in self._routes:
                yield _listen(pg_channel)
        for pg_channel, name in pairs:
            self._routes.setdefault(pg_channel, (name, set()))[1].add(sink)

    def _remove(self, sink: NoteSink) -> Generator[Run, Any, None]:
        for name in sink.channels:
            pg_channel = self._channel_for(name)
            route = self._routes.get(pg_channel)
            if route is None:
                continue
            route[1].discard(sink)
            if not route[1]:
                del self._routes[pg_channel]
                yield _unlisten(pg_channel)

    def _route(self, channel: str, payload: str) -> None:
        if channel == self.wake_channel:
            self._wakes.bump(payload)
            return
        route = self._routes.get(channel)
        if route is None:
            return  # the control channel, or a channel just unlistened
        name, sinks = route
        text = payload.partition(":")[2]  # behind the tag (docs/adr/0008)
        for sink in list(sinks):
            sink.deliver(name, text)

    def _fail_pending(self) -> None:
        with self._lock:
            pending = list(self._requests)
            self._requests.clear()
        for request in pending:
            request.done(StoreClosed("the store was closed"))


# ---------------------------------------------------------------- runners


class ThreadListener:
    """Runs a :class:`ListenerCore` on a thread of its own (the sync store)."""

    def __init__(
        self,
        core: ListenerCore,
        connect: Callable[[], psycopg.Connection[Any]],
        poke: Callable[[str], None],
        timeout_s: float,
    ) -> None:
        self.core = core
        self._connect = connect
        self._poke = poke
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._attempted = threading.Event()
        self.conn: psycopg.Connection[Any] | None = None
        core.on_attempt = self._attempted.set

    @property
    def started(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        """Start the thread; returns once its first connection attempt is
        over, so that a blocked call that re-checks after this cannot miss a
        commit. Never raises: when the server cannot be reached the thread
        keeps trying and blocked calls poll meanwhile."""
        with self._lock:
            if self._thread is None and not self.core.stopping:
                self._thread = threading.Thread(
                    target=self._run, name="alkstore-pg-listener", daemon=True
                )
                self._thread.start()
        self._attempted.wait(self._timeout_s)

    def stop(self) -> None:
        self.core.stop()
        self._stop.set()
        thread = self._thread
        if thread is not None:
            self._poke(self.core.ctl_channel)
            thread.join(IDLE_S + self._timeout_s)
            if thread.is_alive():  # pragma: no cover - stuck in a connect
                log.warning("listener thread did not stop in time")

    def subscribe(self, sink: NoteSink) -> None:
        """Route *sink*'s channels to it; returns once their LISTEN ran, so
        that it receives everything committed from now on (N-1)."""
        self.start()
        done = threading.Event()
        errors: list[BaseException] = []

        def finish(error: BaseException | None) -> None:
            if error is not None:
                errors.append(error)
            done.set()

        self.core.submit(True, sink, finish)
        self._poke(self.core.ctl_channel)
        if not done.wait(self._timeout_s):
            raise TransientError(
                f"the listener connection did not LISTEN within {self._timeout_s:g} s"
            )
        if errors:
            raise errors[0]

    def unsubscribe(self, sink: NoteSink) -> None:
        with contextlib.suppress(StoreClosed):
            self.core.submit(False, sink, lambda error: None)

    def _run(self) -> None:
        plan = self.core.plan()
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                step = plan.throw(error) if error is not None else plan.send(value)
            except StopIteration:
                return
            value, error = None, None
            try:
                if step is CONNECT:
                    self.conn = self._connect()
                elif isinstance(step, Run):
                    assert self.conn is not None
                    self.conn.execute(step.text)
                elif isinstance(step, Wait):
                    assert self.conn is not None
                    gen = self.conn.notifies(timeout=step.timeout_s, stop_after=1)
                    value = [(n.channel, n.payload) for n in gen]
                elif isinstance(step, Pause):
                    self._stop.wait(step.seconds)
                elif step is CLOSE:
                    conn, self.conn = self.conn, None
                    if conn is not None:
                        with contextlib.suppress(Exception):
                            conn.close()
            except _LOST as exc:
                error = exc


class TaskListener:
    """Runs a :class:`ListenerCore` as a task on the event loop (the async
    store): the loop is never blocked (A-2)."""

    def __init__(
        self,
        core: ListenerCore,
        connect: Callable[[], Awaitable[psycopg.AsyncConnection[Any]]],
        poke: Callable[[str], Awaitable[None]],
        timeout_s: float,
    ) -> None:
        self.core = core
        self._connect = connect
        self._poke = poke
        self._timeout_s = timeout_s
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._attempted = asyncio.Event()
        self.conn: psycopg.AsyncConnection[Any] | None = None
        core.on_attempt = self._attempted.set

    @property
    def started(self) -> bool:
        return self._task is not None

    async def start(self) -> None:
        if self._task is None and not self.core.stopping:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="alkstore-pg-listener"
            )
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._attempted.wait(), self._timeout_s)

    async def stop(self) -> None:
        self.core.stop()
        self._stop.set()
        task = self._task
        if task is None:
            return
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._poke(self.core.ctl_channel), IDLE_S)
        try:
            await asyncio.wait_for(asyncio.shield(task), IDLE_S + self._timeout_s)
        except (asyncio.TimeoutError, Exception):  # pragma: no cover - stuck
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    async def subscribe(self, sink: NoteSink) -> None:
        await self.start()
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def settle(error: BaseException | None) -> None:
            if done.done():
                return
            if error is None:
                done.set_result(None)
            else:
                done.set_exception(error)

        def finish(error: BaseException | None) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closed
                loop.call_soon_threadsafe(settle, error)

        self.core.submit(True, sink, finish)
        with contextlib.suppress(Exception):
            await self._poke(self.core.ctl_channel)
        try:
            await asyncio.wait_for(asyncio.shield(done), self._timeout_s)
        except asyncio.TimeoutError:
            raise TransientError(
                f"the listener connection did not LISTEN within {self._timeout_s:g} s"
            ) from None

    async def unsubscribe(self, sink: NoteSink) -> None:
        with contextlib.suppress(StoreClosed):
            self.core.submit(False, sink, lambda error: None)

    async def _run(self) -> None:
        plan = self.core.plan()
        value: Any = None
        error: BaseException | None = None
        try:
            while True:
                try:
                    step = plan.throw(error) if error is not None else plan.send(value)
                except StopIteration:
                    return
                value, error = None, None
                try:
                    if step is CONNECT:
                        self.conn = await self._connect()
                    elif isinstance(step, Run):
                        assert self.conn is not None
                        await self.conn.execute(step.text)
                    elif isinstance(step, Wait):
                        assert self.conn is not None
                        gen = self.conn.notifies(timeout=step.timeout_s, stop_after=1)
                        value = [(n.channel, n.payload) async for n in gen]
                    elif isinstance(step, Pause):
                        with contextlib.suppress(asyncio.TimeoutError):
                            await asyncio.wait_for(self._stop.wait(), step.seconds)
                    elif step is CLOSE:
                        conn, self.conn = self.conn, None
                        if conn is not None:
                            with contextlib.suppress(Exception):
                                await conn.close()
                except _LOST as exc:
                    error = exc
        finally:
            conn, self.conn = self.conn, None
            if conn is not None:
                with contextlib.suppress(Exception):
                    await conn.close()


# ------------------------------------------------------------------ poller


class WatchedWakeBoard(WakeBoard):
    """A :class:`WakeBoard` that remembers every key a blocked call waited
    on, for the poller to probe."""

    def __init__(self) -> None:
        super().__init__()
        self._watch_lock = threading.Lock()
        self._watched: dict[str, None] = {}

    def generation(self, keys: Sequence[str]) -> int:
        with self._watch_lock:
            for key in keys:
                self._watched.setdefault(key, None)
        return super().generation(keys)

    def watched(self) -> list[str]:
        with self._watch_lock:
            return list(self._watched)


class PollCore:
    """The poller's memory: the last fingerprint of each key. A key seen for
    the first time is bumped too: the caller that started watching it may
    have looked just before a change."""

    def __init__(self, wakes: WatchedWakeBoard) -> None:
        self.wakes = wakes
        self._seen: dict[str, str] = {}
        self.healthy = True

    def update(self, rows: Sequence[tuple[str, str]]) -> None:
        for key, fingerprint in rows:
            if self._seen.get(key) != fingerprint:
                self._seen[key] = fingerprint
                self.wakes.bump(key)


class ThreadPoller:
    """One probe every *poll_s* on a thread of its own (the sync store)."""

    def __init__(
        self,
        core: PollCore,
        probe: Callable[[list[str]], list[tuple[str, str]]],
        poll_s: float,
    ) -> None:
        self.core = core
        self._probe = probe
        self._poll_s = poll_s
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        with self._lock:
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(
                    target=self._run, name="alkstore-pg-poller", daemon=True
                )
                self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)

    def _run(self) -> None:
        while not self._stop.is_set():
            keys = self.core.wakes.watched()
            if keys:
                try:
                    self.core.update(self._probe(keys))
                    self.core.healthy = True
                except StoreClosed:
                    return
                except Exception as exc:  # an engine error: keep polling
                    self.core.healthy = False
                    log.warning("wake poll failed: %s", exc)
            self._stop.wait(self._poll_s)


class TaskPoller:
    """:class:`ThreadPoller` as a task on the event loop (the async store)."""

    def __init__(
        self,
        core: PollCore,
        probe: Callable[[list[str]], Awaitable[list[tuple[str, str]]]],
        poll_s: float,
    ) -> None:
        self.core = core
        self._probe = probe
        self._poll_s = poll_s
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None and not self._stop.is_set():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="alkstore-pg-poller"
            )

    async def stop(self) -> None:
        self._stop.set()
        task = self._task
        if task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(task), 5.0)
            except (asyncio.TimeoutError, Exception):  # pragma: no cover
                task.cancel()

    async def _run(self) -> None:
        while not self._stop.is_set():
            keys = self.core.wakes.watched()
            if keys:
                try:
                    self.core.update(await self._probe(keys))
                    self.core.healthy = True
                except StoreClosed:
                    return
                except Exception as exc:
                    self.core.healthy = False
                    log.warning("wake poll failed: %s", exc)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self._poll_s)
