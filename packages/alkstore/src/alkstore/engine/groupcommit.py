"""Leader and followers: the one group-commit primitive of the engines
(docs/adr/0008, docs/adr/0017).

Many callers want to commit small writes; a database commits faster in
groups. A :class:`Turns` queue lets one group run at a time: a caller that
finds nothing running runs at once (it *leads*); callers arriving meanwhile
queue up, and whoever runs the next group takes every queued caller that
fits with it, runs their writes together, and wakes them with their
outcomes (:meth:`Turns.finish`). Nobody returns before the commit that holds
their own write.

Who runs the next group is the engine's choice. On threads, the caller that
finished hands the lead to the first queued caller, which runs the next
group on its own thread (:meth:`Turns.hand_over`); on an event loop, a task
of the engine's own can drain the queue instead (``lead=False``), so that
cancelling one caller never cancels the others' statement.

SQLite's write queue (one per database file and process) and PostgreSQL's
producer combiner (one per store) are built on it; what a write is, how a
group commits, and which errors reach whom stay theirs.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Generic, Protocol, TypeVar

__all__ = ["DONE", "LEAD", "WAITING", "Turn", "Turns"]

#: A queued turn's states: waiting in the queue, handed the lead, finished by a group.
WAITING, LEAD, DONE = 0, 1, 2


class Signal(Protocol):
    """What wakes a queued caller: ``threading.Event`` or the loop's event."""

    def set(self) -> None: ...


class Turn:
    """One caller's place in :class:`Turns`; engines subclass it with their
    request's fields. ``event`` is made only when the caller has to wait."""

    __slots__ = ("event", "state")

    def __init__(self) -> None:
        self.state = WAITING
        self.event: Signal | None = None


R = TypeVar("R", bound=Turn)


class Turns(Generic[R]):
    """One running group at a time, and the callers queued behind it."""

    def __init__(self, signal: Callable[[], Signal] = threading.Event) -> None:
        self._signal = signal
        self.mutex = threading.Lock()
        self.waiting: deque[R] = deque()
        self.busy = False

    def enter(self, make: Callable[[], R]) -> R | None:
        """``None`` when nothing runs: the caller leads now. Else its turn,
        made by *make* (only then: a caller alone pays for nothing), queued
        with a fresh ``event`` to wait on."""
        with self.mutex:
            if not self.busy:
                self.busy = True
                return None
            turn = make()
            turn.event = self._signal()
            self.waiting.append(turn)
            return turn

    def wait(self, turn: R, timeout_s: float | None = None) -> bool | None:
        """Block (threads only) until *turn* is handed the lead (``True``) or
        finished by a group (``False``); ``None`` when *timeout_s* passed
        first and *turn* left the queue unserved."""
        event = turn.event
        assert isinstance(event, threading.Event)
        if not event.wait(timeout_s):
            if self.withdraw(turn):
                return None
            event.wait()  # taken by a running group: it finishes soon
        return turn.state == LEAD

    def withdraw(self, turn: R) -> bool:
        """Take *turn* out of the queue if no group took it yet."""
        with self.mutex:
            if turn.state == WAITING and turn in self.waiting:
                self.waiting.remove(turn)
                return True
            return False

    def take(
        self,
        first: R,
        limit: int,
        weight: Callable[[R], int] = lambda _: 1,
        stop: Callable[[R], bool] | None = None,
    ) -> list[R]:
        """*first* and the queued turns behind it, in order, while their
        total *weight* stays within *limit* and *stop* does not say a turn
        must run alone (*first* always goes)."""
        group = [first]
        if not self.waiting:  # nobody queued: no need for the mutex
            return group
        total = weight(first)
        waiting = self.waiting
        with self.mutex:
            while waiting:
                nxt = waiting[0]
                if (stop is not None and stop(nxt)) or total + weight(nxt) > limit:
                    break
                group.append(waiting.popleft())
                total += weight(nxt)
        return group

    def hand_over(self, lead: bool = True) -> bool:
        """After a group: ``True`` when turns are queued (the queue stays
        busy; with *lead*, the first of them is handed the lead and woken),
        else the queue is free and ``False``."""
        with self.mutex:
            if not self.waiting:
                self.busy = False
                return False
            if lead:
                nxt = self.waiting.popleft()
                nxt.state = LEAD
                assert nxt.event is not None
                nxt.event.set()
            return True

    def free(self) -> None:
        """Nothing runs any more (a draining task of the engine ended)."""
        with self.mutex:
            self.busy = False

    @staticmethod
    def finish(group: Sequence[R]) -> None:
        """Wake the queued members of *group*: their outcomes are in."""
        for turn in group:
            turn.state = DONE
            if turn.event is not None:
                turn.event.set()
