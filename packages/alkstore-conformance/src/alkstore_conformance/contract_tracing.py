"""Trace context stored at enqueue (O-2, its storage half).

An enqueue made while an OpenTelemetry span is current stores that span's
W3C ``traceparent`` (and ``tracestate``) in a column of the job, shown as
``JobInfo.trace_context``; the payload is never touched. Only the
OpenTelemetry API is used here, as an application without an SDK would:
``trace.use_span`` of a non-recording span makes a context current, and the
default global propagator writes it. (The worker's span, linked to this
context, is tested in the alkstore repository with an SDK.)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState

from alkstore import Capability, JobState, QueueOpts, Store

from ._base import ContractBase, requires, unique

__all__ = ["TracingContract"]

TRACE_ID = 0x4BF92F3577B34DA6A3CE929D0E0E4736
SPAN_ID = 0x00F067AA0BA902B7
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@contextmanager
def current_span(state: TraceState | None = None) -> Iterator[None]:
    """A sampled span of a remote caller made current (the API only, no SDK)."""
    context = SpanContext(
        trace_id=TRACE_ID,
        span_id=SPAN_ID,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
        trace_state=state,
    )
    with trace.use_span(NonRecordingSpan(context)):
        yield


@requires(Capability.QUEUES)
class TracingContract(ContractBase):
    """O-2: the enqueue's trace context is stored on the job."""

    @pytest.mark.clause("O-2", "Q-14")
    @pytest.mark.requires(Capability.UNIQUE_KEYS)
    def test_enqueue_in_a_span_stores_its_traceparent_beside_the_payload(
        self, store: Store
    ) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=60))
        payloads = [{"n": 1}, {"n": 2}, {"n": 3}, {"n": 4}]
        with current_span():
            ids = [q.enqueue(payloads[0])]
            ids += q.enqueue_many(payloads[1:3])
            ids.append(q.enqueue_unique(unique("key"), payloads[3]).id)
        for job_id, payload in zip(ids, payloads, strict=True):
            info = q.get_job(job_id)
            assert info is not None
            assert info.trace_context is not None, f"job {job_id}: no trace context stored"
            assert info.trace_context["traceparent"] == TRACEPARENT
            assert info.payload == payload, "the trace context went into the payload"
        # Claimed and dead-lettered, the job keeps it; the payload stays clean.
        jobs = q.claim_batch("w", 4)
        assert [j.payload for j in jobs] == payloads
        assert jobs[0].fail("kept for inspection")
        dead = q.get_job(ids[0])
        assert dead is not None and dead.state is JobState.DEAD
        assert dead.trace_context is not None
        assert dead.trace_context["traceparent"] == TRACEPARENT
        assert q.ack_batch(jobs[1:]) == 3

    @pytest.mark.clause("O-2")
    @pytest.mark.requires(Capability.OUTBOX)
    def test_enqueue_stores_the_tracestate_too(self, store: Store) -> None:
        q = store.queue(unique())
        box = store.outbox(unique("box"))
        with current_span(TraceState([("vendor", "opaque-value")])):
            job_id = q.enqueue("x")
            message = box.put("m")
        for info in (q.get_job(job_id), box.queue.get_job(message)):
            assert info is not None and info.trace_context is not None
            assert info.trace_context["traceparent"] == TRACEPARENT
            assert info.trace_context.get("tracestate") == "vendor=opaque-value"

    @pytest.mark.clause("O-2")
    def test_enqueue_without_a_span_stores_no_trace_context(self, store: Store) -> None:
        q = store.queue(unique())
        ids = [q.enqueue("x"), *q.enqueue_many(["y", "z"])]
        # An invalid (all-zero) span context is no context either.
        with trace.use_span(NonRecordingSpan(trace.INVALID_SPAN_CONTEXT)):
            ids.append(q.enqueue("w"))
        for job_id in ids:
            info = q.get_job(job_id)
            assert info is not None
            assert info.trace_context is None
