# Generated from _combine_async.py by scripts/async_to_sync.py: edit that file, not this one.
"""Producer group commit for PostgreSQL (docs/adr/0008).

Concurrent plain enqueues without ``tx=`` (a web application's request
threads, or the tasks of one event loop) would each commit on their own,
and PostgreSQL serializes commits that NOTIFY on one lock: sixteen threads
enqueued slower than one. Instead, a caller alone runs its own statement at
once; callers arriving meanwhile queue up, and the next statement takes all
of them into one statement and one commit. Every caller returns only after
the commit that holds its own jobs; nobody's durability is weakened.

Who runs that next statement differs between the faces. On threads, the
caller that finished hands the lead to the first waiting caller, which runs
the batch on its own thread (leader and followers). On an event loop, a
task of the combiner's own drains the waiting callers, so that cancelling
one caller never cancels the others' statement: a cancelled caller whose
request was not taken yet is dropped (nothing of it is written); once
taken, its rows commit with the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from alkstore._acompat import Event
from alkstore.engine import Inserted, NewJob
from alkstore.engine.groupcommit import Turn, Turns

__all__ = ["MAX_ROWS", "EnqueueCombiner"]

#: Most jobs one combined statement carries.
MAX_ROWS = 1_000


class Single(Protocol):
    """One caller's plain enqueue, as its own statement and commit."""

    def __call__(self, queue: str, jobs: Sequence[NewJob], /) -> list[Inserted]: ...


class Many(Protocol):
    """The plain enqueues of several callers as one statement and one commit;
    the ids in the callers' order."""

    def __call__(self, batches: Sequence[tuple[str, Sequence[NewJob]]], /) -> list[int]: ...


class _Waiter(Turn):
    """A queued caller, woken once its outcome is in, or (on threads) when it
    is handed the lead and runs the next batch itself."""

    __slots__ = ("error", "jobs", "queue", "result")

    def __init__(self, queue: str, jobs: Sequence[NewJob]) -> None:
        super().__init__()
        self.queue = queue
        self.jobs = jobs
        self.result: list[Inserted] | None = None
        self.error: BaseException | None = None

    def outcome(self) -> list[Inserted]:
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


def _rows(waiter: _Waiter) -> int:
    return len(waiter.jobs)


class EnqueueCombiner:
    """Group commit of one store's plain enqueues: one running batch at a
    time (the kit's :class:`~alkstore.engine.groupcommit.Turns`)."""

    def __init__(self, single: Single, many: Many) -> None:
        self._single = single
        self._many = many
        # On the async face only tasks of one loop come here: the mutex is
        # never contended there, and nothing waits while it is held.
        self._turns: Turns[_Waiter] = Turns(Event)

    def submit(self, queue: str, jobs: Sequence[NewJob]) -> list[Inserted]:
        """Insert *jobs* into *queue*, alone or combined with the callers
        waiting meanwhile; returns after the commit that holds them."""
        waiter = self._turns.enter(lambda: _Waiter(queue, jobs))
        if waiter is None:  # alone: run at once, on the caller's own thread or task
            try:
                return self._single(queue, jobs)
            finally:
                self._hand_over()
        if self._turns.wait(waiter):  # handed the lead
            try:
                self._lead(waiter)
            finally:
                self._hand_over()
        return waiter.outcome()

    def _hand_over(self) -> None:
        """After a batch: the next one goes to a task of the combiner's own
        (async), or to the first waiting caller (threads)."""
        self._turns.hand_over()

    def _run_batch(self, batch: list[_Waiter]) -> None:
        """One statement and one commit for *batch*: each caller gets its own
        ids, or all of them the one error."""
        try:
            if len(batch) == 1:
                batch[0].result = self._single(batch[0].queue, batch[0].jobs)
                return
            ids = self._many([(r.queue, r.jobs) for r in batch])
        except BaseException as exc:  # the one commit failed for everyone in it
            for req in batch:
                req.error = exc
            return
        at = 0
        for req in batch:
            req.result = [Inserted(i) for i in ids[at : at + len(req.jobs)]]
            at += len(req.jobs)

    def _lead(self, first: _Waiter) -> None:
        batch = self._turns.take(first, MAX_ROWS, _rows)
        try:
            self._run_batch(batch)
        finally:
            Turns.finish(batch[1:])
