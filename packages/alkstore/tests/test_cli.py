"""The ``alkstore`` command (SPEC §13): every command, ``--json``, errors.

Most tests call :func:`alkstore.cli.main` in-process; the long-running
commands (``worker``, ``scheduler``) and one error case run as real processes,
stopped with SIGTERM as an init system would.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

import alkstore
from alkstore import EnqueueOpts, JobState, QueueOpts, Store
from alkstore.cli import main
from alkstore_conformance._base import eventually as _eventually

POSIX = os.name == "posix"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``main(argv)``: exit status, stdout, stderr."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    code, out, err = run(capsys, *argv, "--json")
    assert (code, err) == (0, ""), err
    return json.loads(out)


def eventually(probe: Callable[[], Any]) -> Any:
    """The suite's poll, with the CLI tests' wait: their processes start slowly."""
    return _eventually(probe, timeout_s=20.0, interval_s=0.05)


def iso(text: str) -> datetime:
    """An ISO 8601 timestamp from the JSON output; always timezone-aware."""
    value = datetime.fromisoformat(text)
    assert value.tzinfo is not None
    return value


def cli_command() -> list[str]:
    """The installed ``alkstore`` console script, else ``python -m alkstore``."""
    script = Path(sys.executable).parent / ("alkstore.exe" if os.name == "nt" else "alkstore")
    if script.exists():
        return [str(script)]
    found = shutil.which("alkstore")
    return [found] if found else [sys.executable, "-m", "alkstore"]


def assert_one_error_line(err: str) -> None:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("alkstore: error: ") or lines[0].startswith("alkstore: "), err
    assert "Traceback" not in err


# ------------------------------------------------------------------ URL choice


def test_migrate_creates_the_schema_and_names_the_engine(
    capsys: pytest.CaptureFixture[str], url: str, tmp_path: Path
) -> None:
    code, out, err = run(capsys, "--url", url, "migrate")
    assert (code, err) == (0, "")
    assert url in out
    assert (tmp_path / "store.db").exists()
    data = run_json(capsys, "migrate", "--url", url)
    assert data["url"] == url
    assert data["engine"] == "alkstore_sqlite"
    assert "queues" in data["capabilities"]


def _older_schema(url: str) -> None:
    """Make the store at *url* as a release with schema version 1 left it."""
    if url.startswith("sqlite"):
        from alkstore_sqlite import _sql as sqlite_sql

        path = url.removeprefix("sqlite:///")
        with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
            for statement in sqlite_sql.MIGRATIONS[1]:
                conn.execute(statement)
            conn.execute(sqlite_sql.SET_VERSION, {"version": "1"})
        return
    import psycopg

    from alkstore_postgres._sql import Statements
    from alkstore_postgres._url import parse_url as pg_parse

    parsed = pg_parse(url)
    st = Statements(parsed.options["schema"])
    with psycopg.connect(parsed.conninfo, autocommit=True) as conn:
        conn.execute(st.create_schema, {})
        for statement in st.migrations[1]:
            conn.execute(statement, {})
        conn.execute(st.set_version, {"version": "1"})


@pytest.mark.clause("E-6")
def test_migrate_says_whether_it_created_upgraded_or_found_the_schema_up_to_date(
    capsys: pytest.CaptureFixture[str], engine_url: str
) -> None:
    """E-6: ``migrate`` reports what it did, on each engine."""
    version = _engine_schema_version(engine_url)
    code, out, err = run(capsys, "--url", engine_url, "migrate")
    assert (code, err) == (0, "")
    assert out.startswith(f"created the schema (version {version}): ")
    code, out, err = run(capsys, "--url", engine_url, "migrate")
    assert (code, err) == (0, "")
    assert out.startswith(f"the schema is up to date (version {version}): ")
    data = run_json(capsys, "--url", engine_url, "migrate")
    assert (data["migration"], data["from_version"], data["version"]) == (
        "up-to-date",
        version,
        version,
    )


@pytest.mark.clause("E-6")
def test_migrate_says_from_which_version_it_upgraded(
    capsys: pytest.CaptureFixture[str], engine_url: str
) -> None:
    version = _engine_schema_version(engine_url)
    _older_schema(engine_url)
    code, out, err = run(capsys, "--url", engine_url, "migrate")
    assert (code, err) == (0, "")
    assert out.startswith(f"upgraded the schema from version 1 to {version}: ")
    assert run_json(capsys, "--url", engine_url, "migrate")["migration"] == "up-to-date"


@pytest.mark.clause("E-6")
def test_migrate_json_reports_a_created_schema(
    capsys: pytest.CaptureFixture[str], engine_url: str
) -> None:
    data = run_json(capsys, "--url", engine_url, "migrate")
    version = _engine_schema_version(engine_url)
    assert (data["migration"], data["from_version"], data["version"]) == ("created", 0, version)


def _engine_schema_version(url: str) -> int:
    if url.startswith("sqlite"):
        from alkstore_sqlite._sql import SCHEMA_VERSION as SQLITE_VERSION

        return SQLITE_VERSION
    from alkstore_postgres._schema import SCHEMA_VERSION as PG_VERSION

    return PG_VERSION


def test_url_comes_from_the_environment(
    capsys: pytest.CaptureFixture[str], url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALKSTORE_URL", url)
    assert run_json(capsys, "migrate")["url"] == url
    # --url wins over the environment.
    other = url.replace("store.db", "other.db")
    assert run_json(capsys, "--url", other, "migrate")["url"] == other


def test_default_url_is_sqlite_in_the_working_directory(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert run_json(capsys, "migrate")["url"] == alkstore.DEFAULT_URL
    assert (tmp_path / "alkstore.db").exists()


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0
    listed = {m.group(1) for m in re.finditer(r"^    (\S+)", out, re.MULTILINE)}
    assert listed == _subcommands()


# -------------------------------------------------------------------- queues


def test_queues_on_an_empty_store(capsys: pytest.CaptureFixture[str], url: str) -> None:
    assert run(capsys, "--url", url, "migrate")[0] == 0
    code, out, _ = run(capsys, "--url", url, "queues")
    assert code == 0
    assert "no queues" in out
    assert run_json(capsys, "--url", url, "queues") == []


def test_queues_counts_every_state(
    capsys: pytest.CaptureFixture[str], url: str, store: Store
) -> None:
    q = store.queue("emails")
    q.enqueue_many([1, 2])
    q.enqueue(3, EnqueueOpts(delay_s=3600))
    claimed = q.claim("w")
    assert claimed is not None
    dead = q.claim("w")
    assert dead is not None and dead.fail("bad")
    store.queue("other").enqueue("x")
    data = run_json(capsys, "--url", url, "queues")
    counts = ("queue", "pending", "scheduled", "processing", "dead")
    assert [{k: row[k] for k in counts} for row in data] == [
        {"queue": "emails", "pending": 0, "scheduled": 1, "processing": 1, "dead": 1},
        {"queue": "other", "pending": 1, "scheduled": 0, "processing": 0, "dead": 0},
    ]
    code, out, _ = run(capsys, "--url", url, "queues")
    assert code == 0
    header, *rows = out.splitlines()
    assert header.split() == ["QUEUE", "PENDING", "SCHEDULED", "PROCESSING", "DEAD", "PAUSED"]
    assert rows[0].split() == ["emails", "0", "1", "1", "1", "no"]


# ------------------------------------------------------------- enqueue / jobs


def test_enqueue_prints_the_id_and_applies_its_options(
    capsys: pytest.CaptureFixture[str], url: str, store: Store
) -> None:
    code, out, err = run(
        capsys,
        "--url",
        url,
        "enqueue",
        "emails",
        '{"to": "a@example.com"}',
        "--priority",
        "7",
        "--delay",
        "600",
        "--max-attempts",
        "5",
        "--visibility-timeout",
        "45",
        "--backoff-base",
        "2",
    )
    assert (code, err) == (0, "")
    job_id = int(out.strip())
    info = store.queue("emails").get_job(job_id)
    assert info is not None
    assert info.payload == {"to": "a@example.com"}
    assert (info.priority, info.max_attempts) == (7, 5)
    assert (info.visibility_timeout_s, info.backoff_base_s) == (45.0, 2.0)
    assert (info.run_at - info.created_at).total_seconds() == pytest.approx(600, abs=1)
    data = run_json(capsys, "--url", url, "enqueue", "emails", "[1, 2]")
    assert data["queue"] == "emails"
    assert store.queue("emails").get_job(data["id"]) is not None


def test_jobs_lists_a_state_as_table_and_json(
    capsys: pytest.CaptureFixture[str], url: str, store: Store
) -> None:
    q = store.queue("emails")
    ids = q.enqueue_many([{"n": n} for n in range(5)])
    data = run_json(capsys, "--url", url, "jobs", "emails")
    assert [j["id"] for j in data] == ids
    first = data[0]
    assert first["state"] == "pending"
    assert first["payload"] == {"n": 0}
    assert first["queue"] == "emails"
    iso(first["created_at"])
    iso(first["run_at"])
    assert first["claimed_at"] is None
    code, out, _ = run(capsys, "--url", url, "jobs", "emails")
    assert code == 0
    assert out.splitlines()[0].split()[:3] == ["ID", "STATE", "ATTEMPTS"]
    assert len(out.splitlines()) == 6


def test_jobs_pages_with_limit_and_after(
    capsys: pytest.CaptureFixture[str], url: str, store: Store
) -> None:
    ids = store.queue("q").enqueue_many(list(range(5)))
    page = run_json(capsys, "--url", url, "jobs", "q", "--limit", "2")
    assert [j["id"] for j in page] == ids[:2]
    page = run_json(capsys, "--url", url, "jobs", "q", "--limit", "2", "--after", str(ids[1]))
    assert [j["id"] for j in page] == ids[2:4]
    code, out, _ = run(capsys, "--url", url, "jobs", "q", "--limit", "2")
    assert code == 0
    assert f"--after {ids[1]}" in out


def test_jobs_shows_processing_and_dead_jobs(
    capsys: pytest.CaptureFixture[str], url: str, store: Store
) -> None:
    q = store.queue("q", QueueOpts(max_attempts=1))
    q.enqueue_many(["a", "b"])
    held = q.claim("worker-7")
    doomed = q.claim("worker-7")
    assert held is not None and doomed is not None
    assert doomed.fail("no such user")
    processing = run_json(capsys, "--url", url, "jobs", "q", "--state", "processing")
    assert [(j["id"], j["worker_id"]) for j in processing] == [(held.id, "worker-7")]
    iso(processing[0]["deadline"])
    dead = run_json(capsys, "--url", url, "jobs", "q", "--state", "dead")
    assert [(j["id"], j["last_error"]) for j in dead] == [(doomed.id, "no such user")]
    iso(dead[0]["died_at"])
    code, out, _ = run(capsys, "--url", url, "jobs", "q", "--state", "dead")
    assert code == 0
    assert "LAST_ERROR" in out and "no such user" in out
    code, out, _ = run(capsys, "--url", url, "jobs", "empty-queue")
    assert code == 0 and "no pending jobs" in out


def test_job_shows_one_job_in_any_state(
    capsys: pytest.CaptureFixture[str], url: str, store: Store
) -> None:
    q = store.queue("q", QueueOpts(max_attempts=1))
    job_id = q.enqueue({"k": "v"})
    job = q.claim("w")
    assert job is not None and job.fail("broken")
    data = run_json(capsys, "--url", url, "job", "q", str(job_id))
    assert data["id"] == job_id
    assert data["state"] == "dead"
    assert data["last_error"] == "broken"
    assert data["payload"] == {"k": "v"}
    iso(data["died_at"])
    code, out, _ = run(capsys, "--url", url, "job", "q", str(job_id))
    assert code == 0
    assert "broken" in out and '{"k": "v"}' in out
    # Handles are scoped to their queue (C-7).
    code, _, err = run(capsys, "--url", url, "job", "other", str(job_id))
    assert code == 1
    assert_one_error_line(err)


def test_outbox_queues_are_reachable_by_their_full_name(
    capsys: pytest.CaptureFixture[str], url: str, store: Store
) -> None:
    store.outbox("hooks").put({"event": "x"})
    names = [q["queue"] for q in run_json(capsys, "--url", url, "queues")]
    assert names == ["__alkstore.outbox.hooks"]
    jobs = run_json(capsys, "--url", url, "jobs", "__alkstore.outbox.hooks")
    assert [j["payload"] for j in jobs] == [{"event": "x"}]


# -------------------------------------------------------------- cancel/sweep


def test_cancel_deletes_once(capsys: pytest.CaptureFixture[str], url: str, store: Store) -> None:
    job_id = store.queue("q").enqueue(1)
    code, out, err = run(capsys, "--url", url, "cancel", "q", str(job_id))
    assert (code, err) == (0, "")
    assert str(job_id) in out
    assert store.queue("q").get_job(job_id) is None
    code, out, err = run(capsys, "--url", url, "cancel", "q", str(job_id))
    assert code == 1
    assert out == ""
    assert len(err.splitlines()) == 1
    code, out, _ = run(capsys, "--url", url, "cancel", "q", str(job_id), "--json")
    assert code == 1
    assert json.loads(out) == {"queue": "q", "id": job_id, "cancelled": False}


@pytest.mark.clause("Q-27")
def test_run_now_makes_a_scheduled_job_ready(
    capsys: pytest.CaptureFixture[str], url: str, store: Store
) -> None:
    """Q-27 in the CLI: run-now --queue Q ID makes a scheduled job claimable at once;
    a job that is not pending (here: claimed) changes nothing and exits 1."""
    q = store.queue("emails")
    later = q.enqueue(1, EnqueueOpts(delay_s=3600))
    assert q.claim("w") is None
    code, out, err = run(capsys, "--url", url, "run-now", "--queue", "emails", str(later))
    assert (code, err) == (0, "") and f"job {later} of queue emails is ready now" in out
    job = q.claim("w")
    assert job is not None and job.id == later
    code, out, _ = run(capsys, "--url", url, "--json", "run-now", "emails", str(later))
    assert code == 1
    assert json.loads(out) == {"queue": "emails", "id": later, "ready": False}
    code, _, err = run(capsys, "--url", url, "run-now", "--queue", "emails", "999")
    assert code == 1 and "is not pending" in err


@pytest.mark.clause("Q-27")
def test_pause_and_resume_a_queue(
    capsys: pytest.CaptureFixture[str], url: str, store: Store
) -> None:
    """Q-27 in the CLI: pause --queue stops claims (and shows in queues), twice is no
    error; resume --queue lets them run again; --json says whether it changed."""
    q = store.queue("emails")
    job_id = q.enqueue(1)
    code, out, err = run(capsys, "--url", url, "pause", "--queue", "emails")
    assert (code, err) == (0, "") and "paused queue emails" in out
    assert q.is_paused() and q.claim("w") is None
    code, out, _ = run(capsys, "--url", url, "pause", "--queue", "emails")
    assert code == 0 and "already paused" in out
    data = run_json(capsys, "--url", url, "queues")
    assert [(r["queue"], r["paused"]) for r in data] == [("emails", True)]
    _, out, _ = run(capsys, "--url", url, "queues")
    assert out.splitlines()[1].split() == ["emails", "1", "0", "0", "0", "yes"]
    data = run_json(capsys, "--url", url, "resume", "--queue", "emails")
    assert data == {"queue": "emails", "paused": False, "changed": True}
    assert not q.is_paused()
    job = q.claim("w")
    assert job is not None and job.id == job_id
    assert run_json(capsys, "--url", url, "resume", "emails") == {
        "queue": "emails",
        "paused": False,
        "changed": False,
    }
    code, _, err = run(capsys, "--url", url, "pause")
    assert code == 2 and "--queue" in err


def test_sweep_one_queue_or_all(capsys: pytest.CaptureFixture[str], url: str, store: Store) -> None:
    for name in ("a", "b"):
        store.queue(name).enqueue(1, EnqueueOpts(expires_s=0.05))
    time.sleep(0.1)
    data = run_json(capsys, "--url", url, "sweep", "a")
    assert data == [{"queue": "a", "expired": 1, "purged": 0, "exhausted": 0, "results": 0}]
    data = run_json(capsys, "--url", url, "sweep", "--all")
    assert data == [
        {"queue": "a", "expired": 0, "purged": 0, "exhausted": 0, "results": 0},
        {"queue": "b", "expired": 1, "purged": 0, "exhausted": 0, "results": 0},
    ]
    info = store.queue("b").list_jobs(JobState.DEAD)
    assert [i.last_error for i in info] == ["expired"]
    code, out, _ = run(capsys, "--url", url, "sweep", "--all")
    assert code == 0 and out.splitlines()[0].split()[0] == "QUEUE"


# ----------------------------------------------------------------- schedules


def test_schedule_schedules_and_unschedule(
    capsys: pytest.CaptureFixture[str], url: str, store: Store
) -> None:
    code, out, _ = run(capsys, "--url", url, "schedules")
    assert code == 0 and "no schedules" in out
    created = run_json(
        capsys, "--url", url, "schedule", "nightly", "0 3 * * *", "maint", '{"task": "sweep"}'
    )
    assert created["name"] == "nightly"
    iso(created["next_fire_at"])
    listed = run_json(capsys, "--url", url, "schedules")
    assert [(s["name"], s["spec"], s["queue"], s["payload"], s["tz"]) for s in listed] == [
        ("nightly", "0 3 * * *", "maint", {"task": "sweep"}, "UTC")
    ]
    assert [s.name for s in store.schedules()] == ["nightly"]
    code, out, _ = run(capsys, "--url", url, "schedules")
    assert code == 0 and "nightly" in out and "0 3 * * *" in out
    code, _, err = run(capsys, "--url", url, "unschedule", "nightly")
    assert (code, err) == (0, "")
    assert store.schedules() == []
    code, _, err = run(capsys, "--url", url, "unschedule", "nightly")
    assert code == 1 and len(err.splitlines()) == 1


# ------------------------------------------------------------------- workers


@pytest.mark.clause("O-5")
def test_workers_lists_the_registered_workers(
    capsys: pytest.CaptureFixture[str], url: str, store: Store
) -> None:
    """O-5: ``alkstore workers`` shows each running worker (id, host, pid, queues,
    concurrency, started, last seen) as a table, or as JSON with --json."""
    from datetime import datetime, timezone

    from alkstore.types import WorkerInfo

    code, out, _ = run(capsys, "--url", url, "workers")
    assert code == 0 and "no workers" in out
    started = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    store.report_worker(WorkerInfo("w-1", "box", 321, ("emails", "sms"), 8, started, "0.1.0"))
    code, out, _ = run(capsys, "--url", url, "workers")
    head, row = out.splitlines()
    assert head.split() == ["ID", "HOST", "PID", "QUEUES", "CONCURRENCY", "STARTED", "LAST_SEEN"]
    assert row.split()[:6] == ["w-1", "box", "321", "emails,sms", "8", "2026-01-02T03:04:05Z"]
    listed = run_json(capsys, "--url", url, "workers")
    assert [(w["id"], w["queues"], w["concurrency"]) for w in listed] == [
        ("w-1", ["emails", "sms"], 8)
    ]
    assert iso(listed[0]["started_at"]) == started
    iso(listed[0]["last_seen"])


# ---------------------------------------------------------------------- demo


def test_demo_runs_on_a_temporary_store_and_leaves_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "demo")
    assert (code, err) == (0, "")
    for needle in ("schema", "transaction", "run_until_empty", "stream", "lock", "dead"):
        assert needle in out
    assert list(tmp_path.iterdir()) == []
    temp_store = out.splitlines()[0].rpartition("sqlite:///")[2]
    assert not Path(temp_store).parent.exists()


def _tables(path: Path) -> set[str]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def test_demo_on_a_given_url_removes_what_it_created(
    capsys: pytest.CaptureFixture[str], url: str, store: Store, tmp_path: Path
) -> None:
    mine = store.queue("mine")
    mine.enqueue({"keep": True})
    store.schedule("my-schedule", "@daily", "mine")
    tables = _tables(tmp_path / "store.db")
    code, out, err = run(capsys, "--url", url, "demo")
    assert (code, err) == (0, "")
    assert "dead letters" in out and "Cleaned up" in out
    code, _, err = run(capsys, "demo", "--url", url)  # twice: no clash with the first run
    assert (code, err) == (0, "")
    # Only what was there before: no demo queue (dead letters included), no
    # schedule, no business table; the stream's events are trimmed.
    assert [s.queue for s in store.queue_stats()] == ["mine"]
    assert [s.name for s in store.schedules()] == ["my-schedule"]
    assert _tables(tmp_path / "store.db") == tables
    with contextlib.closing(sqlite3.connect(tmp_path / "store.db")) as conn:
        (events,) = conn.execute("SELECT count(*) FROM __alkstore_events").fetchone()
    assert events == 0


def test_demo_cleans_up_when_it_stops_half_way(
    capsys: pytest.CaptureFixture[str],
    url: str,
    store: Store,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from alkstore import _demo

    def broken(self: object) -> None:
        raise KeyboardInterrupt

    tables = _tables(tmp_path / "store.db")
    monkeypatch.setattr(_demo._Demo, "streams", broken)
    code, _, _ = run(capsys, "--url", url, "demo")
    assert code == 130
    assert store.queue_stats() == []
    assert _tables(tmp_path / "store.db") == tables


def test_demo_without_sqlite_asks_for_it_or_a_url(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from alkstore import _open

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(_open, "installed_schemes", lambda: ["postgres", "postgresql"])
    code, out, err = run(capsys, "demo")
    assert code == 2 and out == ""
    assert_one_error_line(err)
    assert 'pip install "alkstore[sqlite]"' in err and "--url" in err
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------- read-only


READ_ONLY = [["queues"], ["jobs", "q"], ["job", "q", "1"], ["schedules"]]


@pytest.mark.parametrize("argv", READ_ONLY, ids=" ".join)
def test_read_only_commands_never_create_a_database(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    for url in (None, f"sqlite:///{tmp_path / 'typo.db'}"):
        code, out, err = run(capsys, *(["--url", url] if url else []), *argv)
        assert (code, out) == (1, "")
        assert_one_error_line(err)
        assert "migrate" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", READ_ONLY, ids=" ".join)
def test_read_only_commands_refuse_a_database_without_the_schema(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str]
) -> None:
    path = tmp_path / "app.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
        conn.commit()
    before = path.read_bytes()
    code, out, err = run(capsys, "--url", f"sqlite:///{path}", *argv)
    assert (code, out) == (1, "")
    assert_one_error_line(err)
    assert "alkstore migrate" in err
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]


#: One command line of every command that needs an existing store (E-6):
#: all but ``migrate`` and ``demo``.
EXISTING_STORE_COMMANDS: dict[str, list[str]] = {
    "queues": ["queues"],
    "jobs": ["jobs", "--queue", "q"],
    "job": ["job", "--queue", "q", "1"],
    "enqueue": ["enqueue", "--queue", "q", "{}"],
    "cancel": ["cancel", "--queue", "q", "1"],
    "pause": ["pause", "--queue", "q"],
    "resume": ["resume", "--queue", "q"],
    "run-now": ["run-now", "--queue", "q", "1"],
    "sweep": ["sweep", "--all"],
    "redrive": ["redrive", "emails", "--all", "--yes"],
    "purge": ["purge", "--queue", "q", "--all", "--yes"],
    "worker": ["worker", "json:dumps", "--queue", "q"],
    "metrics": ["metrics"],
    "dashboard": ["dashboard", "--bind", "127.0.0.1:0"],
    "schedules": ["schedules"],
    "schedule": ["schedule", "s", "@daily", "--queue", "q"],
    "unschedule": ["unschedule", "s"],
    "scheduler": ["scheduler"],
    "workers": ["workers"],
}


def _subcommands() -> set[str]:
    from alkstore import cli

    parser = cli._build_parser()
    found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return set(found[0].choices)


def test_every_command_but_migrate_and_demo_needs_an_existing_store() -> None:
    assert _subcommands() == {*EXISTING_STORE_COMMANDS, "migrate", "demo"}


@pytest.mark.clause("E-6")
@pytest.mark.parametrize("argv", EXISTING_STORE_COMMANDS.values(), ids=EXISTING_STORE_COMMANDS)
def test_commands_on_a_store_that_does_not_exist_create_nothing(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
) -> None:
    """E-6: a mistyped SQLite path (or the default one, absent) is one line
    naming it, pointing at ``alkstore migrate``, exit 1, and no new file."""
    monkeypatch.chdir(tmp_path)
    for url, path in ((f"sqlite:///{tmp_path / 'typo.db'}", str(tmp_path / "typo.db")),
                      (None, "alkstore.db")):  # fmt: skip
        code, out, err = run(capsys, *(["--url", url] if url else []), *argv)
        assert (code, out) == (1, ""), err
        assert_one_error_line(err)
        assert f"'{path}'" in err
        assert "`alkstore migrate` creates one" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.clause("E-6")
def test_a_write_on_a_postgres_schema_that_does_not_exist_creates_nothing(
    pg_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import uuid

    import psycopg

    schema = f"alkt_absent_{uuid.uuid4().hex[:8]}"
    sep = "&" if "?" in pg_server else "?"
    url = f"{pg_server}{sep}schema={schema}"
    for argv in (["enqueue", "--queue", "q", "1"], ["sweep", "--all"], ["unschedule", "s"]):
        code, out, err = run(capsys, "--url", url, *argv)
        assert (code, out) == (1, ""), err
        assert_one_error_line(err)
        assert f"schema '{schema}'" in err and "`alkstore migrate` creates one" in err
    with psycopg.connect(pg_server, autocommit=True) as conn:
        found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
    assert found is None


@pytest.mark.clause("E-6")
def test_a_write_command_still_upgrades_an_older_store(
    capsys: pytest.CaptureFixture[str], url: str
) -> None:
    """An existing store of an older schema is a store: a write upgrades it
    as before (only a store that does not exist is refused)."""
    _older_schema(url)
    code, _, err = run(capsys, "--url", url, "enqueue", "--queue", "q", "1")
    assert (code, err) == (0, "")
    assert run_json(capsys, "--url", url, "migrate")["migration"] == "up-to-date"


def test_version_names_the_contract_and_the_installed_engines(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, "--version")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == f"alkstore {alkstore.__version__}"
    assert any(line.startswith("alkstore-sqlite ") and "sqlite" in line for line in lines)
    assert any(line.startswith("alkstore-postgres ") for line in lines)


# -------------------------------------------------------------- passwords

SECRET = "S3cretPW"


@pytest.mark.clause("E-4")
@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://app:{SECRET}@127.0.0.1:1/app?connect_timeout=2",
        f"postgresql://app@127.0.0.1:1/app?password={SECRET}&connect_timeout=2",
        f"sqlite:///x.db?password={SECRET}",
    ],
    ids=["userinfo", "query", "engine-message"],
)
@pytest.mark.parametrize("argv", [["queues"], ["migrate"], ["demo"], ["enqueue", "q", "1"]])
def test_error_messages_never_show_a_password(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    url: str,
    argv: list[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "--url", url, *argv)
    assert code in (1, 2)
    assert_one_error_line(err)
    assert SECRET not in out + err
    assert "***" in err


@pytest.mark.clause("E-4")
def test_log_lines_never_show_a_password(capsys: pytest.CaptureFixture[str]) -> None:
    from alkstore import cli

    root = logging.getLogger()
    handlers = root.handlers[:]
    try:
        root.handlers = []
        cli._configure_logging("info")
        logging.getLogger("alkstore.worker").warning(
            "lost postgresql://app:%s@db/app and host=db password=%s", SECRET, SECRET
        )
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers = handlers
    err = capsys.readouterr().err
    assert SECRET not in err
    assert "postgresql://app:***@db/app" in err and "password=***" in err


# -------------------------------------------------------------------- errors

ERROR_CASES: list[tuple[list[str], int]] = [
    ([], 2),
    (["bogus-command"], 2),
    (["--url", "not-a-url", "queues"], 2),
    (["--url", "mysql://db/app", "queues"], 2),
    (["--url", "sqlite:///:memory:", "queues"], 2),
    (["--url", "sqlite://host/x.db", "queues"], 2),
    (["--url", "sqlite:///{tmp}/no/such/dir/x.db", "queues"], 1),
    (["--url", "{url}", "enqueue", "q", "{not json"], 2),
    (["--url", "{url}", "enqueue", "q", "1", "--delay", "-1"], 2),
    (["--url", "{url}", "enqueue", "q", "1", "--priority", "high"], 2),
    (["--url", "{url}", "enqueue", "__alkstore.mine", "1"], 2),
    (["--url", "{url}", "enqueue", "", "1"], 2),
    (["--url", "{url}", "jobs", "q", "--state", "finished"], 2),
    (["--url", "{url}", "jobs", "q", "--limit", "0"], 2),
    (["--url", "{url}", "jobs"], 2),
    (["--url", "{url}", "job", "q", "seven"], 2),
    (["--url", "{url}", "job", "q", "7"], 1),
    (["--url", "{url}", "cancel", "q", "x"], 2),
    (["--url", "{url}", "sweep"], 2),
    (["--url", "{url}", "sweep", "q", "--all"], 2),
    (["--url", "{url}", "schedule", "s", "every tuesday", "q"], 2),
    (["--url", "{url}", "schedule", "s", "@daily", "q", "--tz", "Mars/Olympus"], 2),
    (["--url", "{url}", "worker", "no_such_module_xyz:handle", "--queue", "q"], 2),
    (["--url", "{url}", "worker", "json", "--queue", "q"], 2),
    (["--url", "{url}", "worker", "json:no_such_function", "--queue", "q"], 2),
    (["--url", "{url}", "worker", "json:__name__", "--queue", "q"], 2),
    (["--url", "{url}", "worker", "json:dumps"], 2),
    (["--url", "{url}", "worker", "json:dumps", "--queue", "q", "--concurrency", "0"], 2),
    (["--url", "{url}", "scheduler", "--lock-ttl", "0"], 2),
    (["--url", "{url}", "redrive"], 2),
    (["--url", "{url}", "redrive", "q"], 2),
    (["--url", "{url}", "redrive", "q", "1", "--all"], 2),
    (["--url", "{url}", "redrive", "q", "one"], 2),
    (["--url", "{url}", "redrive", "q", "--all"], 2),  # stdin is no terminal: needs --yes
    (["--url", "{url}", "redrive", "__alkstore.mine", "1"], 2),
    (["--url", "{url}", "purge", "q"], 2),
    (["--url", "{url}", "purge", "q", "--all"], 2),
    (["--url", "{url}", "purge", "q", "--all", "--yes", "--older-than", "1d"], 2),
    (["--url", "{url}", "purge", "q", "--older-than", "7x"], 2),
    (["--url", "{url}", "purge", "q", "--older-than", "1m1h"], 2),
    (["--url", "{url}", "purge", "--outbox", "", "--all", "--yes"], 2),
    (["--url", "{url}", "jobs", "q", "--state", "later"], 2),
    (["--url", "{url}", "worker", "json:dumps", "--queue", "q", "--rate", "5"], 2),
    (["--url", "{url}", "worker", "json:dumps", "--queue", "q", "--rate", "0/1s"], 2),
    (["--url", "{url}", "worker", "json:dumps", "--queue", "q", "--rate", "5/1x"], 2),
    (["--url", "{url}", "worker", "json:dumps", "--queue", "q", "--rate", "5/0"], 2),
    (["--url", "{url}", "worker", "json:dumps", "--queue", "q", "--burst", "3"], 2),
    (["--url", "{url}", "worker", "json:dumps", "--queue", "q", "--timeout", "-1"], 2),
]


@pytest.mark.parametrize(("argv", "status"), ERROR_CASES, ids=[" ".join(a) for a, _ in ERROR_CASES])
def test_mistakes_print_one_line_and_exit_non_zero(
    capsys: pytest.CaptureFixture[str],
    url: str,
    store: Store,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    status: int,
) -> None:
    """On an existing store (``{url}``), each mistake is one line."""
    monkeypatch.chdir(tmp_path)
    args = [a.replace("{url}", url).replace("{tmp}", str(tmp_path)) for a in argv]
    code, out, err = run(capsys, *args)
    assert code == status, err
    assert out == ""
    assert_one_error_line(err)


@pytest.mark.skipif(not POSIX, reason="runs the console script")
def test_a_real_process_prints_no_traceback(tmp_path: Path) -> None:
    done = subprocess.run(
        [*cli_command(), "--url", "nope", "queues"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert_one_error_line(done.stderr)


# ----------------------------------------------------- dead letters


def _dead_jobs(store: Store, queue: str, n: int) -> list[int]:
    """*n* jobs of *queue* that failed, oldest first."""
    q = store.queue(queue, QueueOpts(max_attempts=1))
    ids = q.enqueue_many([{"n": i} for i in range(n)])
    for job in q.claim_batch("w", n):
        assert job.fail(f"failed {job.payload['n']}")
    return ids


class _Terminal:
    """A stdin that is a terminal and answers *answer* to the prompt."""

    def __init__(self, answer: str) -> None:
        self.answer = answer

    def isatty(self) -> bool:
        return True

    def readline(self) -> str:
        return self.answer + "\n"


def test_redrive_moves_the_listed_dead_jobs_or_all_of_them(
    capsys: pytest.CaptureFixture[str], url: str, store: Store
) -> None:
    a, b, c = _dead_jobs(store, "mail", 3)
    q = store.queue("mail")
    code, out, err = run(capsys, "--url", url, "redrive", "mail", str(a))
    assert (code, err) == (0, "")
    assert "1 dead job" in out
    info = q.get_job(a)
    assert info is not None and (info.state, info.attempts) == (JobState.PENDING, 0)
    # Ids that are not dead jobs of the queue are not counted.
    data = run_json(capsys, "--url", url, "redrive", "mail", str(a), str(b), "999")
    assert data == {"queue": "mail", "redriven": 1}
    data = run_json(capsys, "--url", url, "redrive", "mail", "--all", "--yes")
    assert data == {"queue": "mail", "redriven": 1}
    assert q.stats().dead == 0
    assert [j.id for j in q.list_jobs(JobState.PENDING)] == [a, b, c]


def test_redrive_all_asks_on_a_terminal_and_needs_yes_elsewhere(
    capsys: pytest.CaptureFixture[str], url: str, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    _dead_jobs(store, "mail", 2)
    monkeypatch.setattr(sys, "stdin", _Terminal("n"))
    code, out, err = run(capsys, "--url", url, "redrive", "mail", "--all")
    assert code == 1
    assert "Redrive every dead job of mail (2 now)?" in out
    assert "nothing redriven" in err
    assert store.queue("mail").stats().dead == 2
    monkeypatch.setattr(sys, "stdin", _Terminal("y"))
    code, out, _ = run(capsys, "--url", url, "redrive", "mail", "--all")
    assert code == 0
    assert "redrove 2 dead jobs of mail" in out
    assert store.queue("mail").stats().dead == 0
    # A script or a pipe cannot answer: a usage mistake, nothing moved.
    _dead_jobs(store, "other", 1)
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))
    code, out, err = run(capsys, "--url", url, "redrive", "other", "--all")
    assert (code, out) == (2, "")
    assert_one_error_line(err)
    assert "--yes" in err
    assert store.queue("other").stats().dead == 1


def test_purge_deletes_listed_old_or_all_dead_jobs(
    capsys: pytest.CaptureFixture[str], url: str, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, c, d = _dead_jobs(store, "mail", 4)
    q = store.queue("mail")
    data = run_json(capsys, "--url", url, "purge", "mail", str(a), str(a), "999")
    assert data == {"queue": "mail", "purged": 1}
    # Durations are spelled as in @every.
    for young in ("7d", "1h30m", "30s"):
        assert run_json(capsys, "--url", url, "purge", "mail", "--older-than", young) == {
            "queue": "mail",
            "purged": 0,
        }
    assert run_json(capsys, "--url", url, "purge", "mail", str(b), "--older-than", "0s") == {
        "queue": "mail",
        "purged": 1,
    }
    monkeypatch.setattr(sys, "stdin", _Terminal("yes"))
    code, out, _ = run(capsys, "--url", url, "purge", "mail", "--all")
    assert code == 0
    assert "Delete every dead job of mail (2 now)?" in out
    assert "purged 2 dead jobs of mail" in out
    assert q.stats().dead == 0
    assert (q.get_job(c), q.get_job(d)) == (None, None)


def test_redrive_and_purge_reach_an_outbox_by_its_name(
    capsys: pytest.CaptureFixture[str], url: str, store: Store
) -> None:
    outbox = store.outbox("hooks")
    first, second = outbox.put({"event": 1}), outbox.put({"event": 2})
    for job in outbox.queue.claim_batch("w", 2):
        assert job.fail("endpoint gone")
    data = run_json(capsys, "--url", url, "redrive", "--outbox", "hooks", str(first))
    assert data == {"queue": "__alkstore.outbox.hooks", "redriven": 1}
    code, out, _ = run(capsys, "--url", url, "purge", "--outbox", "hooks", "--all", "--yes")
    assert code == 0
    assert "purged 1 dead job of outbox hooks" in out
    assert outbox.queue.get_job(second) is None
    info = outbox.queue.get_job(first)
    assert info is not None and info.state is JobState.PENDING
    # The backing queue's full name works too, as for `jobs`.
    assert (
        run_json(capsys, "--url", url, "purge", "__alkstore.outbox.hooks", "--all", "--yes")[
            "purged"
        ]
        == 0
    )


def test_jobs_shows_a_delayed_job_as_scheduled(
    capsys: pytest.CaptureFixture[str], url: str, store: Store
) -> None:
    q = store.queue("q")
    ready = q.enqueue("now")
    later = q.enqueue("later", EnqueueOpts(delay_s=3600))
    listed = run_json(capsys, "--url", url, "jobs", "q")
    assert [(j["id"], j["state"]) for j in listed] == [(ready, "pending"), (later, "scheduled")]
    only = run_json(capsys, "--url", url, "jobs", "q", "--state", "scheduled")
    assert [(j["id"], j["state"]) for j in only] == [(later, "scheduled")]
    code, out, _ = run(capsys, "--url", url, "jobs", "q", "--state", "scheduled")
    assert code == 0
    assert out.splitlines()[1].split()[:2] == [str(later), "scheduled"]
    assert run_json(capsys, "--url", url, "job", "q", str(later))["state"] == "scheduled"
    code, out, _ = run(capsys, "--url", url, "jobs", "other", "--state", "scheduled")
    assert (code, out.strip()) == (0, "(no scheduled jobs in other)")


# ----------------------------------------------------- worker and scheduler

HANDLERS = textwrap.dedent(
    """
    import pathlib

    from alkstore import Fail

    def handle(job):
        if job.payload.get("poison"):
            raise Fail("poisoned")
        pathlib.Path(f"done-{job.id}").write_text("ok")
    """
)


def _start(cwd: Path, *args: str, stderr: Any = subprocess.PIPE) -> subprocess.Popen[str]:
    """Start the CLI with *args* in *cwd*, its output piped as text."""
    return subprocess.Popen(
        [*cli_command(), *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )


def _stop(proc: subprocess.Popen[str]) -> str:
    """SIGTERM *proc*, wait for it, and return its stderr."""
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"the process did not stop on SIGTERM: {err}")
    return err


@pytest.mark.skipif(not POSIX, reason="stops the process with SIGTERM")
def test_worker_command_runs_the_handler_until_sigterm(
    tmp_path: Path, url: str, store: Store
) -> None:
    (tmp_path / "handlers.py").write_text(HANDLERS)
    q = store.queue("mail", QueueOpts(max_attempts=2))
    ids = q.enqueue_many([{"n": 1}, {"n": 2}, {"poison": True}])
    proc = _start(
        tmp_path,
        *("--url", url, "worker", "handlers:handle", "--queue", "mail"),
        *("--concurrency", "2", "--log-level", "debug"),
        *("--worker-id", "cli-worker", "--register-every", "0.2"),
    )
    try:
        eventually(lambda: q.stats().live == 0)
        # O-5: registered under its id, its finished count refreshed at --register-every.
        registered = [(w.id, w.queues, w.concurrency) for w in store.workers()]
        assert registered == [("cli-worker", ("mail",), 2)]
        eventually(
            lambda: (
                sum(
                    c.n
                    for c in store.worker_counts()
                    if (c.worker_id, c.outcome) == ("cli-worker", "acked")
                )
                == 2
            )
        )
        later = q.enqueue({"n": 3})  # an idle worker picks up new work
        eventually(lambda: (tmp_path / f"done-{later}").exists())
    finally:
        err = _stop(proc)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert "alkstore.worker" in err  # the worker's log lines
    assert all((tmp_path / f"done-{i}").exists() for i in ids[:2])
    dead = q.list_jobs(JobState.DEAD)
    assert [(d.id, d.last_error) for d in dead] == [(ids[2], "poisoned")]
    assert q.stats().live == 0


@pytest.mark.skipif(not POSIX, reason="stops the process with SIGTERM")
def test_scheduler_command_fires_schedules_until_sigterm(
    tmp_path: Path, url: str, store: Store
) -> None:
    store.schedule("tick", "@every 1s", "ticks", {"from": "cli"})
    proc = _start(tmp_path, "--url", url, "scheduler", "--lock-ttl", "3")
    try:
        eventually(lambda: store.queue("ticks").stats().live >= 1)
    finally:
        err = _stop(proc)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    jobs = store.queue("ticks").list_jobs(JobState.PENDING)
    assert jobs and all(j.payload == {"from": "cli"} for j in jobs)


ORDERED_HANDLERS = textwrap.dedent(
    """
    import json
    import pathlib
    import time

    def handle(job):
        if job.payload.get("slow"):
            time.sleep(1.5)
            return
        with open("order.jsonl", "a") as out:
            # The claim's deadline: claim time plus one visibility timeout,
            # so the gaps are the claims' own (a start can lag its claim).
            out.write(json.dumps([job.queue, job.payload["n"], job.deadline.timestamp()]) + "\\n")
    """
)


@pytest.mark.skipif(not POSIX, reason="stops the process with SIGTERM")
def test_worker_command_serves_queues_in_order_paced_and_with_a_timeout(
    tmp_path: Path, url: str, store: Store
) -> None:
    """`--queue` twice: the first queue empties before the second is served
    (W-10); `--rate 10/1s`: claims paced by a limiter named after the first
    queue (R-1); `--timeout`: a handler running past it has its job retried
    with the timeout as its error (W-11)."""
    (tmp_path / "ordered.py").write_text(ORDERED_HANDLERS)
    first = store.queue("first")
    second = store.queue("second", QueueOpts(max_attempts=1))
    second.enqueue_many([{"n": i} for i in range(3)])
    first.enqueue_many([{"n": i} for i in range(3)])
    slow = second.enqueue({"slow": True}, EnqueueOpts(priority=-1))
    proc = _start(
        tmp_path,
        *("--url", url, "worker", "ordered:handle", "--queue", "first", "--queue", "second"),
        *("--concurrency", "1", "--rate", "10/1s", "--timeout", "0.5", "--no-register"),
    )
    try:
        eventually(lambda: second.stats().dead == 1)
        assert store.workers() == []  # --no-register: never in the registry
    finally:
        err = _stop(proc)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert "queues first, second" in err and "limiter 'first'" in err
    done = [json.loads(line) for line in (tmp_path / "order.jsonl").read_text().splitlines()]
    assert [(q, n) for q, n, _ in done] == [(q, n) for q in ("first", "second") for n in range(3)]
    # Six claims at ten a second, one at a time: at least half a second apart end to end.
    assert done[-1][2] - done[0][2] >= 0.49
    dead = second.get_job(slow)
    assert dead is not None and dead.last_error == "timeout after 0.5 s"


@pytest.mark.skipif(not POSIX, reason="stops the process with SIGTERM")
def test_scheduler_command_logs_fires_and_leader_changes(
    tmp_path: Path, url: str, store: Store
) -> None:
    """The first scheduler leads and logs each fire; a second logs that it
    stands by, and that it leads once the first is stopped (SC-5)."""
    store.schedule("tick", "@every 1s", "ticks", {"from": "cli"})
    standby_log = tmp_path / "sched-b.err"

    def start(owner: str, err: Any = subprocess.PIPE) -> subprocess.Popen[str]:
        args = ("--url", url, "scheduler", "--lock-ttl", "2", "--owner", owner)
        return _start(tmp_path, *args, stderr=err)

    leader = start("sched-a")
    standby: subprocess.Popen[str] | None = None
    try:
        eventually(lambda: store.queue("ticks").stats().live >= 1)
        with standby_log.open("w") as err:  # read while it runs
            standby = start("sched-b", err)
        # It opens, finds the lock held and says so (however long its start
        # takes on a loaded machine).
        eventually(lambda: "scheduler sched-b: standby" in standby_log.read_text())
        leader_err = _stop(leader)
        before = store.queue("ticks").stats().live
        eventually(lambda: store.queue("ticks").stats().live > before)  # b took over
    finally:
        if leader.poll() is None:
            _stop(leader)
        if standby is not None:
            _stop(standby)
        standby_err = standby_log.read_text() if standby_log.exists() else ""
    assert "scheduler sched-a: leader" in leader_err
    assert "schedule tick fired for" in leader_err and "on queue 'ticks'" in leader_err
    assert "scheduler sched-b: standby" in standby_err
    assert "scheduler sched-b: leader" in standby_err
    assert "schedule tick fired for" in standby_err
    assert "Traceback" not in leader_err + standby_err


# ------------------------------------------------------- one spelling of a queue

#: Each command that names a queue, with its --help usage line's words.
QUEUE_COMMANDS = [
    "jobs",
    "job",
    "enqueue",
    "cancel",
    "sweep",
    "redrive",
    "purge",
    "worker",
    "schedule",
]


@pytest.mark.parametrize("command", QUEUE_COMMANDS)
def test_help_shows_the_queue_as_the_queue_option(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    code, out, _ = run(capsys, command, "--help")
    assert code == 0
    usage = out.split("\n\n")[0]
    assert "--queue QUEUE" in usage
    assert re.search(r"(?<!--queue )\bQUEUE\b", usage) is None, usage
    assert "--queue QUEUE" in out.split("options:")[1]


def test_queue_commands_take_queue_or_the_older_word(
    capsys: pytest.CaptureFixture[str], url: str, store: Store
) -> None:
    """Every command spells the queue ``--queue``; where a command took it as
    a word before, that still works (a user's scripts)."""
    new = run_json(capsys, "--url", url, "enqueue", "--queue", "q", '{"n": 1}')
    old = run_json(capsys, "--url", url, "enqueue", "q", '{"n": 2}')
    late = run_json(capsys, "--url", url, "enqueue", '{"n": 3}', "--queue", "q")
    ids = [new["id"], old["id"], late["id"]]
    assert {new["queue"], old["queue"], late["queue"]} == {"q"}
    listed = run_json(capsys, "--url", url, "jobs", "--queue", "q")
    assert [j["payload"] for j in listed] == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert run_json(capsys, "--url", url, "jobs", "q") == listed
    one = run_json(capsys, "--url", url, "job", "--queue", "q", str(ids[0]))
    assert one == run_json(capsys, "--url", url, "job", "q", str(ids[0]))
    assert one["payload"] == {"n": 1}
    assert run_json(capsys, "--url", url, "cancel", "--queue", "q", str(ids[0]))["cancelled"]
    assert run_json(capsys, "--url", url, "cancel", "q", str(ids[1]))["cancelled"]
    assert [j.id for j in store.queue("q").list_jobs(JobState.PENDING)] == [ids[2]]
    assert run_json(capsys, "--url", url, "sweep", "--queue", "q")[0]["queue"] == "q"
    assert run_json(capsys, "--url", url, "sweep", "q")[0]["queue"] == "q"

    dead = _dead_jobs(store, "d", 3)
    assert run_json(capsys, "--url", url, "redrive", "--queue", "d", str(dead[0]))["redriven"] == 1
    assert run_json(capsys, "--url", url, "redrive", "d", str(dead[1]))["redriven"] == 1
    assert run_json(capsys, "--url", url, "purge", str(dead[2]), "--queue", "d")["purged"] == 1

    for argv in (
        ["schedule", "a", "@daily", "--queue", "maint", '{"t": 1}'],
        ["schedule", "b", "@daily", "maint", '{"t": 1}'],
        ["schedule", "c", "@daily", '{"t": 1}', "--queue", "maint"],
    ):
        assert run_json(capsys, "--url", url, *argv)["queue"] == "maint"
    assert [(s.name, s.queue, s.payload) for s in store.schedules()] == [
        (name, "maint", {"t": 1}) for name in "abc"
    ]
    assert (
        run_json(capsys, "--url", url, "schedule", "d", "@daily", "--queue", "m")["payload"] is None
    )


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["schedule", "n", "@daily", "q", "--bogus"], "unrecognized arguments: --bogus"),
        (["jobs", "--queues", "q"], "unrecognized arguments: --queues"),
        (["jobs"], "required: --queue"),
        (["job", "7"], "required: --queue"),
        (["job", "--queue", "a", "b", "7"], "the queue is given twice"),
        (["schedule", "n", "@daily", "--queue", "a", "b", "{}"], "the queue is given twice"),
        (["worker", "json:dumps", "--queue"], "expected one argument"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else "",
)
def test_a_subcommand_mistake_points_at_that_subcommands_help(
    capsys: pytest.CaptureFixture[str], url: str, store: Store, argv: list[str], needle: str
) -> None:
    code, out, err = run(capsys, "--url", url, *argv)
    assert (code, out) == (2, "")
    assert_one_error_line(err)
    assert needle in err
    assert f"(see 'alkstore {argv[0]} --help')" in err


