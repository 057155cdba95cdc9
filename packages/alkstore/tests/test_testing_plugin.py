"""FW-2: ``alkstore.testing``, the pytest plugin for the users' own tests.

Written as a user writes tests: the ``store`` and ``async_store`` fixtures
come from the plugin (this directory's conftest defines neither), and
``drain`` / ``adrain`` run handlers inline. The example project of the guide
(docs/examples/testing/) runs here too, on SQLite and, through
``ALKSTORE_TEST_URL``, on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from alkstore import AsyncStore, Fail, JobState, QueueOpts, Retry, Store
from alkstore.errors import InvalidArgument
from alkstore.testing import DrainReport, adrain, drain
from alkstore.testing import plugin as _plugin

# This package's own conftest.py defines a `store` of its own (for the CLI and
# dashboard tests); a fixture named in the test module wins over a conftest's,
# so this file takes the plugin's, as a project with such a conftest would.
store = _plugin.store

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "docs" / "examples" / "testing"


pytestmark = pytest.mark.clause("FW-2")


@pytest.fixture(autouse=True)
def _no_ambient_test_url(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests choose their store themselves: a developer's
    ``$ALKSTORE_TEST_URL`` is set only where a test sets it."""
    monkeypatch.delenv("ALKSTORE_TEST_URL", raising=False)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """``time.sleep`` fails the test: a drain never waits out a backoff."""
    calls: list[float] = []

    def refuse(seconds: float) -> None:
        calls.append(seconds)
        raise AssertionError(f"time.sleep({seconds}) called during a drain")

    monkeypatch.setattr(time, "sleep", refuse)
    return calls


def _flaky(fails: int) -> Any:
    """A handler that raises ``fails`` times, then succeeds."""
    seen: list[int] = []

    def handle(job: Any) -> None:
        seen.append(job.attempts)
        if len(seen) <= fails:
            raise ConnectionError(f"try {len(seen)}")

    handle.seen = seen  # type: ignore[attr-defined]
    return handle


# ------------------------------------------------------------ the fixtures


def test_fw2_store_is_a_fresh_migrated_store_in_tmp_path(store: Store, tmp_path: Path) -> None:
    """FW-2: ``store`` is open, empty and lives in the test's own directory."""
    assert store.queue_stats() == []
    assert str(tmp_path) in store.url
    store.queue("q").enqueue({"n": 1})
    assert [s.pending for s in store.queue_stats()] == [1]


@pytest.mark.anyio
async def test_fw2_async_store_is_the_same_database_as_store(
    store: Store, async_store: AsyncStore
) -> None:
    """FW-2: in one test both faces open the one database."""
    job_id = store.queue("q").enqueue({"face": "sync"})
    info = await async_store.queue("q").get_job(job_id)
    assert info is not None and info.payload == {"face": "sync"}


def test_fw2_a_conftest_store_fixture_wins_over_the_plugin(pytester: pytest.Pytester) -> None:
    """FW-2: the plugin's fixtures are plain names a project may define again."""
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture
        def store():
            return "the project's own"
        """
    )
    pytester.makepyfile(
        test_mine="""
        def test_own(store):
            assert store == "the project's own"
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:xdist", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_fw2_importing_alkstore_testing_does_not_import_pytest() -> None:
    """FW-2: pytest is no dependency of alkstore; only pytest loads the plugin."""
    code = "import sys, alkstore.testing; sys.exit('pytest' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


# ------------------------------------------------------------ drain, sync


def test_fw2_drain_acks_what_the_handler_finishes(store: Store, no_sleep: list[float]) -> None:
    q = store.queue("emails")
    ids = q.enqueue_many([{"n": 1}, {"n": 2}, {"n": 3}])
    handled: list[Any] = []

    report = drain(q, lambda job: handled.append(job.payload["n"]))

    assert handled == [1, 2, 3]
    assert report.ran == 3
    assert [r.job_id for r in report.acked] == ids
    assert report.retried == [] and report.dead == []
    assert q.stats().pending == 0 and q.stats().processing == 0
    assert all(q.get_job(i) is None for i in ids)


def test_fw2_drain_retries_by_the_curve_without_sleeping(
    store: Store, no_sleep: list[float]
) -> None:
    """FW-2, B-1: each retry's delay is the curve's (drawn with rng), recorded
    and skipped: the job runs again at once, and time.sleep never runs."""
    q = store.queue("emails", QueueOpts(max_attempts=5, backoff_base_s=10))
    job_id = q.enqueue({"to": "ada"})
    handler = _flaky(3)

    report = drain(q, handler, rng=lambda: 0.0)

    # Ceilings 10, 20, 40 s; rng 0 draws the lower half of each: 5, 10, 20.
    assert report.delays == [5.0, 10.0, 20.0]
    assert [r.outcome for r in report.runs] == ["retried"] * 3 + ["acked"]
    assert [r.error for r in report.retried] == [
        "ConnectionError: try 1",
        "ConnectionError: try 2",
        "ConnectionError: try 3",
    ]
    assert handler.seen == [1, 2, 3, 4]
    assert q.get_job(job_id) is None
    assert no_sleep == []


