"""The named rows an engine hands the kit, and the values the kit hands it.

An engine's executor (:mod:`alkstore.engine.seam`) speaks in these types, not
positional tuples: what a claim returns is a :class:`ClaimRow`, what
``get_job`` reads is a :class:`JobRow`. The rows of the hot paths (one or
more per enqueue, claim and ack) are named tuples: as readable, and cheaper
to build than frozen dataclasses. Times are aware UTC datetimes (the
engine converts its own representation); payloads stay the stored JSON text,
decoded by the kit (C-3), so an engine never needs to know about JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from alkstore.types import ConsumerLag, StreamStats

__all__ = [
    "ClaimRow",
    "EventRow",
    "Fence",
    "Fire",
    "Inserted",
    "JobRow",
    "NewJob",
    "RateSpec",
    "ResultRow",
    "ScheduleRow",
    "claim_row",
    "job_row",
    "schedule_row",
    "stream_stats_of",
]


class NewJob(NamedTuple):
    """A validated job ready to insert, its stamps resolved (Q-1).

    ``delay_s`` is relative to the engine's clock at the insert; ``run_at``,
    when set, is absolute and wins. ``expires_s`` is relative to the insert.
    ``unique_key`` (Q-23), ``group`` and ``group_limit`` (Q-25) are ``None``
    for a plain job; ``trace_context`` is the encoded W3C context (O-2);
    ``result_ttl_s`` the RS-1 stamp (``None``: the ack keeps nothing).
    ``after`` the ids the job waits for (WF-1), ascending; ``()`` for none.
    With ``after``, ``delay_s`` counts from the job's release.

    Q-29, for a job with a ``unique_key`` only: ``replace`` overwrites the
    payload and opts of a pending holder of the key (its id, ``created_at``,
    attempts, claim number, key and group are kept); ``debounce_s`` sets a
    pending holder's ``run_at`` to the enqueue's time plus ``debounce_s``
    (the kit also puts it in ``delay_s``, for the insert), but no later than
    its ``created_at`` plus ``max_wait_s`` when that is set. A processing
    holder is left as it is, as without them.
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
    unique_key: str | None = None
    group: str | None = None
    group_limit: int | None = None
    trace_context: str | None = None
    result_ttl_s: float | None = None
    after: tuple[int, ...] = ()
    replace: bool = False
    debounce_s: float | None = None
    max_wait_s: float | None = None


class Inserted(NamedTuple):
    """One row of an insert: the id holding the job, and whether this insert
    wrote it (``False`` only for a unique key a live job already held: left
    as it was, or replaced or debounced by Q-29)."""

    id: int
    created: bool = True


class Fence(NamedTuple):
    """What identifies one claim (Q-4): the job id and its claim number, a
    counter that only grows (redrives included). Every handle operation
    matches both, plus the deadline (Q-7). ``group`` is the job's group
    (Q-25), so an engine knows before it runs whether a slot may free."""

    id: int
    claim: int
    group: str | None = None


class ClaimRow(NamedTuple):
    """A row a claim took, in any order: the kit sorts them into claim order
    (Q-2) by ``(-priority, ready_at, id)``.

    ``ready_at`` is when the row became claimable (its ``run_at``, or the
    lapsed deadline of a reclaim); ``claimed_at`` is the claim's time, both
    from the engine's clock, so the queue time (O-1) is their difference.
    ``result_ttl_s`` is the row's RS-1 stamp, so the kit can refuse a result
    for a job without it before any I/O.
    """

    id: int
    queue: str
    payload: str
    attempts: int
    claim: int
    max_attempts: int
    priority: int
    ready_at: datetime
    claimed_at: datetime
    deadline: datetime
    visibility_timeout_s: float
    backoff_base_s: float
    group: str | None = None
    trace_context: str | None = None
    result_ttl_s: float | None = None
    progress: str | None = None


def claim_row(row: Sequence[Any], when: Callable[[Any], datetime]) -> ClaimRow:
    """A :class:`ClaimRow` from a claim statement's row in the field order
    above, the engine's time values turned into aware datetimes by *when*
    (the last columns, ``result_ttl_s`` and ``progress`` (Q-28), may be left
    out: ``None``)."""
    (job_id, queue, payload, attempts, claims, max_attempts, priority, ready_at, claimed_at,
     deadline, vt, backoff, grp, trace) = row[:14]  # fmt: skip
    ttl = row[14] if len(row) > 14 else None
    progress = row[15] if len(row) > 15 else None
    return ClaimRow(
        int(job_id),
        queue,
        payload,
        int(attempts),
        int(claims),
        int(max_attempts),
        int(priority),
        when(ready_at),
        when(claimed_at),
        when(deadline),
        float(vt),
        float(backoff),
        grp,
        trace,
        None if ttl is None else float(ttl),
        progress,
    )


@dataclass(frozen=True, slots=True)
class JobRow:
    """A job as ``get_job`` and ``list_jobs`` read it, in any state (Q-14).
    ``state`` is ``'pending'``, ``'processing'``, ``'dead'`` or ``'done'``
    (RS-1: ``result`` is the kept result's stored text, ``finished_at`` the
    ack's time), or ``'waiting'`` (WF-1: ``waiting_on`` the unfinished
    parents, ascending; an engine fills it after :func:`job_row`)."""

    id: int
    queue: str
    state: str
    payload: str
    priority: int
    run_at: datetime
    created_at: datetime
    claimed_at: datetime | None
    deadline: datetime | None
    worker_id: str | None
    attempts: int
    max_attempts: int
    visibility_timeout_s: float
    backoff_base_s: float
    dead_letter_retention_s: float | None
    expires_at: datetime | None
    last_error: str | None = None
    died_at: datetime | None = None
    unique_key: str | None = None
    group: str | None = None
    group_limit: int | None = None
    trace_context: str | None = None
    result_ttl_s: float | None = None
    result: str | None = None
    finished_at: datetime | None = None
    waiting_on: tuple[int, ...] = ()
    progress: str | None = None


