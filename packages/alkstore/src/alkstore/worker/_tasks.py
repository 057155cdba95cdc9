"""``AsyncWorker``: the worker on the caller's event loop (A-5).

For asyncio applications (a FastAPI lifespan, an aiohttp app): coroutine
handlers run as tasks, at most ``concurrency`` at a time; a plain handler runs
in a thread pool of that size. The rules are the sync worker's (W-1..W-12,
``_rules``); heartbeats and group commit run as tasks. Timeouts cancel the
handler's task. Signals are the application's to handle: call :meth:`stop`
or set the *stop* event.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from alkstore.errors import InvalidArgument, StoreClosed, TransientError
from alkstore.protocols import AsyncJob, AsyncQueue, AsyncRateLimit, AsyncStore
from alkstore.types import QueueOpts

from . import _hooks
from ._rules import (
    MAX_ERROR_PAUSE_S,
    SLICE_S,
    AsyncHandlerJob,
    Running,
    Settings,
    StopSignal,
    apply_args,
    check_settings,
    error_text,
    heartbeat_interval,
    is_coroutine_handler,
    log_dropped,
    log_outcome,
    outcome_of,
    queue_names_of,
    split_flush,
    timeout_outcome,
)

__all__ = ["AsyncHandler", "AsyncWorker"]

log = logging.getLogger("alkstore.worker")

#: A handler of the async worker: a coroutine function, or a plain callable
#: (run in a thread).
AsyncHandler = Callable[[AsyncJob], Awaitable[object]] | Callable[[AsyncJob], object]

_FLUSH_TRIES = 8


class AsyncWorker:
    """Runs *handler* over the jobs of *queue* on the caller's loop (A-5).

    The same arguments as :class:`~alkstore.worker.Worker`, over an
    :class:`~alkstore.protocols.AsyncStore`: ``concurrency`` counts tasks;
    timeouts cancel the task (W-11).
    """

    #: Whether a slot stays taken until its job's outcome commits (the outbox:
    #: one delivery after the other, even across a crash), rather than
    #: freeing when the handler returns (W-6).
    _hold_slots = False

    def __init__(
        self,
        store: AsyncStore | None,
        queue: str | AsyncQueue | Sequence[str | AsyncQueue],
        handler: AsyncHandler,
        concurrency: int = 4,
        worker_id: str | None = None,
        *,
        queue_opts: QueueOpts | None = None,
        heartbeat_every_s: float | None = None,
        grace_s: float = 30.0,
        claim_wait_s: float = 0.5,
        timeout_s: float | None = None,
        flush_s: float = 0.005,
        rate_limit: AsyncRateLimit | None = None,
    ) -> None:
        self._settings: Settings = check_settings(
            handler,
            concurrency,
            worker_id,
            heartbeat_every_s,
            grace_s,
            claim_wait_s,
            timeout_s,
            flush_s,
        )
        if store is not None and not hasattr(store, "transaction"):
            raise InvalidArgument(f"store must be an alkstore store, not {type(store).__name__}")
        self._store = store
        names = queue_names_of(queue)
        if names is not None and len(names) > 1:
            if store is None:
                raise InvalidArgument("several queues need their store")
            if queue_opts is not None:
                raise InvalidArgument("queue_opts goes with one queue name")
            self._queues: list[AsyncQueue] = [
                q if not isinstance(q, str) else store.queue(q)  # type: ignore[misc]
                for q in names
            ]
            self._many = True
        else:
            one = names[0] if names is not None else queue
            self._queues = [_one_queue(store, one, queue_opts)]
            self._many = False
        self._handler = handler
        self._is_async = is_coroutine_handler(handler)
        self._rate_limit = rate_limit
        self._stop: asyncio.Event | None = None
        self._running = False

    def __repr__(self) -> str:
        names = [q.name for q in self._queues]
        return (
            f"AsyncWorker(queues={names!r}, concurrency={self._settings.concurrency}, "
            f"worker_id={self._settings.worker_id!r})"
        )

    @property
    def queue(self) -> AsyncQueue:
        return self._queues[0]

    @property
    def queues(self) -> list[AsyncQueue]:
        return list(self._queues)

    @property
    def worker_id(self) -> str:
        return self._settings.worker_id

    @property
    def concurrency(self) -> int:
        return self._settings.concurrency

    def stop(self) -> None:
        """Ask a running :meth:`run` to stop gracefully (W-3); from the loop."""
        if self._stop is not None:
            self._stop.set()

    async def _claim(self, n: int, wait_s: float) -> list[AsyncJob]:
        extra: dict[str, Any] = {}
        if self._rate_limit is not None:
            extra["rate_limit"] = self._rate_limit
        if self._many:
            assert self._store is not None
            return await self._store.claim_any(self._queues, self.worker_id, n, wait_s, **extra)
        return await self._queues[0].claim_batch(self.worker_id, n, wait_s, **extra)

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Claim and handle jobs until *stop* is set or :meth:`stop` is called."""
        if stop is not None and not isinstance(stop, asyncio.Event):
            raise InvalidArgument(f"stop must be an asyncio.Event, not {type(stop).__name__}")
        external = stop if stop is not None else asyncio.Event()
        self._stop = asyncio.Event()
        mine = self._stop

        def stopping() -> bool:
            return external.is_set() or mine.is_set()

        async with self._session() as session:
            session.watch_stop(external, mine)
            log.info(
                "worker %s: started on %s with concurrency %d (asyncio)",
                self.worker_id,
                ", ".join(repr(q.name) for q in self._queues),
                self.concurrency,
            )
            pause = 0.0
            while not stopping():
                free = await session.wait_for_free_slot(stopping)
                if free == 0 or stopping():
                    continue
                try:
                    jobs = await self._claim(free, self._settings.claim_wait_s)
                except StoreClosed:
                    log.error("worker %s: the store was closed; stopping", self.worker_id)
                    raise
                except Exception as exc:
                    pause = min(max(pause * 2, 0.1), MAX_ERROR_PAUSE_S)
                    log.error(
                        "worker %s: claiming failed (%s); retrying in %.1f s",
                        self.worker_id,
                        error_text(exc),
                        pause,
                    )
                    await _sleep_unless(stopping, pause)
                    continue
                pause = 0.0
                if stopping():
                    await session.give_back(jobs)
                    break
                for job in jobs:
                    session.start(job)
            await session.drain(self._settings.grace_s)
        log.info("worker %s: stopped after %d job(s)", self.worker_id, session.finished)

    async def run_until_empty(self) -> int:
        """Handle every job claimable now, retries included; return how many ran."""
        async with self._session() as session:
            while True:
                free = await session.wait_for_free_slot(lambda: False)
                seen = session.changes
                jobs = await self._claim(free, 0)
                for job in jobs:
                    session.start(job)
                if jobs:
                    continue
                if session.idle and session.changes == seen:
                    break
                await session.wait_for_change(seen)
            await session.drain(math.inf)
        return session.finished

    def _session(self) -> _TaskSession:
        if self._running:
            raise RuntimeError("this AsyncWorker is already running")
        self._running = True
        return _TaskSession(self)


