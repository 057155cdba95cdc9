"""The documentation's examples run, on both engines (docs/examples/).

Each example runs in a fresh process from an empty directory: on SQLite
with the embedded default URL, on PostgreSQL against a fresh database.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
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


@pytest.fixture
def fresh_database(pg_url: str) -> Iterator[str]:
    name = f"alkstore_example_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(urlsplit(pg_url)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs_on_postgres(example: Path, tmp_path: Path, fresh_database: str) -> None:
    _run(example, tmp_path, fresh_database)
