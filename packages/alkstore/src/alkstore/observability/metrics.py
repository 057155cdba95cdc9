"""Metrics through the OpenTelemetry metrics API (O-1).

Two kinds of instrument, both on the meter ``alkstore``:

- **Worker-side** (what a worker knows as it runs jobs), recorded by the
  worker through :func:`record_finished`, :func:`record_duration` and
  :func:`record_queue_time`:

  ============================  =========  ======================  ===========
  instrument                    kind       attributes              unit
  ============================  =========  ======================  ===========
  ``alkstore.jobs.finished``    counter    ``queue``, ``outcome``  ``{job}``
  ``alkstore.job.duration``     histogram  ``queue``               ``s``
  ``alkstore.job.queue_time``   histogram  ``queue``               ``s``
  ============================  =========  ======================  ===========

  ``outcome`` is one of :class:`Outcome`. The duration is the handler's run
  time; the queue time runs from the moment a job became ready (its
  ``run_at``) to its claim.

- **Store-side** depth gauges, read from the database by a process that opts
  in with :func:`observe_store` (``alkstore metrics``, the dashboard), never
  by every worker: ``alkstore.queue.jobs`` {``queue``, ``state``} and
  ``alkstore.queue.oldest_ready_age`` (``s``) {``queue``}.

Without an SDK the API is a no-op and a record call costs a few attribute
look-ups; nothing here reads the clock or the database on the job path. An
application that installs an SDK (``opentelemetry-sdk``, or
``opentelemetry-instrument``) gets the instruments without further wiring:
instruments made before the SDK was set start recording once it is.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Protocol

from opentelemetry import metrics as otel_metrics
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation

from alkstore._strenum import StrEnum
from alkstore.errors import InvalidArgument
from alkstore.protocols import Store
from alkstore.types import QueueStats

from ._closing import Closing

__all__ = [
    "DEPTH_STATES",
    "METER_NAME",
    "SECONDS_BUCKETS",
    "DepthSampler",
    "JobMetrics",
    "JobSink",
    "Outcome",
    "StoreObservation",
    "add_sink",
    "observe_store",
    "record_duration",
    "record_finished",
    "record_queue_time",
    "remove_sink",
]

log = logging.getLogger("alkstore.observability")

#: The meter (and tracer) name of every alkstore instrument.
METER_NAME = "alkstore"
#: Histogram bucket bounds in seconds, from a 5 ms handler to an hour in the
#: queue. Given to the SDK as advice and used by the Prometheus endpoints.
SECONDS_BUCKETS: tuple[float, ...] = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    900.0,
    3600.0,
)
#: The ``state`` values of ``alkstore.queue.jobs``: ``pending`` is ready now,
#: ``scheduled`` waits for its ``run_at``, as in :class:`~alkstore.QueueStats`.
DEPTH_STATES: tuple[str, ...] = ("pending", "scheduled", "processing", "dead")


def _version() -> str:
    from alkstore._version import __version__

    return __version__


class Outcome(StrEnum):
    """How the worker finished with a job (the ``outcome`` attribute).

    - ``acked``: the handler returned and the ack landed.
    - ``retried``: the job went back to pending for another attempt.
    - ``failed``: the handler raised ``Fail``; the job is dead at once.
    - ``dead``: a retry found the budget spent; the job is dead.
    - ``timeout``: the handler ran past the worker's ``timeout_s`` (retried
      or dead; the timeout is what an operator wants to see).
    - ``lost``: the claim was gone when the worker settled it (an ack, retry,
      fail or heartbeat refused), so the outcome was dropped.
    """

    ACKED = "acked"
    RETRIED = "retried"
    FAILED = "failed"
    DEAD = "dead"
    TIMEOUT = "timeout"
    LOST = "lost"


_OUTCOMES: dict[str, str] = {o.value: o.value for o in Outcome}


def _outcome(value: Outcome | str) -> str:
    try:
        return _OUTCOMES[value]
    except (KeyError, TypeError):
        known = ", ".join(_OUTCOMES)
        raise InvalidArgument(f"unknown outcome {value!r} (one of {known})") from None


class JobSink(Protocol):
    """Something that takes the worker-side measurements besides the API: the
    Prometheus endpoint of ``alkstore worker --metrics-port`` is one."""

    def finished(self, queue: str, outcome: str) -> None: ...
    def duration(self, queue: str, seconds: float) -> None: ...
    def queue_time(self, queue: str, seconds: float) -> None: ...


class JobMetrics:
    """The worker-side instruments on one meter provider (the global one by
    default: the proxy the API hands out before an SDK is set, which starts
    recording once one is)."""

    def __init__(self, meter_provider: MeterProvider | None = None) -> None:
        provider = meter_provider or otel_metrics.get_meter_provider()
        meter = provider.get_meter(METER_NAME, _version())
        self._finished = meter.create_counter(
            "alkstore.jobs.finished",
            unit="{job}",
            description="Jobs a worker finished with, by queue and outcome",
        )
        self._duration = meter.create_histogram(
            "alkstore.job.duration",
            unit="s",
            description="Handler run time",
            explicit_bucket_boundaries_advisory=SECONDS_BUCKETS,
        )
        self._queue_time = meter.create_histogram(
            "alkstore.job.queue_time",
            unit="s",
            description="Time from a job being ready to its claim",
            explicit_bucket_boundaries_advisory=SECONDS_BUCKETS,
        )

    def finished(self, queue: str, outcome: Outcome | str) -> None:
        self._finished.add(1, {"queue": queue, "outcome": _outcome(outcome)})

    def duration(self, queue: str, seconds: float) -> None:
        self._duration.record(max(0.0, seconds), {"queue": queue})

    def queue_time(self, queue: str, seconds: float) -> None:
        self._queue_time.record(max(0.0, seconds), {"queue": queue})


# The module-level recorder the worker calls. The API's global provider is
# process-wide by design; so are the sinks, because an exposition endpoint
# is one per process (docs/adr/0012).
_default_lock = threading.Lock()
_default: JobMetrics | None = None
_sinks: tuple[JobSink, ...] = ()


def _recorder() -> JobMetrics:
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = JobMetrics()
    return _default


def add_sink(sink: JobSink) -> None:
    """Send the worker-side measurements to *sink* too, until
    :func:`remove_sink`."""
    global _sinks
    with _default_lock:
        _sinks = (*_sinks, sink)


def remove_sink(sink: JobSink) -> None:
    global _sinks
    with _default_lock:
        _sinks = tuple(s for s in _sinks if s is not sink)


def record_finished(queue: str, outcome: Outcome | str) -> None:
    """Count one job the worker finished with (``alkstore.jobs.finished``).

    Call it once per job, after the operation that settled it returned:
    ``acked`` once the ack committed, ``lost`` when it was refused.
    """
    value = _outcome(outcome)
    _recorder().finished(queue, value)
    for sink in _sinks:
        sink.finished(queue, value)


def record_duration(queue: str, seconds: float) -> None:
    """Record a handler's run time (``alkstore.job.duration``)."""
    _recorder().duration(queue, seconds)
    for sink in _sinks:
        sink.duration(queue, seconds)


