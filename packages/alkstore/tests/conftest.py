"""Fixtures of the contract package's own tests (CLI, specs, types).

The CLI tests run against the SQLite engine, which the development
environment installs; each test gets its own database file. Tests that run
on each engine take ``engine_url``: a new SQLite file, or a new schema on
the PostgreSQL server the engine's test helpers find.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import alkstore
from alkstore import Store

ENGINES = ["sqlite", "postgres"]


@pytest.fixture
def url(tmp_path: Path) -> str:
    """A store URL on a fresh SQLite file in the test's directory (each
    engine's, in the observability tests)."""
    return f"sqlite:///{tmp_path / 'store.db'}"


@pytest.fixture
def store(url: str) -> Iterator[Store]:
    """An open store (schema created) at *url*."""
    with alkstore.open(url) as opened:
        yield opened


#: ``main(argv)`` run in-process: exit status, stdout, stderr.
CliRun = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]) -> CliRun:
    """Run the ``alkstore`` command in this process with *argv*."""
    from alkstore.cli import main

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture(autouse=True)
def _no_ambient_url(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never pick up a developer's ``$ALKSTORE_URL``."""
    monkeypatch.delenv("ALKSTORE_URL", raising=False)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """The URL of a PostgreSQL server; skipped without one, failed under CI."""
    from alkstore_postgres.testing import provide_server

    with provide_server() as found:
        if found.url is None:
            if os.environ.get("CI", "").lower() == "true":
                pytest.fail(f"CI needs PostgreSQL: {found.reason}", pytrace=False)
            pytest.skip(found.reason)
        yield found.url


@pytest.fixture(params=ENGINES)
def engine_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL of a fresh, empty store on each engine (no schema yet): a new
    SQLite file, or a new PostgreSQL schema dropped afterwards."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    from alkstore_postgres.testing import HOOKS

    server: str = request.getfixturevalue("pg_server")
    with HOOKS.isolated(server, {}, request.node.name) as (url, opts):
        sep = "&" if "?" in url else "?"
        yield f"{url}{sep}schema={opts['schema']}"
