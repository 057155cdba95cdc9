"""Value types of the contract (SPEC §3-§10).

All are frozen dataclasses or enums, checked when built: a bad value raises
:class:`~alkstore.errors.InvalidArgument` before anything reaches a database.
Durations are seconds (``*_s``, ``int`` or ``float``, kept as ``float``);
timestamps are timezone-aware UTC ``datetime`` objects (C-4).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ._strenum import StrEnum
from .errors import InvalidArgument
from .names import validate_name

__all__ = [
    "MAX_DURATION_S",
    "MAX_PRIORITY",
    "MIN_PRIORITY",
    "ConsumerLag",
    "EnqueueOpts",
    "Enqueued",
    "Event",
    "JobInfo",
    "JobResult",
    "JobState",
    "LockInfo",
    "Notification",
    "QueueOpts",
    "QueueStats",
    "Schedule",
    "StreamStats",
    "SweepResult",
    "WorkerCount",
    "WorkerInfo",
]

#: Longest accepted duration: a hundred years. Longer values are mistakes, and
#: would overflow date arithmetic in one database or another.
MAX_DURATION_S = 100 * 365.25 * 86400.0
#: Priorities are 32-bit signed integers on every engine.
MIN_PRIORITY = -(2**31)
MAX_PRIORITY = 2**31 - 1
_MAX_ATTEMPTS = 2**31 - 1
#: Largest ``QueueOpts.max_depth``.
MAX_DEPTH = 10_000_000
#: The range of accepted ``run_at`` times: ``datetime``'s own range, less a
#: margin for the time zone conversions and the arithmetic engines do on it.
EARLIEST = datetime(1, 1, 2, tzinfo=timezone.utc)
LATEST = datetime(9999, 12, 30, tzinfo=timezone.utc)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_duration(
    name: str, value: object, *, allow_zero: bool = True, allow_none: bool = False
) -> float | None:
    """Validate a duration in seconds and return it as a float (C-4)."""
    if value is None:
        if allow_none:
            return None
        raise InvalidArgument(f"{name} is required")
    if not _is_number(value):
        raise InvalidArgument(f"{name} must be a number of seconds, not {type(value).__name__}")
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (OverflowError, ValueError, TypeError) as exc:  # an int beyond any float
        raise InvalidArgument(f"{name} is out of range: {exc}") from exc
    if not math.isfinite(seconds):
        raise InvalidArgument(f"{name} must be finite, got {value!r}")
    if seconds < 0 or (seconds == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise InvalidArgument(f"{name} must be {bound}, got {value!r}")
    if seconds > MAX_DURATION_S:
        raise InvalidArgument(f"{name} must be at most {MAX_DURATION_S:.0f} s, got {value!r}")
    return seconds


def check_int(name: str, value: object, lo: int, hi: int) -> int:
    """Validate an integer (``bool`` refused) within ``[lo, hi]``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{name} must be an int, not {type(value).__name__}")
    if not lo <= value <= hi:
        raise InvalidArgument(f"{name} must be in [{lo}, {hi}], got {value}")
    return value


def check_aware(name: str, value: object) -> datetime:
    """Validate a timezone-aware ``datetime`` within :data:`EARLIEST` ..
    :data:`LATEST` once in UTC: naive times are ambiguous, and times at the
    ends of ``datetime``'s range overflow the arithmetic engines do on them."""
    if not isinstance(value, datetime):
        raise InvalidArgument(f"{name} must be a datetime, not {type(value).__name__}")
    try:
        offset = value.utcoffset()
        utc = value.astimezone(timezone.utc) if offset is not None else None
    except (OverflowError, ValueError, TypeError) as exc:
        # An offset that pushes the time past year 9999 or before year 1,
        # or a tzinfo whose utcoffset() is not a valid offset.
        raise InvalidArgument(f"{name} cannot be expressed in UTC: {exc}") from exc
    if utc is None:
        raise InvalidArgument(f"{name} must be timezone-aware, got naive {value!r}")
    if not EARLIEST <= utc <= LATEST:
        raise InvalidArgument(f"{name} must lie between {EARLIEST:%Y-%m-%d} and {LATEST:%Y-%m-%d}")
    return value


def _set(obj: object, name: str, value: object) -> None:
    object.__setattr__(obj, name, value)


def check_result_ttl(value: object) -> float | None:
    """A ``result_ttl_s`` (RS-1): ``None`` (keep nothing) or seconds > 0."""
    return check_duration("result_ttl_s", value, allow_zero=False, allow_none=True)


