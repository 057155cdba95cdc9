"""O-3: the Prometheus endpoints, scraped with a real HTTP client and parsed
with ``prometheus_client``'s own parser."""

from __future__ import annotations

import signal
import textwrap
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

import alkstore
from alkstore import EnqueueOpts, InvalidArgument, QueueOpts, QueueStats, Store
from alkstore.cli import main
from alkstore.observability import (
    WorkerRegistry,
    record_duration,
    record_finished,
    serve_store_metrics,
    serve_worker_metrics,
)
from alkstore.observability._http import parse_bind
from alkstore.observability.prometheus import CONTENT_TYPE, parse_samples, render_depth

from .conftest import Running, eventually

WEIRD = 'we"ird\\queue \u00e9\u6f22'

pytestmark = pytest.mark.clause("O-1", "O-3")


def families(text: str) -> dict[str, list[Sample]]:
    """``{family: samples}``, parsed by prometheus_client (which raises on
    anything malformed)."""
    return {f.name: list(f.samples) for f in text_string_to_metric_families(text)}


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"] == CONTENT_TYPE
        text: str = response.read().decode("utf-8")
    return text


def depth_of(text: str) -> dict[tuple[str, str], float]:
    return {
        (s.labels["queue"], s.labels["state"]): s.value
        for s in families(text)["alkstore_queue_jobs"]
    }


def expected_depth(stats: list[QueueStats]) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    for s in stats:
        for state in ("pending", "scheduled", "processing", "dead"):
            out[(s.queue, state)] = getattr(s, state)
    return out


def _seed(store: Store) -> None:
    q = store.queue("emails", QueueOpts(max_attempts=1))
    q.enqueue_many([{"n": i} for i in range(3)])
    q.enqueue({"later": 1}, EnqueueOpts(delay_s=600))
    job = q.claim("w")
    assert job is not None
    job.fail("boom")
    store.queue(WEIRD).enqueue({"x": 1})


# ----------------------------------------------------------------- the format


def test_depth_text_parses_and_escapes_queue_names() -> None:
    now = datetime.now(timezone.utc)
    stats = [
        QueueStats("emails", 2, 1, 3, 4, oldest_ready_at=now - timedelta(seconds=30)),
        QueueStats(WEIRD, 0, 0, 0, 1),
    ]
    found = families(render_depth(stats, now))
    assert depth_of(render_depth(stats, now)) == expected_depth(stats)
    ages = {s.labels["queue"]: s.value for s in found["alkstore_queue_oldest_ready_age_seconds"]}
    assert ages == {"emails": 30.0, WEIRD: 0.0}


def test_worker_registry_renders_counters_and_cumulative_histograms() -> None:
    reg = WorkerRegistry()
    for outcome in ("acked", "acked", "failed"):
        reg.finished("emails", outcome)
    reg.finished(WEIRD, "lost")
    for seconds in (0.004, 0.3, 0.3, 7200.0):
        reg.duration("emails", seconds)
    reg.queue_time("emails", 1.5)
    found = families(reg.render())
    finished = {
        (s.labels["queue"], s.labels["outcome"]): s.value
        for s in found["alkstore_jobs_finished"]
        if s.name == "alkstore_jobs_finished_total"
    }
    assert finished[("emails", "acked")] == 2
    assert finished[("emails", "failed")] == 1
    assert finished[("emails", "retried")] == 0  # every outcome from the first on
    assert finished[(WEIRD, "lost")] == 1
    duration = {
        (s.name, s.labels.get("le")): s.value for s in found["alkstore_job_duration_seconds"]
    }
    assert duration[("alkstore_job_duration_seconds_bucket", "0.005")] == 1
    assert duration[("alkstore_job_duration_seconds_bucket", "0.5")] == 3
    assert duration[("alkstore_job_duration_seconds_bucket", "3600.0")] == 3
    assert duration[("alkstore_job_duration_seconds_bucket", "+Inf")] == 4
    assert duration[("alkstore_job_duration_seconds_count", None)] == 4
    assert duration[("alkstore_job_duration_seconds_sum", None)] == pytest.approx(7200.604)
    queue_time = {s.name: s.value for s in found["alkstore_job_queue_time_seconds"]}
    assert queue_time["alkstore_job_queue_time_seconds_count"] == 1


def test_an_empty_registry_still_declares_its_families() -> None:
    found = families(WorkerRegistry().render())
    assert set(found) == {
        "alkstore_jobs_finished",
        "alkstore_job_duration_seconds",
        "alkstore_job_queue_time_seconds",
    }


def test_own_parser_reads_back_what_the_registry_wrote() -> None:
    reg = WorkerRegistry()
    reg.finished(WEIRD, "acked")
    reg.finished("a", "dead")
    got = parse_samples(reg.render(), "alkstore_jobs_finished_total")
    assert got[(("outcome", "acked"), ("queue", WEIRD))] == 1
    assert got[(("outcome", "dead"), ("queue", "a"))] == 1
    assert len(got) == 12


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("9100", ("127.0.0.1", 9100)),
        (":9100", ("127.0.0.1", 9100)),
        ("0.0.0.0:80", ("0.0.0.0", 80)),
        ("[::1]:0", ("::1", 0)),
        ("localhost:8765", ("localhost", 8765)),
    ],
)
def test_bind_addresses(text: str, expected: tuple[str, int]) -> None:
    assert parse_bind(text) == expected


@pytest.mark.parametrize("text", ["", "host:", "::1:80", "1:99999", "x:y"])
def test_bad_bind_addresses_are_invalid(text: str) -> None:
    with pytest.raises(InvalidArgument):
        parse_bind(text)


# -------------------------------------------------------------- the endpoints