def record_queue_time(queue: str, seconds: float) -> None:
    """Record the wait from ready to claimed (``alkstore.job.queue_time``)."""
    _recorder().queue_time(queue, seconds)
    for sink in _sinks:
        sink.queue_time(queue, seconds)


# ------------------------------------------------------------ depth gauges


class DepthSampler:
    """``store.queue_stats()`` read at most once per *max_age_s*, so that the
    gauges, the Prometheus page and the dashboard of one process share one
    read per collection."""

    def __init__(self, store: Store, max_age_s: float = 1.0) -> None:
        self._store = store
        self._max_age_s = max_age_s
        self._lock = threading.Lock()
        self._at = -float("inf")
        self._stats: list[QueueStats] = []
        self._read_at = datetime.now(timezone.utc)

    @property
    def store(self) -> Store:
        return self._store

    def sample(self) -> tuple[datetime, list[QueueStats]]:
        """The latest counts and when they were read (a fresh read when the
        last one is older than *max_age_s*). Errors of the read propagate."""
        with self._lock:
            now = time.monotonic()
            if now - self._at >= self._max_age_s:
                self._stats = self._store.queue_stats()
                self._read_at = datetime.now(timezone.utc)
                self._at = now
            return self._read_at, list(self._stats)


def oldest_ready_age_s(stats: QueueStats, now: datetime) -> float:
    """Seconds the longest-waiting ready job has waited; 0 when none waits."""
    if stats.oldest_ready_at is None:
        return 0.0
    return max(0.0, (now - stats.oldest_ready_at).total_seconds())


