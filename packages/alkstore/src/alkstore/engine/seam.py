# Generated from seam_async.py by scripts/async_to_sync.py: edit that file, not this one.
"""The engine seam's I/O: one operation per unit of work (docs/adr/0010).

What the operations share, and the rules every one follows, are in
:mod:`.seam_base`. On the sync face the executor is thread-safe (the kit
calls it from any thread); on the async face no operation blocks the event
loop (A-2), and :mod:`alkstore.engine.threaded` turns any sync executor into
an async one by running each operation on an I/O thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Protocol

from alkstore.protocols import Tx
from alkstore.types import (
    JobState,
    LockInfo,
    QueueStats,
    StreamStats,
    SweepResult,
    WorkerCount,
    WorkerInfo,
)

from .rows import (
    ClaimRow,
    EventRow,
    Fence,
    Fire,
    Inserted,
    JobRow,
    NewJob,
    RateSpec,
    ResultRow,
    ScheduleRow,
)
from .seam_base import ExecutorBase, NoteSink, TxT

__all__ = ["Executor", "NoteSink"]


class Executor(ExecutorBase[TxT], Protocol[TxT]):
    """The I/O of one open store (SPEC §14 for the faces)."""

    # ------------------------------------------------------------ the store

    def start_wakes(self) -> None:
        """Make sure commits from now on reach :attr:`wakes` (start a watcher
        or listener on first need)."""
        ...

    def transaction(self) -> AbstractContextManager[Tx]:
        """A transaction: committed on a normal exit, rolled back when the
        block raises (T-1..T-4)."""
        ...

    def close(self) -> None:
        """Release the store's connections and threads; idempotent. Every later
        call raises ``StoreClosed`` (ST-3)."""
        ...

    # --------------------------------------------------------------- queues

    def insert_jobs(
        self, tx: TxT | None, queue: str, jobs: Sequence[NewJob], max_depth: int | None
    ) -> list[Inserted]:
        """Insert *jobs* (at least one; every field but ``payload`` and
        ``unique_key`` is the same for all) in one atomic step and wake the
        queue at commit. Jobs with a ``unique_key`` follow Q-23; with
        ``replace`` or ``debounce_s`` (Q-29) a pending holder of the key is
        updated in place instead, in one statement, the items decided in
        order (and the queue woken only when the holder became ready
        earlier). With *max_depth*, raise ``QueueFull`` and write nothing
        when the queue would hold more unfinished jobs (Q-24)."""
        ...

    def claim(
        self,
        queues: Sequence[str],
        worker_id: str,
        n: int,
        rate: RateSpec | None,
        idle: bool,
    ) -> list[ClaimRow]:
        """Claim up to *n* claimable jobs, from the first of *queues* that has
        some, then the next (W-10), in claim order (Q-2..Q-6, Q-25), taking one
        unit of *rate* per job (R-1). Dead-letters exhausted lapsed claims of
        those queues first (Q-12). *idle* is a hint: the caller is waiting and
        found nothing last time, so an engine may look with a pure read before
        it takes a write lock."""
        ...

    def next_ready(self, queues: Sequence[str]) -> float | None:
        """Seconds until the earliest claimable row of *queues* is ready
        (negative when one already is), ``None`` when there is none."""
        ...

    def ack(
        self,
        tx: TxT | None,
        fences: Sequence[Fence],
        results: Sequence[str | None] | None = None,
    ) -> list[bool]:
        """Delete each fenced claim that is still valid, in one atomic step;
        one result per fence, in order (Q-7, Q-9).

        With *results* (one per fence: the encoded result, or ``None`` for a
        JSON ``null``; the kit passes them when any fence's job is stamped
        with ``result_ttl_s``), each deleted row so stamped keeps its result
        in the same step, in storage of its own (never the claim's tables or
        indexes), until ``finished_at + result_ttl_s``, and the commit wakes
        :func:`~alkstore.engine.result_wake_key` of its queue (RS-1, RS-2)."""
        ...

    def retry(self, tx: TxT | None, fence: Fence, delay_s: float, error: str) -> bool:
        """Back to pending after *delay_s*, or to dead with *error* at an
        exhausted budget (Q-10)."""
        ...

    def fail(self, tx: TxT | None, fence: Fence, error: str) -> bool:
        """To dead with *error* (Q-11)."""
        ...

    def release(self, fence: Fence) -> bool:
        """Give the claim back unstarted: pending, ready now, the attempt not
        counted (Q-26)."""
        ...

    def heartbeat(self, fence: Fence, extend_s: float) -> datetime | None:
        """The new deadline, or ``None`` when the claim is no longer valid (Q-8)."""
        ...

    def progress(self, tx: TxT | None, fence: Fence, value: str | None) -> bool:
        """Store *value* (encoded JSON text; ``None`` clears it) as the job's
        checkpoint while the claim is valid, the deadline unchanged; ``False``
        when the claim is no longer valid (Q-28, fenced as Q-7). The
        checkpoint stays on the row through retries and reclaims, moves with
        it to dead and back on a redrive, and is what a claim returns as
        ``ClaimRow.progress`` and ``get_job`` as ``JobRow.progress``."""
        ...

    def cancel(self, tx: TxT | None, queue: str, job_id: int) -> bool:
        """Delete a pending or processing job of *queue*, whoever holds it;
        ``False`` for a dead or missing job (Q-13)."""
        ...

    def get_job(self, queue: str, job_id: int) -> JobRow | None:
        """The job's row in any state, or ``None`` when there is none."""
        ...

    def list_jobs(self, queue: str, state: JobState, limit: int, after_id: int) -> list[JobRow]:
        """Jobs of *queue* in *state* with ``id > after_id``, ascending id
        (``done``: the kept results not yet past their time, RS-1)."""
        ...

    def get_result(self, tx: TxT | None, queue: str, job_id: int) -> ResultRow | None:
        """How the job ended: its kept result not yet past its time
        (``'done'``), or its dead row (``'dead'``); ``None`` otherwise (RS-2).
        With *tx*, read in the caller's transaction. A pure read (C-8)."""
        ...

    def parent_results(self, tx: TxT | None, job_id: int) -> dict[int, str]:
        """WF-4: the kept results (stored text) of the jobs the live job
        *job_id* was enqueued after, by id; a parent without a kept result
        not yet past its time is absent. With *tx*, read in the caller's
        transaction. A pure read."""
        ...

    def queue_stats(self, queue: str | None) -> list[QueueStats]:
        """Counts of one queue (always one row), or of every queue with rows."""
        ...

    def sweep(self, queue: str) -> SweepResult:
        """Requeue or dead-letter the lapsed claims of *queue* now (Q-12);
        expire and purge (Q-15, Q-16); delete its kept results past their
        time (RS-3)."""
        ...

    def redrive(self, tx: TxT | None, queue: str, job_ids: Sequence[int] | None) -> int:
        """Dead jobs of *queue* (those ids, or all) back to pending with a
        fresh budget; the number moved (Q-21)."""
        ...

    def purge_dead(
        self,
        tx: TxT | None,
        queue: str,
        job_ids: Sequence[int] | None,
        older_than_s: float | None,
    ) -> int:
        """Delete dead jobs of *queue* (those ids, or all; only those dead
        longer than *older_than_s* when given); the number deleted (Q-22)."""
        ...

    # Q-27, O-6: operating live work (capabilities ``pause`` and ``run_now``).

    def set_paused(self, tx: TxT | None, queue: str, paused: bool) -> bool:
        """Pause *queue* (a row in a table of paused queues) or resume it;
        ``True`` when the state changed. While a queue is paused every claim
        of it finds nothing and :meth:`next_ready` ignores it; a resume that
        changed the state wakes the queue at commit (Q-27)."""
        ...

    def is_paused(self, queue: str) -> bool:
        """Whether *queue* is paused (Q-27). A pure read."""
        ...

    def run_now(self, tx: TxT | None, queue: str, job_id: int) -> bool:
        """Make the pending job *job_id* of *queue* ready now (``run_at`` and
        the ready time moved back to now, never forwards) and wake the queue
        at commit; ``False`` for a job in any other state or missing (O-6)."""
        ...

    # -------------------------------------------------------------- streams

    def publish(self, tx: TxT | None, stream: str, key: str | None, payload: str) -> int:
        """Append an event; its offset, gap-free in commit order (S-1, S-2, S-4)."""
        ...

    def read_events(self, stream: str, after: int, limit: int) -> list[EventRow]:
        """Up to *limit* events with offset > *after*, ascending (S-2)."""
        ...

    def has_event_after(self, stream: str, after: int) -> bool:
        """Whether an event with offset > *after* exists (a cheap look)."""
        ...

    def commit_offset(self, stream: str, consumer: str, offset: int) -> bool:
        """Store the consumer's offset; ``False``, changing nothing, unless it
        moves forwards (S-3)."""
        ...

    def get_offset(self, stream: str, consumer: str) -> int:
        """The consumer's stored offset, ``0`` when it has none."""
        ...

    def trim(self, stream: str, before: int) -> int:
        """Delete events with offset < *before*; the number deleted."""
        ...

    def stream_stats(self) -> list[StreamStats]:
        """One row per stream with events or consumers."""
        ...

    # ---------------------------------------------------------------- locks

    def acquire_lock(self, name: str, owner: str, ttl_s: float) -> tuple[int, datetime] | None:
        """``(token, expires_at)``, or ``None`` while another owner holds it."""
        ...

    def renew_lock(self, name: str, owner: str, token: int, ttl_s: float) -> datetime | None:
        """The new expiry while *token* still holds the lock, else ``None`` (L-3)."""
        ...

    def release_lock(self, name: str, owner: str, token: int) -> bool:
        """Free the lock while *token* still holds it; ``False`` once it expired
        or changed hands (L-3)."""
        ...

    def held_locks(self) -> list[LockInfo]:
        """Every unexpired lock."""
        ...

    # ---------------------------------------------------------- rate limits

    def acquire_rate(self, rate: RateSpec, n: int) -> float:
        """Take *n* units: ``0.0`` when granted, else the seconds until they
        could be (nothing taken). One statement (R-1)."""
        ...

    # -------------------------------------------------------- notifications

    def notify(self, tx: TxT | None, channel: str, payload: str) -> None:
        """Deliver *payload* to the channel's listeners at the commit (N-1)."""
        ...

    def subscribe(self, sink: NoteSink) -> None:
        """Deliver to *sink* everything committed on its channels from the
        moment this returns (N-1)."""
        ...

    def unsubscribe(self, sink: NoteSink) -> None:
        """Stop delivering to *sink*."""
        ...

    # ------------------------------------------------------------ schedules

    def clock(self) -> datetime:
        """The engine's "now" (C-4)."""
        ...

    def upsert_schedule(self, row: ScheduleRow) -> ScheduleRow:
        """Create or replace by name; when the stored spec and zone equal
        *row*'s, keep the stored ``next_fire_at`` (SC-2). Wakes the scheduler
        (key :data:`~alkstore.engine.schedules.SCHEDULES_WAKE_KEY`)."""
        ...

    def delete_schedule(self, name: str) -> bool:
        """Delete by name; ``False`` when there was none."""
        ...

    def list_schedules(self) -> list[ScheduleRow]:
        """Every schedule, by name."""
        ...

    def due_schedules(self) -> tuple[datetime, list[ScheduleRow]]:
        """The engine's now, and the schedules due at it."""
        ...

    def fire_schedule(self, fire: Fire) -> bool:
        """Compare-and-set the schedule's ``next_fire_at`` from
        ``fire.expected`` and, only when it matched, enqueue ``fire.job`` on
        ``fire.queue``, atomically (SC-3)."""
        ...

    def seconds_to_next_fire(self) -> float | None:
        """Seconds until the earliest schedule fires, ``None`` with none."""
        ...

    # ------------------------------------------------------ workers (O-5)

    def report_worker(
        self,
        info: WorkerInfo,
        counts: Sequence[WorkerCount],
        gone: bool,
        forget_after_s: float,
        keep_counts_s: float,
    ) -> None:
        """A worker's refresh as one atomic write (one statement where the
        database can, O-5): insert or update *info*'s row with ``last_seen``
        at the engine's now (``info.last_seen`` is ignored), or, with *gone*,
        delete it; add each of *counts* (merged: one per minute, queue and
        outcome; every one of ``info.id``) to the stored count of its key;
        delete the rows of other workers last seen more than
        *forget_after_s* ago and the counts whose minute is more than
        *keep_counts_s* old (a count of *counts* that old is not stored)."""
        ...

    def list_workers(self, seen_within_s: float) -> list[WorkerInfo]:
        """The workers last seen at most *seen_within_s* ago, by id, with
        ``last_seen``. A pure read."""
        ...

    def worker_counts(self, since: datetime) -> list[WorkerCount]:
        """Every stored count whose minute is at or after *since*, by minute,
        worker, queue and outcome. A pure read."""
        ...