class JobState(StrEnum):
    """Where a job is in its life: ``pending -> processing -> dead``.

    ``ack`` and ``cancel`` delete the row, so a finished job has no state,
    unless it was stamped with ``result_ttl_s``: then its ack keeps its
    result, and the job shows as ``done`` until the result's time is up
    (RS-1; a view of storage outside the claim path). A job enqueued with
    ``EnqueueOpts(after=...)`` is ``waiting`` until every job it names has
    finished (WF-1): outside the claim path too, it is never claimed.
    """

    PENDING = "pending"
    PROCESSING = "processing"
    DEAD = "dead"
    DONE = "done"
    WAITING = "waiting"


@dataclass(frozen=True)
class QueueOpts:
    """Queue-level defaults, stamped on each job at enqueue (Q-1).

    Defaults: 300 s visibility timeout, 3 attempts, 5 s backoff base, dead
    rows kept until a person deletes them, no bound on the queue's depth and
    no limit per group.

    ``max_depth`` (Q-24) is a property of the handle: enqueues through it
    refuse to leave more than that many unfinished jobs in the queue.
    ``group_limit`` (Q-25) is stamped on each job: at most that many claims of
    one group run at once. ``result_ttl_s`` (RS-1) is stamped on each job
    too: its ack keeps its result for that long (``None``: nothing is kept).
    """

    visibility_timeout_s: float = 300.0
    max_attempts: int = 3
    backoff_base_s: float = 5.0
    dead_letter_retention_s: float | None = None
    max_depth: int | None = None
    group_limit: int | None = None
    result_ttl_s: float | None = None

    def __post_init__(self) -> None:
        _set(
            self,
            "visibility_timeout_s",
            check_duration("visibility_timeout_s", self.visibility_timeout_s, allow_zero=False),
        )
        check_int("max_attempts", self.max_attempts, 1, _MAX_ATTEMPTS)
        _set(self, "backoff_base_s", check_duration("backoff_base_s", self.backoff_base_s))
        _set(
            self,
            "dead_letter_retention_s",
            check_duration(
                "dead_letter_retention_s", self.dead_letter_retention_s, allow_none=True
            ),
        )
        if self.max_depth is not None:
            check_int("max_depth", self.max_depth, 1, MAX_DEPTH)
        if self.group_limit is not None:
            check_int("group_limit", self.group_limit, 1, _MAX_ATTEMPTS)
        _set(self, "result_ttl_s", check_result_ttl(self.result_ttl_s))


@dataclass(frozen=True)
class EnqueueOpts:
    """Per-job options. ``delay_s`` and ``run_at`` exclude each other;
    ``max_attempts`` overrides the queue handle's; ``expires_s`` sets the
    job's ``expires_at`` relative to the enqueue (Q-15); ``group`` puts the
    job in a group whose concurrent claims ``QueueOpts.group_limit`` bounds
    (Q-25; a name by C-1's rules); ``result_ttl_s`` overrides the queue
    handle's (RS-1: how long the job's result is kept after its ack).
    ``after`` names jobs of this store (any queue) that must finish first
    (WF-1): up to 1,000 ids, duplicates counted once; the job waits, never
    claimed, until the last of them is acked, and dies with it when one of
    them dies or is cancelled (WF-3)."""

    priority: int = 0
    delay_s: float | None = None
    run_at: datetime | None = None
    max_attempts: int | None = None
    expires_s: float | None = None
    group: str | None = None
    result_ttl_s: float | None = None
    after: Sequence[int] = ()

    def __post_init__(self) -> None:
        check_int("priority", self.priority, MIN_PRIORITY, MAX_PRIORITY)
        _set(self, "delay_s", check_duration("delay_s", self.delay_s, allow_none=True))
        if self.run_at is not None:
            check_aware("run_at", self.run_at)
            if self.delay_s is not None:
                raise InvalidArgument("give delay_s or run_at, not both")
        if self.max_attempts is not None:
            check_int("max_attempts", self.max_attempts, 1, _MAX_ATTEMPTS)
        _set(
            self,
            "expires_s",
            check_duration("expires_s", self.expires_s, allow_zero=False, allow_none=True),
        )
        if self.group is not None:
            validate_name(self.group, "group", allow_reserved=True)
        _set(self, "result_ttl_s", check_result_ttl(self.result_ttl_s))
        _set(self, "after", check_after(self.after))


