"""O-2: the trace context stored at enqueue and the handler's span.

The helpers are tested in this process with the SDK's in-memory exporter on
providers the tests make (the global providers stay untouched), and across
two processes. The end-to-end path through an engine's job column and the
worker is tested too, marked as waiting for that engine and worker support.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import alkstore
from alkstore import Store
from alkstore.observability import current_trace_context, handler_span

from .conftest import Running, eventually

TRACEPARENT = re.compile(r"^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")

pytestmark = pytest.mark.clause("O-2")


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracer_provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider
    provider.shutdown()


def traceparent(span: trace.Span) -> str:
    sc = span.get_span_context()
    return f"00-{sc.trace_id:032x}-{sc.span_id:016x}-{int(sc.trace_flags):02x}"


def only(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, [s.name for s in spans]
    return found[0]


def test_no_current_span_means_no_stored_context() -> None:
    assert current_trace_context() is None


def test_the_current_span_is_written_as_w3c_traceparent(tracer_provider: TracerProvider) -> None:
    tracer = tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("request") as span:
        ctx = current_trace_context()
    assert ctx is not None
    assert TRACEPARENT.match(ctx["traceparent"])
    assert ctx["traceparent"] == traceparent(span)
    assert "baggage" not in ctx


def test_baggage_is_never_stored(tracer_provider: TracerProvider) -> None:
    from opentelemetry import baggage, context

    token = context.attach(baggage.set_baggage("user.email", "ada@example.com"))
    try:
        with tracer_provider.get_tracer("app").start_as_current_span("request"):
            ctx = current_trace_context()
    finally:
        context.detach(token)
    assert ctx is not None and set(ctx) <= {"traceparent", "tracestate"}


def test_handler_span_continues_the_enqueue_trace(
    tracer_provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    tracer = tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("POST /signup") as request:
        stored = current_trace_context()
    with handler_span(
        "emails", stored, job_id=42, attempt=2, tracer_provider=tracer_provider
    ) as span:
        assert span.is_recording()
        with tracer.start_as_current_span("send mail"):
            pass
    spans = exporter.get_finished_spans()
    handler = only(spans, "process emails")
    enqueue_ctx = request.get_span_context()
    assert handler.kind is SpanKind.CONSUMER
    assert handler.context.trace_id == enqueue_ctx.trace_id  # one trace
    assert handler.parent is not None and handler.parent.span_id == enqueue_ctx.span_id
    assert [link.context.span_id for link in handler.links] == [enqueue_ctx.span_id]
    assert dict(handler.attributes or {}) == {
        "messaging.system": "alkstore",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": "emails",
        "messaging.message.id": "42",
        "alkstore.job.attempt": 2,
    }
    inner = only(spans, "send mail")
    assert inner.parent is not None and inner.parent.span_id == handler.context.span_id


def test_handler_span_records_the_handlers_exception(
    tracer_provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    with (
        pytest.raises(ConnectionError),
        handler_span("emails", None, tracer_provider=tracer_provider),
    ):
        raise ConnectionError("smtp down")
    span = only(exporter.get_finished_spans(), "process emails")
    assert span.status.status_code is StatusCode.ERROR
    assert [e.name for e in span.events] == ["exception"]


def test_handler_span_without_a_stored_context_nests_in_the_current_one(
    tracer_provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    tracer = tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("worker loop") as loop:
        with handler_span("emails", None, tracer_provider=tracer_provider):
            pass
        with handler_span(
            "emails", {"traceparent": "00-zz-not-a-context"}, tracer_provider=tracer_provider
        ):
            pass
    handlers = [s for s in exporter.get_finished_spans() if s.name == "process emails"]
    assert len(handlers) == 2
    for span in handlers:
        assert span.links == ()
        assert span.parent is not None and span.parent.span_id == loop.get_span_context().span_id


def test_without_an_sdk_the_handler_span_is_a_no_op() -> None:
    # The global provider of the test process is the API's proxy: nothing is
    # parsed or recorded, and the block still runs.
    ran = []
    with handler_span("emails", {"traceparent": "garbage"}) as span:
        ran.append(True)
    assert ran == [True]
    assert span is trace.INVALID_SPAN


_CHILD = textwrap.dedent(
    """
    import json, sys
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from alkstore.observability import handler_span

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with handler_span("emails", json.loads(sys.argv[1]), job_id=7, tracer_provider=provider):
        pass
    (span,) = exporter.get_finished_spans()
    print(json.dumps({
        "trace_id": span.context.trace_id,
        "parent": span.parent.span_id if span.parent else None,
        "links": [link.context.span_id for link in span.links],
        "kind": span.kind.name,
    }))
    """
)


def test_the_helpers_carry_one_trace_into_another_process(
    tracer_provider: TracerProvider,
) -> None:
    """What the engine stores at enqueue, given to a handler span in another
    process, continues the same trace there."""
    with tracer_provider.get_tracer("app").start_as_current_span("enqueue") as span:
        stored = current_trace_context()
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(stored)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    child = json.loads(done.stdout)
    sc = span.get_span_context()
    assert child == {
        "trace_id": sc.trace_id,
        "parent": sc.span_id,
        "links": [sc.span_id],
        "kind": "CONSUMER",
    }


# ------------------------------------------------- through an engine and a worker


def test_enqueue_stores_the_current_trace_context(
    store: Store, tracer_provider: TracerProvider
) -> None:
    q = store.queue("traced")
    with tracer_provider.get_tracer("app").start_as_current_span("request") as span:
        job_id = q.enqueue({"n": 1})
    untraced = q.enqueue({"n": 2})
    info = q.get_job(job_id)
    assert info is not None and info.trace_context is not None
    assert info.trace_context["traceparent"] == traceparent(span)
    assert info.payload == {"n": 1}  # never in the payload
    plain = q.get_job(untraced)
    assert plain is not None and plain.trace_context is None


_TRACED_HANDLER = textwrap.dedent(
    """
    import json, os
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    class FileExporter(SpanExporter):
        def export(self, spans):
            with open(os.environ["SPANS_FILE"], "a") as f:
                for s in spans:
                    f.write(json.dumps({
                        "name": s.name, "kind": s.kind.name,
                        "trace_id": s.context.trace_id,
                        "parent": s.parent.span_id if s.parent else None,
                        "links": [link.context.span_id for link in s.links],
                    }) + "\\n")
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileExporter()))
    trace.set_tracer_provider(provider)

    def handle(job):
        with trace.get_tracer("app").start_as_current_span("handler body"):
            pass
    """
)


def test_one_trace_runs_from_the_enqueue_to_the_handler_in_a_worker_process(
    engine_url: str,
    tmp_path: Path,
    tracer_provider: TracerProvider,
    background: Callable[..., Running],
) -> None:
    spans_file = tmp_path / "spans.jsonl"
    (tmp_path / "traced_handler.py").write_text(_TRACED_HANDLER)
    with alkstore.open(engine_url) as store:
        with tracer_provider.get_tracer("app").start_as_current_span("POST /orders") as span:
            job_id = store.queue("traced").enqueue({"order": 1})
        stored = store.queue("traced").get_job(job_id)
        assert stored is not None and stored.trace_context is not None  # the engine's part
        worker = background(
            "--url",
            engine_url,
            "worker",
            "traced_handler:handle",
            "--queue",
            "traced",
            "--grace",
            "1",
            env={"SPANS_FILE": str(spans_file)},
        )
        eventually(lambda: store.queue("traced").stats().pending == 0, what="job claimed")
        eventually(
            lambda: spans_file.exists() and "process traced" in spans_file.read_text(),
            what="handler span exported",
        )
        worker.stop()
    spans = [json.loads(line) for line in spans_file.read_text().splitlines()]
    handler = next(s for s in spans if s["name"] == "process traced")
    body = next(s for s in spans if s["name"] == "handler body")
    sc = span.get_span_context()
    assert handler["kind"] == "CONSUMER"
    assert handler["trace_id"] == body["trace_id"] == sc.trace_id
    assert handler["links"] == [sc.span_id]
    assert handler["parent"] == sc.span_id
