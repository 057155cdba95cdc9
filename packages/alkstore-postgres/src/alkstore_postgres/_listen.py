# Generated from _listen_async.py by scripts/async_to_sync.py: edit that file, not this one.
"""Wakes and notifications in: the listener connection, and the poller that
replaces it behind a transaction pooler (docs/adr/0003, docs/adr/0008).

**The listener.** One connection per store, outside the pool, in autocommit,
LISTENs on the schema's wake channel and on the channels of the store's
listeners. Its life is one plan, :meth:`~._listen_base.ListenerCore.plan`
(connect, LISTEN, wait for notifications, route them, reconnect with
backoff), run by :class:`ListenerLoop`: a task on the event loop for
the async store, a thread of its own for the sync store. psycopg holds the
connection while it waits for notifications, so ``LISTEN``/``UNLISTEN``
requests are queued to the loop and served between two waits; a requester
interrupts the wait with an empty NOTIFY on the listener's private control
channel. Wake payloads bump the store's :class:`~alkstore.engine.WakeBoard`;
other channels go to their sinks.

When the connection drops, the loop reconnects with backoff, re-issues
every ``LISTEN`` and bumps every wake key: notifications sent meanwhile are
lost, so sleepers must look again. Blocked calls also poll, so a dead
listener slows wakes down but never loses work (Q-19).

**The poller** (EN-4, a transaction pooler without ``listen_url``): a pooled
connection cannot LISTEN, so one probe per store every ``poll_s``
(:data:`._sql.WAKE_PROBE`) reads a fingerprint of every watched key and
bumps the keys whose fingerprint moved: :class:`Poller`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Any, Protocol

import psycopg

from alkstore._acompat import Event, Spawned, event_wait, join, spawn
from alkstore.engine import NoteSink, Step, run_plan
from alkstore.errors import StoreClosed, TransientError

from ._listen_base import (
    CLOSE,
    CONNECT,
    IDLE_S,
    LOST,
    ListenerCore,
    Pause,
    PollCore,
    Run,
    Wait,
)

__all__ = ["ListenerLoop", "Poller"]

log = logging.getLogger("alkstore.postgres")


class Connect(Protocol):
    """Opens the listener connection."""

    def __call__(self) -> psycopg.Connection[Any]: ...


class Poke(Protocol):
    """Interrupts the listener's wait with an empty NOTIFY on *channel*
    (best effort: never raises)."""

    def __call__(self, channel: str) -> None: ...


class Probe(Protocol):
    """The poller's probe: the fingerprint of each of *keys*."""

    def __call__(self, keys: list[str]) -> list[tuple[str, str]]: ...


class ListenerLoop:
    """Runs a :class:`~._listen_base.ListenerCore`: as a task on the event
    loop for the async store, which is never blocked (A-2); on a thread of
    its own for the sync store."""

    def __init__(self, core: ListenerCore, connect: Connect, poke: Poke, timeout_s: float) -> None:
        self.core = core
        self._connect = connect
        self._poke = poke
        self._timeout_s = timeout_s
        # Guards the start; nothing waits while it is held.
        self._lock = threading.Lock()
        self._runner: Spawned | None = None
        self._stop = Event()
        self._attempted = Event()
        self.conn: psycopg.Connection[Any] | None = None
        core.on_attempt = self._attempted.set

    @property
    def started(self) -> bool:
        return self._runner is not None

    def start(self) -> None:
        """Start the loop; returns once its first connection attempt is
        over, so that a blocked call that re-checks after this cannot miss a
        commit. Never raises: when the server cannot be reached the loop
        keeps trying and blocked calls poll meanwhile."""
        with self._lock:
            if self._runner is None and not self.core.stopping:
                self._runner = spawn(self._run, "alkstore-pg-listener")
        event_wait(self._attempted, self._timeout_s)

    def stop(self) -> None:
        self.core.stop()
        self._stop.set()
        runner = self._runner
        if runner is None:
            return
        self._poke(self.core.ctl_channel)
        join(runner, IDLE_S + self._timeout_s)
        if runner.is_alive():  # pragma: no cover - stuck in a connect
            log.warning("listener thread did not stop in time")

    def subscribe(self, sink: NoteSink) -> None:
        """Route *sink*'s channels to it; returns once their LISTEN ran, so
        that it receives everything committed from now on (N-1)."""
        self.start()
        done = Event()
        errors: list[BaseException] = []

        def finish(error: BaseException | None) -> None:
            # Called by the loop's runner (on the event loop for the async store).
            if error is not None:
                errors.append(error)
            done.set()

        self.core.submit(True, sink, finish)
        with contextlib.suppress(Exception):
            self._poke(self.core.ctl_channel)
        if not event_wait(done, self._timeout_s):
            raise TransientError(
                f"the listener connection did not LISTEN within {self._timeout_s:g} s"
            )
        if errors:
            raise errors[0]

    def unsubscribe(self, sink: NoteSink) -> None:
        with contextlib.suppress(StoreClosed):
            self.core.submit(False, sink, lambda error: None)

    def _run(self) -> None:
        try:
            run_plan(self.core.plan(), self._perform, LOST)
        finally:
            self._close()

    def _perform(self, step: Step | Run | Wait | Pause) -> Any:
        if step is CONNECT:
            self.conn = self._connect()
        elif isinstance(step, Run):
            assert self.conn is not None
            self.conn.execute(step.text)
        elif isinstance(step, Wait):
            assert self.conn is not None
            gen = self.conn.notifies(timeout=step.timeout_s, stop_after=1)
            return [(n.channel, n.payload) for n in gen]
        elif isinstance(step, Pause):
            event_wait(self._stop, step.seconds)
        elif step is CLOSE:
            self._close()
        return None

    def _close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()


class Poller:
    """One probe every *poll_s* (EN-4): a task on the event loop for the
    async store, a thread of its own for the sync store."""

    def __init__(self, core: PollCore, probe: Probe, poll_s: float) -> None:
        self.core = core
        self._probe = probe
        self._poll_s = poll_s
        # Guards the start; nothing waits while it is held.
        self._lock = threading.Lock()
        self._stop = Event()
        self._runner: Spawned | None = None

    def start(self) -> None:
        with self._lock:
            if self._runner is None and not self._stop.is_set():
                self._runner = spawn(self._run, "alkstore-pg-poller")

    def stop(self) -> None:
        self._stop.set()
        if self._runner is not None:
            join(self._runner, 5.0)

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
            event_wait(self._stop, self._poll_s)
