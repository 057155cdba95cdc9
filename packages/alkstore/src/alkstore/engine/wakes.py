"""Wakes: how blocked calls learn that a commit may have made work (Q-19).

:class:`WakeBoard` keeps a generation counter per key (a queue name,
``"stream:<name>"``, the scheduler's key) that an engine bumps from whatever
thread sees a commit; threads and asyncio tasks wait on it alike. The
blocking loop of every ``claim(wait_s=...)``, ``claim_any``,
``Stream.wait`` and rate-limit wait is written once, as the plan
:func:`blocking_plan`, and run by the runner of each face
(:mod:`.runners_async`, the source of :mod:`.runners`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Generator, Sequence
from typing import Any, TypeVar

__all__ = [
    "ATTEMPT",
    "CLOSE_CHECK_S",
    "FALLBACK_POLL_S",
    "GENERATION",
    "NEXT_READY",
    "START_WAKES",
    "Plan",
    "Sleep",
    "Step",
    "WakeBoard",
    "blocking_plan",
]

T = TypeVar("T")

#: Longest a blocking call sleeps before it looks at the database again even
#: though no wake arrived: wakes are hints (Q-19), this is the safety net.
FALLBACK_POLL_S = 5.0
#: The pause before re-attempting when a row is ready but the attempt got
#: nothing: short, but never a spin.
RETRY_READY_S = 0.005
#: How often a blocked thread checks whether its store was closed.
CLOSE_CHECK_S = 0.25


class _AsyncWaiter:
    __slots__ = ("future", "keys", "loop")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[None], keys: frozenset[str]
    ) -> None:
        self.loop = loop
        self.future = future
        self.keys = keys


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class WakeBoard:
    """Generation counters per key, waited on by threads and asyncio tasks.

    A waiter reads :meth:`generation` before it checks the database, then
    waits until the generation moves past what it read: a wake that lands
    between the check and the wait is never lost. Engines :meth:`bump` a key
    when a commit may have made work for it and :meth:`bump_all` when they
    cannot tell (SQLite's ``data_version``) or may have missed wakes (a
    reconnect). Safe from any thread.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._gens: dict[str, int] = {}
        self._epoch = 0
        self._closed = False
        self._async: list[_AsyncWaiter] = []

    @property
    def closed(self) -> bool:
        return self._closed

    def generation(self, keys: Sequence[str]) -> int:
        """The combined generation of *keys*; reading it registers them."""
        with self._cond:
            gens = self._gens
            return self._epoch + sum(gens.setdefault(k, 0) for k in keys)

    def _current(self, keys: Sequence[str] | frozenset[str]) -> int:
        return self._epoch + sum(self._gens.get(k, 0) for k in keys)

    def bump(self, key: str) -> None:
        """Wake the waiters of *key*. A key nobody ever waited on is not
        recorded: wakes for every queue of a database must not grow memory."""
        with self._cond:
            if key not in self._gens:
                return
            self._gens[key] += 1
            self._cond.notify_all()
            if self._async:
                self._wake_async(key)

    def bump_all(self) -> None:
        with self._cond:
            self._epoch += 1
            self._cond.notify_all()
            if self._async:
                self._wake_async(None)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._epoch += 1
            self._cond.notify_all()
            self._wake_async(None)

    def _wake_async(self, key: str | None) -> None:
        keep: list[_AsyncWaiter] = []
        for waiter in self._async:
            if key is None or key in waiter.keys:
                with contextlib.suppress(RuntimeError):  # the waiter's loop is closed
                    waiter.loop.call_soon_threadsafe(_resolve, waiter.future)
            else:
                keep.append(waiter)
        self._async = keep

    def wait(self, keys: Sequence[str], seen: int, timeout_s: float) -> bool:
        """Block the thread until *keys* moved past *seen* or *timeout_s*
        passed; ``True`` when woken. Returns at once after :meth:`close`."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._current(keys) == seen and not self._closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    async def wait_async(self, keys: Sequence[str], seen: int, timeout_s: float) -> bool:
        """:meth:`wait` for an asyncio task: the loop is never blocked (A-2)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        waiter = _AsyncWaiter(loop, future, frozenset(keys))
        with self._cond:
            if self._current(keys) != seen or self._closed:
                return True
            self._async.append(waiter)
        try:
            await asyncio.wait_for(future, timeout_s)
            return True
        except asyncio.TimeoutError:
            return False
        finally:
            with self._cond:
                if waiter in self._async:
                    self._async.remove(waiter)


# ----------------------------------------------------------- the one loop


class Step:
    """A named step a plan (a generator) asks its runner to take: the
    blocking loop's, the scheduler loop's and an engine's listener's."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"


#: Read the wake generation of the keys (and check that the store is open).
GENERATION = Step("generation")
#: Run the attempt; its result goes back to the plan.
ATTEMPT = Step("attempt")
#: Start the engine's wake source (once, before the first sleep).
START_WAKES = Step("start_wakes")
#: Ask how soon a row is ready (``None`` without a next-ready probe).
NEXT_READY = Step("next_ready")


class Sleep:
    """Sleep until the monotonic time ``until`` or a wake past ``seen``."""

    __slots__ = ("seen", "until")

    def __init__(self, until: float, seen: int) -> None:
        self.until = until
        self.seen = seen


Plan = Generator["Step | Sleep", Any, Any]


def blocking_plan(wait_s: float, fallback_s: float | None, lazy_wakes: bool) -> Plan:
    """The blocking loop (Q-19), as steps for a runner.

    Attempts until the attempt returns something truthy or *wait_s* runs
    out. Between attempts it sleeps until a wake, until the next row is ready
    (never sleeping through one: a row that is ready but was not taken is
    retried after a short pause), or at most *fallback_s*. With *lazy_wakes*
    the wake source starts only before the first sleep, followed by a fresh
    attempt, so a commit made meanwhile cannot be missed.
    """
    deadline = time.monotonic() + wait_s
    started = not lazy_wakes
    while True:
        seen = yield GENERATION
        result = yield ATTEMPT
        now = time.monotonic()
        if result or now >= deadline:
            return result
        if not started:
            started = True
            yield START_WAKES
            continue
        wake_at = deadline if fallback_s is None else min(deadline, now + fallback_s)
        ready_in = yield NEXT_READY
        if ready_in is not None:
            wake_at = min(wake_at, now + max(ready_in, RETRY_READY_S))
        yield Sleep(wake_at, seen)
