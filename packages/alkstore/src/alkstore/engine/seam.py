"""The engine seam: what an engine supplies so that the kit can implement the
whole public API above it, once, sync and async (docs/adr/0010).

An engine implements :class:`Executor` (and, for a native async face,
:class:`AsyncExecutor`: the same operations as coroutines). Each operation is
one unit of I/O with the engine's own atomicity: it fully happens or leaves
no trace (C-6), joins the caller's ``tx`` where it takes one (T-1), and wraps
every driver error (E-1, E-2). Everything that does not depend on the
database — argument checks, payload encoding and decoding, the backoff
curve, claim order, handles, blocking loops, the scheduler's planning and
leader loop, listeners, the outbox — lives in the kit and is the same for
every engine.

Arguments arrive validated: names follow C-1, payloads are encoded JSON
text, durations are finite seconds, ids are 64-bit integers. ``tx`` is
passed through as the caller gave it; the engine resolves it (its own
transaction object, a native connection, or what
:func:`alkstore.engine.native.unwrap` finds inside a framework's object) and
refuses anything else with ``InvalidArgument`` before any statement.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from datetime import datetime
from typing import Protocol

from alkstore.protocols import AsyncTx, Capability, Tx
from alkstore.types import JobState, LockInfo, QueueStats, StreamStats, SweepResult

from .rows import ClaimRow, EventRow, Fence, Inserted, JobRow, NewJob, RateSpec, ScheduleRow
from .wakes import WakeBoard

__all__ = ["AsyncExecutor", "Executor", "NoteSink"]


class NoteSink(Protocol):
    """Where an engine delivers notifications for one listener (N-1)."""

    @property
    def channels(self) -> frozenset[str]: ...

    def deliver(self, channel: str, payload: str) -> None:
        """Called once per notification, in commit order per channel, with the
        stored payload text. Must not block; may be called from any thread."""
        ...


class Executor(Protocol):
    """The I/O of one open store. Thread-safe: the kit calls it from any thread."""

    # ------------------------------------------------------------ the store

    @property
    def url(self) -> str:
        """The store's URL without a password (E-4)."""
        ...

    @property
    def capabilities(self) -> frozenset[Capability]: ...

    @property
    def closed(self) -> bool: ...

    @property
    def store_id(self) -> str:
        """Names the database: equal for two stores on the same one, different
        for another file, server, database or schema (C-7)."""
        ...

    @property
    def wakes(self) -> WakeBoard:
        """Bumped, per queue name and ``"stream:<name>"``, when a commit may
        have made work (Q-19); every key when the engine cannot tell."""
        ...

    def start_wakes(self) -> None:
        """Make sure commits from now on reach :attr:`wakes` (start a watcher
        or listener on first need)."""
        ...

    def fallback_s(self) -> float | None:
        """How often blocked calls look again without a wake (``None``: never)."""
        ...

    def transaction(self) -> AbstractContextManager[Tx]:
        """A transaction: committed on a normal exit, rolled back when the
        block raises (T-1..T-4)."""
        ...

    def close(self) -> None: ...

    # --------------------------------------------------------------- queues

    def insert_jobs(
        self, tx: object | None, queue: str, jobs: Sequence[NewJob], max_depth: int | None
    ) -> list[Inserted]:
        """Insert *jobs* (at least one; every field but ``payload`` and
        ``unique_key`` is the same for all) in one atomic step and wake the
        queue at commit. Jobs with a ``unique_key`` follow Q-23. With
        *max_depth*, raise ``QueueFull`` and write nothing when the queue
        would hold more unfinished jobs (Q-24)."""
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

    def ack(self, tx: object | None, fences: Sequence[Fence]) -> list[bool]:
        """Delete each fenced claim that is still valid, in one atomic step;
        one result per fence, in order (Q-7, Q-9)."""
        ...

    def retry(self, tx: object | None, fence: Fence, delay_s: float, error: str) -> bool:
        """Back to pending after *delay_s*, or to dead with *error* at an
        exhausted budget (Q-10)."""
        ...

    def fail(self, tx: object | None, fence: Fence, error: str) -> bool:
        """To dead with *error* (Q-11)."""
        ...

    def release(self, fence: Fence) -> bool:
        """Give the claim back unstarted: pending, ready now, the attempt not
        counted (Q-26)."""
        ...

    def heartbeat(self, fence: Fence, extend_s: float) -> datetime | None:
        """The new deadline, or ``None`` when the claim is no longer valid (Q-8)."""
        ...

    def cancel(self, tx: object | None, queue: str, job_id: int) -> bool: ...

    def get_job(self, queue: str, job_id: int) -> JobRow | None: ...

    def list_jobs(self, queue: str, state: JobState, limit: int, after_id: int) -> list[JobRow]:
        """Jobs of *queue* in *state* with ``id > after_id``, ascending id."""
        ...

    def queue_stats(self, queue: str | None) -> list[QueueStats]:
        """Counts of one queue (always one row), or of every queue with rows."""
        ...

    def sweep(self, queue: str) -> SweepResult: ...

    def redrive(self, tx: object | None, queue: str, job_ids: Sequence[int] | None) -> int: ...

    def purge_dead(
        self,
        tx: object | None,
        queue: str,
        job_ids: Sequence[int] | None,
        older_than_s: float | None,
    ) -> int: ...

    # -------------------------------------------------------------- streams

    def publish(self, tx: object | None, stream: str, key: str | None, payload: str) -> int: ...
    def read_events(self, stream: str, after: int, limit: int) -> list[EventRow]: ...
    def has_event_after(self, stream: str, after: int) -> bool: ...
    def commit_offset(self, stream: str, consumer: str, offset: int) -> bool: ...
    def get_offset(self, stream: str, consumer: str) -> int: ...
    def trim(self, stream: str, before: int) -> int: ...
    def stream_stats(self) -> list[StreamStats]: ...

    # ---------------------------------------------------------------- locks

    def acquire_lock(self, name: str, owner: str, ttl_s: float) -> tuple[int, datetime] | None:
        """``(token, expires_at)``, or ``None`` while another owner holds it."""
        ...

    def renew_lock(self, name: str, owner: str, token: int, ttl_s: float) -> datetime | None: ...
    def release_lock(self, name: str, owner: str, token: int) -> bool: ...
    def held_locks(self) -> list[LockInfo]: ...

    # ---------------------------------------------------------- rate limits

    def acquire_rate(self, rate: RateSpec, n: int) -> float:
        """Take *n* units: ``0.0`` when granted, else the seconds until they
        could be (nothing taken). One statement (R-1)."""
        ...

    # -------------------------------------------------------- notifications

    def notify(self, tx: object | None, channel: str, payload: str) -> None: ...

    def subscribe(self, sink: NoteSink) -> None:
        """Deliver to *sink* everything committed on its channels from the
        moment this returns (N-1)."""
        ...

    def unsubscribe(self, sink: NoteSink) -> None: ...

    # ------------------------------------------------------------ schedules

    def clock(self) -> datetime:
        """The engine's "now" (C-4)."""
        ...

    def upsert_schedule(self, row: ScheduleRow) -> ScheduleRow:
        """Create or replace by name; when the stored spec and zone equal
        *row*'s, keep the stored ``next_fire_at`` (SC-2). Wakes the scheduler
        (key :data:`~alkstore.engine.schedules.SCHEDULES_WAKE_KEY`)."""
        ...

    def delete_schedule(self, name: str) -> bool: ...
    def list_schedules(self) -> list[ScheduleRow]: ...

    def due_schedules(self) -> tuple[datetime, list[ScheduleRow]]:
        """The engine's now, and the schedules due at it."""
        ...

    def fire_schedule(
        self,
        name: str,
        expected: datetime,
        fire_at: datetime,
        next_fire_at: datetime,
        queue: str,
        job: NewJob,
    ) -> bool:
        """Compare-and-set the schedule's ``next_fire_at`` from *expected* and,
        only when it matched, enqueue *job* on *queue*, atomically (SC-3)."""
        ...

    def seconds_to_next_fire(self) -> float | None: ...


