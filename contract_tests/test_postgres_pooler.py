"""The published conformance suite against the PostgreSQL engine behind a
real PgBouncer in transaction mode (EN-4).

The bouncer is Debian's ``pgbouncer`` program, started for the session by
:func:`alkstore_postgres.testing.provide_pgbouncer` in front of the session's
server. ``TestPostgresPooler`` runs the whole suite in pooler mode with wakes
from the poller (no LISTEN anywhere; notifications are not declared, so
their tests are skipped and their calls must be refused);
``TestPostgresPoolerListen`` runs the notification and wake tests again with
``listen_url=`` pointing past the bouncer.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from alkstore_conformance import NotificationContract, StoreContract, StoreFactory
from alkstore_postgres.testing import HOOKS, provide_pgbouncer


@pytest.fixture(scope="session")
def bouncer_url(pg_url: str) -> Iterator[str]:
    """A PgBouncer (transaction mode) in front of the session's server."""
    with provide_pgbouncer(pg_url) as found:
        if found.url is None:
            if os.environ.get("CI", "").lower() == "true":
                pytest.fail(f"CI needs PgBouncer: {found.reason}", pytrace=False)
            pytest.skip(found.reason)
        yield found.url


class TestPostgresPooler(StoreContract):
    @pytest.fixture
    def store_factory(
        self, bouncer_url: str, request: pytest.FixtureRequest
    ) -> Iterator[StoreFactory]:
        with HOOKS.isolated(bouncer_url, {"pooler": True}, request.node.name) as (url, opts):
            yield StoreFactory(url, opts)


class TestPostgresPoolerListen(NotificationContract):
    @pytest.fixture
    def store_factory(
        self, bouncer_url: str, pg_url: str, request: pytest.FixtureRequest
    ) -> Iterator[StoreFactory]:
        base = {"pooler": True, "listen_url": pg_url}
        with HOOKS.isolated(bouncer_url, base, request.node.name) as (url, opts):
            yield StoreFactory(url, opts)
