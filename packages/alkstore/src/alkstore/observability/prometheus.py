"""Prometheus endpoints in the text exposition format (O-3).

Two endpoints, each a ``/metrics`` page served from a background thread:

- :func:`serve_store_metrics` (``alkstore metrics --serve``): the depth of
  every queue, read from the store at each scrape (at most once a second):
  ``alkstore_queue_jobs{queue,state}`` and
  ``alkstore_queue_oldest_ready_age_seconds{queue}`` (0 when nothing is
  ready).
- :func:`serve_worker_metrics` (``alkstore worker --metrics-port``): the
  worker-side counters of this process: ``alkstore_jobs_finished_total
  {queue,outcome}`` and the histograms ``alkstore_job_duration_seconds``
  and ``alkstore_job_queue_time_seconds`` {queue}.

The names are the OpenTelemetry instrument names of O-1 as an OpenTelemetry
Prometheus exporter spells them (dots to underscores, the unit as a suffix,
``_total`` on counters). The worker-side values come from a
:class:`WorkerRegistry` that the record functions feed besides the API, so
the endpoint works without an SDK and never competes with the application's
own meter provider (docs/adr/0012).
"""

from __future__ import annotations

import bisect
import logging
import math
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone

from alkstore.protocols import Store
from alkstore.types import QueueStats

from . import metrics as _metrics
from ._http import (
    ServedApp,
    StartResponse,
    WSGIApp,
    WSGIEnviron,
    parse_bind,
    serve_wsgi,
)
from .metrics import SECONDS_BUCKETS, DepthSampler, Outcome, depth_values, oldest_ready_age_s

__all__ = [
    "CONTENT_TYPE",
    "WorkerRegistry",
    "metrics_app",
    "parse_samples",
    "render_depth",
    "serve_store_metrics",
    "serve_worker_metrics",
]

log = logging.getLogger("alkstore.observability")

#: The content type of the text exposition format, version 0.0.4.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


# ------------------------------------------------------------------ the format


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in pairs)
    return "{" + inner + "}" if inner else ""


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    if float(value).is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


def _family(name: str, kind: str, help_text: str) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]


def render_depth(stats: Sequence[QueueStats], now: datetime | None = None) -> str:
    """The depth families for *stats* (as read at *now*) in the text format."""
    at = now or datetime.now(timezone.utc)
    lines = _family("alkstore_queue_jobs", "gauge", "Jobs in the queue by state.")
    for s in stats:
        for state, count in depth_values(s):
            lines.append(
                f"alkstore_queue_jobs{_labels([('queue', s.queue), ('state', state)])} {count}"
            )
    lines += _family(
        "alkstore_queue_oldest_ready_age_seconds",
        "gauge",
        "How long the longest-waiting ready job has waited (0 when none is ready).",
    )
    for s in stats:
        age = oldest_ready_age_s(s, at)
        lines.append(
            f"alkstore_queue_oldest_ready_age_seconds{_labels([('queue', s.queue)])} {_number(age)}"
        )
    return "\n".join(lines) + "\n"


class _Histogram:
    __slots__ = ("buckets", "count", "sum")

    def __init__(self, size: int) -> None:
        self.buckets = [0] * size
        self.count = 0
        self.sum = 0.0


