from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fix_trace import Traced

from alkstore_sqlite import SQLiteStore, _conn, _sql


@pytest.fixture
def db_path(tmp_path: Path) -> str:
    return str(tmp_path / "app.db")


@pytest.fixture
def store(db_path: str) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(db_path)
    try:
        yield opened
    finally:
        opened.close()


#: Writes, at a path, a database file as an older release left it.
OldFile = Callable[[int], None]


@pytest.fixture
def old_file(db_path: str) -> OldFile:
    """``old_file(version)``: make *db_path* a file as the release of schema
    *version* left it, holding one pending job (id 1), for upgrade tests."""

    def make(version: int) -> None:
        conn = sqlite3.connect(db_path, isolation_level=None)
        try:
            for step in range(1, version + 1):
                for statement in _sql.MIGRATIONS[step]:
                    conn.execute(statement)
            conn.execute(_sql.SET_VERSION, {"version": str(version)})
            conn.execute(
                "INSERT INTO __alkstore_jobs (queue, state, payload, priority, run_at, "
                "ready_at, created_at, max_attempts, visibility_timeout_s, backoff_base_s) "
                "VALUES ('q', 'pending', '\"old\"', 0, 0, 0, 0, 3, 30, 1)"
            )
        finally:
            conn.close()

    return make


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> Traced:
    """The statements of the stores the test opens (see :class:`Traced`)."""
    found = Traced()
    real_connect = _conn.connect

    def tracing_connect(path: str, busy: float, sync: str) -> sqlite3.Connection:
        conn = real_connect(path, busy, sync)
        conn.set_trace_callback(found.add)
        return conn

    monkeypatch.setattr(_conn, "connect", tracing_connect)
    return found