def test_fw2_drain_dead_letters_after_max_attempts(store: Store, no_sleep: list[float]) -> None:
    q = store.queue("emails", QueueOpts(max_attempts=3, backoff_base_s=60))
    job_id = q.enqueue({"to": "bob"})

    def always(job: Any) -> None:
        raise ValueError("bad address")

    report = drain(q, always)

    assert [r.outcome for r in report.runs] == ["retried", "retried", "dead"]
    assert [r.attempt for r in report.runs] == [1, 2, 3]
    assert 30 <= report.delays[0] <= 60 and 60 <= report.delays[1] <= 120
    assert report.dead[0].delay_s is None
    info = q.get_job(job_id)
    assert info is not None and info.state is JobState.DEAD
    assert info.last_error == "ValueError: bad address"
    assert [j.id for j in q.list_jobs(JobState.DEAD)] == [job_id]


def test_fw2_drain_applies_retry_and_fail_as_the_worker_does(
    store: Store, no_sleep: list[float]
) -> None:
    """W-1 through drain: Retry(delay_s) is that delay, Fail dead-letters now."""
    q = store.queue("orders", QueueOpts(max_attempts=3))
    later = q.enqueue({"kind": "later"})
    never = q.enqueue({"kind": "never"})

    def handle(job: Any) -> None:
        if job.payload["kind"] == "later":
            raise Retry(delay_s=90, reason="not yet")
        raise Fail("cannot be done")

    report = drain(q, handle)

    by_job = {(r.job_id, r.attempt): r for r in report.runs}
    assert by_job[(never, 1)].outcome == "dead"
    assert by_job[(never, 1)].error == "cannot be done"
    assert [r.delay_s for r in report.runs if r.job_id == later] == [90.0, 90.0, None]
    dead = q.get_job(later)
    assert dead is not None and dead.last_error == "not yet"
    failed = q.get_job(never)
    assert failed is not None and failed.state is JobState.DEAD and failed.attempts == 1


def test_fw2_drain_leaves_a_job_the_handler_settled_alone(store: Store) -> None:
    """W-9 through drain: a handler that acks in its own transaction."""
    q = store.queue("emails")
    job_id = q.enqueue({"n": 1})

    def handle(job: Any) -> None:
        with store.transaction() as tx:
            assert job.ack(tx=tx)

    report = drain(q, handle)

    assert [r.outcome for r in report.runs] == ["settled"]
    assert q.get_job(job_id) is None


def test_fw2_drain_runs_a_coroutine_handler_on_the_sync_face(store: Store) -> None:
    """W-8 through drain: an ``async def`` handler is awaited."""
    q = store.queue("emails")
    q.enqueue({"n": 1})
    seen: list[int] = []

    async def handle(job: Any) -> None:
        await asyncio.sleep(0)
        seen.append(job.payload["n"])

    report = drain(q, handle)

    assert seen == [1] and len(report.acked) == 1


def test_fw2_drain_times_out_as_the_worker_does(store: Store) -> None:
    """W-11 through drain: a coroutine past timeout_s is cancelled and retried
    with the worker's text, then dead-lettered at the budget."""
    q = store.queue("slow", QueueOpts(max_attempts=2))
    job_id = q.enqueue({"n": 1})
    cancelled: list[int] = []

    async def slow(job: Any) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(job.attempts)
            raise

    report = drain(q, slow, timeout_s=0.05)

    assert [(r.outcome, r.timed_out) for r in report.runs] == [
        ("retried", True),
        ("dead", True),
    ]
    assert cancelled == [1, 2]
    info = q.get_job(job_id)
    assert info is not None and info.last_error == "timeout after 0.05 s"


def test_fw2_raise_errors_shows_a_failed_assert_in_a_handler(store: Store) -> None:
    q = store.queue("emails", QueueOpts(max_attempts=1))
    q.enqueue({"n": 1})

    def handle(job: Any) -> None:
        assert job.payload["n"] == 2, "wrong n"

    report = drain(q, handle)

    assert report.dead[0].error is not None and "wrong n" in report.dead[0].error
    with pytest.raises(AssertionError, match="wrong n"):
        report.raise_errors()


def test_fw2_a_base_exception_gives_the_job_back_and_propagates(store: Store) -> None:
    q = store.queue("emails")
    job_id = q.enqueue({"n": 1})

    def interrupted(job: Any) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        drain(q, interrupted)

    info = q.get_job(job_id)
    assert info is not None and info.state is JobState.PENDING and info.attempts == 0