# --------------------------------------------------- a handler that fails to import


def _write_chain(directory: Path, depth: int) -> None:
    """Modules ``chain0`` .. ``chain{depth-1}``, each importing the next; the
    last divides by zero on its line 3."""
    for i in range(depth - 1):
        (directory / f"chain{i}.py").write_text(f"import chain{i + 1}  # noqa\n")
    (directory / f"chain{depth - 1}.py").write_text('"""Broken."""\n\nSETTING = 1 / 0\n')


@pytest.mark.clause("E-6")
def test_a_handler_module_that_fails_to_import_shows_its_file_and_line(
    capsys: pytest.CaptureFixture[str],
    url: str,
    store: Store,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """E-6: the error line, then the module's own traceback (importlib's
    frames left out): the last frames by default, all with debug logging."""
    monkeypatch.syspath_prepend(str(tmp_path))
    _write_chain(tmp_path, 7)
    last = str(tmp_path / "chain6.py")
    code, out, err = run(capsys, "--url", url, "worker", "chain0:handle", "--queue", "q")
    assert (code, out) == (1, "")
    first, *rest = err.splitlines()
    assert first == (
        "alkstore: error: importing 'chain0' failed: ZeroDivisionError: division by zero"
    )
    assert rest[0] == "Traceback (most recent call last, 2 earlier frame(s) not shown):"
    at = rest.index(f'  File "{last}", line 3, in <module>')
    assert rest[at + 1] == "    SETTING = 1 / 0"
    assert [line for line in rest if line.startswith("  File ")] == [
        f'  File "{tmp_path / f"chain{i}.py"}", line {3 if i == 6 else 1}, in <module>'
        for i in range(2, 7)
    ]
    assert "importlib" not in err and "cli.py" not in err
    code, _, err = run(
        capsys, "--url", url, "worker", "chain0:handle", "--queue", "q", "--log-level", "debug"
    )
    assert code == 1
    files = [line for line in err.splitlines() if line.startswith("  File ")]
    assert len(files) == 7 and "not shown" not in err


def test_a_handler_module_with_a_syntax_error_shows_the_line(
    capsys: pytest.CaptureFixture[str],
    url: str,
    store: Store,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "typo_handlers.py").write_text("def handle(job):\n    return job.payload)\n")
    code, out, err = run(capsys, "--url", url, "worker", "typo_handlers:handle", "--queue", "q")
    assert (code, out) == (1, "")
    lines = err.splitlines()
    assert lines[0].startswith("alkstore: error: importing 'typo_handlers' failed: SyntaxError")
    assert f'  File "{tmp_path / "typo_handlers.py"}", line 2' in lines
    assert "    return job.payload)" in lines