#: Most jobs one ``EnqueueOpts(after=...)`` may name (WF-1).
MAX_AFTER = 1_000


def check_after(value: object) -> tuple[int, ...]:
    """WF-1: a sequence of at most :data:`MAX_AFTER` job ids (``int``, never
    ``bool``), duplicates counted once; ascending, so equal lists compare
    equal. ``()`` (or ``None``) waits for nothing."""
    if value is None:
        return ()
    if isinstance(value, (str, bytes, dict)) or not isinstance(value, Iterable):
        raise InvalidArgument("after must be a sequence of job ids")
    ids: set[int] = set()
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int):
            raise InvalidArgument(f"after holds job ids (int), not {type(item).__name__}")
        if not 1 <= item <= 2**63 - 1:
            raise InvalidArgument(f"after holds job ids >= 1, got {item}")
        ids.add(item)
    if len(ids) > MAX_AFTER:
        raise InvalidArgument(f"after names at most {MAX_AFTER} jobs, got {len(ids)}")
    return tuple(sorted(ids))


@dataclass(frozen=True)
class JobInfo:
    """A job as ``get_job`` and ``list_jobs`` see it (Q-14).

    ``last_error`` and ``died_at`` are set for dead jobs only. ``deadline`` and
    ``worker_id`` describe the current or last claim (``None`` before any).
    ``unique_key`` (Q-23), ``group`` and ``group_limit`` (Q-25) are what the
    enqueue gave; ``trace_context`` holds the W3C ``traceparent`` (and
    ``tracestate``) current at the enqueue (O-2). ``result_ttl_s`` is the
    job's RS-1 stamp; a ``done`` job (RS-1) has its ``result`` and
    ``finished_at`` (its ack's time), ``None`` in every other state. A
    ``waiting`` job (WF-1) names in ``waiting_on`` the jobs it still waits
    for, ascending; ``()`` in every other state. ``progress`` is the job's
    last checkpoint (Q-28: what ``job.progress`` stored, kept across retries,
    reclaims, death and redrive; ``None`` when never set, and for a done job).
    """

    id: int
    queue: str
    state: JobState
    payload: Any
    attempts: int
    max_attempts: int
    priority: int
    created_at: datetime
    run_at: datetime
    claimed_at: datetime | None
    expires_at: datetime | None
    visibility_timeout_s: float
    backoff_base_s: float
    dead_letter_retention_s: float | None
    last_error: str | None = None
    died_at: datetime | None = None
    deadline: datetime | None = None
    worker_id: str | None = None
    unique_key: str | None = None
    group: str | None = None
    group_limit: int | None = None
    trace_context: dict[str, str] | None = None
    result_ttl_s: float | None = None
    result: Any = None
    finished_at: datetime | None = None
    waiting_on: tuple[int, ...] = ()
    progress: Any = None

    def __post_init__(self) -> None:
        _set(self, "state", _state(self.state))
        if self.attempts < 0 or self.max_attempts < 1:
            raise InvalidArgument("attempts must be >= 0 and max_attempts >= 1")
        if (self.state is JobState.DEAD) != (self.died_at is not None):
            raise InvalidArgument("died_at is set exactly for dead jobs")
        if (self.state is JobState.DONE) != (self.finished_at is not None):
            raise InvalidArgument("finished_at is set exactly for done jobs")


@dataclass(frozen=True)
class JobResult:
    """How a finished job ended, as ``q.result`` reports it (RS-2).

    ``state`` is ``JobState.DONE`` (acked with its result kept: ``value`` is
    the result) or ``JobState.DEAD`` (``value`` is ``None`` and
    ``last_error`` says why); ``finished_at`` is the ack's time, or when the
    job died.
    """

    id: int
    state: JobState
    value: Any
    last_error: str | None
    finished_at: datetime

    def __post_init__(self) -> None:
        _set(self, "state", _state(self.state))
        if self.state not in (JobState.DONE, JobState.DEAD):
            raise InvalidArgument("a job result is done or dead")


def _state(value: object) -> JobState:
    if isinstance(value, JobState):
        return value
    try:
        return JobState(value)
    except ValueError as exc:
        raise InvalidArgument(f"unknown job state {value!r}") from exc


