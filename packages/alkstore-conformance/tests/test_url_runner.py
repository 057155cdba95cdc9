"""``python -m alkstore_conformance URL``: the suite against an engine by URL."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "alkstore_conformance", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _run_on_sqlite(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """:func:`_run` against a SQLite file in *tmp_path*, from *tmp_path*."""
    return _run(f"sqlite:///{tmp_path / 'x.db'}", *args, cwd=tmp_path)


def test_runs_the_suite_against_a_sqlite_url(tmp_path: Path) -> None:
    chosen = "every_rule or payloads_round_trip or threads_share"
    done = _run_on_sqlite(tmp_path, "-q", "-k", chosen)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "8 passed" in done.stdout  # four tests, each through both faces
    # Each test got its own file, removed afterwards.
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_engine_options_reach_the_engine(tmp_path: Path) -> None:
    opts = '{"synchronous": "normal"}'
    done = _run_on_sqlite(tmp_path, "--engine-opts", opts, "-q", "-k", "every_rule")
    assert done.returncode == 0, done.stdout + done.stderr
    bad = _run_on_sqlite(tmp_path, "--engine-opts", '{"nope": 1}', "-q")
    assert bad.returncode != 0


def test_bad_invocations_exit_2_with_one_line(tmp_path: Path) -> None:
    for args in (["not-a-url"], ["sqlite:///x.db", "--engine-opts", "{bad json"]):
        done = _run(*args, cwd=tmp_path)
        assert done.returncode == 2
        assert len(done.stderr.strip().splitlines()) == 1
        assert "Traceback" not in done.stderr


@pytest.mark.clause("P-4")
def test_unknown_scheme_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = _run("nosuchdb://app:S3cret@host/db", "-q", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "'nosuchdb'" in lines[0] and "sqlite" in lines[0]  # names the installed schemes
    assert "S3cret" not in done.stderr
    assert list(tmp_path.iterdir()) == []
