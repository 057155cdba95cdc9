"""PostgreSQL fixtures of the contract wirings.

``pg_url``: a server for the session, found or started by
:func:`alkstore_postgres.testing.provide_server` (``$ALKSTORE_PG_DSN``,
``localhost:5432``, a throwaway ``initdb`` cluster, testcontainers). Without
one the tests are skipped with the reason, except under ``CI=true``, where a
missing server is a failure.

``pg_database``: an empty database of the test's own, for tests that run
programs which need a whole database (the examples, the framework and
deployment tests). Each test process creates one database and empties it
between tests instead of creating and dropping one per test: PostgreSQL
forces an immediate checkpoint for every ``DROP DATABASE``, a burst of disk
writes that stalls every other test's commits, and the suite's timed checks
with them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

from alkstore_postgres.testing import provide_server

__all__ = ["pg_database", "pg_url", "scratch_database"]


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """The URL of a PostgreSQL server, for the whole session."""
    with provide_server() as found:
        if found.url is None:
            if os.environ.get("CI", "").lower() == "true":
                pytest.fail(f"CI needs PostgreSQL: {found.reason}", pytrace=False)
            pytest.skip(found.reason)
        yield found.url


# Schemas PostgreSQL itself owns; every other schema of a scratch database
# belongs to the test that used it last.
_SCHEMAS_TO_DROP = """
    SELECT nspname FROM pg_namespace
    WHERE nspname NOT LIKE 'pg\\_%' AND nspname <> 'information_schema'
"""


class ScratchDatabase:
    """One database of this test process, handed out empty to each test."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.name: str | None = None

    def url(self) -> str:
        assert self.name is not None
        return urlunsplit(urlsplit(self.server)._replace(path=f"/{self.name}"))

    def fresh(self) -> str:
        """The URL of the database, created or emptied for the caller."""
        if self.name is not None:
            try:
                self._empty()
            except psycopg.Error:
                self.drop()  # something still holds it: start over with a new one
        if self.name is None:
            self.name = f"alkstore_scratch_{uuid.uuid4().hex[:12]}"
            with psycopg.connect(self.server, autocommit=True) as conn:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.name)))
        return self.url()

    def _empty(self) -> None:
        # The last test's programs may still hold connections (a pooler's
        # server connections, a store left open): end them first.
        with psycopg.connect(self.server, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = %s AND pid <> pg_backend_pid()",
                [self.name],
            )
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute("SET lock_timeout = '5s'")
            with conn.transaction():
                for (schema,) in conn.execute(_SCHEMAS_TO_DROP).fetchall():
                    conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
                conn.execute("CREATE SCHEMA public")

    def drop(self) -> None:
        if self.name is None:
            return
        name, self.name = self.name, None
        with psycopg.connect(self.server, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@pytest.fixture(scope="session")
def scratch_database(pg_url: str) -> Iterator[ScratchDatabase]:
    """This test process's scratch database, dropped when the session ends."""
    scratch = ScratchDatabase(pg_url)
    try:
        yield scratch
    finally:
        scratch.drop()


@pytest.fixture
def pg_database(scratch_database: ScratchDatabase) -> str:
    """The URL of an empty PostgreSQL database of this test's own."""
    return scratch_database.fresh()
