# Generated from queue_async.py by scripts/async_to_sync.py: edit that file, not this one.
"""Queue handles (SPEC §5, §15, §16).

Everything but I/O happens once, in :mod:`.queue_base` and here: argument
checks, payload encoding, stamping (Q-1), claim order and handles (Q-2, Q-4),
the blocking loop (Q-19), undecodable rows (C-3), the wait for room of a
bounded queue (Q-24).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from alkstore._acompat import sleep
from alkstore._tracecontext import trace_context_text
from alkstore.errors import QueueFull, StoreClosed, TransientError
from alkstore.protocols import Capability, Job, RateLimit
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
from .infos import job_info, job_result
from .jobs import KitJob
from .jobs_base import decode_claims
from .native import resolve_sync
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
from .runners import run_blocking
from .wakes import blocking_plan

if TYPE_CHECKING:
    from .seam import Executor

__all__ = ["KitQueue", "claim_sync"]


# ------------------------------------------------------------------ claims


def _handles(
    ex: Executor[Any], rows: list[ClaimRow], queues: Sequence[str], worker_id: str
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
    ex: Executor[Any],
    queues: tuple[str, ...],
    worker_id: str,
    n: int,
    wait_s: float,
    rate: RateSpec | None,
) -> list[Job]:
    """Claim up to *n* jobs from *queues* in order, waiting up to *wait_s*
    (Q-19, W-10). On the async face a task cancelled while a claim is in
    flight gives back what that claim took (A-4, Q-26)."""

    def once(idle: bool) -> list[Job]:
        jobs: list[Job] = []
        while len(jobs) < n:  # undecodable rows went to dead: claim in their place
            rows = ex.claim(queues, worker_id, n - len(jobs), rate, idle)
            if not rows:
                break
            got, dropped = _handles(ex, rows, queues, worker_id)
            jobs.extend(got)
            if not dropped:
                break
        return jobs

    attempt = once

    if ex.closed:
        raise StoreClosed("the store was closed")
    if wait_s == 0:
        return attempt(False)

    def next_ready() -> float | None:
        return rate_pause(ex.next_ready(queues), rate)

    jobs: list[Job] = run_blocking(
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


class KitQueue(QueueBase):
    """A :class:`~alkstore.protocols.Queue` over an executor."""

    def __init__(
        self, ex: Executor[Any], name: str, opts: QueueOpts, store: object | None = None
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

    def _insert(self, tx: object | None, jobs: list[NewJob], wait_s: float = 0) -> list[Any]:
        if jobs[0].after:
            require(self._ex.capabilities, Capability.WORKFLOWS)
        tx = resolve_sync(tx, self._ex)
        max_depth = self._opts.max_depth
        if max_depth is None:
            return self._ex.insert_jobs(tx, self._name, jobs, None)
        deadline = time.monotonic() + wait_s
        pause = FULL_FIRST_PAUSE_S
        while True:
            try:
                return self._ex.insert_jobs(tx, self._name, jobs, max_depth)
            except QueueFull:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._ex.closed:
                    raise
                sleep(min(pause, remaining))
                pause = min(pause * 2, FULL_MAX_PAUSE_S)

    def _prepare(
        self,
        payloads: Sequence[Any],
        opts: EnqueueOpts | None,
        keys: Sequence[str | None] | None = None,
    ) -> list[NewJob]:
        """Every payload encoded before any statement runs (C-3, C-6)."""
        return jobs_of(self._opts, payloads, opts, keys)

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
        wait = check_bounded_wait(wait_s, tx) if wait_s else 0.0
        jobs = [prepare_job(self._opts, payload, opts, trace_context=trace_context_text())]
        return int((self._insert(tx, jobs, wait))[0].id)

    def enqueue_many(
        self, payloads: Sequence[Any], opts: EnqueueOpts | None = None, tx: object | None = None
    ) -> list[int]:
        """Insert every payload in one atomic step; ids in payload order."""
        self._check_open()
        if not check_payloads(payloads):
            return []
        return [r.id for r in self._insert(tx, self._prepare(payloads, opts))]

    def enqueue_unique(
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
        jobs = self._prepare((payload,), opts, (check_unique_key(key),))
        row = (self._insert(tx, with_conflict(jobs, *conflict)))[0]
        return Enqueued(row.id, row.created)

    def enqueue_many_unique(
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
        jobs = self._prepare([p for _, p in pairs], opts, [k for k, _ in pairs])
        return [Enqueued(r.id, r.created) for r in self._insert(tx, with_conflict(jobs, *conflict))]

    def claim(
        self, worker_id: str, wait_s: float = 0, rate_limit: RateLimit | None = None
    ) -> Job | None:
        """The best claimable job (Q-2..Q-6), waiting up to *wait_s* (Q-19)."""
        jobs = self.claim_batch(worker_id, 1, wait_s, rate_limit)
        return jobs[0] if jobs else None

    def claim_batch(
        self,
        worker_id: str,
        n: int,
        wait_s: float = 0,
        rate_limit: RateLimit | None = None,
    ) -> list[Job]:
        """Up to *n* jobs in claim order, in one statement (Q-2, Q-3),
        waiting up to *wait_s* for the first (Q-19)."""
        self._check_open()
        wid, count, wait = claim_args(worker_id, n, wait_s)
        rate = rate_spec(rate_limit, self._ex.store_id, self._async_face)
        return claim_sync(self._ex, self._names, wid, count, wait, rate)

    def ack_batch(self, jobs: Sequence[Any], *, results: Sequence[Any] | None = None) -> int:
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
            landed = self._ex.ack(None, fences)
        else:
            require(self._ex.capabilities, Capability.RESULTS)
            landed = self._ex.ack(None, fences, encoded)
        return sum(h._landed(ok) for h, ok in zip(handles, landed, strict=True))

    def cancel(self, job_id: int, tx: object | None = None) -> bool:
        """Delete a pending or processing job of this queue, whoever holds it
        (Q-13, C-7); joins *tx* (T-1)."""
        self._check_open()
        return self._ex.cancel(resolve_sync(tx, self._ex), self._name, check_job_id(job_id))

    def get_job(self, job_id: int) -> JobInfo | None:
        """The job in any state, or ``None`` (Q-14); scoped to this queue (C-7)."""
        self._check_open()
        row = self._ex.get_job(self._name, check_job_id(job_id))
        return None if row is None else job_info(row)

    def result(self, job_id: int, wait_s: float = 0, tx: object | None = None) -> JobResult | None:
        """How the job ended: ``done`` with its kept result, or ``dead``;
        ``None`` while it is unfinished (after waiting up to *wait_s*, woken
        by the finishing commit) and for an unknown id (RS-2)."""
        self._check_open()
        jid = check_job_id(job_id)
        wait = check_result_wait(wait_s, tx)
        ex = self._ex
        require(ex.capabilities, Capability.RESULTS)
        resolved = resolve_sync(tx, ex)

        def attempt(idle: bool) -> JobResult | None:
            row = ex.get_result(resolved, self._name, jid)
            return None if row is None else job_result(row)

        if wait == 0:
            return attempt(False)
        fallback = ex.fallback_s()
        got: JobResult | None = run_blocking(
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

    def list_jobs(self, state: JobState, limit: int = 100, after_id: int = 0) -> list[JobInfo]:
        """Jobs in *state* with ``id > after_id``, ascending, at most *limit*."""
        self._check_open()
        wanted = self._state_arg(state)
        count, after = self._list_args(limit, after_id)
        rows = self._ex.list_jobs(self._name, wanted, count, after)
        return [job_info(r) for r in rows]

    def stats(self) -> QueueStats:
        """Counts by state; a pure read (C-8)."""
        self._check_open()
        return (self._ex.queue_stats(self._name))[0]

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
        return self._ex.redrive(resolve_sync(tx, self._ex), self._name, ids)

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
        return self._ex.purge_dead(resolve_sync(tx, self._ex), self._name, ids, older)

    def pause(self, tx: object | None = None) -> bool:
        """Pause this queue for the whole fleet (Q-27); joins *tx* (T-1).
        ``True`` when it was not paused before."""
        self._check_open()
        require(self._ex.capabilities, Capability.PAUSE)
        return self._ex.set_paused(resolve_sync(tx, self._ex), self._name, True)

    def resume(self, tx: object | None = None) -> bool:
        """Resume a paused queue, waking its blocked claims at the commit
        (Q-27); joins *tx* (T-1). ``True`` when it was paused."""
        self._check_open()
        require(self._ex.capabilities, Capability.PAUSE)
        return self._ex.set_paused(resolve_sync(tx, self._ex), self._name, False)

    def is_paused(self) -> bool:
        """Whether this queue is paused (Q-27); a pure read."""
        self._check_open()
        require(self._ex.capabilities, Capability.PAUSE)
        return self._ex.is_paused(self._name)

    def run_now(self, job_id: int, tx: object | None = None) -> bool:
        """Make a pending job of this queue ready at once (O-6): a scheduled
        one becomes claimable now, a ready one keeps its place. ``False``
        for a processing, waiting, dead or unknown job; joins *tx* (T-1)."""
        self._check_open()
        jid = check_job_id(job_id)
        require(self._ex.capabilities, Capability.RUN_NOW)
        return self._ex.run_now(resolve_sync(tx, self._ex), self._name, jid)
