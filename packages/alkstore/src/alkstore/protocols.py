"""The contract as typed Protocols: what every engine implements (SPEC §3-§10).

Each method's docstring names the rules it must honour. None of these classes
is ``runtime_checkable``: an engine proves it conforms statically (a typed
assignment ``store: alkstore.Store = MyStore(...)`` checked by mypy) and
dynamically by passing the published conformance suite.

``tx`` arguments accept the store's own :class:`Tx` or the driver's native
handle (T-2), hence their type ``object | None``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from enum import Enum
from types import TracebackType
from typing import Any, Protocol

from .types import (
    EnqueueOpts,
    Event,
    JobInfo,
    JobState,
    Notification,
    QueueOpts,
    QueueStats,
    Schedule,
    SweepResult,
)

__all__ = [
    "Capability",
    "Job",
    "Listener",
    "Lock",
    "Outbox",
    "Queue",
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

    def __str__(self) -> str:
        return self.value


class Tx(Protocol):
    """A transaction opened by ``store.transaction()`` (T-1, T-2)."""

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Any:
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


class Queue(Protocol):
    """A handle on one queue name with the opts it stamps on enqueues (Q-1)."""

    @property
    def name(self) -> str: ...
    @property
    def opts(self) -> QueueOpts: ...

    def enqueue(
        self, payload: Any, opts: EnqueueOpts | None = None, tx: object | None = None
    ) -> int:
        """Insert one job and return its id (Q-1, C-3, T-1)."""
        ...

    def enqueue_many(
        self, payloads: Sequence[Any], opts: EnqueueOpts | None = None, tx: object | None = None
    ) -> list[int]:
        """Insert many jobs in one statement; ids in the order of *payloads*."""
        ...

    def claim(self, worker_id: str, wait_s: float = 0) -> Job | None:
        """Claim the best claimable job (Q-2..Q-6), waiting up to *wait_s* (Q-19)."""
        ...

    def claim_batch(self, worker_id: str, n: int, wait_s: float = 0) -> list[Job]:
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
