"""The listener connection: NOTIFY in, wakes and notifications out (docs/adr/0003).

One connection per store, outside the pool, in autocommit, owned by one
thread that waits in ``notifies()``. psycopg holds the connection's lock
while it waits, so ``LISTEN``/``UNLISTEN`` requests are queued to that
thread and run between two waits; a requester wakes the thread with an
empty NOTIFY on the listener's private control channel. Wake-channel
payloads bump the store's :class:`~alkstore.engine.WakeBoard`; user channels
go to their :class:`~alkstore.engine.QueueListener` objects.

When the connection drops, the thread reconnects with backoff, re-issues
every ``LISTEN`` and bumps every wake key: notifications sent meanwhile are
lost, so sleepers must look again. Blocked calls also poll, so a dead
listener slows wakes down but never loses work (Q-19).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

from alkstore.engine import QueueListener, WakeBoard
from alkstore.errors import StoreClosed, TransientError
from alkstore.names import decode_payload
from alkstore.types import Notification

__all__ = ["PgListener"]

log = logging.getLogger("alkstore.postgres")

#: Longest wait in ``notifies()`` before the thread looks at its queue again
#: without being poked (unsubscribes do not poke).
_IDLE_S = 1.0
_RECONNECT_MIN_S = 0.05
_RECONNECT_MAX_S = 5.0
# TCP keepalives, so that a silently dead network is noticed by the kernel.
_KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
}


@dataclass(eq=False)
class _Request:
    """A LISTEN (``add``) or UNLISTEN (``remove``) for the thread to run."""

    add: bool
    listener: QueueListener
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None


class PgListener:
    """The listener connection of one store and the thread that serves it."""

    def __init__(
        self,
        conninfo: str,
        connect_kwargs: dict[str, Any],
        *,
        wake_channel: str,
        wakes: WakeBoard,
        channel_for: Callable[[str], str],
        poke: Callable[[str], None],
    ) -> None:
        self._conninfo = conninfo
        self._connect_kwargs = {**_KEEPALIVES, **connect_kwargs, "autocommit": True}
        self._wake_channel = wake_channel
        self._ctl_channel = f"alkstore_ctl_{uuid.uuid4().hex[:20]}"
        self._wakes = wakes
        self._channel_for = channel_for
        self._poke = poke
        self._lock = threading.Lock()
        self._requests: deque[_Request] = deque()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: psycopg.Connection[Any] | None = None
        self._connected = False
        # Owned by the thread: PostgreSQL channel -> (channel name, listeners).
        self._routes: dict[str, tuple[str, set[QueueListener]]] = {}

    @property
    def started(self) -> bool:
        return self._thread is not None

    @property
    def connected(self) -> bool:
        """Whether the thread holds a live connection right now."""
        return self._connected

    @property
    def backend_pid(self) -> int | None:
        """The server process of the listener connection (for tests)."""
        conn = self._conn
        return None if conn is None or conn.closed else conn.info.backend_pid

    # ------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Connect and start the thread; idempotent and never raises.

        The first connection is made here, in the caller's thread, so that
        the wake channel is listened to when this returns (a blocked call
        then re-checks once and cannot miss a commit). When the server cannot
        be reached, the thread keeps trying in the background and blocked
        calls poll meanwhile.
        """
        with self._lock:
            if self._thread is not None or self._stopping.is_set():
                return
            try:
                self._conn = self._connect()
                self._connected = True
            except (psycopg.Error, TransientError, OSError) as exc:
                log.warning("listener connection failed, retrying in the background: %s", exc)
            self._thread = threading.Thread(
                target=self._run, name=f"alkstore-listener-{self._wake_channel}", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        """Stop the thread and close the connection; pending requests fail."""
        self._stopping.set()
        thread = self._thread
        if thread is not None:
            self._poke(self._ctl_channel)
            thread.join(_IDLE_S + 5.0)
            if thread.is_alive():  # pragma: no cover - stuck in a connect
                log.warning("listener thread did not stop in time")
        self._fail_pending()

    def _connect(self) -> psycopg.Connection[Any]:
        conn = psycopg.connect(self._conninfo, **self._connect_kwargs)
        try:
            for channel in (self._wake_channel, self._ctl_channel, *self._routes):
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        except BaseException:
            conn.close()
            raise
        return conn

    # -------------------------------------------------------------- requests

    def subscribe(self, listener: QueueListener, timeout_s: float) -> None:
        """Route *listener*'s channels to it; returns once their LISTEN ran,
        so that it receives everything committed from now on (N-1)."""
        request = _Request(add=True, listener=listener)
        with self._lock:
            if self._stopping.is_set():
                raise StoreClosed("the store was closed")
            self._requests.append(request)
        self._poke(self._ctl_channel)
        if not request.done.wait(timeout_s):
            listener.close()
            raise TransientError(f"the listener connection did not LISTEN within {timeout_s} s")
        if request.error is not None:
            listener.close()
            raise request.error

    def unsubscribe(self, listener: QueueListener) -> None:
        """Stop routing to *listener*; its channels are UNLISTENed when no
        other listener needs them. Does not wait."""
        with self._lock:
            if not self._stopping.is_set():
                self._requests.append(_Request(add=False, listener=listener))

    def _fail_pending(self) -> None:
        with self._lock:
            pending = list(self._requests)
            self._requests.clear()
        for request in pending:
            request.error = StoreClosed("the store was closed")
            request.done.set()

    # ---------------------------------------------------------------- thread

    def _run(self) -> None:
        delay = _RECONNECT_MIN_S
        while not self._stopping.is_set():
            conn = self._conn
            try:
                if conn is None:
                    conn = self._conn = self._connect()
                    self._connected = True
                    log.info("listener connection re-established")
                    # Wakes sent while disconnected are lost: look again.
                    self._wakes.bump_all()
                delay = _RECONNECT_MIN_S
                self._serve(conn)
                for note in conn.notifies(timeout=_IDLE_S, stop_after=1):
                    self._route(note)
            except (psycopg.Error, OSError) as exc:
                self._connected = False
                if self._stopping.is_set():
                    break
                log.warning("listener connection lost (%s); reconnecting in %.2f s", exc, delay)
                if conn is not None:
                    conn.close()
                self._conn = None
                self._stopping.wait(delay)
                delay = min(delay * 2, _RECONNECT_MAX_S)
        self._connected = False
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _serve(self, conn: psycopg.Connection[Any]) -> None:
        """Run the queued requests in order. A request is taken off the queue
        only once done, so a connection lost half-way leaves it to be run
        again (each step is idempotent) after the reconnect."""
        while True:
            with self._lock:
                if not self._requests:
                    return
                request = self._requests[0]
            try:
                if request.add:
                    self._add(conn, request.listener)
                else:
                    self._remove(conn, request.listener)
            except psycopg.Error:
                raise  # the connection: reconnect, then run it again
            except Exception as exc:  # pragma: no cover - a bug, not the network
                request.error = exc
            with self._lock:
                self._requests.popleft()
            request.done.set()

    def _add(self, conn: psycopg.Connection[Any], listener: QueueListener) -> None:
        if listener.closed:
            return
        pairs = [(self._channel_for(name), name) for name in sorted(listener.channels)]
        for pg_channel, _ in pairs:
            if pg_channel not in self._routes:
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(pg_channel)))
        for pg_channel, name in pairs:
            self._routes.setdefault(pg_channel, (name, set()))[1].add(listener)

    def _remove(self, conn: psycopg.Connection[Any], listener: QueueListener) -> None:
        for name in listener.channels:
            pg_channel = self._channel_for(name)
            route = self._routes.get(pg_channel)
            if route is None:
                continue
            route[1].discard(listener)
            if not route[1]:
                del self._routes[pg_channel]
                conn.execute(sql.SQL("UNLISTEN {}").format(sql.Identifier(pg_channel)))

    def _route(self, note: psycopg.Notify) -> None:
        if note.channel == self._wake_channel:
            self._wakes.bump(note.payload)
            return
        route = self._routes.get(note.channel)
        if route is None:
            return  # the control channel, or a channel just unlistened
        name, listeners = route
        try:
            # Behind the tag that keeps identical notifications apart.
            payload = decode_payload(note.payload.partition(":")[2])
        except ValueError:
            log.warning("dropped a notification on %r that is not JSON", name)
            return
        for listener in list(listeners):
            listener.deliver(Notification(name, payload))
