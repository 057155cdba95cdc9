"""Building blocks for engine authors.

Everything here is engine-agnostic: input preparation (so every engine refuses
the same bad input the same way), the claim handle, the lock handle, the
listener, the outbox, wake bookkeeping and the scheduler's leader loop. An
engine supplies the SQL; these pieces supply the rules that do not depend on
it. Third-party engines may use them; nothing requires it.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import socket
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from types import TracebackType
from typing import Any, Protocol

from . import backoff
from .errors import InvalidArgument, StoreClosed, TransientError
from .names import decode_payload, encode_payload, validate_name
from .protocols import Capability, Job, Queue
from .specs import ScheduleSpec
from .types import (
    EnqueueOpts,
    Event,
    JobInfo,
    JobState,
    Notification,
    QueueOpts,
    Schedule,
    check_duration,
    check_int,
)

__all__ = [
    "ALL_CAPABILITIES",
    "OUTBOX_OPTS",
    "OUTBOX_PREFIX",
    "SCHEDULER_LOCK",
    "ClaimedJob",
    "FirePlan",
    "JobOps",
    "LockHandle",
    "LockOps",
    "NewJob",
    "QueueBase",
    "QueueListener",
    "QueueOutbox",
    "WakeBoard",
    "decode_enqueue_opts",
    "default_owner",
    "encode_enqueue_opts",
    "error_text",
    "outbox_queue_name",
    "plan_fire",
    "prepare_job",
    "run_scheduler_loop",
]

log = logging.getLogger("alkstore.engine")

#: Every capability; the in-repo engines declare them all.
ALL_CAPABILITIES: frozenset[Capability] = frozenset(Capability)
#: The leader lock of ``run_schedules`` (SC-5).
SCHEDULER_LOCK = "__alkstore.scheduler"
#: Outbox ``name`` is backed by the queue ``OUTBOX_PREFIX + name`` (Q-20).
OUTBOX_PREFIX = "__alkstore.outbox."
#: The fixed opts of every outbox's backing queue (Q-20).
OUTBOX_OPTS = QueueOpts(visibility_timeout_s=60.0, max_attempts=5, backoff_base_s=5.0)
#: Longest a blocking call sleeps before it looks at the database again even
#: though no wake arrived: wakes are hints (Q-19), this is the safety net.
FALLBACK_POLL_S = 5.0
#: The pause before re-attempting when a row is ready but the attempt got
#: nothing: short, but never a spin.
_RETRY_READY_S = 0.005
#: How often a blocked call checks whether its store was closed.
_CLOSE_CHECK_S = 0.25


def outbox_queue_name(name: str) -> str:
    """The reserved queue that backs outbox *name* (Q-20)."""
    return OUTBOX_PREFIX + validate_name(name, "outbox")


def default_owner() -> str:
    """A worker or lock owner id unique to this process: ``host:pid:random``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def error_text(exc: BaseException) -> str:
    """The ``last_error`` text for an exception: ``"<ExcType>: <message>"`` (W-1)."""
    return f"{type(exc).__name__}: {exc}"


def check_worker_id(worker_id: object) -> str:
    """Worker ids follow the name rules, reserved prefix allowed."""
    return validate_name(worker_id, "worker_id", allow_reserved=True)


def check_wait(wait_s: object) -> float:
    """Validate a ``wait_s`` / ``timeout_s`` argument."""
    value = check_duration("wait_s", wait_s)
    assert value is not None
    return value


# --------------------------------------------------------------------- enqueue


@dataclass(frozen=True)
class NewJob:
    """A validated job ready to insert: the stamps resolved (Q-1).

    ``delay_s`` is relative to the engine's clock at insert; ``run_at``, when
    set, is absolute and wins. ``expires_s`` is relative to the insert.
    """

    payload: str
    priority: int
    delay_s: float
    run_at: datetime | None
    max_attempts: int
    visibility_timeout_s: float
    backoff_base_s: float
    dead_letter_retention_s: float | None
    expires_s: float | None


