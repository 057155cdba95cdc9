"""From engine rows to the public value types (Q-14, §7, §9)."""

from __future__ import annotations

import json
from collections.abc import Iterable

from alkstore.types import Event, JobInfo, JobResult, JobState, Schedule

from .codec import decode_or_none, let_the_loop_run
from .prepare import decode_enqueue_opts
from .rows import EventRow, JobRow, ResultRow, ScheduleRow

__all__ = [
    "event_of",
    "events_of",
    "job_info",
    "job_infos",
    "job_result",
    "schedule_of",
    "trace_context_of",
]


def trace_context_of(text: str | None) -> dict[str, str] | None:
    """The stored W3C trace context (O-2) as a dict, ``None`` when absent or
    unreadable."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        return value
    return None


def job_info(row: JobRow) -> JobInfo:
    """``JobInfo`` of a row; an undecodable payload shows as ``None`` (C-3)."""
    return JobInfo(
        id=row.id,
        queue=row.queue,
        state=JobState(row.state),
        payload=decode_or_none(row.payload),
        attempts=row.attempts,
        max_attempts=row.max_attempts,
        priority=row.priority,
        created_at=row.created_at,
        run_at=row.run_at,
        claimed_at=row.claimed_at,
        expires_at=row.expires_at,
        visibility_timeout_s=row.visibility_timeout_s,
        backoff_base_s=row.backoff_base_s,
        dead_letter_retention_s=row.dead_letter_retention_s,
        last_error=row.last_error,
        died_at=row.died_at,
        deadline=row.deadline,
        worker_id=row.worker_id,
        unique_key=row.unique_key,
        group=row.group,
        group_limit=row.group_limit,
        trace_context=trace_context_of(row.trace_context),
        result_ttl_s=row.result_ttl_s,
        result=None if row.result is None else decode_or_none(row.result),
        finished_at=row.finished_at,
        waiting_on=row.waiting_on,
        progress=decode_or_none(row.progress),
    )


def job_result(row: ResultRow) -> JobResult:
    """``JobResult`` of a row (RS-2); an undecodable value shows as ``None``."""
    return JobResult(
        id=row.id,
        state=JobState(row.state),
        value=None if row.value is None else decode_or_none(row.value),
        last_error=row.last_error,
        finished_at=row.finished_at,
    )


def event_of(row: EventRow) -> Event:
    return Event(
        offset=row.offset,
        key=row.key,
        payload=decode_or_none(row.payload),
        created_at=row.created_at,
    )


def events_of(rows: Iterable[EventRow]) -> list[Event]:
    return [event_of(r) for r in rows]


def schedule_of(row: ScheduleRow) -> Schedule:
    return Schedule(
        name=row.name,
        spec=row.spec,
        queue=row.queue,
        payload=decode_or_none(row.payload),
        opts=decode_enqueue_opts(row.opts),
        tz=row.tz,
        next_fire_at=row.next_fire_at,
        last_fire_at=row.last_fire_at,
    )


def job_infos(rows: Iterable[JobRow]) -> list[JobInfo]:
    """``job_info`` of each row; after a big payload the GIL is let go (A-2)."""
    out: list[JobInfo] = []
    for row in rows:
        out.append(job_info(row))
        let_the_loop_run(row.payload)
    return out
