# Async source of _protocols.py (scripts/async_to_sync.py makes it: edit this file).
"""The protocols of one face, written once for both (SPEC §14, docs/adr/0017).

The async protocols are the source and the sync ones are made from them:
the same names without the ``Async`` prefix, the same operations,
arguments, results, errors and rules, with coroutines on the async face
where the sync face does I/O (A-1). Handles (``queue()``, ``stream()``,
``listen()``, ...), properties and ``should_stop`` do no I/O and are plain
on both faces. Import them from :mod:`alkstore.protocols`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from types import TracebackType
from typing import Any, Protocol

from . import _acompat
from ._protocols_base import Capability
from .types import (
    Enqueued,
    EnqueueOpts,
    Event,
    JobInfo,
    JobResult,
    JobState,
    LockInfo,
    Notification,
    QueueOpts,
    QueueStats,
    Schedule,
    StreamStats,
    SweepResult,
    WorkerCount,
    WorkerInfo,
)

__all__ = [
    "AsyncCursorLike",
    "AsyncJob",
    "AsyncListener",
    "AsyncLock",
    "AsyncOutbox",
    "AsyncQueue",
    "AsyncRateLimit",
    "AsyncStore",
    "AsyncStream",
    "AsyncTx",
]


class AsyncCursorLike(Protocol):
    """What ``await tx.execute`` returns (T-2, A-6). On the sync face: a DB-API
    cursor of the engine's driver (``sqlite3.Cursor``, ``psycopg.Cursor``). On
    the async face, on every engine, the same with each fetch awaited and the
    rows iterated asynchronously: psycopg's async cursor is one, and an
    engine whose driver is synchronous wraps its cursor so that each fetch
    runs off the event loop (see
    :class:`alkstore.engine.threaded.ThreadedAsyncCursor`).

    Rows are the driver's own (tuples, ``sqlite3.Row``, mappings), as the
    driver's row factory makes them; code that must run on every engine reads
    them by position, and code written against one engine runs on the other."""

    @property
    def rowcount(self) -> int:
        """Rows the last statement changed (``-1`` when the driver cannot tell)."""
        ...

    @property
    def description(self) -> Sequence[Any] | None:
        """One entry per result column, its name first; ``None`` when the
        statement returns no rows."""
        ...

    async def fetchone(self) -> Any:
        """The next row, or ``None`` when there is none left."""
        ...

    async def fetchmany(self, size: int = ...) -> list[Any]:
        """Up to *size* more rows (the driver's default batch without it)."""
        ...

    async def fetchall(self) -> list[Any]:
        """Every row left."""
        ...

    def __aiter__(self) -> AsyncIterator[Any]:
        """``async for row in cursor``: the rows left, one at a time."""
        ...

    async def close(self) -> None:
        """Free the cursor; rows not fetched are dropped."""
        ...


class AsyncTx(Protocol):
    """A transaction opened by ``async with store.transaction()`` (T-1, T-2;
    A-4 on the async face)."""

    async def execute(
        self, sql: str, params: Sequence[Any] | dict[str, Any] = ()
    ) -> AsyncCursorLike:
        """Run the caller's own SQL in this transaction, in the driver's
        placeholder style, and return its cursor (T-2, A-6; see
        :class:`AsyncCursorLike`)."""
        ...

    @property
    def connection(self) -> Any:
        """The driver's connection this transaction runs on."""
        ...


class AsyncJob(Protocol):
    """A claimed job: the handle of one claim, identified by (id, attempt) (Q-4)."""

    @property
    def id(self) -> int: ...
    @property
    def queue(self) -> str: ...
    @property
    def payload(self) -> Any: ...
    @property
    def attempts(self) -> int: ...
    @property
    def max_attempts(self) -> int: ...
    @property
    def priority(self) -> int: ...
    @property
    def deadline(self) -> datetime:
        """When this claim lapses; moved by a successful heartbeat (Q-8)."""
        ...

    async def ack(self, tx: object | None = None, *, result: Any = None) -> bool:
        """Delete the row if this claim is still valid (Q-7, Q-9, T-1); a job
        stamped with ``result_ttl_s`` keeps *result* (RS-1)."""
        ...

    async def parent_results(self, tx: object | None = None) -> dict[int, Any]:
        """The kept results (RS-1) of the jobs this one was enqueued after
        (``EnqueueOpts.after``), by id; a parent without a kept result is
        absent (WF-4)."""
        ...

    async def retry(
        self, error: str, delay_s: float | None = None, tx: object | None = None
    ) -> bool:
        """Set the row pending again after *delay_s*, or after the curve's delay
        when ``None``; dead-letter with *error* at an exhausted budget (Q-10)."""
        ...

    async def fail(self, error: str, tx: object | None = None) -> bool:
        """Dead-letter the row now with ``last_error = error`` (Q-11)."""
        ...

    async def heartbeat(self, extend_s: float | None = None) -> bool:
        """Move the deadline to now + *extend_s* (default: the row's visibility
        timeout); refused once the deadline has passed (Q-8)."""
        ...

    async def release(self) -> bool:
        """Give an unstarted claim back: pending, ready now, and this claim
        does not count as an attempt; fenced like the other ops (Q-26)."""
        ...

    @property
    def checkpoint(self) -> Any:
        """The job's last stored progress (Q-28): what ``progress`` stored in
        this attempt or an earlier one, ``None`` when never set."""
        ...

    async def progress(self, value: Any, tx: object | None = None) -> bool:
        """Store *value* (C-3 rules, at most 64 KiB encoded; ``None`` clears
        it) as the job's checkpoint, fenced like a heartbeat and leaving the
        deadline where it is; it survives retries and reclaims (Q-28)."""
        ...

    def should_stop(self) -> bool:
        """True once the handler should wrap up: its worker stops or timed it
        out, or the claim was lost (W-12). Outside a worker: once the claim's
        deadline passed or an op on it was refused."""
        ...


class AsyncRateLimit(Protocol):
    """A named GCRA limiter shared by every process on the database (R-1)."""

    @property
    def name(self) -> str: ...
    @property
    def rate(self) -> float: ...
    @property
    def per_s(self) -> float: ...
    @property
    def burst(self) -> int: ...

    async def acquire(self, n: int = 1, wait_s: float = 0) -> bool:
        """Take *n* units, waiting up to *wait_s* for them; ``False`` when
        they did not come in time (C-5). One statement per attempt."""
        ...


class AsyncQueue(Protocol):
    """A handle on one queue name with the opts it stamps on enqueues (Q-1)."""

    @property
    def name(self) -> str: ...
    @property
    def opts(self) -> QueueOpts: ...

    async def enqueue(
        self,
        payload: Any,
        opts: EnqueueOpts | None = None,
        tx: object | None = None,
        *,
        wait_s: float = 0,
    ) -> int:
        """Insert one job and return its id (Q-1, C-3, T-1). On a bounded
        queue that is full, wait up to *wait_s* for room, then raise
        ``QueueFull`` (Q-24)."""
        ...

    async def enqueue_many(
        self, payloads: Sequence[Any], opts: EnqueueOpts | None = None, tx: object | None = None
    ) -> list[int]:
        """Insert many jobs in one statement; ids in the order of *payloads*."""
        ...

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
        """Insert a job holding *key*, unless a live job of the queue holds it
        already: then nothing is written and its id comes back (Q-23).

        Q-29: with ``on_conflict="replace"`` a *pending* holder takes this
        call's payload and opts instead (a processing one is kept); with
        *debounce_s* a pending holder runs *debounce_s* after the latest
        enqueue of its key, but no later than *max_wait_s* after its first
        (its ``created_at``). Both answer ``created=False``."""
        ...

    async def enqueue_many_unique(
        self,
        items: Sequence[tuple[str, Any]],
        opts: EnqueueOpts | None = None,
        tx: object | None = None,
        on_conflict: str = "skip",
        debounce_s: float | None = None,
        max_wait_s: float | None = None,
    ) -> list[Enqueued]:
        """``enqueue_unique`` for each ``(key, payload)``, in one transaction
        (the items decided in order, Q-29)."""
        ...

    async def claim(
        self, worker_id: str, wait_s: float = 0, rate_limit: AsyncRateLimit | None = None
    ) -> AsyncJob | None:
        """Claim the best claimable job (Q-2..Q-6), waiting up to *wait_s* (Q-19);
        with *rate_limit*, only while it grants a unit (R-1)."""
        ...

    async def claim_batch(
        self,
        worker_id: str,
        n: int,
        wait_s: float = 0,
        rate_limit: AsyncRateLimit | None = None,
    ) -> list[AsyncJob]:
        """Claim up to *n* jobs in one statement, in claim order (Q-2, Q-19)."""
        ...

    async def ack_batch(
        self, jobs: Sequence[AsyncJob], *, results: Sequence[Any] | None = None
    ) -> int:
        """Ack every still-valid claim; return how many landed (Q-9); with
        *results* (one per job), stamped jobs keep theirs (RS-1)."""
        ...

    async def cancel(self, job_id: int, tx: object | None = None) -> bool:
        """Delete a pending or processing job of this queue (Q-13, C-7);
        joins *tx* like every write (T-1)."""
        ...

    async def get_job(self, job_id: int) -> JobInfo | None:
        """The job of this queue with that id, in any state (Q-14, C-7)."""
        ...

    async def result(
        self, job_id: int, wait_s: float = 0, tx: object | None = None
    ) -> JobResult | None:
        """How the job ended (``done`` with its kept result, or ``dead``);
        ``None`` while unfinished, after waiting up to *wait_s*, and for an
        unknown id (RS-2)."""
        ...

    async def sweep_expired(self) -> SweepResult:
        """Dead-letter expired and exhausted rows and purge retained dead rows,
        in one atomic step (Q-12, Q-15..Q-17)."""
        ...

    async def stats(self) -> QueueStats:
        """Counts by state, a pure read (C-8)."""
        ...

    async def list_jobs(
        self, state: JobState, limit: int = 100, after_id: int = 0
    ) -> list[JobInfo]:
        """Jobs in *state* with ``id > after_id``, ascending id, at most *limit*."""
        ...

    async def redrive(self, job_ids: Sequence[int] | None = None, tx: object | None = None) -> int:
        """Move dead jobs of this queue back to pending with a fresh budget,
        keeping their ids; every dead job when ``None`` (Q-21)."""
        ...

    async def purge_dead(
        self,
        job_ids: Sequence[int] | None = None,
        older_than_s: float | None = None,
        tx: object | None = None,
    ) -> int:
        """Delete dead jobs of this queue: the given ids, those dead for at
        least *older_than_s*, or all (Q-22)."""
        ...

    async def pause(self, tx: object | None = None) -> bool:
        """Pause this queue for every store on the database (Q-27): its
        claims hand out nothing until :meth:`resume`; enqueues, acks,
        heartbeats and retries go on. Joins *tx* (T-1). ``True`` when it was
        not paused before."""
        ...

    async def resume(self, tx: object | None = None) -> bool:
        """Undo :meth:`pause` and wake the queue's blocked claims at the
        commit (Q-27). Joins *tx* (T-1). ``True`` when it was paused."""
        ...

    async def is_paused(self) -> bool:
        """Whether the queue is paused (Q-27); a pure read."""
        ...

    async def run_now(self, job_id: int, tx: object | None = None) -> bool:
        """Make a pending job of this queue ready at once: a scheduled one
        (``run_at`` in the future) becomes claimable now, one already ready
        keeps its place (O-6). ``False`` for a processing, waiting, dead or
        unknown job. Joins *tx* (T-1); wakes blocked claims at the commit."""
        ...


class AsyncOutbox(Protocol):
    """A transactional outbox on the reserved queue ``__alkstore.outbox.<name>`` (Q-20)."""

    @property
    def name(self) -> str: ...
    @property
    def queue(self) -> AsyncQueue: ...

    async def put(self, payload: Any, tx: object | None = None) -> int:
        """Enqueue *payload* for delivery, joining *tx* (T-1)."""
        ...

    async def run(
        self,
        deliver: Callable[[Any], object] | Callable[[Any], Awaitable[object]],
        stop: _acompat.AEvent | None = None,
        worker_id: str | None = None,
    ) -> None:
        """Deliver until *stop* is set: ack on return, retry by the curve on an
        exception. On the async face *deliver* is a coroutine function or a
        plain callable (run in a thread)."""
        ...


class AsyncStream(Protocol):
    """An append-only log with per-consumer offsets (S-1..S-4)."""

    @property
    def name(self) -> str: ...

    async def publish(self, payload: Any, key: str | None = None, tx: object | None = None) -> int:
        """Append an event and return its offset (S-1, S-2, S-4, T-1)."""
        ...

    async def read(self, after: int = 0, limit: int = 100) -> list[Event]:
        """Events with offset > *after*, in offset order, without gaps (S-2)."""
        ...

    async def commit(self, consumer: str, offset: int) -> bool:
        """Store *consumer*'s offset if it moves forward (S-3)."""
        ...

    async def offset(self, consumer: str) -> int:
        """*consumer*'s committed offset, 0 when none."""
        ...

    async def wait(self, after: int, timeout_s: float) -> bool:
        """Wait until an event past *after* exists, or *timeout_s* passes."""
        ...

    async def trim(self, before: int) -> int:
        """Delete events with offset < *before*; return how many."""
        ...


class AsyncLock(Protocol):
    """A held TTL lock (L-1..L-4); ``async with lock:`` releases it on exit."""

    @property
    def name(self) -> str: ...
    @property
    def owner(self) -> str: ...
    @property
    def token(self) -> int:
        """The fencing token: strictly greater for every fresh acquisition (L-4)."""
        ...

    @property
    def expires_at(self) -> datetime: ...

    async def renew(self, ttl_s: float | None = None) -> bool:
        """Extend the TTL while still held; ``False`` once it lapsed (L-3)."""
        ...

    async def release(self) -> bool:
        """Give the lock up; ``False`` if it was no longer held."""
        ...

    async def __aenter__(self) -> AsyncLock: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class AsyncListener(Protocol):
    """Notifications on a set of channels (N-1, N-2), from the moment it was
    made (on the async face: entered, or first waited on). ``async for note
    in listener`` or ``await listener.get(timeout_s)`` takes them."""

    @property
    def channels(self) -> frozenset[str]: ...

    async def get(self, timeout_s: float | None = None) -> Notification | None:
        """The next notification, or ``None`` after *timeout_s*."""
        ...

    def __aiter__(self) -> AsyncIterator[Notification]: ...

    async def close(self) -> None: ...

    async def __aenter__(self) -> AsyncListener: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class AsyncStore(Protocol):
    """One open store: the entry point to every primitive (§3). Handles
    (``queue``, ``outbox``, ``stream``, ``rate_limit``, ``listen``,
    ``transaction``) are plain objects made without I/O; on the async face
    every call that does I/O is a coroutine (§14)."""

    @property
    def url(self) -> str:
        """The URL the store was opened with (without a password)."""
        ...

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What this engine supports (CF-1)."""
        ...

    @property
    def closed(self) -> bool: ...

    def queue(self, name: str, opts: QueueOpts | None = None) -> AsyncQueue: ...

    def outbox(self, name: str) -> AsyncOutbox: ...

    def stream(self, name: str) -> AsyncStream: ...

    async def lock(self, name: str, ttl_s: float, owner: str | None = None) -> AsyncLock | None:
        """Acquire *name* for *ttl_s* seconds, or ``None`` while another owner
        holds it (L-1..L-4)."""
        ...

    async def notify(self, channel: str, payload: Any, tx: object | None = None) -> None:
        """Send to the channel's listeners when the write commits (N-1, T-3)."""
        ...

    def listen(self, *channels: str) -> AsyncListener: ...

    async def ack_each(
        self,
        jobs: Sequence[AsyncJob],
        tx: object | None = None,
        *,
        results: Sequence[Any] | None = None,
    ) -> list[bool]:
        """Ack handles of any queues of this store in one transaction; one
        result per handle, in order (Q-9); with *results* (one per job),
        stamped jobs keep theirs (RS-1)."""
        ...

    async def claim_any(
        self,
        queues: Sequence[str | AsyncQueue],
        worker_id: str,
        n: int = 1,
        wait_s: float = 0,
        rate_limit: AsyncRateLimit | None = None,
    ) -> list[AsyncJob]:
        """Claim up to *n* jobs from the first of *queues*, in that order, that
        have claimable jobs, blocking on wakes of any of them (W-10)."""
        ...

    def rate_limit(self, name: str, rate: float, per_s: float, burst: int = 1) -> AsyncRateLimit:
        """A handle on the limiter *name*: *rate* units per *per_s* seconds,
        *burst* at once (R-1)."""
        ...

    async def stream_stats(self) -> list[StreamStats]:
        """Every stream with its last offset, stored events and consumers' lag."""
        ...

    async def held_locks(self) -> list[LockInfo]:
        """Every lock held right now (unexpired), by name."""
        ...

    # O-5: the workers' registry.
    async def workers(self) -> list[WorkerInfo]:
        """The registered workers seen within the last hour, by id, each with
        its ``last_seen`` (O-5)."""
        ...

    async def worker_counts(self, since: datetime | None = None) -> list[WorkerCount]:
        """The workers' per-minute counts of finished jobs from the minute of
        *since* on (by default the last hour), by minute, worker, queue and
        outcome (O-5)."""
        ...

    async def report_worker(
        self,
        info: WorkerInfo,
        counts: Sequence[WorkerCount] = (),
        *,
        gone: bool = False,
        forget_after_s: float = 3600.0,
        keep_counts_s: float = 604800.0,
    ) -> None:
        """A worker's refresh, in one statement (O-5): register or refresh
        *info* (``last_seen`` is the store's now), add *counts* to the stored
        ones, delete workers silent for *forget_after_s* and counts older than
        *keep_counts_s*. With *gone* the worker's row is deleted instead (a
        clean stop); its counts stay. ``Worker.run`` calls this; an
        application rarely does."""
        ...

    async def schedule(
        self,
        name: str,
        spec: str,
        queue: str,
        payload: Any = None,
        opts: EnqueueOpts | None = None,
        tz: str = "UTC",
    ) -> Schedule:
        """Create or update a schedule by name (SC-1, SC-2)."""
        ...

    async def unschedule(self, name: str) -> bool: ...

    async def schedules(self) -> list[Schedule]: ...

    async def tick_schedules(self) -> int:
        """Enqueue every due fire exactly once; return how many (SC-3, SC-4)."""
        ...

    async def run_schedules(
        self,
        stop: _acompat.AEvent | None = None,
        owner: str | None = None,
        lock_ttl_s: float = 30,
    ) -> None:
        """Run the leader-elected scheduler loop until *stop* is set (SC-5)."""
        ...

    async def queue_stats(self) -> list[QueueStats]:
        """Counts for every queue with live or dead rows, by name."""
        ...

    def transaction(self) -> AbstractAsyncContextManager[AsyncTx]:
        """A transaction that commits on normal exit and rolls back on an
        exception (T-1..T-4) or, on the async face, a cancellation (A-4)."""
        ...

    async def close(self) -> None:
        """Release every resource; later calls raise ``StoreClosed`` (ST-3)."""
        ...

    async def __aenter__(self) -> AsyncStore: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...
