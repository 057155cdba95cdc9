"""Tracing through the OpenTelemetry API (O-2).

A job carries the trace context of the code that enqueued it, so that the
trace of a web request continues into the handler that runs minutes later in
another process:

- at enqueue the engine stores :func:`current_trace_context` in the job's own
  column (never in the payload); it is ``JobInfo.trace_context``;
- the worker runs the handler inside :func:`handler_span`: a span of kind
  ``CONSUMER`` named ``process <queue>``, linked to the stored context and,
  when it has one, its child, so the enqueue and the handler share one trace.

Both use the global propagator (W3C ``traceparent``/``tracestate`` unless the
application configured another) and the global tracer provider. With no SDK
installed, :func:`current_trace_context` returns ``None`` after one context
look-up, and :func:`handler_span` neither parses the stored context nor
makes a span.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from opentelemetry import propagate, trace
from opentelemetry.trace import Link, Span, SpanKind, TracerProvider

from alkstore._tracecontext import MAX_CONTEXT_VALUE, current_trace_context

from .metrics import METER_NAME

__all__ = ["MAX_CONTEXT_VALUE", "current_trace_context", "handler_span"]


class _Tracers:
    """The alkstore tracer of the current global provider, made once per
    provider (the SDK builds a new tracer on every ``get_tracer``)."""

    def __init__(self) -> None:
        self._provider: TracerProvider | None = None
        self._tracer: trace.Tracer | None = None

    def get(self, provider: TracerProvider) -> trace.Tracer:
        tracer = self._tracer
        if self._provider is not provider or tracer is None:
            from alkstore._version import __version__

            tracer = provider.get_tracer(METER_NAME, __version__)
            self._provider, self._tracer = provider, tracer
        return tracer


_tracers = _Tracers()


def _tracing_enabled(provider: TracerProvider) -> bool:
    """False while the API has no SDK behind it: then spans are no-ops and
    the stored context need not be parsed."""
    return not isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


@contextmanager
def handler_span(
    queue: str,
    trace_context: Mapping[str, str] | None,
    *,
    job_id: int | None = None,
    attempt: int | None = None,
    tracer_provider: TracerProvider | None = None,
) -> Iterator[Span]:
    """Run the block (the handler) in a span ``process <queue>`` of kind
    ``CONSUMER`` (O-2).

    With a valid *trace_context* (the job's stored one) the span links to it
    and is its child, so the trace runs from the enqueue into the handler;
    without one it is a child of the current context. The span is current
    inside the block, so the handler's own spans nest under it. An exception
    leaving the block is recorded on the span, which ends with an error
    status, and propagates unchanged. Works inside a coroutine too.

    Attributes follow the messaging conventions: ``messaging.system`` =
    ``alkstore``, ``messaging.operation.type`` = ``process``,
    ``messaging.destination.name`` = the queue, ``messaging.message.id``
    and ``alkstore.job.attempt`` when given. *tracer_provider* defaults to
    the global one.
    """
    provider = tracer_provider or trace.get_tracer_provider()
    if not _tracing_enabled(provider):
        yield trace.INVALID_SPAN
        return
    parent = None
    links: list[Link] = []
    if trace_context:
        extracted = propagate.extract(dict(trace_context))
        span_context = trace.get_current_span(extracted).get_span_context()
        if span_context.is_valid:
            parent = extracted
            links.append(Link(span_context))
    attributes: dict[str, str | int] = {
        "messaging.system": "alkstore",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": queue,
    }
    if job_id is not None:
        attributes["messaging.message.id"] = str(job_id)
    if attempt is not None:
        attributes["alkstore.job.attempt"] = attempt
    with _tracers.get(provider).start_as_current_span(
        f"process {queue}",
        context=parent,
        kind=SpanKind.CONSUMER,
        links=links,
        attributes=attributes,
    ) as span:
        yield span