class WorkerRegistry:
    """The worker-side measurements of this process, kept for the Prometheus
    endpoint: a counter per (queue, outcome) and a histogram per queue with
    the bounds :data:`~alkstore.observability.metrics.SECONDS_BUCKETS`.

    A :class:`~alkstore.observability.metrics.JobSink`; thread-safe.
    """

    def __init__(self, buckets: Sequence[float] = SECONDS_BUCKETS) -> None:
        self._bounds = tuple(sorted(buckets))
        self._lock = threading.Lock()
        self._finished: dict[str, dict[str, int]] = {}
        self._duration: dict[str, _Histogram] = {}
        self._queue_time: dict[str, _Histogram] = {}

    def finished(self, queue: str, outcome: str) -> None:
        with self._lock:
            counts = self._finished.get(queue)
            if counts is None:
                # Every outcome from the first one on, so rate() sees zeros
                # rather than series that appear out of nowhere.
                counts = self._finished[queue] = dict.fromkeys((o.value for o in Outcome), 0)
            counts[outcome] = counts.get(outcome, 0) + 1

    def duration(self, queue: str, seconds: float) -> None:
        self._observe(self._duration, queue, seconds)

    def queue_time(self, queue: str, seconds: float) -> None:
        self._observe(self._queue_time, queue, seconds)

    def _observe(self, table: dict[str, _Histogram], queue: str, seconds: float) -> None:
        value = max(0.0, float(seconds))
        index = bisect.bisect_left(self._bounds, value)
        with self._lock:
            hist = table.get(queue)
            if hist is None:
                hist = table[queue] = _Histogram(len(self._bounds) + 1)
            hist.buckets[index] += 1
            hist.count += 1
            hist.sum += value

    def finished_counts(self) -> dict[tuple[str, str], int]:
        """``{(queue, outcome): count}`` so far."""
        with self._lock:
            return {(q, o): n for q, counts in self._finished.items() for o, n in counts.items()}

    def render(self) -> str:
        """Every family in the text format."""
        with self._lock:
            finished = {q: dict(c) for q, c in self._finished.items()}
            hists = {
                "alkstore_job_duration_seconds": self._copy(self._duration),
                "alkstore_job_queue_time_seconds": self._copy(self._queue_time),
            }
        lines = _family(
            "alkstore_jobs_finished_total",
            "counter",
            "Jobs this worker finished with, by queue and outcome.",
        )
        for queue, counts in sorted(finished.items()):
            for outcome, count in counts.items():
                labels = _labels([("queue", queue), ("outcome", outcome)])
                lines.append(f"alkstore_jobs_finished_total{labels} {count}")
        helps = {
            "alkstore_job_duration_seconds": "Handler run time.",
            "alkstore_job_queue_time_seconds": "Time from a job being ready to its claim.",
        }
        for name, table in hists.items():
            lines += _family(name, "histogram", helps[name])
            for queue, hist in sorted(table.items()):
                running = 0
                for bound, n in zip((*self._bounds, math.inf), hist.buckets, strict=True):
                    running += n
                    le = "+Inf" if math.isinf(bound) else repr(float(bound))
                    labels = _labels([("queue", queue), ("le", le)])
                    lines.append(f"{name}_bucket{labels} {running}")
                base = _labels([("queue", queue)])
                lines.append(f"{name}_sum{base} {_number(hist.sum)}")
                lines.append(f"{name}_count{base} {hist.count}")
        return "\n".join(lines) + "\n"

    @staticmethod
    def _copy(table: Mapping[str, _Histogram]) -> dict[str, _Histogram]:
        copied: dict[str, _Histogram] = {}
        for queue, hist in table.items():
            clone = _Histogram(len(hist.buckets))
            clone.buckets = list(hist.buckets)
            clone.count, clone.sum = hist.count, hist.sum
            copied[queue] = clone
        return copied


