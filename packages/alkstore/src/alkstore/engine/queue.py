"""Queue handles (SPEC §5, §15, §16), sync and async side by side.

Everything but I/O happens here once: argument checks, payload encoding,
stamping (Q-1), claim order and handles (Q-2, Q-4), the blocking loop (Q-19),
undecodable rows (C-3), the wait for room of a bounded queue (Q-24).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from alkstore.errors import InvalidArgument, QueueFull, StoreClosed, TransientError
from alkstore.protocols import AsyncJob, AsyncRateLimit, Job, RateLimit
from alkstore.types import (
    Enqueued,
    EnqueueOpts,
    JobInfo,
    JobState,
    QueueOpts,
    QueueStats,
    SweepResult,
    check_duration,
    check_int,
)

from .codec import UNDECODABLE_ERROR
from .infos import job_info
from .jobs import AsyncKitJob, JobData, KitJob, decode_claims, handle_of
from .prepare import (
    MAX_CLAIM_BATCH,
    check_ids,
    check_job_id,
    check_limit,
    check_unique_key,
    check_wait,
    check_worker_id,
    prepare_job,
)
from .rows import ClaimRow, Fence, NewJob, RateSpec
from .sizes import BIG_PAYLOAD_BYTES, surely_small
from .tracing import trace_context_text
from .wakes import blocking_plan, run_blocking, run_blocking_async

if TYPE_CHECKING:
    from .seam import AsyncExecutor, Executor

__all__ = [
    "AsyncKitQueue",
    "KitQueue",
    "claim_async",
    "claim_sync",
]

#: First and longest pause of ``enqueue(..., wait_s=)`` on a full queue:
#: acks send no wake for it (Q-24), so it polls, backing off.
_FULL_FIRST_PAUSE_S = 0.01
_FULL_MAX_PAUSE_S = 0.5


# ----------------------------------------------------------- shared checks


def _check_payloads(payloads: object) -> Sequence[Any]:
    if isinstance(payloads, (str, bytes)) or not isinstance(payloads, Sequence):
        raise InvalidArgument("payloads must be a sequence (list or tuple) of payloads")
    return payloads


def _check_items(items: object) -> list[tuple[str, Any]]:
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise InvalidArgument("items must be a sequence of (key, payload) pairs")
    pairs: list[tuple[str, Any]] = []
    for item in items:
        if not isinstance(item, tuple) or len(item) != 2:
            raise InvalidArgument("items must be (key, payload) pairs")
        pairs.append((check_unique_key(item[0]), item[1]))
    return pairs


def _jobs_of(
    opts: QueueOpts,
    payloads: Sequence[Any],
    eopts: EnqueueOpts | None,
    keys: Sequence[str | None] | None = None,
) -> list[NewJob]:
    """Every payload encoded before any statement runs (C-3, C-6)."""
    trace = trace_context_text()
    first = prepare_job(
        opts, payloads[0], eopts, unique_key=None if keys is None else keys[0], trace_context=trace
    )
    jobs = [first]
    for i in range(1, len(payloads)):
        job = prepare_job(
            opts,
            payloads[i],
            eopts,
            unique_key=None if keys is None else keys[i],
            trace_context=trace,
        )
        jobs.append(job)
    return jobs


def _check_bounded_wait(wait_s: object, tx: object | None) -> float:
    wait = check_wait(wait_s)
    if wait and tx is not None:
        raise InvalidArgument("wait_s cannot be used with tx: waiting would hold the transaction")
    return wait


def _claim_args(worker_id: object, n: object, wait_s: object) -> tuple[str, int, float]:
    return (
        check_worker_id(worker_id),
        check_int("n", n, 1, MAX_CLAIM_BATCH),
        check_wait(wait_s),
    )


def rate_spec(rate_limit: object, store_id: str) -> RateSpec | None:
    """The limiter a claim takes its units from (R-1), checked."""
    if rate_limit is None:
        return None
    spec = getattr(rate_limit, "_spec", None)
    if not isinstance(spec, RateSpec) or getattr(rate_limit, "_store_id", None) != store_id:
        raise InvalidArgument("rate_limit must be a rate limit of this store (store.rate_limit)")
    return spec


def _rate_pause(ready_in: float | None, rate: RateSpec | None) -> float | None:
    """With a limiter, a ready row is retried no sooner than the next unit
    could come, rather than every few milliseconds."""
    if ready_in is None or rate is None:
        return ready_in
    return max(ready_in, min(rate.interval_s, 1.0))


# ------------------------------------------------------------------ claims


def _sync_handles(
    ex: Executor, rows: list[ClaimRow], queues: Sequence[str], worker_id: str
) -> tuple[list[Job], int]:
    """Handles of the claimed rows; rows that do not decode go to dead (C-3:
    never let one undecodable row fail the batch). Also returns how many did.

    The good rows' claims are committed: when the database is busy for a bad
    row's ``fail``, the caller still gets them, and the bad row's claim lapses
    for a later claim to dead-letter."""
    good, bad = decode_claims(rows, queues)
    for row in bad:
        try:
            ex.fail(None, Fence(row.id, row.claim, row.group), UNDECODABLE_ERROR)
        except TransientError:
            if not good:
                raise
    sid = ex.store_id
    jobs: list[Job] = [KitJob(ex, row, value, worker_id, sid) for row, value in good]
    return jobs, len(bad)


def claim_sync(
    ex: Executor,
    queues: tuple[str, ...],
    worker_id: str,
    n: int,
    wait_s: float,
    rate: RateSpec | None,
) -> list[Job]:
    """Claim up to *n* jobs from *queues* in order, waiting up to *wait_s* (Q-19, W-10)."""

    def attempt(idle: bool) -> list[Job]:
        jobs: list[Job] = []
        while len(jobs) < n:  # undecodable rows went to dead: claim in their place
            rows = ex.claim(queues, worker_id, n - len(jobs), rate, idle)
            if not rows:
                break
            got, dropped = _sync_handles(ex, rows, queues, worker_id)
            jobs.extend(got)
            if not dropped:
                break
        return jobs

    if ex.closed:
        raise StoreClosed("the store was closed")
    if wait_s == 0:
        return attempt(False)
    jobs: list[Job] = run_blocking(
        blocking_plan(wait_s, ex.fallback_s(), lazy_wakes=True),
        wakes=ex.wakes,
        keys=queues,
        attempt=attempt,
        is_closed=lambda: ex.closed,
        start_wakes=ex.start_wakes,
        next_ready=lambda: _rate_pause(ex.next_ready(queues), rate),
    )
    return jobs


async def _async_handles(
    ex: AsyncExecutor, rows: list[ClaimRow], queues: Sequence[str], worker_id: str
) -> tuple[list[AsyncJob], int]:
    if any(len(r.payload) > BIG_PAYLOAD_BYTES for r in rows):
        good, bad = await asyncio.to_thread(decode_claims, rows, queues)
    else:
        good, bad = decode_claims(rows, queues)
    for row in bad:  # as in _sync_handles
        try:
            await ex.fail(None, Fence(row.id, row.claim, row.group), UNDECODABLE_ERROR)
        except TransientError:
            if not good:
                raise
    sid = ex.store_id
    jobs: list[AsyncJob] = [AsyncKitJob(ex, row, value, worker_id, sid) for row, value in good]
    return jobs, len(bad)


#: Releases running after a cancelled claim; kept so they are not collected.
_GIVING_BACK: set[asyncio.Task[None]] = set()


async def _release_all(jobs: list[AsyncJob]) -> None:
    for job in jobs:
        with contextlib.suppress(Exception):  # else the claim lapses as usual
            await job.release()


async def claim_async(
    ex: AsyncExecutor,
    queues: tuple[str, ...],
    worker_id: str,
    n: int,
    wait_s: float,
    rate: RateSpec | None,
) -> list[AsyncJob]:
    """:func:`claim_sync` for the async face. A task cancelled while a claim
    is in flight gives back what that claim took (A-4, Q-26)."""

    async def once(idle: bool, started: list[bool]) -> list[AsyncJob]:
        started.append(True)
        jobs: list[AsyncJob] = []
        while len(jobs) < n:  # undecodable rows went to dead: claim in their place
            rows = await ex.claim(queues, worker_id, n - len(jobs), rate, idle)
            if not rows:
                break
            got, dropped = await _async_handles(ex, rows, queues, worker_id)
            jobs.extend(got)
            if not dropped:
                break
        return jobs

    async def attempt(idle: bool) -> list[AsyncJob]:
        started: list[bool] = []
        inner = asyncio.ensure_future(once(idle, started))
        try:
            return await asyncio.shield(inner)
        except asyncio.CancelledError:
            if not started:
                # Cancelled before the claim began: it never will.
                inner.cancel()
                raise

            # The claim may commit after the cancellation: release its jobs.
            def give_back(done: asyncio.Future[list[AsyncJob]]) -> None:
                if not done.cancelled() and done.exception() is None and done.result():
                    task = asyncio.ensure_future(_release_all(done.result()))
                    _GIVING_BACK.add(task)
                    task.add_done_callback(_GIVING_BACK.discard)

            inner.add_done_callback(give_back)
            raise

    if ex.closed:
        raise StoreClosed("the store was closed")
    if wait_s == 0:
        return await attempt(False)

    async def next_ready() -> float | None:
        return _rate_pause(await ex.next_ready(queues), rate)

    jobs: list[AsyncJob] = await run_blocking_async(
        blocking_plan(wait_s, ex.fallback_s(), lazy_wakes=True),
        wakes=ex.wakes,
        keys=queues,
        attempt=attempt,
        is_closed=lambda: ex.closed,
        start_wakes=ex.start_wakes,
        next_ready=next_ready,
    )
    return jobs


# ------------------------------------------------------------- the handles


class _QueueCommon:
    """Name, opts and the checks both faces share."""

    def __init__(self, name: str, opts: QueueOpts) -> None:
        self._name = name
        self._opts = opts
        self._names = (name,)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._name!r}, {self._opts!r})"

    @property
    def name(self) -> str:
        return self._name

    @property
    def opts(self) -> QueueOpts:
        return self._opts

    @staticmethod
    def _state_arg(state: object) -> JobState:
        try:
            return JobState(state)
        except ValueError as exc:
            raise InvalidArgument(f"unknown job state {state!r}") from exc

    @staticmethod
    def _list_args(limit: object, after_id: object) -> tuple[int, int]:
        return check_limit(limit), check_int("after_id", after_id, 0, 2**63 - 1)

    @staticmethod
    def _purge_args(job_ids: object, older_than_s: object) -> tuple[list[int] | None, float | None]:
        return check_ids(job_ids), check_duration("older_than_s", older_than_s, allow_none=True)

    def _mine(self, jobs: object, store_id: str) -> list[JobData]:
        """The handles that belong to this queue of this store; the rest
        count 0 (C-7)."""
        if isinstance(jobs, (str, bytes)) or not isinstance(jobs, Sequence):
            raise InvalidArgument("jobs must be a sequence of claimed jobs")
        handles = [handle_of(job) for job in jobs]
        return [h for h in handles if h.queue == self._name and h._store_id == store_id]


class KitQueue(_QueueCommon):
    """A :class:`~alkstore.protocols.Queue` over an :class:`Executor`."""

    def __init__(self, ex: Executor, name: str, opts: QueueOpts) -> None:
        super().__init__(name, opts)
        self._ex = ex

    def _check_open(self) -> None:
        if self._ex.closed:
            raise StoreClosed("the store was closed")

    def _insert(self, tx: object | None, jobs: list[NewJob], wait_s: float = 0) -> list[Any]:
        max_depth = self._opts.max_depth
        if max_depth is None:
            return self._ex.insert_jobs(tx, self._name, jobs, None)
        deadline = time.monotonic() + wait_s
        pause = _FULL_FIRST_PAUSE_S
        while True:
            try:
                return self._ex.insert_jobs(tx, self._name, jobs, max_depth)
            except QueueFull:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._ex.closed:
                    raise
                time.sleep(min(pause, remaining))
                pause = min(pause * 2, _FULL_MAX_PAUSE_S)

    def enqueue(
        self,
        payload: Any,
        opts: EnqueueOpts | None = None,
        tx: object | None = None,
        *,
        wait_s: float = 0,
    ) -> int:
        """Insert one job, stamped with this handle's opts (Q-1); joins *tx*
        (T-1); on a full bounded queue waits up to *wait_s* for room (Q-24)."""
        self._check_open()
        wait = _check_bounded_wait(wait_s, tx) if wait_s else 0.0
        job = prepare_job(self._opts, payload, opts, trace_context=trace_context_text())
        return int(self._insert(tx, [job], wait)[0].id)

    def enqueue_many(
        self, payloads: Sequence[Any], opts: EnqueueOpts | None = None, tx: object | None = None
    ) -> list[int]:
        """Insert every payload in one atomic step; ids in payload order."""
        self._check_open()
        if not _check_payloads(payloads):
            return []
        return [r.id for r in self._insert(tx, _jobs_of(self._opts, payloads, opts))]

    def enqueue_unique(
        self, key: str, payload: Any, opts: EnqueueOpts | None = None, tx: object | None = None
    ) -> Enqueued:
        """Insert a job holding *key* unless a live job holds it (Q-23)."""
        self._check_open()
        job = prepare_job(
            self._opts,
            payload,
            opts,
            unique_key=check_unique_key(key),
            trace_context=trace_context_text(),
        )
        row = self._insert(tx, [job])[0]
        return Enqueued(row.id, row.created)

    def enqueue_many_unique(
        self,
        items: Sequence[tuple[str, Any]],
        opts: EnqueueOpts | None = None,
        tx: object | None = None,
    ) -> list[Enqueued]:
        """``enqueue_unique`` for each ``(key, payload)``, atomically (Q-23)."""
        self._check_open()
        pairs = _check_items(items)
        if not pairs:
            return []
        keys = [k for k, _ in pairs]
        jobs = _jobs_of(self._opts, [p for _, p in pairs], opts, keys)
        return [Enqueued(r.id, r.created) for r in self._insert(tx, jobs)]

    def claim(
        self, worker_id: str, wait_s: float = 0, rate_limit: RateLimit | None = None
    ) -> Job | None:
        """The best claimable job (Q-2..Q-6), waiting up to *wait_s* (Q-19)."""
        jobs = self.claim_batch(worker_id, 1, wait_s, rate_limit)
        return jobs[0] if jobs else None

    def claim_batch(
        self, worker_id: str, n: int, wait_s: float = 0, rate_limit: RateLimit | None = None
    ) -> list[Job]:
        """Up to *n* jobs in claim order, in one statement (Q-2, Q-3),
        waiting up to *wait_s* for the first (Q-19)."""
        self._check_open()
        wid, count, wait = _claim_args(worker_id, n, wait_s)
        rate = rate_spec(rate_limit, self._ex.store_id)
        return claim_sync(self._ex, self._names, wid, count, wait, rate)

    def ack_batch(self, jobs: Sequence[Any]) -> int:
        """Ack every still-valid claim of this queue in one transaction; count
        those that landed; handles of another queue or store count 0 (Q-9, C-7)."""
        self._check_open()
        handles = self._mine(jobs, self._ex.store_id)
        if not handles:
            return 0
        results = self._ex.ack(None, [h._fence for h in handles])
        return sum(h._landed(ok) for h, ok in zip(handles, results, strict=True))

    def cancel(self, job_id: int, tx: object | None = None) -> bool:
        """Delete a pending or processing job of this queue, whoever holds it
        (Q-13, C-7); joins *tx* (T-1)."""
        self._check_open()
        return self._ex.cancel(tx, self._name, check_job_id(job_id))

    def get_job(self, job_id: int) -> JobInfo | None:
        """The job in any state, or ``None`` (Q-14); scoped to this queue (C-7)."""
        self._check_open()
        row = self._ex.get_job(self._name, check_job_id(job_id))
        return None if row is None else job_info(row)

    def list_jobs(self, state: JobState, limit: int = 100, after_id: int = 0) -> list[JobInfo]:
        """Jobs in *state* with ``id > after_id``, ascending, at most *limit*."""
        self._check_open()
        wanted = self._state_arg(state)
        count, after = self._list_args(limit, after_id)
        return [job_info(r) for r in self._ex.list_jobs(self._name, wanted, count, after)]

    def stats(self) -> QueueStats:
        """Counts by state; a pure read (C-8)."""
        self._check_open()
        return self._ex.queue_stats(self._name)[0]

    def sweep_expired(self) -> SweepResult:
        """Expired rows and exhausted lapsed claims to dead, retained dead rows
        purged: one atomic step (Q-12, Q-15..Q-17)."""
        self._check_open()
        return self._ex.sweep(self._name)

    def redrive(self, job_ids: Sequence[int] | None = None, tx: object | None = None) -> int:
        """Dead jobs back to pending with a fresh budget, same ids (Q-21)."""
        self._check_open()
        ids = check_ids(job_ids)
        if ids == []:
            return 0
        return self._ex.redrive(tx, self._name, ids)

    def purge_dead(
        self,
        job_ids: Sequence[int] | None = None,
        older_than_s: float | None = None,
        tx: object | None = None,
    ) -> int:
        """Delete dead jobs: the given ids, those dead for *older_than_s*, or
        all (Q-22)."""
        self._check_open()
        ids, older = self._purge_args(job_ids, older_than_s)
        if ids == []:
            return 0
        return self._ex.purge_dead(tx, self._name, ids, older)


class AsyncKitQueue(_QueueCommon):
    """An :class:`~alkstore.protocols.AsyncQueue` over an :class:`AsyncExecutor`."""

    def __init__(self, ex: AsyncExecutor, name: str, opts: QueueOpts) -> None:
        super().__init__(name, opts)
        self._ex = ex

    def _check_open(self) -> None:
        if self._ex.closed:
            raise StoreClosed("the store was closed")

    async def _insert(self, tx: object | None, jobs: list[NewJob], wait_s: float = 0) -> list[Any]:
        max_depth = self._opts.max_depth
        if max_depth is None:
            return await self._ex.insert_jobs(tx, self._name, jobs, None)
        deadline = time.monotonic() + wait_s
        pause = _FULL_FIRST_PAUSE_S
        while True:
            try:
                return await self._ex.insert_jobs(tx, self._name, jobs, max_depth)
            except QueueFull:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._ex.closed:
                    raise
                await asyncio.sleep(min(pause, remaining))
                pause = min(pause * 2, _FULL_MAX_PAUSE_S)

    async def _prepare(
        self,
        payloads: Sequence[Any],
        opts: EnqueueOpts | None,
        keys: Sequence[str | None] | None = None,
    ) -> list[NewJob]:
        # payloads that may be big are encoded in a thread.
        if all(surely_small(p) for p in payloads[:64]) and len(payloads) <= 64:
            return _jobs_of(self._opts, payloads, opts, keys)
        return await asyncio.to_thread(_jobs_of, self._opts, payloads, opts, keys)

    async def enqueue(
        self,
        payload: Any,
        opts: EnqueueOpts | None = None,
        tx: object | None = None,
        *,
        wait_s: float = 0,
    ) -> int:
        self._check_open()
        wait = _check_bounded_wait(wait_s, tx) if wait_s else 0.0
        jobs = await self._prepare((payload,), opts)
        return int((await self._insert(tx, jobs, wait))[0].id)

    async def enqueue_many(
        self, payloads: Sequence[Any], opts: EnqueueOpts | None = None, tx: object | None = None
    ) -> list[int]:
        self._check_open()
        if not _check_payloads(payloads):
            return []
        return [r.id for r in await self._insert(tx, await self._prepare(payloads, opts))]

    async def enqueue_unique(
        self, key: str, payload: Any, opts: EnqueueOpts | None = None, tx: object | None = None
    ) -> Enqueued:
        self._check_open()
        jobs = await self._prepare((payload,), opts, (check_unique_key(key),))
        row = (await self._insert(tx, jobs))[0]
        return Enqueued(row.id, row.created)

    async def enqueue_many_unique(
        self,
        items: Sequence[tuple[str, Any]],
        opts: EnqueueOpts | None = None,
        tx: object | None = None,
    ) -> list[Enqueued]:
        self._check_open()
        pairs = _check_items(items)
        if not pairs:
            return []
        jobs = await self._prepare([p for _, p in pairs], opts, [k for k, _ in pairs])
        return [Enqueued(r.id, r.created) for r in await self._insert(tx, jobs)]

    async def claim(
        self, worker_id: str, wait_s: float = 0, rate_limit: AsyncRateLimit | None = None
    ) -> AsyncJob | None:
        jobs = await self.claim_batch(worker_id, 1, wait_s, rate_limit)
        return jobs[0] if jobs else None

    async def claim_batch(
        self,
        worker_id: str,
        n: int,
        wait_s: float = 0,
        rate_limit: AsyncRateLimit | None = None,
    ) -> list[AsyncJob]:
        self._check_open()
        wid, count, wait = _claim_args(worker_id, n, wait_s)
        rate = rate_spec(rate_limit, self._ex.store_id)
        return await claim_async(self._ex, self._names, wid, count, wait, rate)

    async def ack_batch(self, jobs: Sequence[Any]) -> int:
        self._check_open()
        handles = self._mine(jobs, self._ex.store_id)
        if not handles:
            return 0
        results = await self._ex.ack(None, [h._fence for h in handles])
        return sum(h._landed(ok) for h, ok in zip(handles, results, strict=True))

    async def cancel(self, job_id: int, tx: object | None = None) -> bool:
        self._check_open()
        return await self._ex.cancel(tx, self._name, check_job_id(job_id))

    async def get_job(self, job_id: int) -> JobInfo | None:
        self._check_open()
        row = await self._ex.get_job(self._name, check_job_id(job_id))
        return None if row is None else job_info(row)

    async def list_jobs(
        self, state: JobState, limit: int = 100, after_id: int = 0
    ) -> list[JobInfo]:
        self._check_open()
        wanted = self._state_arg(state)
        count, after = self._list_args(limit, after_id)
        rows = await self._ex.list_jobs(self._name, wanted, count, after)
        if sum(len(r.payload) for r in rows) > BIG_PAYLOAD_BYTES:
            return await asyncio.to_thread(lambda: [job_info(r) for r in rows])
        return [job_info(r) for r in rows]

    async def stats(self) -> QueueStats:
        self._check_open()
        return (await self._ex.queue_stats(self._name))[0]

    async def sweep_expired(self) -> SweepResult:
        self._check_open()
        return await self._ex.sweep(self._name)

    async def redrive(self, job_ids: Sequence[int] | None = None, tx: object | None = None) -> int:
        self._check_open()
        ids = check_ids(job_ids)
        if ids == []:
            return 0
        return await self._ex.redrive(tx, self._name, ids)

    async def purge_dead(
        self,
        job_ids: Sequence[int] | None = None,
        older_than_s: float | None = None,
        tx: object | None = None,
    ) -> int:
        self._check_open()
        ids, older = self._purge_args(job_ids, older_than_s)
        if ids == []:
            return 0
        return await self._ex.purge_dead(tx, self._name, ids, older)