def prepare_job(queue_opts: QueueOpts, payload: Any, opts: EnqueueOpts | None) -> NewJob:
    """Validate and resolve one enqueue (Q-1, C-3); raises before any write."""
    if opts is None:
        opts = EnqueueOpts()
    elif not isinstance(opts, EnqueueOpts):
        raise InvalidArgument(f"opts must be EnqueueOpts, not {type(opts).__name__}")
    return NewJob(
        payload=encode_payload(payload),
        priority=opts.priority,
        delay_s=opts.delay_s or 0.0,
        run_at=opts.run_at.astimezone(timezone.utc) if opts.run_at is not None else None,
        max_attempts=opts.max_attempts
        if opts.max_attempts is not None
        else queue_opts.max_attempts,
        visibility_timeout_s=queue_opts.visibility_timeout_s,
        backoff_base_s=queue_opts.backoff_base_s,
        dead_letter_retention_s=queue_opts.dead_letter_retention_s,
        expires_s=opts.expires_s,
    )


def check_queue_opts(opts: object) -> QueueOpts:
    """``None`` means the defaults; anything but ``QueueOpts`` is refused."""
    if opts is None:
        return QueueOpts()
    if not isinstance(opts, QueueOpts):
        raise InvalidArgument(f"opts must be QueueOpts, not {type(opts).__name__}")
    return opts


def encode_enqueue_opts(opts: EnqueueOpts | None) -> str | None:
    """``EnqueueOpts`` as stored with a schedule (no ``run_at``: a recurring job
    has no single start time)."""
    if opts is None:
        return None
    if not isinstance(opts, EnqueueOpts):
        raise InvalidArgument(f"opts must be EnqueueOpts, not {type(opts).__name__}")
    if opts.run_at is not None:
        raise InvalidArgument("a schedule's opts cannot set run_at; use delay_s")
    return json.dumps(
        {
            "priority": opts.priority,
            "delay_s": opts.delay_s,
            "max_attempts": opts.max_attempts,
            "expires_s": opts.expires_s,
        }
    )


def decode_enqueue_opts(text: str | None) -> EnqueueOpts | None:
    """The inverse of :func:`encode_enqueue_opts`."""
    if text is None:
        return None
    return EnqueueOpts(**json.loads(text))


# ------------------------------------------------------------------ rows

#: Turns a stored timestamp (SQLite microseconds, a PostgreSQL datetime) into
#: an aware UTC datetime (C-4).
ToTime = Callable[[Any], datetime]

#: Column order of the rows :func:`job_info_from_row` reads: the job's
#: columns, then ``state``, ``last_error``, ``died_at``.
JOB_INFO_COLUMNS = (
    "id",
    "queue",
    "payload",
    "priority",
    "run_at",
    "created_at",
    "claimed_at",
    "deadline",
    "worker_id",
    "attempts",
    "max_attempts",
    "visibility_timeout_s",
    "backoff_base_s",
    "dead_letter_retention_s",
    "expires_at",
    "state",
    "last_error",
    "died_at",
)


def job_info_from_row(row: Sequence[Any], to_time: ToTime) -> JobInfo:
    """A ``JobInfo`` (Q-14) from a row in :data:`JOB_INFO_COLUMNS` order."""
    col = dict(zip(JOB_INFO_COLUMNS, row, strict=True))

    def opt_time(name: str) -> datetime | None:
        return None if col[name] is None else to_time(col[name])

    retention = col["dead_letter_retention_s"]
    return JobInfo(
        id=int(col["id"]),
        queue=col["queue"],
        state=JobState(col["state"]),
        payload=decode_payload(col["payload"]),
        attempts=int(col["attempts"]),
        max_attempts=int(col["max_attempts"]),
        priority=int(col["priority"]),
        created_at=to_time(col["created_at"]),
        run_at=to_time(col["run_at"]),
        claimed_at=opt_time("claimed_at"),
        expires_at=opt_time("expires_at"),
        visibility_timeout_s=float(col["visibility_timeout_s"]),
        backoff_base_s=float(col["backoff_base_s"]),
        dead_letter_retention_s=None if retention is None else float(retention),
        last_error=col["last_error"],
        died_at=opt_time("died_at"),
        deadline=opt_time("deadline"),
        worker_id=col["worker_id"],
    )


def schedule_from_row(row: Sequence[Any], to_time: ToTime) -> Schedule:
    """A ``Schedule`` from ``(name, spec, queue, payload, opts, tz,
    next_fire_at, last_fire_at)``, payload and opts as stored."""
    name, spec, queue, payload, opts, tz, next_fire_at, last_fire_at = row
    return Schedule(
        name=name,
        spec=spec,
        queue=queue,
        payload=decode_payload(payload),
        opts=decode_enqueue_opts(opts),
        tz=tz,
        next_fire_at=to_time(next_fire_at),
        last_fire_at=None if last_fire_at is None else to_time(last_fire_at),
    )


