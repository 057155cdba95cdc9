"""Where the worker reports to observability (O-1, O-2): the queue time at
the claim, the handler's span, and each outcome once it committed. All of it
is nearly free until an application installs an OpenTelemetry SDK (or a
Prometheus endpoint of the worker is serving)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from alkstore.observability import metrics, tracing

__all__ = ["claimed", "finished", "handler_span"]


def claimed(job: Any) -> None:
    """A job was claimed and starts now: its time from ready to claimed (O-1)."""
    ready_at = getattr(job, "ready_at", None)
    claimed_at = getattr(job, "claimed_at", None)
    if isinstance(ready_at, datetime) and isinstance(claimed_at, datetime):
        metrics.record_queue_time(job.queue, max((claimed_at - ready_at).total_seconds(), 0.0))


def finished(job: Any, label: str, duration_s: float | None) -> None:
    """A job's outcome committed, or was refused (``lost``) (O-1)."""
    metrics.record_finished(job.queue, label)
    if duration_s is not None:
        metrics.record_duration(job.queue, duration_s)


@contextmanager
def handler_span(job: Any) -> Iterator[None]:
    """The CONSUMER span ``process <queue>`` the handler runs in, linked to
    the context stored at the enqueue (O-2)."""
    context = getattr(job, "trace_context", None)
    with tracing.handler_span(
        job.queue,
        context if isinstance(context, dict) else None,
        job_id=job.id,
        attempt=job.attempts,
    ):
        yield
