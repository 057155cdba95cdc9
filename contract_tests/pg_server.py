"""The ``pg_url`` fixture: a PostgreSQL server for the session.

Found or started by :func:`alkstore_postgres.testing.provide_server`
(``$ALKSTORE_PG_DSN``, ``localhost:5432``, a throwaway ``initdb`` cluster,
testcontainers). Without one the tests are skipped with the reason, except
under ``CI=true``, where a missing server is a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from alkstore_postgres.testing import provide_server

__all__ = ["pg_url"]


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """The URL of a PostgreSQL server, for the whole session."""
    with provide_server() as found:
        if found.url is None:
            if os.environ.get("CI", "").lower() == "true":
                pytest.fail(f"CI needs PostgreSQL: {found.reason}", pytrace=False)
            pytest.skip(found.reason)
        yield found.url