def test_store_endpoint_serves_depth_and_follows_the_store(store: Store) -> None:
    _seed(store)
    with serve_store_metrics(store, "127.0.0.1:0") as server:
        text = scrape(server.url)
        assert depth_of(text) == expected_depth(store.queue_stats())
        store.queue("emails").enqueue({"n": 99})

        def caught_up() -> bool:
            return depth_of(scrape(server.url))[("emails", "pending")] == 3

        eventually(caught_up, what="the next scrape shows the new job")
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(server.url.replace("/metrics", "/nope"), timeout=10)
        assert missing.value.code == 404
        missing.value.close()


def test_a_failing_store_is_a_failed_scrape() -> None:
    class Down:
        def queue_stats(self) -> list[QueueStats]:
            raise alkstore.EngineError("connection refused")

    with serve_store_metrics(Down(), ("127.0.0.1", 0)) as server:  # type: ignore[arg-type]
        with pytest.raises(urllib.error.HTTPError) as failed:
            urllib.request.urlopen(server.url, timeout=10)
    assert failed.value.code == 503
    failed.value.close()


def test_worker_endpoint_serves_what_the_record_functions_saw() -> None:
    with serve_worker_metrics("127.0.0.1:0") as server:
        record_finished("emails", "acked")
        record_finished("emails", "retried")
        record_duration("emails", 0.2)
        found = families(scrape(server.url))
    after_close = WorkerRegistry()
    record_finished("emails", "acked")  # the closed endpoint no longer listens
    assert after_close.finished_counts() == {}
    finished = {
        s.labels["outcome"]: s.value
        for s in found["alkstore_jobs_finished"]
        if s.name.endswith("_total") and s.labels["queue"] == "emails"
    }
    assert finished["acked"] == 1 and finished["retried"] == 1
    counts = [s for s in found["alkstore_job_duration_seconds"] if s.name.endswith("_count")]
    assert [s.value for s in counts] == [1]


def test_metrics_command_prints_the_depth_once(
    engine_url: str, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    _seed(store)
    assert main(["--url", engine_url, "metrics"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert depth_of(out) == expected_depth(store.queue_stats())


def test_metrics_serve_is_scraped_over_http(
    engine_url: str, store: Store, background: Callable[..., Running]
) -> None:
    _seed(store)
    served = background("--url", engine_url, "metrics", "--serve", "127.0.0.1:0")
    url = served.wait_for(r"serving (http://\S+/metrics)").group(1)
    assert depth_of(scrape(url)) == expected_depth(store.queue_stats())
    assert served.stop() == 0


def test_metrics_never_creates_a_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nothing-here.db"
    assert main(["--url", f"sqlite:///{missing}", "metrics"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("alkstore: error: no store at") and err.count("\n") == 1
    assert not missing.exists()


def test_metrics_refuses_a_postgres_schema_that_does_not_exist(
    pg_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import uuid

    import psycopg

    schema = f"alkt_absent_{uuid.uuid4().hex[:8]}"
    sep = "&" if "?" in pg_server else "?"
    assert main(["--url", f"{pg_server}{sep}schema={schema}", "metrics"]) == 1
    assert "`alkstore migrate` creates one" in capsys.readouterr().err
    with psycopg.connect(pg_server, autocommit=True) as conn:
        found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
    assert found is None


_HANDLER = textwrap.dedent(
    """
    from alkstore import Fail

    def handle(job):
        if job.payload.get("fail"):
            raise Fail("refused")
    """
)


def test_worker_metrics_port_serves_the_exposition(
    engine_url: str, store: Store, tmp_path: Path, background: Callable[..., Running]
) -> None:
    (tmp_path / "metrics_handler.py").write_text(_HANDLER)
    worker = background(
        "--url", engine_url, "worker", "metrics_handler:handle", "--queue", "jobs",
        "--metrics-port", "127.0.0.1:0", "--grace", "1",
    )  # fmt: skip
    url = worker.wait_for(r"metrics at (http://\S+/metrics)").group(1)
    found = families(scrape(url))
    assert "alkstore_jobs_finished" in found
    assert "alkstore_job_duration_seconds" in found
    assert worker.stop() == 0


def test_worker_metrics_count_the_jobs_it_finished(
    engine_url: str, store: Store, tmp_path: Path, background: Callable[..., Running]
) -> None:
    (tmp_path / "metrics_handler.py").write_text(_HANDLER)
    q = store.queue("jobs")
    q.enqueue_many([{"n": 1}, {"n": 2}, {"fail": True}])
    worker = background(
        "--url", engine_url, "worker", "metrics_handler:handle", "--queue", "jobs",
        "--metrics-port", "127.0.0.1:0", "--grace", "1",
    )  # fmt: skip
    url = worker.wait_for(r"metrics at (http://\S+/metrics)").group(1)
    eventually(lambda: q.stats().live == 0, what="the worker drained the queue")

    def counted() -> dict[str, float] | None:
        found = families(scrape(url))
        got = {
            s.labels["outcome"]: s.value
            for s in found["alkstore_jobs_finished"]
            if s.name.endswith("_total") and s.labels["queue"] == "jobs"
        }
        return got if got.get("acked") == 2 and got.get("failed") == 1 else None

    counted_now = eventually(counted, timeout_s=3, what="acked 2, failed 1")
    assert counted_now["lost"] == 0
    found = families(scrape(url))
    durations = {
        s.name: s.value for s in found["alkstore_job_duration_seconds"] if "le" not in s.labels
    }
    assert durations["alkstore_job_duration_seconds_count"] == 3
    waits = {s.name: s.value for s in found["alkstore_job_queue_time_seconds"]}
    assert waits["alkstore_job_queue_time_seconds_count"] == 3
    worker.proc.send_signal(signal.SIGTERM)
