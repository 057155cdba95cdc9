"""O-1: the OpenTelemetry instruments, read back with the SDK's in-memory reader."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from alkstore import EnqueueOpts, InvalidArgument, QueueOpts, QueueStats, Store
from alkstore.observability import (
    SECONDS_BUCKETS,
    DepthSampler,
    JobMetrics,
    Outcome,
    observe_store,
    record_finished,
)

pytestmark = pytest.mark.clause("O-1")


@pytest.fixture
def reader() -> Iterator[InMemoryMetricReader]:
    found = InMemoryMetricReader()
    yield found
    found.shutdown()


@pytest.fixture
def provider(reader: InMemoryMetricReader) -> MeterProvider:
    return MeterProvider(metric_readers=[reader])


def points(reader: InMemoryMetricReader) -> dict[str, list[tuple[dict[str, Any], Any, Any]]]:
    """``{instrument: [(attributes, point, metric)]}`` of one collection."""
    data = reader.get_metrics_data()
    found: dict[str, list[tuple[dict[str, Any], Any, Any]]] = {}
    if data is None:
        return found
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            assert scope.scope.name == "alkstore"
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    found.setdefault(metric.name, []).append(
                        (dict(point.attributes or {}), point, metric)
                    )
    return found


def test_finished_counts_by_queue_and_outcome(
    provider: MeterProvider, reader: InMemoryMetricReader
) -> None:
    m = JobMetrics(provider)
    for outcome in ("acked", "acked", Outcome.RETRIED, "dead", "lost"):
        m.finished("emails", outcome)
    m.finished("reports", Outcome.TIMEOUT)
    got = {
        (a["queue"], a["outcome"]): p.value for a, p, _ in points(reader)["alkstore.jobs.finished"]
    }
    assert got == {
        ("emails", "acked"): 2,
        ("emails", "retried"): 1,
        ("emails", "dead"): 1,
        ("emails", "lost"): 1,
        ("reports", "timeout"): 1,
    }
    metric = points(reader)["alkstore.jobs.finished"][0][2]
    assert metric.unit == "{job}"


def test_histograms_are_seconds_with_advised_buckets(
    provider: MeterProvider, reader: InMemoryMetricReader
) -> None:
    m = JobMetrics(provider)
    m.duration("emails", 0.02)
    m.duration("emails", 3.0)
    m.queue_time("emails", 120.0)
    m.queue_time("emails", -1.0)  # clock skew between hosts: never negative
    found = points(reader)
    ((attrs, duration, metric),) = found["alkstore.job.duration"]
    assert attrs == {"queue": "emails"}
    assert metric.unit == "s"
    assert duration.count == 2
    assert duration.sum == pytest.approx(3.02)
    assert tuple(duration.explicit_bounds) == SECONDS_BUCKETS
    ((_, queue_time, _),) = found["alkstore.job.queue_time"]
    assert queue_time.count == 2
    assert queue_time.min == 0.0
    assert queue_time.max == 120.0


def test_outcomes_are_exactly_the_six_of_the_rule() -> None:
    assert [o.value for o in Outcome] == ["acked", "retried", "failed", "dead", "timeout", "lost"]
    with pytest.raises(InvalidArgument):
        record_finished("emails", "finished")
    with pytest.raises(InvalidArgument):
        JobMetrics().finished("emails", 3)  # type: ignore[arg-type]


def test_record_functions_without_an_sdk_do_nothing_and_raise_nothing() -> None:
    # The test process never installs a global SDK: these go to the API's
    # no-op proxy instruments.
    from alkstore.observability import record_duration, record_queue_time

    record_finished("emails", "acked")
    record_duration("emails", 0.5)
    record_queue_time("emails", 2.0)


def _seed(store: Store) -> None:
    emails = store.queue("emails", QueueOpts(max_attempts=1))
    emails.enqueue_many([{"n": i} for i in range(4)])
    emails.enqueue({"later": True}, EnqueueOpts(delay_s=3600))
    job = emails.claim("w1")
    assert job is not None
    job.fail("boom")
    held = emails.claim("w1")
    assert held is not None
    store.queue("other").enqueue({"x": 1})


def test_depth_gauges_match_queue_stats(
    store: Store, provider: MeterProvider, reader: InMemoryMetricReader
) -> None:
    _seed(store)
    with observe_store(store, meter_provider=provider):
        found = points(reader)
        stats = {s.queue: s for s in store.queue_stats()}
    jobs = {(a["queue"], a["state"]): p.value for a, p, _ in found["alkstore.queue.jobs"]}
    expected = {}
    for s in stats.values():
        expected.update(
            {
                (s.queue, "pending"): s.pending,
                (s.queue, "scheduled"): s.scheduled,
                (s.queue, "processing"): s.processing,
                (s.queue, "dead"): s.dead,
            }
        )
    assert jobs == expected
    assert expected[("emails", "dead")] == 1 and expected[("emails", "processing")] == 1
    ages = {a["queue"]: p.value for a, p, _ in found["alkstore.queue.oldest_ready_age"]}
    assert set(ages) == set(stats)
    assert all(age >= 0 for age in ages.values())
    assert found["alkstore.queue.oldest_ready_age"][0][2].unit == "s"


def test_a_closed_observation_stops_feeding_the_gauges(
    store: Store, provider: MeterProvider, reader: InMemoryMetricReader
) -> None:
    _seed(store)
    observation = observe_store(store, meter_provider=provider)
    assert points(reader)["alkstore.queue.jobs"]
    observation.close()
    assert "alkstore.queue.jobs" not in points(reader)


class CountingStore:
    """Enough of a store for the gauges: ``queue_stats`` only, counted."""

    def __init__(self, stats: list[QueueStats], fail: bool = False) -> None:
        self.stats = stats
        self.fail = fail
        self.calls = 0

    def queue_stats(self) -> list[QueueStats]:
        self.calls += 1
        if self.fail:
            raise RuntimeError("database is down")
        return self.stats


def test_both_gauges_share_one_read_per_collection(
    provider: MeterProvider, reader: InMemoryMetricReader
) -> None:
    waited = datetime.now(timezone.utc) - timedelta(seconds=90)
    fake = CountingStore([QueueStats("q", 3, 0, 1, 0, oldest_ready_at=waited)])
    with observe_store(DepthSampler(fake, max_age_s=60), meter_provider=provider):  # type: ignore[arg-type]
        found = points(reader)
    assert fake.calls == 1
    ((attrs, age, _),) = found["alkstore.queue.oldest_ready_age"]
    assert attrs == {"queue": "q"}
    assert 89 <= age.value < 120


def test_a_failing_read_is_logged_and_the_export_goes_on(
    provider: MeterProvider, reader: InMemoryMetricReader, caplog: pytest.LogCaptureFixture
) -> None:
    broken = CountingStore([], fail=True)
    fine = CountingStore([QueueStats("ok", 1, 0, 0, 0)])
    with (
        caplog.at_level(logging.WARNING, logger="alkstore.observability"),
        observe_store(broken, meter_provider=provider),  # type: ignore[arg-type]
        observe_store(fine, meter_provider=provider),  # type: ignore[arg-type]
    ):
        found = points(reader)
    assert {a["queue"] for a, _, _ in found["alkstore.queue.jobs"]} == {"ok"}
    assert "database is down" in caplog.text


def test_global_instruments_start_recording_once_an_sdk_is_set(tmp_path: Path) -> None:
    """The worker's record calls made before the application installs its SDK
    are dropped; those after are counted, with no re-wiring."""
    script = textwrap.dedent(
        """
        import json, sys
        from opentelemetry import metrics
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        import alkstore
        from alkstore.observability import record_finished, record_duration, observe_store

        record_finished("early", "acked")
        reader = InMemoryMetricReader()
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        record_finished("q", "acked")
        record_finished("q", "failed")
        record_duration("q", 0.25)
        store = alkstore.open(sys.argv[1])
        store.queue("q").enqueue(1)
        observation = observe_store(store)
        out = {}
        for rm in reader.get_metrics_data().resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    out[m.name] = [
                        [dict(p.attributes), getattr(p, "value", None), getattr(p, "count", None)]
                        for p in m.data.data_points
                    ]
        observation.close()
        store.close()
        print(json.dumps(out, sort_keys=True))
        """
    )
    url = f"sqlite:///{tmp_path / 'g.db'}"
    done = subprocess.run(
        [sys.executable, "-c", script, url], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    finished = {(a["queue"], a["outcome"]): v for a, v, _ in out["alkstore.jobs.finished"]}
    assert finished == {("q", "acked"): 1, ("q", "failed"): 1}
    assert out["alkstore.job.duration"] == [[{"queue": "q"}, None, 1]]
    jobs = {(a["queue"], a["state"]): v for a, v, _ in out["alkstore.queue.jobs"]}
    assert jobs[("q", "pending")] == 1