def _one_queue(store: AsyncStore | None, queue: object, opts: QueueOpts | None) -> AsyncQueue:
    if isinstance(queue, str):
        if store is None:
            raise InvalidArgument("a queue name needs its store; or pass a queue handle")
        return store.queue(queue, opts)
    if queue is None or not hasattr(queue, "claim_batch"):
        raise InvalidArgument(
            f"queue must be a queue name, a queue handle or a list of them, not "
            f"{type(queue).__name__}"
        )
    if opts is not None:
        raise InvalidArgument("queue_opts goes with a queue name, not a queue handle")
    handle: AsyncQueue = queue  # type: ignore[assignment]
    return handle


async def _sleep_unless(stopping: Callable[[], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not stopping():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        await asyncio.sleep(min(remaining, SLICE_S))


class _TaskSession:
    """The tasks of one ``run`` / ``run_until_empty`` of an AsyncWorker."""

    def __init__(self, worker: AsyncWorker) -> None:
        self._w = worker
        self._s = worker._settings
        self._wid = worker.worker_id
        self._store = worker._store
        self._hold = worker._hold_slots
        self._stopping = StopSignal()  # what should_stop sees (W-12)
        self._cond = asyncio.Condition()
        self._in_flight = 0
        self._unsettled = 0
        self._finished = 0
        self._changes = 0
        self._active: dict[int, Running] = {}
        self._pending: list[Running] = []
        self._flushing = False
        self._closing = False
        self._helpers: list[asyncio.Task[None]] = []
        self._pool: ThreadPoolExecutor | None = None

    async def __aenter__(self) -> _TaskSession:
        if not self._w._is_async:
            self._pool = ThreadPoolExecutor(
                max_workers=self._s.concurrency, thread_name_prefix="alkstore-worker"
            )
        self._helpers = [
            asyncio.ensure_future(self._heartbeat_loop()),
            asyncio.ensure_future(self._flush_loop()),
        ]
        return self

    async def __aexit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        try:
            if exc is not None and self._in_flight:
                await self.drain(self._s.grace_s)
        finally:
            self._stopping.set()
            async with self._cond:
                self._closing = True
                self._cond.notify_all()
            for helper in self._helpers:
                try:
                    await asyncio.wait_for(helper, 10)
                except (asyncio.TimeoutError, asyncio.CancelledError):
                    helper.cancel()
            if self._pool is not None:
                self._pool.shutdown(wait=False)
            self._w._running = False

    @property
    def finished(self) -> int:
        return self._finished

    @property
    def changes(self) -> int:
        return self._changes

    @property
    def idle(self) -> bool:
        return self._unsettled == 0 and self._in_flight == 0

    def _changed(self) -> None:
        self._changes += 1
        self._cond.notify_all()

    async def wait_for_free_slot(self, stopping: Callable[[], bool]) -> int:
        async with self._cond:
            while self._in_flight >= self._s.concurrency:
                if stopping():
                    return 0
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._cond.wait(), SLICE_S)
            return self._s.concurrency - self._in_flight

    async def wait_for_change(self, seen: int) -> None:
        async with self._cond:
            while self._changes == seen and (self._in_flight or self._unsettled):
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._cond.wait(), SLICE_S)

    def watch_stop(self, *requests: asyncio.Event) -> None:
        """W-12: handlers see these stop requests at once through ``should_stop``."""
        self._stopping.watch(*requests)

    async def give_back(self, jobs: Sequence[AsyncJob]) -> None:
        for job in jobs:
            try:
                await job.release()
            except Exception as exc:
                log.warning("worker %s: could not release job %s: %s", self._wid, job.id, exc)

    def start(self, job: AsyncJob) -> None:
        entry = Running(job, heartbeat_interval(job, self._s.heartbeat_every_s), self._stopping)
        entry.view = AsyncHandlerJob(job, entry)
        _hooks.claimed(job)
        self._in_flight += 1
        self._unsettled += 1
        self._active[id(entry)] = entry
        entry.task = asyncio.ensure_future(self._run_one(entry))

    async def _run_one(self, entry: Running) -> None:
        outcome: BaseException | None = None
        try:
            with _hooks.handler_span(entry.job):
                if self._pool is not None:
                    loop = asyncio.get_running_loop()
                    result = await loop.run_in_executor(self._pool, self._w._handler, entry.view)
                else:
                    result = self._w._handler(entry.view)
                if inspect.isawaitable(result):
                    await result
        except BaseException as exc:  # CancelledError: a timeout or the end of the grace
            outcome = exc
        await self._handler_ended(entry, outcome)

    async def _handler_ended(self, entry: Running, exc: BaseException | None) -> None:
        settle_now = False
        entry.handled = True
        entry.ran_s = time.monotonic() - entry.started
        if entry.abandoned:
            log_dropped(self._wid, entry, "after the grace period; it will be reclaimed")
            settle_now = True
        elif entry.timed_out:
            log.debug("worker %s: %s ended after its timeout", self._wid, entry.ref())
        elif entry.settled:
            settle_now = True
        elif entry.lost:
            log_dropped(self._wid, entry, "its claim was lost (heartbeat refused)")
            _hooks.finished(entry.job, "lost", entry.ran_s)
            settle_now = True
        else:
            job = entry.job
            entry.done = True
            entry.outcome = outcome_of(exc, job.attempts, job.max_attempts)
        async with self._cond:
            self._finished += 1
            if entry.outcome is not None and not entry.timed_out:
                self._pending.append(entry)
                if not self._hold:
                    self._free_slot(entry)
            else:
                if settle_now:
                    self._settle(entry)
                self._free_slot(entry)
            self._changed()

    def _is_closing(self) -> bool:
        return self._closing

    def _settle(self, entry: Running) -> None:
        self._active.pop(id(entry), None)
        self._unsettled -= 1
        if entry.handled:
            self._free_slot(entry)

    def _free_slot(self, entry: Running) -> None:
        # W-6: a slot frees when its handler returns; a worker that holds
        # slots until the commit (the outbox) frees it then.
        if entry.slot:
            entry.slot = False
            self._in_flight -= 1

    async def _flush_loop(self) -> None:
        while True:
            async with self._cond:
                while not self._pending and not self._closing:
                    with contextlib.suppress(asyncio.TimeoutError):
                        # Woken by each outcome; the timeout is only a bound,
                        # and an idle worker does not poll (W-4).
                        bound = self._s.flush_s if self._in_flight else SLICE_S
                        await asyncio.wait_for(self._cond.wait(), bound)
                if not self._pending:
                    return
                batch, self._pending = self._pending, []
                self._flushing = True
            try:
                await self._flush(batch)
            finally:
                async with self._cond:
                    self._flushing = False
                    for entry in batch:
                        self._settle(entry)
                    self._changed()

    async def _flush(self, batch: list[Running]) -> None:
        live = []
        for entry in batch:
            if entry.lost or entry.abandoned:
                log_dropped(self._wid, entry, "its claim was lost before the flush")
                _hooks.finished(entry.job, "lost", None)
                continue
            entry.flushing = True
            live.append(entry)
        if not live:
            return
        results: list[bool] | None = None
        for attempt in range(_FLUSH_TRIES):
            try:
                results = await self._commit(live)
                break
            except TransientError as exc:
                log.warning(
                    "worker %s: settling %d job(s) failed (%s); retrying", self._wid, len(live), exc
                )
                await asyncio.sleep(min(0.05 * 2**attempt, 2.0))
            except Exception as exc:
                log.error(
                    "worker %s: settling %d job(s) failed (%s); their claims will lapse "
                    "and the jobs will be reclaimed",
                    self._wid,
                    len(live),
                    error_text(exc),
                )
                break
        if results is None:
            return
        for entry, landed in zip(live, results, strict=True):
            assert entry.outcome is not None
            log_outcome(self._wid, entry, entry.outcome, landed)
            _hooks.finished(
                entry.job,
                entry.outcome.label if landed else "lost",
                entry.ran_s,
            )

    async def _commit(self, live: list[Running]) -> list[bool]:
        store = self._store
        batch, rest = split_flush(live) if store is not None else ([], live)
        landed: dict[int, bool] = {}
        if store is not None and len(rest) == 0:
            acked = await store.ack_each([e.job for e in batch])
            for entry, ok in zip(batch, acked, strict=True):
                landed[id(entry)] = ok
        elif store is not None and (len(rest) > 1 or batch):
            async with store.transaction() as tx:
                if batch:
                    acked = await store.ack_each([e.job for e in batch], tx=tx)
                    for entry, ok in zip(batch, acked, strict=True):
                        landed[id(entry)] = ok
                for entry in rest:
                    op, args = apply_args(entry)
                    landed[id(entry)] = bool(await getattr(entry.job, op)(*args, tx=tx))
        else:
            for entry in rest:
                op, args = apply_args(entry)
                landed[id(entry)] = bool(await getattr(entry.job, op)(*args))
        return [landed[id(e)] for e in live]

    async def drain(self, grace_s: float) -> None:
        self._stopping.set()
        deadline = time.monotonic() + grace_s
        async with self._cond:
            while self._in_flight:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._cond.wait(), min(remaining, SLICE_S))
        for entry in [e for e in self._active.values() if not e.handled]:
            entry.abandoned = True
            if entry.task is not None:
                entry.task.cancel()
            log.warning(
                "worker %s: %s did not finish within the grace period; its claim is left "
                "to lapse and the job will be reclaimed",
                self._wid,
                entry.ref(),
            )
        async with self._cond:
            while self._pending or self._flushing:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._cond.wait(), SLICE_S)

    async def _heartbeat_loop(self) -> None:
        timeout_s = self._s.timeout_s
        while True:
            if self._is_closing():
                return
            now = time.monotonic()
            entries = list(self._active.values())
            for entry in entries:
                if (
                    timeout_s is not None
                    and not entry.handled
                    and not entry.timed_out
                    and now - entry.started >= timeout_s
                ):
                    await self._time_out(entry, timeout_s)
                elif entry.beating and entry.next_beat <= now:
                    await self._beat(entry)
            soonest = min((e.next_beat for e in entries if e.beating), default=now + 1)
            if timeout_s is not None:
                soonest = min(
                    soonest, *(e.started + timeout_s for e in entries if not e.handled), now + 1
                )
            async with self._cond:
                if self._is_closing():
                    return
                with contextlib.suppress(asyncio.TimeoutError):
                    wait = max(min(soonest - time.monotonic(), SLICE_S * 4), 0.001)
                    await asyncio.wait_for(self._cond.wait(), wait)

    async def _time_out(self, entry: Running, timeout_s: float) -> None:
        if entry.handled or entry.timed_out or entry.abandoned or entry.settled:
            return
        entry.timed_out = True
        job = entry.job
        entry.outcome = timeout_outcome(timeout_s, job.attempts, job.max_attempts)
        if entry.task is not None:
            entry.task.cancel()
        async with self._cond:
            self._pending.append(entry)
            self._cond.notify_all()

    async def _beat(self, entry: Running) -> None:
        job = entry.job
        try:
            extended = await job.heartbeat()
        except Exception as exc:
            entry.next_beat = time.monotonic() + entry.interval_s / 2
            log.error(
                "worker %s: heartbeat of %s failed (%s); retrying",
                self._wid,
                entry.ref(),
                error_text(exc),
            )
            return
        if extended:
            entry.next_beat = time.monotonic() + entry.interval_s
            return
        if not entry.beat_refused():
            return
        log.warning(
            "worker %s: heartbeat of %s was refused (the claim lapsed or the job was "
            "cancelled); its handler's result will be dropped",
            self._wid,
            entry.ref(),
        )
