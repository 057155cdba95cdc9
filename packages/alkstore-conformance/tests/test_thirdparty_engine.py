"""P-4: a third-party engine with nothing but its ``alkstore.engines`` entry
point passes the published suite.

The example engine in ``thirdparty/`` (``delegate-sqlite://`` URLs, served by
the SQLite engine) is copied out of the checkout, installed with pip into a
directory of its own, and its one-file wiring is run in a fresh pytest
process, as its author would. The engine registers no conformance hooks, so
the tests that need them must skip and say why.

The normal run takes a representative part of the suite (every area that
needs a hook, the coverage check, cross-process tests); set
``ALKSTORE_THIRDPARTY_FULL=1`` to run all of it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
FULL = os.environ.get("ALKSTORE_THIRDPARTY_FULL") == "1"
SUBSET = (
    "LifecycleContract or ErrorContract or CoverageContract or BasicsContract"
    " or TransactionContract or StreamContract or LockContract"
    " or (QueueContract and (process or order or exhaust))"
)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The example project copied out of the checkout and installed into a
    directory of its own: ``(project, environment)``."""
    root = tmp_path_factory.mktemp("thirdparty")
    project = root / "alkstore-delegate"
    shutil.copytree(HERE / "thirdparty", project)
    site = root / "site"
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"),
            *("--no-build-isolation", "--no-cache-dir", "--target", str(site), str(project)),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    shutil.rmtree(project / "src")  # only the installed copy is importable
    env = {**os.environ, "PYTHONPATH": str(site)}
    return project, env


def _pytest(
    cwd: Path, env: dict[str, str], *args: str, module: str = "pytest"
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )


@pytest.mark.clause("P-4")
def test_one_file_wiring_passes_the_suite(installed: tuple[Path, dict[str, str]]) -> None:
    project, env = installed
    select = [] if FULL else ["-k", SUBSET]
    done = _pytest(project, env, "tests", "-q", "-rs", "-p", "no:cacheprovider", *select)
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    assert re.search(r"\b\d+ passed\b", report), report
    assert not re.search(r"\b\d+ (failed|errors?)\b", report), report
    # The two tests that need engine hooks skip, naming the hook.
    for hook in ("transient_failure", "future_schema"):
        assert f"needs the engine hook {hook}()" in report, report


@pytest.mark.clause("P-4")
def test_url_runner_runs_a_hookless_engine(
    installed: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    _, env = installed
    url = f"delegate-sqlite:///{tmp_path / 'shared.db'}"
    select = [] if FULL else ["-k", "LifecycleContract or SchedulerContract or BasicsContract"]
    done = _pytest(tmp_path, env, url, "-q", "-rs", *select, module="alkstore_conformance")
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    # Without an isolated() hook every test shares the URL's database, and
    # the tests that read database-wide state skip, saying so.
    assert "needs the engine hook isolated()" in report, report
    assert "needs the engine hook future_schema()" in report, report
