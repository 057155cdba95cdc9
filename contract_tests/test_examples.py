"""The documentation's examples run, on both engines (docs/examples/).

Each example runs in a fresh process from an empty directory: on SQLite
with the embedded default URL, on PostgreSQL against an empty database of
its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "docs" / "examples").glob("*.py"))


def _run(example: Path, cwd: Path, url: str | None) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ALKSTORE_URL"}
    if url is not None:
        env["ALKSTORE_URL"] = url
    done = subprocess.run(
        [sys.executable, str(example)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"{example.name} failed:\n{done.stdout}\n{done.stderr}"
    assert done.stdout.strip(), f"{example.name} printed nothing"


def test_every_example_is_collected() -> None:
    assert {p.stem for p in EXAMPLES} >= {
        "quickstart",
        "job_control",
        "streams",
        "locks",
        "notifications",
        "outbox",
        "scheduler",
        "async_worker",
        "worker",
        "fastapi_sqlalchemy",
        "fastapi_psycopg",
        "django_async",
    }


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs_on_the_embedded_default(example: Path, tmp_path: Path) -> None:
    _run(example, tmp_path, None)
    assert (tmp_path / "alkstore.db").exists()


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs_on_postgres(example: Path, tmp_path: Path, pg_database: str) -> None:
    _run(example, tmp_path, pg_database)