@dataclass(frozen=True)
class QueueStats:
    """Counts for one queue: ``pending`` is ready now, ``scheduled`` waits for
    its ``run_at``, ``processing`` is claimed (lapsed claims included).
    ``oldest_ready_at`` is the ready time of the longest-waiting pending job
    that is ready now (``None`` when none is), for the queue-age gauge (O-1);
    it takes no part in comparisons, which are about the counts. ``waiting``
    counts the jobs waiting for others to finish (WF-1), in none of the
    other counts. ``paused`` says whether the queue is paused (Q-27): its
    claims hand out nothing until it is resumed."""

    queue: str
    pending: int
    scheduled: int
    processing: int
    dead: int
    oldest_ready_at: datetime | None = field(default=None, compare=False)
    waiting: int = 0
    paused: bool = False

    def __post_init__(self) -> None:
        if min(self.pending, self.scheduled, self.processing, self.dead, self.waiting) < 0:
            raise InvalidArgument("queue counts cannot be negative")

    @property
    def live(self) -> int:
        """Rows still in the queue: pending, scheduled and processing."""
        return self.pending + self.scheduled + self.processing


@dataclass(frozen=True)
class SweepResult:
    """What one ``sweep_expired()`` did (Q-15, Q-16, Q-12).

    ``expired``: rows moved to dead as ``"expired"``; ``purged``: dead rows
    deleted after their retention; ``exhausted``: lapsed claims with no budget
    left moved to dead as ``"max attempts exceeded"``; ``results``: kept
    results deleted after their time (RS-3).
    """

    expired: int = 0
    purged: int = 0
    exhausted: int = 0
    results: int = 0

    def __post_init__(self) -> None:
        if min(self.expired, self.purged, self.exhausted, self.results) < 0:
            raise InvalidArgument("sweep counts cannot be negative")


@dataclass(frozen=True)
class Enqueued:
    """What ``enqueue_unique`` did (Q-23): the id of the job holding the key,
    and whether this call created it (``False``: a live job already held it,
    and nothing was written; or, with ``on_conflict="replace"`` or
    ``debounce_s``, that pending job was updated in place, Q-29)."""

    id: int
    created: bool


@dataclass(frozen=True)
class ConsumerLag:
    """One consumer of a stream: its committed offset and how many events
    lie past it (``lag``)."""

    consumer: str
    offset: int
    lag: int


@dataclass(frozen=True)
class StreamStats:
    """One stream as ``store.stream_stats()`` sees it (O-4): the last offset
    handed out, the events still stored, and each consumer's lag."""

    stream: str
    last_offset: int
    events: int
    consumers: tuple[ConsumerLag, ...] = ()


@dataclass(frozen=True)
class LockInfo:
    """A held, unexpired lock as ``store.held_locks()`` sees it (O-4)."""

    name: str
    owner: str
    token: int
    expires_at: datetime


@dataclass(frozen=True)
class Event:
    """One stream event (S-1): its offset, optional key, payload and time."""

    offset: int
    key: str | None
    payload: Any
    created_at: datetime

    def __post_init__(self) -> None:
        if self.offset < 1:
            raise InvalidArgument(f"stream offsets start at 1, got {self.offset}")


@dataclass(frozen=True)
class Notification:
    """One delivered notification (N-2)."""

    channel: str
    payload: Any


@dataclass(frozen=True)
class Schedule:
    """A registered schedule (§9) as ``schedules()`` returns it.

    ``next_fire_at`` is the next fire time the scheduler will enqueue;
    ``last_fire_at`` the fire time it enqueued last (``None`` before any).
    """

    name: str
    spec: str
    queue: str
    payload: Any
    opts: EnqueueOpts | None
    tz: str
    next_fire_at: datetime
    last_fire_at: datetime | None = None

    def __post_init__(self) -> None:
        check_aware("next_fire_at", self.next_fire_at)


# ------------------------------------------------------------------ workers


@dataclass(frozen=True)
class WorkerInfo:
    """A running worker as it registers itself in the store (O-5):
    ``store.workers()`` lists these, ``last_seen`` set by the store's clock
    at its latest refresh."""

    id: str
    host: str
    pid: int
    queues: tuple[str, ...]
    concurrency: int
    started_at: datetime
    version: str
    last_seen: datetime | None = None


@dataclass(frozen=True)
class WorkerCount:
    """How many jobs of *queue* one worker finished with *outcome* in the
    minute that starts at *minute* (UTC), as ``store.worker_counts()`` reads
    them (O-5). The outcomes are O-1's: ``acked``, ``retried``, ``failed``,
    ``dead``, ``timeout``, ``lost``."""

    minute: datetime
    worker_id: str
    queue: str
    outcome: str
    n: int
