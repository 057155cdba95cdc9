"""The W3C trace context an enqueue stores on its job (O-2), through the
OpenTelemetry API: the current span's context as the global propagator
writes it, stored as JSON text. Without a valid current span (no SDK, or no
span open) nothing is stored and the enqueue pays only a cheap check. The
worker's side, a handler span continuing it, is :mod:`alkstore.observability.tracing`."""

from __future__ import annotations

import json

from opentelemetry import propagate, trace

__all__ = ["MAX_CONTEXT_VALUE", "current_trace_context", "trace_context_text"]

#: Longest value kept from a propagator: W3C bounds ``traceparent`` at 55
#: characters and asks vendors to keep ``tracestate`` within 512; a longer
#: entry is dropped rather than bloating every job row.
MAX_CONTEXT_VALUE = 1024
#: Entries a propagator may inject that do not belong on a stored job:
#: baggage is request-scoped data of the application, often personal.
_SKIPPED_KEYS = frozenset({"baggage"})


def current_trace_context() -> dict[str, str] | None:
    """The current span's context as the global propagator writes it
    (``{"traceparent": ..., "tracestate": ...}``), or ``None`` when there is
    no valid span context: what the engine stores on an enqueued job.

    Baggage is left out, and so is any value longer than
    :data:`MAX_CONTEXT_VALUE`.
    """
    if not trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    kept = {
        k: v
        for k, v in carrier.items()
        if k not in _SKIPPED_KEYS and isinstance(v, str) and len(v) <= MAX_CONTEXT_VALUE
    }
    return kept or None


def trace_context_text() -> str | None:
    """The current ``traceparent`` (and ``tracestate``) as JSON, or ``None``."""
    context = current_trace_context()
    return None if context is None else json.dumps(context, separators=(",", ":"))