def job_row(row: Sequence[Any], when: Callable[[Any], datetime]) -> JobRow:
    """A :class:`JobRow` from a row in the field order above (every engine's
    ``get_job`` and ``list_jobs`` select it so), the engine's time values
    turned into aware datetimes by *when*. The last three columns
    (``result_ttl_s``, ``result``, ``finished_at``, RS-1) may be left out,
    and so may a 26th, ``progress`` (Q-28: the stored checkpoint text)."""
    (job_id, queue, state, payload, priority, run_at, created_at, claimed_at, deadline,
     worker_id, attempts, max_attempts, visibility_timeout_s, backoff_base_s,
     dead_letter_retention_s, expires_at, last_error, died_at, unique_key, group, group_limit,
     trace_context) = row[:22]  # fmt: skip
    ttl, result, finished_at = row[22:25] if len(row) >= 25 else (None, None, None)
    progress = row[25] if len(row) > 25 else None
    return JobRow(
        id=int(job_id),
        queue=queue,
        state=state,
        payload=payload,
        priority=int(priority),
        run_at=when(run_at),
        created_at=when(created_at),
        claimed_at=None if claimed_at is None else when(claimed_at),
        deadline=None if deadline is None else when(deadline),
        worker_id=worker_id,
        attempts=int(attempts),
        max_attempts=int(max_attempts),
        visibility_timeout_s=float(visibility_timeout_s),
        backoff_base_s=float(backoff_base_s),
        dead_letter_retention_s=(
            None if dead_letter_retention_s is None else float(dead_letter_retention_s)
        ),
        expires_at=None if expires_at is None else when(expires_at),
        last_error=last_error,
        died_at=None if died_at is None else when(died_at),
        unique_key=unique_key,
        group=group,
        group_limit=None if group_limit is None else int(group_limit),
        trace_context=trace_context,
        result_ttl_s=None if ttl is None else float(ttl),
        result=result,
        finished_at=None if finished_at is None else when(finished_at),
        progress=progress,
    )


class ResultRow(NamedTuple):
    """How a finished job ended (RS-2): ``state`` is ``'done'`` (``value``
    the kept result's stored text) or ``'dead'`` (``last_error`` set);
    ``finished_at`` is the ack's time or the death's."""

    id: int
    state: str
    value: str | None
    last_error: str | None
    finished_at: datetime


@dataclass(frozen=True, slots=True)
class EventRow:
    """One stored stream event; ``payload`` is the stored text."""

    offset: int
    key: str | None
    payload: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    """A stored schedule: payload and opts as stored text (opts as the kit
    encoded them, or ``None``)."""

    name: str
    spec: str
    queue: str
    payload: str
    opts: str | None
    tz: str
    next_fire_at: datetime
    last_fire_at: datetime | None = None


class Fire(NamedTuple):
    """One due fire of a schedule (SC-3): move the schedule's
    ``next_fire_at`` from *expected* to *next_fire_at* (``last_fire_at``
    becomes *fire_at*) and, only when it still was *expected*, insert *job*
    into *queue*."""

    name: str
    expected: datetime
    fire_at: datetime
    next_fire_at: datetime
    queue: str
    job: NewJob


def schedule_row(row: Sequence[Any], when: Callable[[Any], datetime]) -> ScheduleRow:
    """A :class:`ScheduleRow` from a row in the field order above, the
    engine's time values turned into aware datetimes by *when*."""
    name, spec, queue, payload, opts, tz, next_fire_at, last_fire_at = row
    return ScheduleRow(
        name=name,
        spec=spec,
        queue=queue,
        payload=payload,
        opts=opts,
        tz=tz,
        next_fire_at=when(next_fire_at),
        last_fire_at=None if last_fire_at is None else when(last_fire_at),
    )


@dataclass(frozen=True, slots=True)
class RateSpec:
    """A rate limiter as the engine applies it (R-1): GCRA with
    ``interval_s = per_s / rate`` between units and room for ``burst``
    units at once."""

    name: str
    interval_s: float
    burst: int


def stream_stats_of(
    streams: Iterable[Sequence[Any]], consumers: Iterable[Sequence[Any]]
) -> list[StreamStats]:
    """``StreamStats`` (O-4) from an engine's two reads: ``(stream, last_seq,
    events)`` per stream and ``(stream, consumer, offset)`` per committed
    consumer offset; a consumer's lag is how far its offset trails."""
    by_stream: dict[str, list[tuple[str, int]]] = {}
    for stream, consumer, seq in consumers:
        by_stream.setdefault(stream, []).append((consumer, int(seq)))
    out = []
    for name, last_seq, events in streams:
        last = int(last_seq)
        lags = tuple(ConsumerLag(c, off, max(last - off, 0)) for c, off in by_stream.get(name, []))
        out.append(StreamStats(name, last, int(events), lags))
    return out