def parse_samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of metric *name* in exposition *text*: ``{labels: value}``
    with labels as sorted ``(key, value)`` pairs. Enough of the format for
    the dashboard to read the counters of our own worker endpoints."""
    found: dict[tuple[tuple[str, str], ...], float] = {}
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        rest = line[len(name) :]
        labels: list[tuple[str, str]] = []
        if rest.startswith("{"):
            parsed = _parse_labels(rest)
            if parsed is None:
                continue
            labels, rest = parsed
        elif not rest.startswith(" "):
            continue  # another metric whose name starts with this one
        fields = rest.split()
        if not fields:
            continue
        try:
            value = float(fields[0])
        except ValueError:
            continue
        found[tuple(sorted(labels))] = value
    return found


def _parse_labels(text: str) -> tuple[list[tuple[str, str]], str] | None:
    """``{k="v",...}`` at the start of *text*: the pairs and what follows."""
    pairs: list[tuple[str, str]] = []
    i = 1
    while True:
        while i < len(text) and text[i] in " ,":
            i += 1
        if i < len(text) and text[i] == "}":
            return pairs, text[i + 1 :]
        eq = text.find("=", i)
        if eq < 0 or eq + 1 >= len(text) or text[eq + 1] != '"':
            return None
        key = text[i:eq].strip()
        j = eq + 2
        value: list[str] = []
        while j < len(text) and text[j] != '"':
            if text[j] == "\\" and j + 1 < len(text):
                nxt = text[j + 1]
                value.append({"n": "\n", "\\": "\\", '"': '"'}.get(nxt, "\\" + nxt))
                j += 2
            else:
                value.append(text[j])
                j += 1
        if j >= len(text):
            return None
        pairs.append((key, "".join(value)))
        i = j + 1


# --------------------------------------------------------------- the servers


def metrics_app(render: Callable[[], str]) -> WSGIApp:
    """A WSGI app answering ``GET /metrics`` with ``render()``; a failing
    render (the database is down) is a 503, which Prometheus records as a
    failed scrape."""

    def app(environ: WSGIEnviron, start_response: StartResponse) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        path = environ.get("PATH_INFO", "/")
        if path not in ("/metrics", "/"):
            return _plain(start_response, "404 Not Found", "not found; try /metrics\n")
        if method not in ("GET", "HEAD"):
            return _plain(start_response, "405 Method Not Allowed", "GET only\n", allow="GET, HEAD")
        if path == "/":
            return _plain(start_response, "200 OK", "alkstore metrics: see /metrics\n")
        try:
            body = render().encode("utf-8")
        except Exception as exc:
            log.warning("rendering /metrics failed: %s", exc)
            return _plain(start_response, "503 Service Unavailable", f"{type(exc).__name__}\n")
        start_response(
            "200 OK", [("Content-Type", CONTENT_TYPE), ("Content-Length", str(len(body)))]
        )
        return [b""] if method == "HEAD" else [body]

    return app


def _plain(start_response: StartResponse, status: str, text: str, **headers: str) -> list[bytes]:
    body = text.encode("utf-8")
    extra = [(k.replace("_", "-").title(), v) for k, v in headers.items()]
    start_response(
        status,
        [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body))), *extra],
    )
    return [body]


class MetricsServer(ServedApp):
    """A running ``/metrics`` endpoint; :meth:`close` stops it (and, for a
    worker endpoint, stops feeding its registry)."""

    @property
    def url(self) -> str:
        """``http://host:port/metrics``."""
        return f"{self._service.url}/metrics"


def _bind(bind: str | tuple[str, int]) -> tuple[str, int]:
    return parse_bind(bind) if isinstance(bind, str) else bind


def serve_store_metrics(
    store: Store | DepthSampler, bind: str | tuple[str, int] = ("127.0.0.1", 9464)
) -> MetricsServer:
    """Serve the depth families of *store* on *bind* (``[HOST:]PORT``, HOST
    127.0.0.1 by default). The store also feeds the OpenTelemetry depth
    gauges while it serves, for an application or
    ``opentelemetry-instrument`` that installed an SDK."""
    sampler = store if isinstance(store, DepthSampler) else DepthSampler(store)
    observation = _metrics.observe_store(sampler)

    def render() -> str:
        at, stats = sampler.sample()
        return render_depth(stats, at)

    host, port = _bind(bind)
    try:
        service = serve_wsgi(metrics_app(render), host, port, name="alkstore-metrics")
    except BaseException:
        observation.close()
        raise
    return MetricsServer(service, observation.close)


def serve_worker_metrics(
    bind: str | tuple[str, int], registry: WorkerRegistry | None = None
) -> MetricsServer:
    """Serve this process's worker-side counters and histograms on *bind*
    (``alkstore worker --metrics-port``): *registry* (a fresh one by
    default) receives every ``record_*`` call until the server is closed."""
    reg = registry or WorkerRegistry()
    host, port = _bind(bind)
    service = serve_wsgi(metrics_app(reg.render), host, port, name="alkstore-worker-metrics")
    _metrics.add_sink(reg)
    return MetricsServer(service, lambda: _metrics.remove_sink(reg))
