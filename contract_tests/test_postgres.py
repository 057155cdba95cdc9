"""The published conformance suite against the in-repo PostgreSQL engine.

Each test gets a fresh schema on the session's server (see ``pg_server``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from alkstore_conformance import StoreContract, StoreFactory
from alkstore_postgres.testing import HOOKS

from .known_failures import KNOWN_FAILURES


class TestPostgres(StoreContract):
    known_failures = KNOWN_FAILURES

    @pytest.fixture
    def store_factory(self, pg_url: str, request: pytest.FixtureRequest) -> Iterator[StoreFactory]:
        with HOOKS.isolated(pg_url, {}, request.node.name) as (url, opts):
            yield StoreFactory(url, opts)