def events_from_rows(rows: Iterable[Sequence[Any]], to_time: ToTime) -> list[Event]:
    """``Event`` values from ``(seq, key, payload, created_at)`` rows."""
    return [
        Event(offset=int(seq), key=key, payload=decode_payload(payload), created_at=to_time(at))
        for seq, key, payload, at in rows
    ]


#: Largest stream offset (a signed 64-bit column on every engine).
MAX_OFFSET = 2**63 - 1


def check_offset(name: str, value: object) -> int:
    """A stream offset argument: an int in ``[0, MAX_OFFSET]``."""
    return check_int(name, value, 0, MAX_OFFSET)


# ------------------------------------------------------------------ job handle


class JobOps(Protocol):
    """What an engine implements for :class:`ClaimedJob`. Each call is fenced
    by (``job.id``, ``job.attempts``) and the deadline (Q-4, Q-7)."""

    def _ack_job(self, job: ClaimedJob, tx: object | None) -> bool: ...
    def _retry_job(
        self, job: ClaimedJob, error: str, delay_s: float, tx: object | None
    ) -> bool: ...
    def _fail_job(self, job: ClaimedJob, error: str, tx: object | None) -> bool: ...
    def _heartbeat_job(self, job: ClaimedJob, extend_s: float) -> datetime | None: ...


def _check_error(error: object) -> str:
    if not isinstance(error, str):
        raise InvalidArgument(f"error must be a str, not {type(error).__name__}")
    return error


@dataclass
class ClaimedJob:
    """The handle of one claim (Q-4), shared by the in-repo engines.

    ``visibility_timeout_s`` and ``backoff_base_s`` are the row's stamps, read
    at claim time; the engine re-checks the row itself on every operation.
    """

    id: int
    queue: str
    payload: Any
    attempts: int
    max_attempts: int
    priority: int
    deadline: datetime
    visibility_timeout_s: float
    backoff_base_s: float
    worker_id: str
    _ops: JobOps = field(repr=False, compare=False)

    def ack(self, tx: object | None = None) -> bool:
        """Delete the row while this claim is valid (Q-7, Q-9)."""
        return self._ops._ack_job(self, tx)

    def retry(self, error: str, delay_s: float | None = None, tx: object | None = None) -> bool:
        """Back to pending after *delay_s* or the curve; dead at budget (Q-10)."""
        _check_error(error)
        delay = check_duration("delay_s", delay_s, allow_none=True)
        if delay is None:
            delay = backoff.delay(self.attempts, self.backoff_base_s)
        return self._ops._retry_job(self, error, delay, tx)

    def fail(self, error: str, tx: object | None = None) -> bool:
        """Dead-letter now (Q-11)."""
        return self._ops._fail_job(self, _check_error(error), tx)

    def heartbeat(self, extend_s: float | None = None) -> bool:
        """Deadline = now + *extend_s*; refused once lapsed (Q-8)."""
        extend = check_duration("extend_s", extend_s, allow_zero=False, allow_none=True)
        deadline = self._ops._heartbeat_job(
            self, self.visibility_timeout_s if extend is None else extend
        )
        if deadline is None:
            return False
        self.deadline = deadline
        return True


def claimed_jobs(
    rows: Iterable[Sequence[Any]], queue: str, worker_id: str, ops: JobOps, to_time: ToTime
) -> list[ClaimedJob]:
    """Claim handles, in claim order (Q-2), from rows of ``(id, payload,
    attempts, max_attempts, priority, run_at, deadline, visibility_timeout_s,
    backoff_base_s)`` as a claim statement returns them (in any order: after a
    claim, ``run_at`` holds the time the row became ready)."""
    ordered = sorted(rows, key=lambda r: (-int(r[4]), r[5], int(r[0])))
    return [
        ClaimedJob(
            id=int(job_id),
            queue=queue,
            payload=decode_payload(payload),
            attempts=int(attempts),
            max_attempts=int(max_attempts),
            priority=int(priority),
            deadline=to_time(deadline),
            visibility_timeout_s=float(vt),
            backoff_base_s=float(backoff),
            worker_id=worker_id,
            _ops=ops,
        )
        for job_id, payload, attempts, max_attempts, priority, _, deadline, vt, backoff in ordered
    ]