def depth_values(stats: QueueStats) -> Iterable[tuple[str, int]]:
    """``(state, count)`` for each of :data:`DEPTH_STATES`."""
    return (
        ("pending", stats.pending),
        ("scheduled", stats.scheduled),
        ("processing", stats.processing),
        ("dead", stats.dead),
    )


class _DepthGauges:
    """The two observable gauges of one meter provider, made once (an SDK
    keeps the first instrument of a name) and fed by every observed store."""

    def __init__(self, provider: MeterProvider) -> None:
        self._lock = threading.Lock()
        self._samplers: list[DepthSampler] = []
        meter = provider.get_meter(METER_NAME, _version())
        meter.create_observable_gauge(
            "alkstore.queue.jobs",
            callbacks=[self._jobs],
            unit="{job}",
            description="Jobs in the queue by state",
        )
        meter.create_observable_gauge(
            "alkstore.queue.oldest_ready_age",
            callbacks=[self._age],
            unit="s",
            description="How long the longest-waiting ready job has waited",
        )

    def add(self, sampler: DepthSampler) -> None:
        with self._lock:
            self._samplers.append(sampler)

    def remove(self, sampler: DepthSampler) -> None:
        with self._lock:
            self._samplers = [s for s in self._samplers if s is not sampler]

    def _each(self) -> Iterable[tuple[datetime, list[QueueStats]]]:
        with self._lock:
            samplers = list(self._samplers)
        for sampler in samplers:
            try:
                yield sampler.sample()
            except Exception as exc:  # a gauge must not break the export
                log.warning("reading queue depths for metrics failed: %s", exc)

    def _jobs(self, options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(count, {"queue": s.queue, "state": state})
            for _, stats in self._each()
            for s in stats
            for state, count in depth_values(s)
        ]

    def _age(self, options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(oldest_ready_age_s(s, at), {"queue": s.queue})
            for at, stats in self._each()
            for s in stats
        ]


_gauges_lock = threading.Lock()
_gauges: weakref.WeakKeyDictionary[MeterProvider, _DepthGauges] = weakref.WeakKeyDictionary()


def _gauges_for(provider: MeterProvider) -> _DepthGauges:
    with _gauges_lock:
        gauges = _gauges.get(provider)
        if gauges is None:
            gauges = _gauges[provider] = _DepthGauges(provider)
        return gauges


class StoreObservation(Closing):
    """A store feeding the depth gauges; :meth:`close` (or ``with``) stops it.
    :attr:`sampler` is the shared read, for callers that show the counts too."""

    def __init__(self, gauges: _DepthGauges, sampler: DepthSampler) -> None:
        self._gauges = gauges
        self.sampler = sampler

    def close(self) -> None:
        self._gauges.remove(self.sampler)


def observe_store(
    store: Store | DepthSampler,
    meter_provider: MeterProvider | None = None,
) -> StoreObservation:
    """Opt *store* in to the depth gauges ``alkstore.queue.jobs`` and
    ``alkstore.queue.oldest_ready_age`` (O-1): each collection reads
    ``queue_stats()`` once (at most once a second). Give a
    :class:`DepthSampler` to share its read with other readers."""
    sampler = store if isinstance(store, DepthSampler) else DepthSampler(store)
    gauges = _gauges_for(meter_provider or otel_metrics.get_meter_provider())
    gauges.add(sampler)
    return StoreObservation(gauges, sampler)
