"""The workers' registry (SPEC §21 O-5, docs/adr/0024): what both store faces
check before a worker's refresh reaches the engine.

A running worker refreshes one row of its own every few seconds and, in the
same statement, adds its per-minute counts of finished jobs by queue and
outcome; the refresh also deletes the rows of workers silent for an hour and
counts older than seven days. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

from alkstore.errors import InvalidArgument
from alkstore.names import check_worker_id, validate_name
from alkstore.types import WorkerCount, WorkerInfo, check_aware, check_duration, check_int

__all__ = [
    "COUNTS_KEPT_S",
    "OUTCOMES",
    "WORKERS_FORGOTTEN_S",
    "check_since",
    "check_worker_report",
    "minute_of",
]

#: A worker silent this long is deleted by the next refresh of any worker (O-5).
WORKERS_FORGOTTEN_S = 3600.0
#: Counts older than this are deleted by the next refresh (O-5).
COUNTS_KEPT_S = 7 * 86400.0
#: The outcomes a worker counts: O-1's labels.
OUTCOMES = ("acked", "retried", "failed", "dead", "timeout", "lost")
#: How far back ``worker_counts()`` reads without a ``since``.
DEFAULT_COUNTS_WINDOW_S = 3600.0

_MAX_TEXT = 255
_MAX_QUEUES = 1000
_MAX_COUNT = 2**62


def minute_of(value: datetime) -> datetime:
    """The start of *value*'s minute, in UTC."""
    return value.astimezone(timezone.utc).replace(second=0, microsecond=0)


def _text(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise InvalidArgument(f"{name} must be a str, not {type(value).__name__}")
    if not value or len(value) > _MAX_TEXT or "\x00" in value:
        raise InvalidArgument(f"{name} must be 1 to {_MAX_TEXT} characters without NUL")
    return value


def check_worker_report(
    info: object,
    counts: object,
    forget_after_s: object,
    keep_counts_s: object,
) -> tuple[WorkerInfo, list[WorkerCount], float, float]:
    """Validate a refresh (O-5); the counts come back merged by (minute,
    queue, outcome), each minute the start of its minute in UTC, in that
    order. A count of another worker is refused."""
    if not isinstance(info, WorkerInfo):
        raise InvalidArgument(f"info must be a WorkerInfo, not {type(info).__name__}")
    wid = check_worker_id(info.id)
    _text("host", info.host)
    _text("version", info.version)
    check_int("pid", info.pid, 0, 2**31 - 1)
    check_int("concurrency", info.concurrency, 1, 2**31 - 1)
    check_aware("started_at", info.started_at)
    if not isinstance(info.queues, tuple) or not 0 < len(info.queues) <= _MAX_QUEUES:
        raise InvalidArgument(f"queues must be a tuple of 1 to {_MAX_QUEUES} queue names")
    for q in info.queues:
        validate_name(q, "queue", allow_reserved=True)
    if isinstance(counts, (str, bytes)) or not isinstance(counts, Sequence):
        raise InvalidArgument("counts must be a sequence of WorkerCount")
    merged: dict[tuple[datetime, str, str], int] = {}
    for c in counts:
        if not isinstance(c, WorkerCount):
            raise InvalidArgument(f"counts must hold WorkerCount, not {type(c).__name__}")
        if c.worker_id != wid:
            raise InvalidArgument(f"a count of worker {c.worker_id!r} in the report of {wid!r}")
        minute = minute_of(check_aware("minute", c.minute))
        validate_name(c.queue, "queue", allow_reserved=True)
        if c.outcome not in OUTCOMES:
            raise InvalidArgument(
                f"outcome must be one of {', '.join(OUTCOMES)}, not {c.outcome!r}"
            )
        check_int("n", c.n, 1, _MAX_COUNT)
        key = (minute, c.queue, c.outcome)
        merged[key] = merged.get(key, 0) + c.n
    rows = [WorkerCount(m, wid, q, o, n) for (m, q, o), n in sorted(merged.items())]
    forget = check_duration("forget_after_s", forget_after_s, allow_zero=False)
    keep = check_duration("keep_counts_s", keep_counts_s, allow_zero=False)
    assert forget is not None and keep is not None
    return info, rows, forget, keep


def check_since(since: object) -> datetime:
    """``worker_counts``'s start: the minute of *since*, by default an hour
    ago."""
    if since is None:
        now = datetime.now(timezone.utc)
        return minute_of(now - timedelta(seconds=DEFAULT_COUNTS_WINDOW_S))
    return minute_of(check_aware("since", since))