def test_fw2_drain_stops_a_queue_that_never_empties(store: Store) -> None:
    q = store.queue("loop")
    q.enqueue(0)

    def again(job: Any) -> None:
        q.enqueue(job.payload + 1)

    with pytest.raises(RuntimeError, match="max_runs"):
        drain(q, again, max_runs=5)


def test_fw2_drain_leaves_delayed_jobs_scheduled(store: Store) -> None:
    from alkstore import EnqueueOpts

    q = store.queue("later")
    q.enqueue({"n": 1}, EnqueueOpts(delay_s=3600))

    report = drain(q, lambda job: None)

    assert report.ran == 0 and report.scheduled == 1


@pytest.mark.anyio
async def test_fw2_each_drain_takes_its_own_face(store: Store, async_store: AsyncStore) -> None:
    with pytest.raises(InvalidArgument, match="adrain"):
        drain(async_store.queue("q"), lambda job: None)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match=r"\bdrain\b"):
        await adrain(store.queue("q"), lambda job: None)  # type: ignore[arg-type]


# ------------------------------------------------------------ adrain


@pytest.mark.anyio
async def test_fw2_adrain_retries_and_dead_letters_on_the_async_face(
    async_store: AsyncStore, no_sleep: list[float]
) -> None:
    q = async_store.queue("emails", QueueOpts(max_attempts=3, backoff_base_s=2))
    ok = await q.enqueue({"ok": True})
    bad = await q.enqueue({"ok": False})

    async def handle(job: Any) -> None:
        if not job.payload["ok"]:
            raise ConnectionError("down")

    report: DrainReport = await adrain(q, handle, rng=lambda: 0.5)

    assert [r.job_id for r in report.acked] == [ok]
    assert [(r.job_id, r.delay_s) for r in report.retried] == [(bad, 1.5), (bad, 3.0)]
    assert [r.job_id for r in report.dead] == [bad]
    info = await q.get_job(bad)
    assert info is not None and info.last_error == "ConnectionError: down"
    assert no_sleep == []


@pytest.mark.anyio
async def test_fw2_adrain_times_out_a_coroutine(async_store: AsyncStore) -> None:
    q = async_store.queue("slow", QueueOpts(max_attempts=1))
    await q.enqueue({"n": 1})

    async def slow(job: Any) -> None:
        await asyncio.sleep(30)

    report = await adrain(q, slow, timeout_s=0.05)

    assert [(r.outcome, r.timed_out, r.error) for r in report.runs] == [
        ("dead", True, "timeout after 0.05 s")
    ]


# ------------------------------------------------------------ the example project


def _run_example(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, env_url: str | None
) -> tuple[pytest.RunResult, list[str]]:
    """Run the guide's example project, plus two tests that each record where
    their store is; return the result and those two places."""
    for name in ("shop.py", "test_shop.py"):
        shutil.copy(EXAMPLE / name, pytester.path / name)
    record = pytester.path / "where.txt"
    pytester.makepyfile(
        test_where=textwrap.dedent(
            f"""
            import pytest

            @pytest.mark.parametrize("n", [1, 2])
            def test_records(store, n):
                assert store.queue_stats() == []
                store.queue("q").enqueue({{"n": n}})
                where = getattr(store, "schema", None) or store.url
                with open({str(record)!r}, "a") as f:
                    f.write(where + "\\n")
            """
        )
    )
    if env_url is None:
        monkeypatch.delenv("ALKSTORE_TEST_URL", raising=False)
    else:
        monkeypatch.setenv("ALKSTORE_TEST_URL", env_url)
    result = pytester.runpytest_subprocess("-p", "no:xdist", "-p", "no:cacheprovider")
    return result, record.read_text().split()


def test_fw2_the_guide_example_project_passes_on_sqlite(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FW-2: the example project passes, each test on a SQLite file of its own."""
    result, places = _run_example(pytester, monkeypatch, None)
    result.assert_outcomes(passed=9)
    assert len(set(places)) == 2 and all(p.startswith("sqlite:///") for p in places)


def test_fw2_alkstore_test_url_runs_the_tests_on_postgres_one_schema_each(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FW-2: with ALKSTORE_TEST_URL on PostgreSQL the example project passes,
    each test in a schema of its own, dropped after it."""
    from alkstore_postgres.testing import find_server

    server = find_server()
    if server is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI needs PostgreSQL", pytrace=False)
        pytest.skip("no PostgreSQL server")
    import psycopg

    result, schemas = _run_example(pytester, monkeypatch, server)
    result.assert_outcomes(passed=9)
    assert len(set(schemas)) == 2 and all(s.startswith("alkt_") for s in schemas)
    with psycopg.connect(server, autocommit=True) as conn:
        left = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname = ANY(%s)", (schemas,)
        ).fetchall()
    assert left == []