#: Most jobs one ``claim_batch`` hands out.
MAX_CLAIM_BATCH = 10_000


class QueueBase(ABC):
    """The engine-independent half of a queue handle (SPEC §5).

    It keeps the handle's name and opts (Q-1), validates arguments before any
    statement runs, and runs the blocking loop of ``claim`` and
    ``claim_batch`` (Q-19). An engine subclasses it and supplies the SQL:
    :meth:`_claim_once`, :meth:`_seconds_to_next_ready`, :meth:`_insert_many`
    and the wake plumbing, plus the rest of the ``Queue`` protocol.
    """

    def __init__(self, name: str, opts: QueueOpts) -> None:
        self._name = name
        self._opts = opts

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._name!r}, {self._opts!r})"

    @property
    def name(self) -> str:
        return self._name

    @property
    def opts(self) -> QueueOpts:
        return self._opts

    # -- what the engine supplies

    @abstractmethod
    def _check_open(self) -> None:
        """Raise ``StoreClosed`` once the store is closed."""

    @abstractmethod
    def _is_closed(self) -> bool: ...

    @property
    @abstractmethod
    def _wakeboard(self) -> WakeBoard: ...

    @abstractmethod
    def _claim_once(self, worker_id: str, n: int) -> list[Job]:
        """One claim statement, without waiting."""

    @abstractmethod
    def _seconds_to_next_ready(self) -> float | None:
        """Seconds until the earliest claimable row is ready (see :func:`wait_for`)."""

    @abstractmethod
    def _start_wakes(self) -> None:
        """Make sure commits from now on reach :attr:`_wakeboard`."""

    @abstractmethod
    def _fallback_s(self) -> float | None:
        """How often a wait polls when wakes may be lost (``None``: never)."""

    @abstractmethod
    def _insert_many(self, first: NewJob, payloads: list[str], tx: object | None) -> list[int]:
        """Insert *payloads* (encoded) with *first*'s stamps in one statement;
        return the ids in payload order."""

    # -- the shared half

    def enqueue_many(
        self, payloads: Sequence[Any], opts: EnqueueOpts | None = None, tx: object | None = None
    ) -> list[int]:
        """Insert every payload in one statement; ids in payload order. Every
        payload is encoded before the statement runs (C-3, C-6)."""
        self._check_open()
        if isinstance(payloads, (str, bytes)) or not isinstance(payloads, Sequence):
            raise InvalidArgument("payloads must be a sequence (list or tuple) of payloads")
        if not payloads:
            return []
        first = prepare_job(self._opts, payloads[0], opts)
        texts = [first.payload] + [encode_payload(p) for p in payloads[1:]]
        ids = self._insert_many(first, texts, tx)
        if len(ids) != len(texts):  # pragma: no cover - a broken database
            raise AssertionError("enqueue_many inserted an unexpected number of rows")
        return ids

    def claim(self, worker_id: str, wait_s: float = 0) -> Job | None:
        """The best claimable job (Q-2..Q-6), waiting up to *wait_s* (Q-19)."""
        jobs = self.claim_batch(worker_id, 1, wait_s)
        return jobs[0] if jobs else None

    def claim_batch(self, worker_id: str, n: int, wait_s: float = 0) -> list[Job]:
        """Up to *n* jobs in claim order, in one statement (Q-2, Q-3),
        waiting up to *wait_s* for the first (Q-19)."""
        self._check_open()
        wid = check_worker_id(worker_id)
        count = check_int("n", n, 1, MAX_CLAIM_BATCH)
        wait = check_wait(wait_s)
        jobs: list[Job] = wait_for(
            lambda: self._claim_once(wid, count),
            wakes=self._wakeboard,
            key=self._name,
            wait_s=wait,
            is_closed=self._is_closed,
            next_ready=self._seconds_to_next_ready,
            on_wait=self._start_wakes,
            fallback_s=self._fallback_s(),
        )
        return jobs


# ----------------------------------------------------------------- lock handle


class LockOps(Protocol):
    """What an engine implements for :class:`LockHandle`."""

    def _renew_lock(self, lock: LockHandle, ttl_s: float) -> datetime | None: ...
    def _release_lock(self, lock: LockHandle) -> bool: ...


