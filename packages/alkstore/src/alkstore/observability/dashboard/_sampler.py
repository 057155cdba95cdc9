"""What the dashboard's charts draw: samples taken while it runs, in memory.

The database keeps no completion history (an ack deletes its row), so the
dashboard samples ``queue_stats()`` every few seconds and keeps the last
samples in a ring. Depth comes straight from those samples. Throughput does
not: a job enqueued and acked between two samples leaves no trace in them.
So the finished-job rates come from the workers' own counters, read from
their Prometheus endpoints (``alkstore worker --metrics-port``) when the
dashboard is given them (``--scrape URL``). What the samples alone can tell
is the backlog's change per second; it is charted always, under its own
name, never as a throughput (docs/adr/0013, 0019).
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.request
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

from alkstore.observability.prometheus import parse_samples
from alkstore.protocols import Store
from alkstore.types import QueueStats

__all__ = [
    "BACKLOG_LABEL",
    "FINISHED_GROUPS",
    "History",
    "Sample",
    "Sampler",
    "backlog_series",
    "finished_series",
    "scrape_finished",
]

log = logging.getLogger("alkstore.dashboard")

#: How the chart groups worker outcomes: (series label, outcomes).
FINISHED_GROUPS: tuple[tuple[str, frozenset[str]], ...] = (
    ("acked/s", frozenset({"acked"})),
    ("retried/s", frozenset({"retried", "timeout"})),
    ("dead/s", frozenset({"failed", "dead"})),
)
#: The series of the backlog chart.
BACKLOG_LABEL = "backlog change/s"
_SCRAPE_TIMEOUT_S = 2.0

#: ``{source: {(queue, outcome): count}}``: the workers' counters at a sample.
Counters = dict[str, dict[tuple[str, str], float]]


@dataclass(frozen=True)
class Sample:
    """One reading: wall-clock and monotonic time, the counts of every queue,
    and the counters of each worker endpoint that answered."""

    at: datetime
    mono: float
    stats: Mapping[str, QueueStats]
    counters: Counters = field(default_factory=dict)


def scrape_finished(url: str, timeout_s: float = _SCRAPE_TIMEOUT_S) -> dict[tuple[str, str], float]:
    """``alkstore_jobs_finished_total`` of one worker endpoint, by (queue,
    outcome)."""
    request = urllib.request.Request(url, headers={"Accept": "text/plain"})
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        text = response.read(8 * 1024 * 1024).decode("utf-8", "replace")
    counts: dict[tuple[str, str], float] = {}
    for labels, value in parse_samples(text, "alkstore_jobs_finished_total").items():
        found = dict(labels)
        if "queue" in found and "outcome" in found:
            counts[(found["queue"], found["outcome"])] = value
    return counts


class History:
    """The last *size* samples, oldest first; thread-safe."""

    def __init__(self, size: int) -> None:
        self._samples: deque[Sample] = deque(maxlen=size)
        self._lock = threading.Lock()

    def add(self, sample: Sample) -> None:
        with self._lock:
            self._samples.append(sample)

    def samples(self) -> list[Sample]:
        with self._lock:
            return list(self._samples)

    def __len__(self) -> int:
        with self._lock:
            return len(self._samples)


def ages(samples: Sequence[Sample], now: float | None = None) -> list[float]:
    """Seconds before *now* (monotonic) each sample was taken."""
    ref = time.monotonic() if now is None else now
    return [max(0.0, ref - s.mono) for s in samples]


def depth_series(samples: Sequence[Sample], queue: str | None) -> dict[str, list[float | None]]:
    """``{state: [count per sample]}`` for one queue, or summed over all
    queues when *queue* is ``None``; ``None`` where the queue had no rows."""
    out: dict[str, list[float | None]] = {
        k: [] for k in ("pending", "scheduled", "processing", "dead")
    }
    for sample in samples:
        chosen = list(sample.stats.values()) if queue is None else [sample.stats.get(queue)]
        present = [s for s in chosen if s is not None]
        for state, values in out.items():
            if queue is not None and not present:
                values.append(0.0)
            else:
                values.append(float(sum(getattr(s, state) for s in present)))
    return out


def _live(sample: Sample, queue: str | None) -> int:
    if queue is None:
        return sum(s.live for s in sample.stats.values())
    stats = sample.stats.get(queue)
    return stats.live if stats is not None else 0


def _rates(
    samples: Sequence[Sample], step: Callable[[Sample, Sample], float]
) -> list[float | None]:
    """``step(previous, sample) / dt`` between consecutive samples; ``None``
    for the first point and where the clock did not move."""
    out: list[float | None] = []
    previous: Sample | None = None
    for sample in samples:
        if previous is None:
            out.append(None)
            previous = sample
            continue
        dt = sample.mono - previous.mono
        if dt <= 0:
            out.append(None)
            continue
        out.append(step(previous, sample) / dt)
        previous = sample
    return out


def backlog_series(samples: Sequence[Sample], queue: str | None) -> dict[str, list[float | None]]:
    """``{"backlog change/s": [...]}``: how fast the live jobs (pending,
    scheduled, processing) grew between samples, below zero while a queue
    drains. It is not a throughput: jobs enqueued and finished between two
    samples cancel out."""
    return {BACKLOG_LABEL: _rates(samples, lambda a, b: float(_live(b, queue) - _live(a, queue)))}


def finished_series(samples: Sequence[Sample], queue: str | None) -> dict[str, list[float | None]]:
    """Finished jobs per second between samples, by the groups of
    :data:`FINISHED_GROUPS`, from the workers' counters (``--scrape``).

    A counter is compared only between two samples its endpoint answered
    both; one that went down (a restarted worker) counts from zero again.
    """

    def finished(outcomes: frozenset[str]) -> Callable[[Sample, Sample], float]:
        def step(previous: Sample, sample: Sample) -> float:
            total = 0.0
            for source, now_counts in sample.counters.items():
                before = previous.counters.get(source)
                if before is None:
                    continue
                for (q, outcome), value in now_counts.items():
                    if outcome not in outcomes or (queue is not None and q != queue):
                        continue
                    old = before.get((q, outcome), 0.0)
                    total += value - old if value >= old else value
            return total

        return step

    return {label: _rates(samples, finished(outcomes)) for label, outcomes in FINISHED_GROUPS}


class Sampler:
    """A daemon thread that adds a :class:`Sample` to *history* every
    *every_s* seconds until :meth:`stop`; a failed read is logged and
    skipped."""

    def __init__(
        self,
        store: Store,
        history: History,
        every_s: float,
        scrape: Sequence[str] = (),
        read: Callable[[str], dict[tuple[str, str], float]] = scrape_finished,
    ) -> None:
        self._store = store
        self._history = history
        self._every_s = every_s
        self._scrape = tuple(scrape)
        self._read = read
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="alkstore-dashboard-sampler")
        self._thread.daemon = True
        self._failing: set[str] = set()

    @property
    def scraping(self) -> bool:
        return bool(self._scrape)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def sample_once(self) -> Sample | None:
        """Take one sample now and add it; ``None`` when the read failed."""
        try:
            stats = self._store.queue_stats()
        except Exception as exc:
            log.warning("sampling queue_stats() failed: %s", exc)
            return None
        counters: Counters = {}
        for url in self._scrape:
            try:
                counters[url] = self._read(url)
            except Exception as exc:
                if url not in self._failing:
                    log.warning("scraping %s failed: %s", url, exc)
                self._failing.add(url)
                continue
            self._failing.discard(url)
        sample = Sample(
            at=datetime.now(timezone.utc),
            mono=time.monotonic(),
            stats={s.queue: s for s in stats},
            counters=counters,
        )
        self._history.add(sample)
        return sample

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.sample_once()
            self._stop.wait(max(0.0, self._every_s - (time.monotonic() - started)))
