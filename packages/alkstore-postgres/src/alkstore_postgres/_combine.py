"""Producer group commit for PostgreSQL (docs/adr/0008).

Concurrent plain enqueues without ``tx=`` (a web application's request
threads) would each commit on their own, and PostgreSQL serializes commits
that NOTIFY on one lock: sixteen threads enqueued slower than one. Instead,
the first caller runs; callers arriving meanwhile queue up, and the next
caller to run takes all of them into one statement and one commit. Every
caller returns only after the commit that holds its own jobs; nobody's
durability is weakened. A caller alone runs its own statement at once.

The async store does the same for tasks of its event loop
(:class:`AsyncEnqueueCombiner`): a task that arrives while an enqueue runs
waits for the next combined statement, run by a task of the combiner's own,
so that cancelling one caller never cancels the others' statement. A
cancelled caller whose request was not taken yet is dropped (nothing of it
is written); once taken, its rows commit with the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Sequence

from alkstore.engine import Inserted, NewJob

__all__ = ["AsyncEnqueueCombiner", "EnqueueCombiner"]

#: Most jobs one combined statement carries.
MAX_ROWS = 1_000

_WAITING, _LEAD, _DONE = 0, 1, 2


class _Request:
    __slots__ = ("error", "event", "jobs", "queue", "result", "state")

    def __init__(self, queue: str, jobs: Sequence[NewJob]) -> None:
        self.queue = queue
        self.jobs = jobs
        self.state = _WAITING
        self.result: list[Inserted] | None = None
        self.error: BaseException | None = None
        self.event: threading.Event | None = None


class EnqueueCombiner:
    """Leader and followers: one running batch at a time per store."""

    def __init__(
        self,
        single: Callable[[str, Sequence[NewJob]], list[Inserted]],
        many: Callable[[Sequence[tuple[str, Sequence[NewJob]]]], list[int]],
    ) -> None:
        self._single = single
        self._many = many
        self._mutex = threading.Lock()
        self._waiting: deque[_Request] = deque()
        self._busy = False

    def submit(self, queue: str, jobs: Sequence[NewJob]) -> list[Inserted]:
        req = _Request(queue, jobs)
        with self._mutex:
            if self._busy:
                event = req.event = threading.Event()
                self._waiting.append(req)
            else:
                self._busy = True
                event = None
        if event is not None:
            event.wait()
            if req.state == _DONE:
                if req.error is not None:
                    raise req.error
                assert req.result is not None
                return req.result
        try:
            self._lead(req)
        finally:
            self._hand_over()
        if req.error is not None:
            raise req.error
        assert req.result is not None
        return req.result

    def _lead(self, first: _Request) -> None:
        batch = [first]
        rows = len(first.jobs)
        with self._mutex:
            while self._waiting and rows + len(self._waiting[0].jobs) <= MAX_ROWS:
                nxt = self._waiting.popleft()
                batch.append(nxt)
                rows += len(nxt.jobs)
        try:
            if len(batch) == 1:
                first.result = self._single(first.queue, first.jobs)
                return
            ids = self._many([(r.queue, r.jobs) for r in batch])
            at = 0
            for req in batch:
                req.result = [Inserted(i) for i in ids[at : at + len(req.jobs)]]
                at += len(req.jobs)
        except BaseException as exc:  # the one commit failed for everyone in it
            for req in batch:
                req.error = exc
        finally:
            for req in batch[1:]:
                req.state = _DONE
                assert req.event is not None
                req.event.set()

    def _hand_over(self) -> None:
        with self._mutex:
            if self._waiting:
                nxt = self._waiting.popleft()
                nxt.state = _LEAD
                assert nxt.event is not None
                nxt.event.set()
            else:
                self._busy = False


class _AsyncRequest:
    __slots__ = ("future", "jobs", "queue")

    def __init__(self, queue: str, jobs: Sequence[NewJob], future: asyncio.Future[list[Inserted]]):
        self.queue = queue
        self.jobs = jobs
        self.future = future


class AsyncEnqueueCombiner:
    """:class:`EnqueueCombiner` for the tasks of one event loop."""

    def __init__(
        self,
        single: Callable[[str, Sequence[NewJob]], Awaitable[list[Inserted]]],
        many: Callable[[Sequence[tuple[str, Sequence[NewJob]]]], Awaitable[list[int]]],
    ) -> None:
        self._single = single
        self._many = many
        self._waiting: deque[_AsyncRequest] = deque()
        self._busy = False
        self._drainer: asyncio.Task[None] | None = None

    async def submit(self, queue: str, jobs: Sequence[NewJob]) -> list[Inserted]:
        if not self._busy:
            self._busy = True  # alone: run at once, on the caller's task
            try:
                return await self._single(queue, jobs)
            finally:
                self._hand_over()
        future: asyncio.Future[list[Inserted]] = asyncio.get_running_loop().create_future()
        req = _AsyncRequest(queue, jobs, future)
        self._waiting.append(req)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            if req in self._waiting:
                self._waiting.remove(req)  # not taken: nothing of it is written
            else:  # taken: its outcome is nobody's now
                future.add_done_callback(_forget)
            raise

    def _hand_over(self) -> None:
        if self._waiting:
            self._drainer = asyncio.get_running_loop().create_task(self._drain())
        else:
            self._busy = False

    async def _drain(self) -> None:
        try:
            while self._waiting:
                batch = [self._waiting.popleft()]
                rows = len(batch[0].jobs)
                while self._waiting and rows + len(self._waiting[0].jobs) <= MAX_ROWS:
                    batch.append(self._waiting.popleft())
                    rows += len(batch[-1].jobs)
                try:
                    if len(batch) == 1:
                        result = await self._single(batch[0].queue, batch[0].jobs)
                        _settle(batch[0].future, result)
                        continue
                    ids = await self._many([(r.queue, r.jobs) for r in batch])
                except BaseException as exc:  # the one commit failed for everyone in it
                    for req in batch:
                        if not req.future.done():
                            req.future.set_exception(exc)
                    if not isinstance(exc, Exception):
                        raise
                    continue
                at = 0
                for req in batch:
                    _settle(req.future, [Inserted(i) for i in ids[at : at + len(req.jobs)]])
                    at += len(req.jobs)
        finally:
            self._busy = False
            self._drainer = None


def _settle(future: asyncio.Future[list[Inserted]], result: list[Inserted]) -> None:
    if not future.done():
        future.set_result(result)


def _forget(future: asyncio.Future[list[Inserted]]) -> None:
    with contextlib.suppress(BaseException):
        future.exception()  # retrieved, so that asyncio does not warn