@dataclass
class LockHandle:
    """A held lock (L-1..L-4). ``with lock:`` releases it on exit."""

    name: str
    owner: str
    token: int
    expires_at: datetime
    ttl_s: float
    _ops: LockOps = field(repr=False, compare=False)

    def renew(self, ttl_s: float | None = None) -> bool:
        """Extend while held; ``False`` once it lapsed or was released (L-3)."""
        ttl = check_duration("ttl_s", ttl_s, allow_zero=False, allow_none=True)
        expires = self._ops._renew_lock(self, self.ttl_s if ttl is None else ttl)
        if expires is None:
            return False
        self.expires_at = expires
        if ttl is not None:
            self.ttl_s = ttl
        return True

    def release(self) -> bool:
        """Give the lock up; ``False`` if no longer held."""
        return self._ops._release_lock(self)

    def __enter__(self) -> LockHandle:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def check_lock_args(name: object, ttl_s: object, owner: object) -> tuple[str, float, str]:
    """Validate ``store.lock`` arguments; a missing owner gets a unique one."""
    lock_name = validate_name(name, "lock", allow_reserved=False)
    ttl = check_duration("ttl_s", ttl_s, allow_zero=False)
    assert ttl is not None
    lock_owner = (
        default_owner() if owner is None else validate_name(owner, "owner", allow_reserved=True)
    )
    return lock_name, ttl, lock_owner


# ------------------------------------------------------------------------ wakes


