"""The contract as typed Protocols: what every engine implements (SPEC §3-§10).

Each method's docstring names the rules it must honour. None of these classes
is ``runtime_checkable``: an engine proves it conforms statically (a typed
assignment ``store: alkstore.Store = MyStore(...)`` checked by mypy) and
dynamically by passing the published conformance suite.

``tx`` arguments accept the store's own :class:`Tx` or the driver's native
handle (T-2), hence their type ``object | None``.

The async faces (SPEC §14) sit after the sync ones, under the same names with
an ``Async`` prefix: the same operations, arguments, results, errors and
rules, with coroutines where the sync face does I/O (A-1).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from datetime import datetime
from enum import Enum
from types import TracebackType
from typing import Any, Protocol

from .types import (
    Enqueued,
    EnqueueOpts,
    Event,
    JobInfo,
    JobState,
    LockInfo,
    Notification,
    QueueOpts,
    QueueStats,
    Schedule,
    StreamStats,
    SweepResult,
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
    "Capability",
    "CursorLike",
    "Job",
    "Listener",
    "Lock",
    "Outbox",
    "Queue",
    "RateLimit",
    "Store",
    "Stream",
    "Tx",
]


class Capability(str, Enum):
    """What an engine declares it supports (CF-1). An operation of an
    undeclared capability raises :class:`~alkstore.errors.UnsupportedOperation`."""

    QUEUES = "queues"
    STREAMS = "streams"
    LOCKS = "locks"
    SCHEDULER = "scheduler"
    NOTIFICATIONS = "notifications"
    OUTBOX = "outbox"
    NATIVE_TRANSACTIONS = "native_transactions"
    CROSS_PROCESS_WAKES = "cross_process_wakes"
    ASYNC = "async"
    DEAD_LETTER_ADMIN = "dead_letter_admin"
    UNIQUE_KEYS = "unique_keys"
    BOUNDED_QUEUES = "bounded_queues"
    GROUPS = "groups"
    RATE_LIMITS = "rate_limits"

    def __str__(self) -> str:
        return self.value


class CursorLike(Protocol):
    """What ``tx.execute`` returns on the sync face (T-2, A-6): a DB-API
    cursor of the engine's driver (``sqlite3.Cursor``, ``psycopg.Cursor``).

    Rows are the driver's own (tuples, ``sqlite3.Row``, mappings), as the
    driver's row factory makes them; code that must run on every engine reads
    them by position."""

    @property
    def rowcount(self) -> int:
        """Rows the last statement changed (``-1`` when the driver cannot tell)."""
        ...

    @property
    def description(self) -> Sequence[Any] | None:
        """One entry per result column, its name first; ``None`` when the
        statement returns no rows."""
        ...

    def fetchone(self) -> Any:
        """The next row, or ``None`` when there is none left."""
        ...

    def fetchmany(self, size: int = ...) -> list[Any]:
        """Up to *size* more rows (the driver's default batch without it)."""
        ...

    def fetchall(self) -> list[Any]:
        """Every row left."""
        ...

    def __iter__(self) -> Iterator[Any]:
        """``for row in cursor``: the rows left, one at a time."""
        ...

    def close(self) -> None:
        """Free the cursor; rows not fetched are dropped."""
        ...


class Tx(Protocol):
    """A transaction opened by ``store.transaction()`` (T-1, T-2)."""

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> CursorLike:
        """Run the caller's own SQL in this transaction, in the driver's
        placeholder style, and return the driver's cursor (T-2)."""
        ...

    @property
    def connection(self) -> Any:
        """The driver's connection this transaction runs on."""
        ...


class Job(Protocol):
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

    def ack(self, tx: object | None = None) -> bool:
        """Delete the row if this claim is still valid (Q-7, Q-9, T-1)."""
        ...

    def retry(self, error: str, delay_s: float | None = None, tx: object | None = None) -> bool:
        """Set the row pending again after *delay_s*, or after the curve's delay
        when ``None``; dead-letter with *error* at an exhausted budget (Q-10)."""
        ...

    def fail(self, error: str, tx: object | None = None) -> bool:
        """Dead-letter the row now with ``last_error = error`` (Q-11)."""
        ...

    def heartbeat(self, extend_s: float | None = None) -> bool:
        """Move the deadline to now + *extend_s* (default: the row's visibility
        timeout); refused once the deadline has passed (Q-8)."""
        ...

    def release(self) -> bool:
        """Give an unstarted claim back: pending, ready now, and this claim
        does not count as an attempt; fenced like the other ops (Q-26)."""
        ...

    def should_stop(self) -> bool:
        """True once the handler should wrap up: its worker stops or timed it
        out, or the claim was lost (W-12). Outside a worker: once the claim's
        deadline passed or an op on it was refused."""
        ...


class RateLimit(Protocol):
    """A named GCRA limiter shared by every process on the database (R-1)."""

    @property
    def name(self) -> str: ...
    @property
    def rate(self) -> float: ...
    @property
    def per_s(self) -> float: ...
    @property
    def burst(self) -> int: ...

    def acquire(self, n: int = 1, wait_s: float = 0) -> bool:
        """Take *n* units, waiting up to *wait_s* for them; ``False`` when
        they did not come in time (C-5). One statement per attempt."""
        ...


class Queue(Protocol):
    """A handle on one queue name with the opts it stamps on enqueues (Q-1)."""

    @property
    def name(self) -> str: ...
    @property
    def opts(self) -> QueueOpts: ...

    def enqueue(
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

    def enqueue_many(
        self, payloads: Sequence[Any], opts: EnqueueOpts | None = None, tx: object | None = None
    ) -> list[int]:
        """Insert many jobs in one statement; ids in the order of *payloads*."""
        ...

    def enqueue_unique(
        self, key: str, payload: Any, opts: EnqueueOpts | None = None, tx: object | None = None
    ) -> Enqueued:
        """Insert a job holding *key*, unless a live job of the queue holds it
        already: then nothing is written and its id comes back (Q-23)."""
        ...

    def enqueue_many_unique(
        self,
        items: Sequence[tuple[str, Any]],
        opts: EnqueueOpts | None = None,
        tx: object | None = None,
    ) -> list[Enqueued]:
        """``enqueue_unique`` for each ``(key, payload)``, in one transaction."""
        ...

    def claim(
        self, worker_id: str, wait_s: float = 0, rate_limit: RateLimit | None = None
    ) -> Job | None:
        """Claim the best claimable job (Q-2..Q-6), waiting up to *wait_s* (Q-19);
        with *rate_limit*, only while it grants a unit (R-1)."""
        ...

    def claim_batch(
        self, worker_id: str, n: int, wait_s: float = 0, rate_limit: RateLimit | None = None
    ) -> list[Job]:
        """Claim up to *n* jobs in one statement, in claim order (Q-2, Q-19)."""
        ...

    def ack_batch(self, jobs: Sequence[Job]) -> int:
        """Ack every still-valid claim; return how many landed (Q-9)."""
        ...

    def cancel(self, job_id: int, tx: object | None = None) -> bool:
        """Delete a pending or processing job of this queue (Q-13, C-7);
        joins *tx* like every write (T-1)."""
        ...

    def get_job(self, job_id: int) -> JobInfo | None:
        """The job of this queue with that id, in any state (Q-14, C-7)."""
        ...

    def sweep_expired(self) -> SweepResult:
        """Dead-letter expired and exhausted rows and purge retained dead rows,
        in one atomic step (Q-12, Q-15..Q-17)."""
        ...

    def stats(self) -> QueueStats:
        """Counts by state, a pure read (C-8)."""
        ...

    def list_jobs(self, state: JobState, limit: int = 100, after_id: int = 0) -> list[JobInfo]:
        """Jobs in *state* with ``id > after_id``, ascending id, at most *limit*."""
        ...

    def redrive(self, job_ids: Sequence[int] | None = None, tx: object | None = None) -> int:
        """Move dead jobs of this queue back to pending with a fresh budget,
        keeping their ids; every dead job when ``None`` (Q-21)."""
        ...

    def purge_dead(
        self,
        job_ids: Sequence[int] | None = None,
        older_than_s: float | None = None,
        tx: object | None = None,
    ) -> int:
        """Delete dead jobs of this queue: the given ids, those dead for at
        least *older_than_s*, or all (Q-22)."""
        ...


class Outbox(Protocol):
    """A transactional outbox on the reserved queue ``__alkstore.outbox.<name>`` (Q-20)."""

    @property
    def name(self) -> str: ...
    @property
    def queue(self) -> Queue: ...

    def put(self, payload: Any, tx: object | None = None) -> int:
        """Enqueue *payload* for delivery, joining *tx* (T-1)."""
        ...

    def run(
        self,
        deliver: Callable[[Any], object],
        stop: threading.Event | None = None,
        worker_id: str | None = None,
    ) -> None:
        """Deliver until *stop* is set: ack on return, retry by the curve on an
        exception."""
        ...


class Stream(Protocol):
    """An append-only log with per-consumer offsets (S-1..S-4)."""

    @property
    def name(self) -> str: ...

    def publish(self, payload: Any, key: str | None = None, tx: object | None = None) -> int:
        """Append an event and return its offset (S-1, S-2, S-4, T-1)."""
        ...

    def read(self, after: int = 0, limit: int = 100) -> list[Event]:
        """Events with offset > *after*, in offset order, without gaps (S-2)."""
        ...

    def commit(self, consumer: str, offset: int) -> bool:
        """Store *consumer*'s offset if it moves forward (S-3)."""
        ...

    def offset(self, consumer: str) -> int:
        """*consumer*'s committed offset, 0 when none."""
        ...

    def wait(self, after: int, timeout_s: float) -> bool:
        """Block until an event past *after* exists, or *timeout_s* passes."""
        ...

    def trim(self, before: int) -> int:
        """Delete events with offset < *before*; return how many."""
        ...


class Lock(Protocol):
    """A held TTL lock (L-1..L-4); a context manager that releases on exit."""

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

    def renew(self, ttl_s: float | None = None) -> bool:
        """Extend the TTL while still held; ``False`` once it lapsed (L-3)."""
        ...

    def release(self) -> bool:
        """Give the lock up; ``False`` if it was no longer held."""
        ...

    def __enter__(self) -> Lock: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class Listener(Protocol):
    """Notifications on a set of channels, from the moment it was made (N-1, N-2)."""

    @property
    def channels(self) -> frozenset[str]: ...

    def get(self, timeout_s: float | None = None) -> Notification | None:
        """The next notification, or ``None`` after *timeout_s*."""
        ...

    def __iter__(self) -> Iterator[Notification]: ...

    def close(self) -> None: ...

    def __enter__(self) -> Listener: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class Store(Protocol):
    """One open store: the entry point to every primitive (§3)."""

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

    def queue(self, name: str, opts: QueueOpts | None = None) -> Queue: ...

    def outbox(self, name: str) -> Outbox: ...

    def stream(self, name: str) -> Stream: ...

    def lock(self, name: str, ttl_s: float, owner: str | None = None) -> Lock | None:
        """Acquire *name* for *ttl_s* seconds, or ``None`` while another owner
        holds it (L-1..L-4)."""
        ...

    def notify(self, channel: str, payload: Any, tx: object | None = None) -> None:
        """Send to the channel's listeners when the write commits (N-1, T-3)."""
        ...

    def listen(self, *channels: str) -> Listener: ...

    def ack_each(self, jobs: Sequence[Job], tx: object | None = None) -> list[bool]:
        """Ack handles of any queues of this store in one transaction; one
        result per handle, in order (Q-9)."""
        ...

    def claim_any(
        self,
        queues: Sequence[str | Queue],
        worker_id: str,
        n: int = 1,
        wait_s: float = 0,
        rate_limit: RateLimit | None = None,
    ) -> list[Job]:
        """Claim up to *n* jobs from the first of *queues*, in that order, that
        have claimable jobs, blocking on wakes of any of them (W-10)."""
        ...

    def rate_limit(self, name: str, rate: float, per_s: float, burst: int = 1) -> RateLimit:
        """A handle on the limiter *name*: *rate* units per *per_s* seconds,
        *burst* at once (R-1)."""
        ...

    def stream_stats(self) -> list[StreamStats]:
        """Every stream with its last offset, stored events and consumers' lag."""
        ...

    def held_locks(self) -> list[LockInfo]:
        """Every lock held right now (unexpired), by name."""
        ...

    def schedule(
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

    def unschedule(self, name: str) -> bool: ...

    def schedules(self) -> list[Schedule]: ...

    def tick_schedules(self) -> int:
        """Enqueue every due fire exactly once; return how many (SC-3, SC-4)."""
        ...

    def run_schedules(
        self,
        stop: threading.Event | None = None,
        owner: str | None = None,
        lock_ttl_s: float = 30,
    ) -> None:
        """Run the leader-elected scheduler loop until *stop* is set (SC-5)."""
        ...

    def queue_stats(self) -> list[QueueStats]:
        """Counts for every queue with live or dead rows, by name."""
        ...

    def transaction(self) -> AbstractContextManager[Tx]:
        """A transaction that commits on normal exit and rolls back on an
        exception (T-1..T-4)."""
        ...

    def close(self) -> None:
        """Release every resource; later calls raise ``StoreClosed`` (ST-3)."""
        ...

    def __enter__(self) -> Store: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


# =============================================================== async faces


class AsyncCursorLike(Protocol):
    """What ``await tx.execute`` returns on the async face, on every engine
    (A-6): :class:`CursorLike` with the fetches awaited and ``async for``.

    ``psycopg.AsyncCursor`` is one; an engine whose driver is synchronous
    wraps its cursor so that each fetch runs off the event loop (see
    :class:`alkstore.engine.threaded.ThreadedAsyncCursor`). Code written
    against one engine runs on the other."""

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
    """A transaction opened by ``async with store.transaction()`` (T-1, T-2, A-4)."""

    async def execute(
        self, sql: str, params: Sequence[Any] | dict[str, Any] = ()
    ) -> AsyncCursorLike:
        """Run the caller's own SQL in this transaction and return its cursor,
        whose fetches are awaited on every engine (T-2, A-6)."""
        ...

    @property
    def connection(self) -> Any:
        """The driver's connection this transaction runs on."""
        ...


class AsyncJob(Protocol):
    """The async handle of one claim (Q-4); see :class:`Job`."""

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
    def deadline(self) -> datetime: ...

    async def ack(self, tx: object | None = None) -> bool: ...
    async def retry(
        self, error: str, delay_s: float | None = None, tx: object | None = None
    ) -> bool: ...
    async def fail(self, error: str, tx: object | None = None) -> bool: ...
    async def heartbeat(self, extend_s: float | None = None) -> bool: ...
    async def release(self) -> bool: ...
    def should_stop(self) -> bool: ...


class AsyncRateLimit(Protocol):
    """The async face of :class:`RateLimit`."""

    @property
    def name(self) -> str: ...
    @property
    def rate(self) -> float: ...
    @property
    def per_s(self) -> float: ...
    @property
    def burst(self) -> int: ...

    async def acquire(self, n: int = 1, wait_s: float = 0) -> bool: ...


class AsyncQueue(Protocol):
    """The async face of :class:`Queue`: a plain handle, coroutines for I/O."""

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
    ) -> int: ...
    async def enqueue_many(
        self, payloads: Sequence[Any], opts: EnqueueOpts | None = None, tx: object | None = None
    ) -> list[int]: ...
    async def enqueue_unique(
        self, key: str, payload: Any, opts: EnqueueOpts | None = None, tx: object | None = None
    ) -> Enqueued: ...
    async def enqueue_many_unique(
        self,
        items: Sequence[tuple[str, Any]],
        opts: EnqueueOpts | None = None,
        tx: object | None = None,
    ) -> list[Enqueued]: ...
    async def claim(
        self, worker_id: str, wait_s: float = 0, rate_limit: AsyncRateLimit | None = None
    ) -> AsyncJob | None: ...
    async def claim_batch(
        self,
        worker_id: str,
        n: int,
        wait_s: float = 0,
        rate_limit: AsyncRateLimit | None = None,
    ) -> list[AsyncJob]: ...
    async def ack_batch(self, jobs: Sequence[AsyncJob]) -> int: ...
    async def cancel(self, job_id: int, tx: object | None = None) -> bool: ...
    async def get_job(self, job_id: int) -> JobInfo | None: ...
    async def sweep_expired(self) -> SweepResult: ...
    async def stats(self) -> QueueStats: ...
    async def list_jobs(
        self, state: JobState, limit: int = 100, after_id: int = 0
    ) -> list[JobInfo]: ...
    async def redrive(
        self, job_ids: Sequence[int] | None = None, tx: object | None = None
    ) -> int: ...
    async def purge_dead(
        self,
        job_ids: Sequence[int] | None = None,
        older_than_s: float | None = None,
        tx: object | None = None,
    ) -> int: ...


class AsyncOutbox(Protocol):
    """The async face of :class:`Outbox` (Q-20)."""

    @property
    def name(self) -> str: ...
    @property
    def queue(self) -> AsyncQueue: ...

    async def put(self, payload: Any, tx: object | None = None) -> int: ...

    async def run(
        self,
        deliver: Callable[[Any], object] | Callable[[Any], Awaitable[object]],
        stop: asyncio.Event | None = None,
        worker_id: str | None = None,
    ) -> None:
        """Deliver until *stop* is set; *deliver* is a coroutine function or a
        plain callable (run in a thread)."""
        ...


class AsyncStream(Protocol):
    """The async face of :class:`Stream` (S-1..S-4)."""

    @property
    def name(self) -> str: ...

    async def publish(
        self, payload: Any, key: str | None = None, tx: object | None = None
    ) -> int: ...
    async def read(self, after: int = 0, limit: int = 100) -> list[Event]: ...
    async def commit(self, consumer: str, offset: int) -> bool: ...
    async def offset(self, consumer: str) -> int: ...
    async def wait(self, after: int, timeout_s: float) -> bool: ...
    async def trim(self, before: int) -> int: ...


class AsyncLock(Protocol):
    """A held lock on the async store; ``async with lock:`` releases it."""

    @property
    def name(self) -> str: ...
    @property
    def owner(self) -> str: ...
    @property
    def token(self) -> int: ...
    @property
    def expires_at(self) -> datetime: ...

    async def renew(self, ttl_s: float | None = None) -> bool: ...
    async def release(self) -> bool: ...
    async def __aenter__(self) -> AsyncLock: ...
    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class AsyncListener(Protocol):
    """Notifications on the async store: ``async with store.listen(...) as l``
    starts listening; ``async for note in l`` or ``await l.get(timeout_s)``."""

    @property
    def channels(self) -> frozenset[str]: ...

    async def get(self, timeout_s: float | None = None) -> Notification | None: ...
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
    """The async face of :class:`Store` (SPEC §14): handles (``queue``,
    ``outbox``, ``stream``, ``rate_limit``) are plain objects; every call that
    does I/O is a coroutine."""

    @property
    def url(self) -> str: ...
    @property
    def capabilities(self) -> frozenset[Capability]: ...
    @property
    def closed(self) -> bool: ...

    def queue(self, name: str, opts: QueueOpts | None = None) -> AsyncQueue: ...
    def outbox(self, name: str) -> AsyncOutbox: ...
    def stream(self, name: str) -> AsyncStream: ...
    def rate_limit(
        self, name: str, rate: float, per_s: float, burst: int = 1
    ) -> AsyncRateLimit: ...
    async def lock(self, name: str, ttl_s: float, owner: str | None = None) -> AsyncLock | None: ...
    async def notify(self, channel: str, payload: Any, tx: object | None = None) -> None: ...
    def listen(self, *channels: str) -> AsyncListener: ...
    async def ack_each(self, jobs: Sequence[AsyncJob], tx: object | None = None) -> list[bool]: ...
    async def claim_any(
        self,
        queues: Sequence[str | AsyncQueue],
        worker_id: str,
        n: int = 1,
        wait_s: float = 0,
        rate_limit: AsyncRateLimit | None = None,
    ) -> list[AsyncJob]: ...
    async def schedule(
        self,
        name: str,
        spec: str,
        queue: str,
        payload: Any = None,
        opts: EnqueueOpts | None = None,
        tz: str = "UTC",
    ) -> Schedule: ...
    async def unschedule(self, name: str) -> bool: ...
    async def schedules(self) -> list[Schedule]: ...
    async def tick_schedules(self) -> int: ...
    async def run_schedules(
        self,
        stop: asyncio.Event | None = None,
        owner: str | None = None,
        lock_ttl_s: float = 30,
    ) -> None: ...
    async def queue_stats(self) -> list[QueueStats]: ...
    async def stream_stats(self) -> list[StreamStats]: ...
    async def held_locks(self) -> list[LockInfo]: ...
    def transaction(self) -> AbstractAsyncContextManager[AsyncTx]: ...
    async def close(self) -> None: ...
    async def __aenter__(self) -> AsyncStore: ...
    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...
