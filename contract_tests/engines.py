"""Both in-repo engines behind one fixture, and raw access to their tables.

The repository's own property, fault and chaos tests run on each engine
through :func:`engine`. :class:`Raw` reaches the engine's tables directly
(``sqlite3``, ``psycopg``) to write what the contract never would: a row
whose payload no reader can decode, written around the contract (C-3).
"""

from __future__ import annotations

import re
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from alkstore_conformance import StoreFactory
from alkstore_postgres.testing import HOOKS as PG_HOOKS

__all__ = ["ENGINES", "Engine", "Raw", "engine", "poison_texts"]

ENGINES = ["sqlite", "postgres"]
# The engine tables whose row counts show whether a call wrote anything.
_COMMON_TABLES = ["jobs", "dead", "streams", "events", "consumers", "locks", "schedules"]
_TABLES = {"sqlite": [*_COMMON_TABLES, "notifications"], "postgres": _COMMON_TABLES}


def poison_texts() -> dict[str, str]:
    """Stored payload texts that are valid JSON to the database (PostgreSQL
    checks ``json`` columns) but that Python's ``json.loads`` refuses."""
    return {
        "deep": "[" * 3000 + "1" + "]" * 3000,
        "long-int": '{"n": ' + "7" * 5000 + "}",
    }


@dataclass(frozen=True)
class Raw:
    """Direct access to one engine's tables on the test's database."""

    kind: str
    factory: StoreFactory

    @property
    def schema(self) -> str:
        return str(self.factory.opts.get("schema", "alkstore"))

    @contextmanager
    def _pg(self) -> Iterator[psycopg.Connection[Any]]:
        from alkstore_postgres._url import parse_url

        with psycopg.connect(parse_url(self.factory.url).conninfo, autocommit=True) as conn:
            yield conn

    @contextmanager
    def _sqlite(self) -> Iterator[sqlite3.Connection]:
        path = self.factory.url.partition("://")[2][1:].partition("?")[0]
        conn = sqlite3.connect(path, isolation_level=None, timeout=10)
        try:
            yield conn
        finally:
            conn.close()

    def set_job_payload(self, job_id: int, text: str) -> None:
        """Overwrite a live job's stored payload text."""
        if self.kind == "sqlite":
            with self._sqlite() as conn:
                conn.execute("UPDATE __alkstore_jobs SET payload = ? WHERE id = ?", (text, job_id))
            return
        with self._pg() as conn:
            conn.execute(
                sql.SQL("UPDATE {}.jobs SET payload = %s::json WHERE id = %s").format(
                    sql.Identifier(self.schema)
                ),
                (text, job_id),
            )

    def set_event_payload(self, stream: str, offset: int, text: str) -> None:
        if self.kind == "sqlite":
            with self._sqlite() as conn:
                conn.execute(
                    "UPDATE __alkstore_events SET payload = ? WHERE stream = ? AND seq = ?",
                    (text, stream, offset),
                )
            return
        with self._pg() as conn:
            conn.execute(
                sql.SQL(
                    "UPDATE {}.events SET payload = %s::json WHERE stream = %s AND seq = %s"
                ).format(sql.Identifier(self.schema)),
                (text, stream, offset),
            )

    def set_schedule_payload(self, name: str, text: str) -> None:
        if self.kind == "sqlite":
            with self._sqlite() as conn:
                conn.execute(
                    "UPDATE __alkstore_schedules SET payload = ? WHERE name = ?", (text, name)
                )
            return
        with self._pg() as conn:
            conn.execute(
                sql.SQL("UPDATE {}.schedules SET payload = %s::json WHERE name = %s").format(
                    sql.Identifier(self.schema)
                ),
                (text, name),
            )

    def send_notification(self, channel: str, text: str) -> None:
        """A notification on *channel* whose stored or sent payload is *text*."""
        if self.kind == "sqlite":
            with self._sqlite() as conn:
                conn.execute(
                    "INSERT INTO __alkstore_notifications (channel, payload, created_at) "
                    "VALUES (?, ?, ?)",
                    (channel, text, int(time.time() * 1_000_000)),
                )
            return
        from alkstore_postgres._ops import user_channel

        with self._pg() as conn:
            conn.execute(
                "SELECT pg_notify(%s, %s)",
                (user_channel(self.schema, channel), f"{uuid.uuid4().hex[:12]}:{text}"),
            )

    @contextmanager
    def counter(self) -> Iterator[Callable[[], dict[str, int]]]:
        """A function that counts the rows of every engine table, on one
        connection kept open for the block (cheap enough to call around
        every operation of a fuzz run)."""
        tables = _TABLES[self.kind]
        if self.kind == "sqlite":
            with self._sqlite() as conn:
                query = "SELECT " + ", ".join(
                    f"(SELECT count(*) FROM __alkstore_{t})" for t in tables
                )
                yield lambda: dict(zip(tables, conn.execute(query).fetchone(), strict=True))
            return
        with self._pg() as pg:
            composed = sql.SQL("SELECT ") + sql.SQL(", ").join(
                sql.SQL("(SELECT count(*) FROM {}.{})").format(
                    sql.Identifier(self.schema), sql.Identifier(t)
                )
                for t in tables
            )

            def count() -> dict[str, int]:
                row = pg.execute(composed).fetchone()
                assert row is not None
                return dict(zip(tables, row, strict=True))

            yield count

    def count(self, table: str) -> int:
        """Rows in one engine table (``jobs``, ``dead``, ``events``, ``notifications``...)."""
        if self.kind == "sqlite":
            with self._sqlite() as conn:
                (n,) = conn.execute(f"SELECT count(*) FROM __alkstore_{table}").fetchone()
                return int(n)
        with self._pg() as conn:
            row = conn.execute(
                sql.SQL("SELECT count(*) FROM {}.{}").format(
                    sql.Identifier(self.schema), sql.Identifier(table)
                )
            ).fetchone()
            assert row is not None
            return int(row[0])


@dataclass(frozen=True)
class Engine:
    """One engine on a fresh isolated database."""

    kind: str
    factory: StoreFactory

    @property
    def raw(self) -> Raw:
        return Raw(self.kind, self.factory)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9_]+", "_", text.lower()).strip("_")[:30] or "t"


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """Each in-repo engine on a fresh database: a new SQLite file, or a new
    schema on the session's PostgreSQL server."""
    if request.param == "sqlite":
        yield Engine("sqlite", StoreFactory(f"sqlite:///{tmp_path / 'store.db'}"))
        return
    pg_url: str = request.getfixturevalue("pg_url")
    with PG_HOOKS.isolated(pg_url, {}, _slug(request.node.name)) as (url, opts):
        yield Engine("postgres", StoreFactory(url, opts))