class WakeBoard:
    """Generation counters per key under one condition variable.

    A waiter reads ``generation(key)`` before it checks the database, then
    ``wait(key, seen, timeout)``: a wake that lands between the check and the
    wait is never lost. Engines bump a key when a commit may have made work
    for it (a queue name, a stream name) and bump every key when they cannot
    tell (SQLite's ``data_version``) or may have missed wakes (a reconnect).
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._gens: dict[str, int] = {}
        self._epoch = 0
        self._closed = False

    def generation(self, key: str) -> int:
        """The key's generation; reading it registers the key for wakes."""
        with self._cond:
            return self._epoch + self._gens.setdefault(key, 0)

    def bump(self, key: str) -> None:
        """Wake waiters of *key*. A key nobody ever waited on is not
        recorded: wakes for every queue of a database must not grow memory."""
        with self._cond:
            if key in self._gens:
                self._gens[key] += 1
                self._cond.notify_all()

    def bump_all(self) -> None:
        with self._cond:
            self._epoch += 1
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._epoch += 1
            self._cond.notify_all()

    def wait(self, key: str, seen: int, timeout_s: float) -> bool:
        """Block until *key* moved past *seen* or *timeout_s* passed; ``True``
        when woken. Returns at once after :meth:`close`."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._epoch + self._gens.get(key, 0) == seen and not self._closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    @property
    def closed(self) -> bool:
        return self._closed


def wait_for(
    attempt: Callable[[], Any],
    *,
    wakes: WakeBoard,
    key: str,
    wait_s: float,
    is_closed: Callable[[], bool],
    next_ready: Callable[[], float | None] | None = None,
    on_wait: Callable[[], None] | None = None,
    fallback_s: float | None = FALLBACK_POLL_S,
) -> Any:
    """The blocking loop of ``claim``, ``claim_batch`` and ``Stream.wait`` (Q-19).

    Calls *attempt* until it returns something truthy or *wait_s* runs out.
    Between attempts it sleeps until a wake on *key*, until *next_ready*
    (seconds until the earliest claimable row is ready, negative when it
    already is, or ``None``) says so, or at most *fallback_s* when wakes may
    be lost. A row that is ready but was not claimed (another claimer holds
    it, or it turned ready just after the attempt) is retried after a short
    pause, never slept through. *on_wait* runs
    once, before the first sleep, and is followed by a fresh attempt: an engine
    that starts its wake source there cannot miss a commit made meanwhile.
    """
    deadline = time.monotonic() + wait_s
    waited = on_wait is None
    while True:
        if is_closed():
            raise StoreClosed("the store was closed")
        seen = wakes.generation(key)
        result = attempt()
        now = time.monotonic()
        if result or now >= deadline:
            return result
        if not waited:
            waited = True
            assert on_wait is not None
            on_wait()
            continue
        wake_at = deadline if fallback_s is None else min(deadline, now + fallback_s)
        if next_ready is not None:
            ready_in = next_ready()
            if ready_in is not None:
                wake_at = min(wake_at, now + max(ready_in, _RETRY_READY_S))
        # Sleep in slices so that close() is noticed promptly.
        while not is_closed():
            remaining = wake_at - time.monotonic()
            if remaining <= 0 or wakes.wait(key, seen, min(remaining, _CLOSE_CHECK_S)):
                break


# --------------------------------------------------------------------- listener


class QueueListener:
    """A :class:`~alkstore.protocols.Listener` fed by its engine (N-1, N-2).

    The engine calls :meth:`deliver` from its delivery thread; ``get`` and
    iteration take from an in-memory queue. ``on_close`` lets the engine stop
    routing to this listener.
    """

    def __init__(self, channels: frozenset[str], on_close: Callable[[QueueListener], None]) -> None:
        self._channels = channels
        self._on_close = on_close
        self._items: collections.deque[Notification] = collections.deque()
        self._cond = threading.Condition()
        self._closed = False

    @property
    def channels(self) -> frozenset[str]:
        return self._channels

    @property
    def closed(self) -> bool:
        return self._closed

    def deliver(self, note: Notification) -> None:
        with self._cond:
            if not self._closed:
                self._items.append(note)
                self._cond.notify_all()

    def get(self, timeout_s: float | None = None) -> Notification | None:
        """The next notification, ``None`` after *timeout_s* (``None``: wait
        forever) or once the listener is closed and drained."""
        limit = None if timeout_s is None else check_duration("timeout_s", timeout_s)
        deadline = None if limit is None else time.monotonic() + limit
        with self._cond:
            while not self._items:
                if self._closed:
                    return None
                if deadline is None:
                    self._cond.wait(_CLOSE_CHECK_S)
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._cond.wait(min(remaining, _CLOSE_CHECK_S))
            return self._items.popleft()

    def __iter__(self) -> Iterator[Notification]:
        """Yield notifications until the listener (or its store) is closed."""
        while True:
            note = self.get(None)
            if note is None:
                return
            yield note

    def close(self) -> None:
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        self._on_close(self)

    def __enter__(self) -> QueueListener:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def check_channels(channels: tuple[object, ...]) -> frozenset[str]:
    """``listen`` needs at least one valid channel name (C-1, C-2)."""
    if not channels:
        raise InvalidArgument("listen() needs at least one channel")
    return frozenset(validate_name(c, "channel") for c in channels)


# ----------------------------------------------------------------------- outbox


class QueueOutbox:
    """An :class:`~alkstore.protocols.Outbox` over its backing queue (Q-20)."""

    def __init__(self, name: str, queue: Queue) -> None:
        self._name = name
        self._queue = queue

    @property
    def name(self) -> str:
        return self._name

    @property
    def queue(self) -> Queue:
        return self._queue

    def put(self, payload: Any, tx: object | None = None) -> int:
        """Enqueue *payload* for delivery, in *tx* when given (T-1)."""
        return self._queue.enqueue(payload, tx=tx)

    def run(
        self,
        deliver: Callable[[Any], object],
        stop: threading.Event | None = None,
        worker_id: str | None = None,
    ) -> None:
        """Claim, ``deliver(payload)``, ack on return; retry by the curve when
        *deliver* raises (Q-20). Returns when *stop* is set (within half a
        second), or on SIGINT/SIGTERM when run in the main thread.

        Deliveries run on a one-thread :class:`~alkstore.worker.Worker`, so a
        slow delivery keeps its claim by heartbeats and a busy database is
        retried rather than ending the loop.
        """
        from .worker import Worker  # the worker builds on this module

        Worker(None, self._queue, lambda job: deliver(job.payload), 1, worker_id).run(stop)


# -------------------------------------------------------------------- scheduler


@dataclass(frozen=True)
class FirePlan:
    """What a due schedule does at a tick: enqueue once for ``fire_at`` (the
    latest missed fire), then wait for ``next_fire_at`` (SC-4)."""

    fire_at: datetime
    next_fire_at: datetime


def plan_fire(schedule: Schedule, spec: ScheduleSpec, now: datetime) -> FirePlan | None:
    """The fire a tick at *now* owes *schedule*, or ``None`` if none is due."""
    due = schedule.next_fire_at
    if due > now:
        return None
    return FirePlan(
        fire_at=spec.latest_fire(due, now, schedule.tz),
        next_fire_at=spec.next_fire(due, now, schedule.tz),
    )


class SchedulerHost(Protocol):
    """What :func:`run_scheduler_loop` needs from an engine."""

    def _acquire_internal_lock(self, name: str, ttl_s: float, owner: str) -> LockHandle | None: ...
    def tick_schedules(self) -> int: ...
    def _seconds_to_next_fire(self) -> float | None: ...

    @property
    def _wakes(self) -> WakeBoard: ...
    @property
    def closed(self) -> bool: ...


#: Wake key bumped when a schedule is created, changed or removed.
SCHEDULES_WAKE_KEY = "__alkstore.schedules"


def run_scheduler_loop(
    host: SchedulerHost,
    stop: threading.Event | None,
    owner: str | None,
    lock_ttl_s: float,
) -> None:
    """The leader-elected scheduler (SC-5), the same on every engine.

    The leader holds :data:`SCHEDULER_LOCK`, renews it every third of its TTL,
    ticks, and sleeps until the soonest fire, a schedule change or the next
    renewal. A standby retries the lock at the same cadence, so it takes over
    within the TTL after the leader dies. Every wait is sliced so that *stop*
    is honoured within a quarter of a second. Exactly-once firing does not rest
    on the lock: ticks compare-and-set each fire (SC-3).
    """
    ttl = check_duration("lock_ttl_s", lock_ttl_s, allow_zero=False)
    assert ttl is not None
    stop = stop if stop is not None else threading.Event()
    me = (
        validate_name(owner, "owner", allow_reserved=True) if owner is not None else default_owner()
    )
    renew_every = max(ttl / 3.0, 0.01)
    lock: LockHandle | None = None
    renewed_at = 0.0

    def pause(seconds: float, seen: int) -> None:
        deadline = time.monotonic() + max(seconds, 0.0)
        while not stop.is_set() and not host.closed:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            if host._wakes.wait(SCHEDULES_WAKE_KEY, seen, min(remaining, _CLOSE_CHECK_S)):
                return

    try:
        while not stop.is_set() and not host.closed:
            try:
                if lock is None:
                    lock = host._acquire_internal_lock(SCHEDULER_LOCK, ttl, me)
                    if lock is None:
                        log.debug("scheduler %s: standby", me)
                        _sleep_unless(stop, renew_every, host)
                        continue
                    log.info("scheduler %s: leader (token %s)", me, lock.token)
                    renewed_at = time.monotonic()
                elif time.monotonic() - renewed_at >= renew_every:
                    if not lock.renew():
                        log.warning("scheduler %s: lost the leader lock", me)
                        lock = None
                        continue
                    renewed_at = time.monotonic()
                # Read before the tick: a change committed meanwhile still wakes us.
                seen = host._wakes.generation(SCHEDULES_WAKE_KEY)
                host.tick_schedules()
                until_fire = host._seconds_to_next_fire()
            except TransientError as exc:
                # A busy database or a dropped connection: the fire stays due
                # (its compare-and-set rolled back) and the next round retries.
                log.warning("scheduler %s: %s; retrying", me, exc)
                _sleep_unless(stop, renew_every, host)
                continue
            except StoreClosed:
                return
            until_renew = renew_every - (time.monotonic() - renewed_at)
            pause(until_renew if until_fire is None else min(until_fire, until_renew), seen)
    finally:
        if lock is not None and not host.closed:
            try:
                lock.release()
            except (TransientError, StoreClosed):
                log.warning("scheduler %s: could not release the leader lock; it expires", me)


def _sleep_unless(stop: threading.Event, seconds: float, host: SchedulerHost) -> None:
    deadline = time.monotonic() + seconds
    while not stop.is_set() and not host.closed:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        stop.wait(min(remaining, _CLOSE_CHECK_S))


def check_schedule_args(
    name: object, spec: object, queue: object, tz: object
) -> tuple[str, ScheduleSpec, str, str]:
    """Validate ``store.schedule`` arguments (C-1, C-2, SC-1)."""
    from .specs import check_timezone, parse

    sched_name = validate_name(name, "schedule")
    parsed = parse(spec)
    queue_name = validate_name(queue, "queue")
    check_timezone(tz)
    assert isinstance(tz, str)
    return sched_name, parsed, queue_name, tz


def check_limit(limit: object, hi: int = 10_000) -> int:
    """A page size for listings."""
    return check_int("limit", limit, 1, hi)
