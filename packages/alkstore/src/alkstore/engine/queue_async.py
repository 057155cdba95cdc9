# Async source of queue.py (scripts/async_to_sync.py makes it: edit this file).
# mypy: warn-unreachable=False
"""Queue handles (SPEC §5, §15, §16).

Everything but I/O happens once, in :mod:`.queue_base` and here: argument
checks, payload encoding, stamping (Q-1), claim order and handles (Q-2, Q-4),
the blocking loop (Q-19), undecodable rows (C-3), the wait for room of a
bounded queue (Q-24).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from alkstore._acompat import aoffload, asleep
from alkstore._sizes import BIG_PAYLOAD_BYTES, surely_small
from alkstore._tracecontext import trace_context_text
from alkstore.errors import QueueFull, StoreClosed, TransientError
from alkstore.protocols import AsyncJob, AsyncRateLimit, Capability
from alkstore.types import (
    Enqueued,
    EnqueueOpts,
    JobInfo,
    JobResult,
    JobState,
    QueueOpts,
    QueueStats,
    SweepResult,
)

from .capabilities import require
from .codec import UNDECODABLE_ERROR
from .infos import job_info, job_infos, job_result
from .jobs_async import AsyncKitJob
from .jobs_base import decode_claims
from .native import resolve_async
from .prepare import check_ids, check_job_id, check_unique_key, prepare_job, with_conflict
from .queue_base import (
    FULL_FIRST_PAUSE_S,
    FULL_MAX_PAUSE_S,
    QueueBase,
    check_bounded_wait,
    check_conflict_args,
    check_items,
    check_payloads,
    claim_args,
    jobs_of,
    rate_pause,
    rate_spec,
)
from .results import (
    RESULT_FALLBACK_S,
    ack_results,
    check_result_wait,
    result_wake_key,
)
from .rows import ClaimRow, Fence, NewJob, RateSpec
from .runners_async import run_blocking_async
from .wakes import blocking_plan

if TYPE_CHECKING:
    from .seam_async import AsyncExecutor

__all__ = ["AsyncKitQueue", "claim_async"]


# ------------------------------------------------------------------ claims


async def _handles(
    ex: AsyncExecutor[Any], rows: list[ClaimRow], queues: Sequence[str], worker_id: str
) -> tuple[list[AsyncJob], int]:
    """Handles of the claimed rows; rows that do not decode go to dead (C-3:
    never let one undecodable row fail the batch). Also returns how many did.

    The good rows' claims are committed: when the database is busy for a bad
    row's ``fail``, the caller still gets them, and the bad row's claim lapses
    for a later claim to dead-letter."""
    if True:  # ASYNC
        if any(len(r.payload) > BIG_PAYLOAD_BYTES for r in rows):
            good, bad = await aoffload(decode_claims, rows, queues)
        else:
            good, bad = decode_claims(rows, queues)
    else:
        good, bad = decode_claims(rows, queues)
    for row in bad:
        try:
            await ex.fail(None, Fence(row.id, row.claim, row.group), UNDECODABLE_ERROR)
        except TransientError:
            if not good:
                raise
    sid = ex.store_id
    jobs: list[AsyncJob] = [AsyncKitJob(ex, row, value, worker_id, sid) for row, value in good]
    return jobs, len(bad)


if True:  # ASYNC
    #: Releases running after a cancelled claim; kept so they are not collected.
    _GIVING_BACK: set[asyncio.Task[None]] = set()

    async def _release_all(jobs: list[AsyncJob]) -> None:
        for job in jobs:
            with contextlib.suppress(Exception):  # else the claim lapses as usual
                await job.release()

    async def _shielded(
        once: Callable[[bool], Awaitable[list[AsyncJob]]], idle: bool
    ) -> list[AsyncJob]:
        """``once(idle)``, shielded: a task cancelled while the claim is in
        flight gives back what that claim took (A-4, Q-26)."""
        started = False

        async def run() -> list[AsyncJob]:
            nonlocal started
            started = True
            return await once(idle)

        inner = asyncio.ensure_future(run())
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


async def claim_async(
    ex: AsyncExecutor[Any],
    queues: tuple[str, ...],
    worker_id: str,
    n: int,
    wait_s: float,
    rate: RateSpec | None,
) -> list[AsyncJob]:
    """Claim up to *n* jobs from *queues* in order, waiting up to *wait_s*
    (Q-19, W-10). On the async face a task cancelled while a claim is in
    flight gives back what that claim took (A-4, Q-26)."""

    async def once(idle: bool) -> list[AsyncJob]:
        jobs: list[AsyncJob] = []
        while len(jobs) < n:  # undecodable rows went to dead: claim in their place
            rows = await ex.claim(queues, worker_id, n - len(jobs), rate, idle)
            if not rows:
                break
            got, dropped = await _handles(ex, rows, queues, worker_id)
            jobs.extend(got)
            if not dropped:
                break
        return jobs

    if True:  # ASYNC

        async def attempt(idle: bool) -> list[AsyncJob]:
            return await _shielded(once, idle)

    else:
        attempt = once

    if ex.closed:
        raise StoreClosed("the store was closed")
    if wait_s == 0:
        return await attempt(False)

    async def next_ready() -> float | None:
        return rate_pause(await ex.next_ready(queues), rate)

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


# -------------------------------------------------------------- the handle


class AsyncKitQueue(QueueBase):
    """A :class:`~alkstore.protocols.AsyncQueue` over an executor."""

    def __init__(
        self, ex: AsyncExecutor[Any], name: str, opts: QueueOpts, store: object | None = None
    ) -> None:
        super().__init__(name, opts)
        self._ex = ex
        self._store = store

    @property
    def __alkstore_store__(self) -> object | None:
        """The store this handle came from: what a worker given only the
        handle settles its jobs through, one ``ack_each`` per flush (W-6)."""
        return self._store

    def _check_open(self) -> None:
        if self._ex.closed:
            raise StoreClosed("the store was closed")

    async def _insert(self, tx: object | None, jobs: list[NewJob], wait_s: float = 0) -> list[Any]:
        if jobs[0].after:
            require(self._ex.capabilities, Capability.WORKFLOWS)
        tx = await resolve_async(tx, self._ex)
        max_depth = self._opts.max_depth
        if max_depth is None:
            return await self._ex.insert_jobs(tx, self._name, jobs, None)
        deadline = time.monotonic() + wait_s
        pause = FULL_FIRST_PAUSE_S
        while True:
            try:
                return await self._ex.insert_jobs(tx, self._name, jobs, max_depth)
            except QueueFull:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._ex.closed:
                    raise
                await asleep(min(pause, remaining))
                pause = min(pause * 2, FULL_MAX_PAUSE_S)

    async def _prepare(
        self,
        payloads: Sequence[Any],
        opts: EnqueueOpts | None,
        keys: Sequence[str | None] | None = None,
    ) -> list[NewJob]:
        """Every payload encoded before any statement runs (C-3, C-6)."""
        if True:  # ASYNC
            # payloads that may be big are encoded in a thread.
            if len(payloads) > 64 or not all(surely_small(p) for p in payloads):
                return await aoffload(jobs_of, self._opts, payloads, opts, keys)
        return jobs_of(self._opts, payloads, opts, keys)

    async def enqueue(
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
        wait = check_bounded_wait(wait_s, tx) if wait_s else 0.0
        if True:  # ASYNC
            jobs = await self._prepare((payload,), opts)
        else:
            jobs = [prepare_job(self._opts, payload, opts, trace_context=trace_context_text())]
        return int((await self._insert(tx, jobs, wait))[0].id)

    async def enqueue_many(
        self, payloads: Sequence[Any], opts: EnqueueOpts | None = None, tx: object | None = None
    ) -> list[int]:
        """Insert every payload in one atomic step; ids in payload order."""
        self._check_open()
        if not check_payloads(payloads):
            return []
        return [r.id for r in await self._insert(tx, await self._prepare(payloads, opts))]

    async def enqueue_unique(
        self,
        key: str,
        payload: Any,
        opts: EnqueueOpts | None = None,
        tx: object | None = None,
        on_conflict: str = "skip",
        debounce_s: float | None = None,
        max_wait_s: float | None = None,
    ) -> Enqueued:
        """Insert a job holding *key* unless a live job holds it (Q-23); a
        pending holder is replaced (``on_conflict="replace"``) or debounced
        (*debounce_s*, capped by *max_wait_s*) instead (Q-29)."""
        self._check_open()
        conflict = check_conflict_args(
            self._ex.capabilities, on_conflict, debounce_s, max_wait_s, opts
        )
        jobs = await self._prepare((payload,), opts, (check_unique_key(key),))
        row = (await self._insert(tx, with_conflict(jobs, *conflict)))[0]
        return Enqueued(row.id, row.created)

    async def enqueue_many_unique(
        self,
        items: Sequence[tuple[str, Any]],
        opts: EnqueueOpts | None = None,
        tx: object | None = None,
        on_conflict: str = "skip",
        debounce_s: float | None = None,
        max_wait_s: float | None = None,
    ) -> list[Enqueued]:
        """``enqueue_unique`` for each ``(key, payload)``, atomically (Q-23,
        Q-29: items are decided in order, so a key repeated with
        ``"replace"`` ends with its last payload)."""
        self._check_open()
        conflict = check_conflict_args(
            self._ex.capabilities, on_conflict, debounce_s, max_wait_s, opts
        )
        pairs = check_items(items)
        if not pairs:
            return []
        jobs = await self._prepare([p for _, p in pairs], opts, [k for k, _ in pairs])
        return [
            Enqueued(r.id, r.created)
            for r in await self._insert(tx, with_conflict(jobs, *conflict))
        ]

    async def claim(
        self, worker_id: str, wait_s: float = 0, rate_limit: AsyncRateLimit | None = None
    ) -> AsyncJob | None:
        """The best claimable job (Q-2..Q-6), waiting up to *wait_s* (Q-19)."""
        jobs = await self.claim_batch(worker_id, 1, wait_s, rate_limit)
        return jobs[0] if jobs else None

    async def claim_batch(
        self,
        worker_id: str,
        n: int,
        wait_s: float = 0,
        rate_limit: AsyncRateLimit | None = None,
    ) -> list[AsyncJob]:
        """Up to *n* jobs in claim order, in one statement (Q-2, Q-3),
        waiting up to *wait_s* for the first (Q-19)."""
        self._check_open()
        wid, count, wait = claim_args(worker_id, n, wait_s)
        rate = rate_spec(rate_limit, self._ex.store_id, self._async_face)
        return await claim_async(self._ex, self._names, wid, count, wait, rate)

    async def ack_batch(self, jobs: Sequence[Any], *, results: Sequence[Any] | None = None) -> int:
        """Ack every still-valid claim of this queue in one transaction; count
        those that landed; handles of another queue or store count 0 (Q-9, C-7).
        *results*, one per job, are kept for the jobs stamped with
        ``result_ttl_s`` (RS-1)."""
        self._check_open()
        handles, kept = self._mine_with(jobs, self._ex.store_id, results)
        if not handles:
            return 0
        encoded = ack_results(handles, kept)
        fences = [h._fence for h in handles]
        if encoded is None:
            landed = await self._ex.ack(None, fences)
        else:
            require(self._ex.capabilities, Capability.RESULTS)
            landed = await self._ex.ack(None, fences, encoded)
        return sum(h._landed(ok) for h, ok in zip(handles, landed, strict=True))

    async def cancel(self, job_id: int, tx: object | None = None) -> bool:
        """Delete a pending or processing job of this queue, whoever holds it
        (Q-13, C-7); joins *tx* (T-1)."""
        self._check_open()
        return await self._ex.cancel(
            await resolve_async(tx, self._ex), self._name, check_job_id(job_id)
        )

    async def get_job(self, job_id: int) -> JobInfo | None:
        """The job in any state, or ``None`` (Q-14); scoped to this queue (C-7)."""
        self._check_open()
        row = await self._ex.get_job(self._name, check_job_id(job_id))
        return None if row is None else job_info(row)

    async def result(
        self, job_id: int, wait_s: float = 0, tx: object | None = None
    ) -> JobResult | None:
        """How the job ended: ``done`` with its kept result, or ``dead``;
        ``None`` while it is unfinished (after waiting up to *wait_s*, woken
        by the finishing commit) and for an unknown id (RS-2)."""
        self._check_open()
        jid = check_job_id(job_id)
        wait = check_result_wait(wait_s, tx)
        ex = self._ex
        require(ex.capabilities, Capability.RESULTS)
        resolved = await resolve_async(tx, ex)

        async def attempt(idle: bool) -> JobResult | None:
            row = await ex.get_result(resolved, self._name, jid)
            return None if row is None else job_result(row)

        if wait == 0:
            return await attempt(False)
        fallback = ex.fallback_s()
        got: JobResult | None = await run_blocking_async(
            blocking_plan(
                wait,
                RESULT_FALLBACK_S if fallback is None else min(fallback, RESULT_FALLBACK_S),
                lazy_wakes=True,
            ),
            wakes=ex.wakes,
            keys=(result_wake_key(self._name),),
            attempt=attempt,
            is_closed=lambda: ex.closed,
            start_wakes=ex.start_wakes,
        )
        return got

    async def list_jobs(
        self, state: JobState, limit: int = 100, after_id: int = 0
    ) -> list[JobInfo]:
        """Jobs in *state* with ``id > after_id``, ascending, at most *limit*."""
        self._check_open()
        wanted = self._state_arg(state)
        count, after = self._list_args(limit, after_id)
        rows = await self._ex.list_jobs(self._name, wanted, count, after)
        if True:  # ASYNC
            if sum(len(r.payload) for r in rows) > BIG_PAYLOAD_BYTES:
                return await aoffload(job_infos, rows)
        return [job_info(r) for r in rows]

    async def stats(self) -> QueueStats:
        """Counts by state; a pure read (C-8)."""
        self._check_open()
        return (await self._ex.queue_stats(self._name))[0]

    async def sweep_expired(self) -> SweepResult:
        """Expired rows and exhausted lapsed claims to dead, retained dead rows
        purged: one atomic step (Q-12, Q-15..Q-17)."""
        self._check_open()
        return await self._ex.sweep(self._name)

    async def redrive(self, job_ids: Sequence[int] | None = None, tx: object | None = None) -> int:
        """Dead jobs back to pending with a fresh budget, same ids (Q-21)."""
        self._check_open()
        ids = check_ids(job_ids)
        if ids == []:
            return 0
        return await self._ex.redrive(await resolve_async(tx, self._ex), self._name, ids)

    async def purge_dead(
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
        return await self._ex.purge_dead(await resolve_async(tx, self._ex), self._name, ids, older)

    async def pause(self, tx: object | None = None) -> bool:
        """Pause this queue for the whole fleet (Q-27); joins *tx* (T-1).
        ``True`` when it was not paused before."""
        self._check_open()
        require(self._ex.capabilities, Capability.PAUSE)
        return await self._ex.set_paused(await resolve_async(tx, self._ex), self._name, True)

    async def resume(self, tx: object | None = None) -> bool:
        """Resume a paused queue, waking its blocked claims at the commit
        (Q-27); joins *tx* (T-1). ``True`` when it was paused."""
        self._check_open()
        require(self._ex.capabilities, Capability.PAUSE)
        return await self._ex.set_paused(await resolve_async(tx, self._ex), self._name, False)

    async def is_paused(self) -> bool:
        """Whether this queue is paused (Q-27); a pure read."""
        self._check_open()
        require(self._ex.capabilities, Capability.PAUSE)
        return await self._ex.is_paused(self._name)

    async def run_now(self, job_id: int, tx: object | None = None) -> bool:
        """Make a pending job of this queue ready at once (O-6): a scheduled
        one becomes claimable now, a ready one keeps its place. ``False``
        for a processing, waiting, dead or unknown job; joins *tx* (T-1)."""
        self._check_open()
        jid = check_job_id(job_id)
        require(self._ex.capabilities, Capability.RUN_NOW)
        return await self._ex.run_now(await resolve_async(tx, self._ex), self._name, jid)
