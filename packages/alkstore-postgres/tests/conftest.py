"""Fixtures of the PostgreSQL engine's own tests: a server for the session
(as in ``contract_tests/pg_server.py``) and a fresh schema per test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from fix_server import found_url, opener
from psycopg import sql

from alkstore_postgres import PostgresStore
from alkstore_postgres._sql import Statements
from alkstore_postgres.testing import HOOKS, provide_server


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """The URL of a PostgreSQL server; skipped without one, failed under CI."""
    with provide_server() as found:
        yield found_url(found, "PostgreSQL")


@pytest.fixture
def schema(pg_url: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh schema name, dropped after the test."""
    with HOOKS.isolated(pg_url, {}, request.node.name) as (_, opts):
        yield str(opts["schema"])


@pytest.fixture
def open_store(pg_url: str, schema: str) -> Iterator[Callable[..., PostgresStore]]:
    """Opens stores on the test's schema (options may override it); closes
    them all afterwards."""
    with opener(pg_url, {"schema": schema}) as factory:
        yield factory


@pytest.fixture
def store(open_store: Callable[..., PostgresStore]) -> PostgresStore:
    return open_store()


@pytest.fixture
def admin(pg_url: str) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
    """A plain autocommit connection to the server."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        yield conn


@pytest.fixture
def old_schema(admin: psycopg.Connection[tuple[Any, ...]], schema: str) -> Callable[..., None]:
    """``old_schema(version, max_attempts=5, job=True)``: make the test's
    schema as the release of schema *version* left it, holding (with *job*)
    one pending job with payload ``"old"``, for upgrade tests."""

    def make(version: int, max_attempts: int = 5, job: bool = True) -> None:
        st = Statements(schema)
        admin.execute(st.create_schema, {})
        for step in range(1, version + 1):
            for statement in st.migrations[step]:
                admin.execute(
                    statement, {"store_id": "old-store", "schema": schema, "width": "3600"}
                )
        admin.execute(st.set_version, {"version": str(version)})
        if job:
            admin.execute(
                sql.SQL(
                    "INSERT INTO {} (queue, state, payload, priority, run_at, ready_at, "
                    "created_at, attempts, max_attempts, visibility_timeout_s, backoff_base_s) "
                    "VALUES ('q', 'pending', '\"old\"', 0, now(), now(), now(), 0, %s, 30, 1)"
                ).format(sql.Identifier(schema, "jobs")),
                (max_attempts,),
            )

    return make
