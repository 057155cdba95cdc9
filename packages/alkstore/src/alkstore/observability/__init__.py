"""Observability (SPEC §17): metrics, traces, Prometheus endpoints, a dashboard.

- :mod:`.metrics` (O-1): the OpenTelemetry instruments. The worker calls
  :func:`record_finished`, :func:`record_duration` and
  :func:`record_queue_time`; a process that reads depth from the store opts
  in with :func:`observe_store`.
- :mod:`.tracing` (O-2): :func:`current_trace_context` for the engine to
  store at enqueue, :func:`handler_span` for the worker to run a handler in.
- :mod:`.prometheus` (O-3): ``/metrics`` endpoints for a store's depth and
  for a worker's counters.
- :mod:`.dashboard` (O-4): the operator's web dashboard.

What the worker calls, per job (``worker.py`` and the async worker):

1. after the claim: ``record_queue_time(queue, claimed_at - run_at)``;
2. around the handler: ``with handler_span(queue, job.trace_context,
   job_id=job.id, attempt=job.attempts):`` (inside the coroutine for an
   async handler), timing it for ``record_duration(queue, seconds)``;
3. once the settling operation returned (after the group commit for acks):
   ``record_finished(queue, outcome)`` with acked, retried, failed (``Fail``),
   dead (a retry at a spent budget), timeout (W-11, retried or dead) or lost
   (the ack, retry, fail or a heartbeat was refused).

Only ``opentelemetry-api`` is needed, and it does nothing until the
application installs an SDK; the Prometheus endpoints and the dashboard need
no SDK at all.
"""

from __future__ import annotations

from .metrics import (
    METER_NAME,
    SECONDS_BUCKETS,
    DepthSampler,
    JobMetrics,
    Outcome,
    StoreObservation,
    observe_store,
    record_duration,
    record_finished,
    record_queue_time,
)
from .prometheus import WorkerRegistry, serve_store_metrics, serve_worker_metrics
from .tracing import current_trace_context, handler_span

__all__ = [
    "METER_NAME",
    "SECONDS_BUCKETS",
    "DepthSampler",
    "JobMetrics",
    "Outcome",
    "StoreObservation",
    "WorkerRegistry",
    "current_trace_context",
    "handler_span",
    "observe_store",
    "record_duration",
    "record_finished",
    "record_queue_time",
    "serve_store_metrics",
    "serve_worker_metrics",
]
