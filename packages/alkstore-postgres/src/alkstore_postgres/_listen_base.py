"""What the listener and the poller of both faces share (docs/adr/0003,
docs/adr/0008): the listener's plan and routes (:class:`ListenerCore`), the
poller's memory (:class:`PollCore`) and the wake board it probes; the loops
that run them, a thread or a task, are :mod:`._listen_async`.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import deque
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from alkstore.engine import NoteSink, Step, WakeBoard
from alkstore.errors import StoreClosed

__all__ = [
    "CLOSE",
    "CONNECT",
    "IDLE_S",
    "KEEPALIVES",
    "LOST",
    "ListenerCore",
    "Pause",
    "PollCore",
    "Run",
    "Wait",
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
LOST = (psycopg.Error, OSError)


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
            except LOST as exc:
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