class AsyncExecutor(Protocol):
    """:class:`Executor` as coroutines, for the async face (SPEC §14).

    The same operations, arguments and rules; none may block the event loop
    (A-2). :mod:`alkstore.engine.threaded` turns any :class:`Executor` into
    one by running each operation in a thread.
    """

    @property
    def url(self) -> str: ...
    @property
    def capabilities(self) -> frozenset[Capability]: ...
    @property
    def closed(self) -> bool: ...
    @property
    def store_id(self) -> str: ...
    @property
    def wakes(self) -> WakeBoard: ...

    async def start_wakes(self) -> None: ...
    def fallback_s(self) -> float | None: ...
    def transaction(self) -> AbstractAsyncContextManager[AsyncTx]: ...
    async def close(self) -> None: ...

    async def insert_jobs(
        self, tx: object | None, queue: str, jobs: Sequence[NewJob], max_depth: int | None
    ) -> list[Inserted]: ...
    async def claim(
        self,
        queues: Sequence[str],
        worker_id: str,
        n: int,
        rate: RateSpec | None,
        idle: bool,
    ) -> list[ClaimRow]: ...
    async def next_ready(self, queues: Sequence[str]) -> float | None: ...
    async def ack(self, tx: object | None, fences: Sequence[Fence]) -> list[bool]: ...
    async def retry(self, tx: object | None, fence: Fence, delay_s: float, error: str) -> bool: ...
    async def fail(self, tx: object | None, fence: Fence, error: str) -> bool: ...
    async def release(self, fence: Fence) -> bool: ...
    async def heartbeat(self, fence: Fence, extend_s: float) -> datetime | None: ...
    async def cancel(self, tx: object | None, queue: str, job_id: int) -> bool: ...
    async def get_job(self, queue: str, job_id: int) -> JobRow | None: ...
    async def list_jobs(
        self, queue: str, state: JobState, limit: int, after_id: int
    ) -> list[JobRow]: ...
    async def queue_stats(self, queue: str | None) -> list[QueueStats]: ...
    async def sweep(self, queue: str) -> SweepResult: ...
    async def redrive(
        self, tx: object | None, queue: str, job_ids: Sequence[int] | None
    ) -> int: ...
    async def purge_dead(
        self,
        tx: object | None,
        queue: str,
        job_ids: Sequence[int] | None,
        older_than_s: float | None,
    ) -> int: ...

    async def publish(
        self, tx: object | None, stream: str, key: str | None, payload: str
    ) -> int: ...
    async def read_events(self, stream: str, after: int, limit: int) -> list[EventRow]: ...
    async def has_event_after(self, stream: str, after: int) -> bool: ...
    async def commit_offset(self, stream: str, consumer: str, offset: int) -> bool: ...
    async def get_offset(self, stream: str, consumer: str) -> int: ...
    async def trim(self, stream: str, before: int) -> int: ...
    async def stream_stats(self) -> list[StreamStats]: ...

    async def acquire_lock(
        self, name: str, owner: str, ttl_s: float
    ) -> tuple[int, datetime] | None: ...
    async def renew_lock(
        self, name: str, owner: str, token: int, ttl_s: float
    ) -> datetime | None: ...
    async def release_lock(self, name: str, owner: str, token: int) -> bool: ...
    async def held_locks(self) -> list[LockInfo]: ...

    async def acquire_rate(self, rate: RateSpec, n: int) -> float: ...

    async def notify(self, tx: object | None, channel: str, payload: str) -> None: ...
    async def subscribe(self, sink: NoteSink) -> None: ...
    async def unsubscribe(self, sink: NoteSink) -> None: ...

    async def clock(self) -> datetime: ...
    async def upsert_schedule(self, row: ScheduleRow) -> ScheduleRow: ...
    async def delete_schedule(self, name: str) -> bool: ...
    async def list_schedules(self) -> list[ScheduleRow]: ...
    async def due_schedules(self) -> tuple[datetime, list[ScheduleRow]]: ...
    async def fire_schedule(
        self,
        name: str,
        expected: datetime,
        fire_at: datetime,
        next_fire_at: datetime,
        queue: str,
        job: NewJob,
    ) -> bool: ...
    async def seconds_to_next_fire(self) -> float | None: ...
