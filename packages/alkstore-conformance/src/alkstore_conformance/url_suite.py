"""The suite wired to the URL given to ``python -m alkstore_conformance``.

Collected only when that command names this file; it reads the URL and the
engine options from the environment the command sets. Each test gets a fresh
database from the engine's ``isolated`` hook. An engine without that hook
shares the URL's one database between all tests, and the tests that read
database-wide state skip, saying so (P-4).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator

import pytest

from ._factory import StoreFactory, hooks_for, hooks_of
from .contract import StoreContract
from .contract_scheduler import SchedulerContract

URL_VAR = "ALKSTORE_CONFORMANCE_URL"
OPTS_VAR = "ALKSTORE_CONFORMANCE_OPTS"


class TestEngineAtURL(StoreContract):
    """The whole contract against the engine behind ``$ALKSTORE_CONFORMANCE_URL``."""

    #: Tests that need a database no other test wrote to: the scheduler's
    #: (ticks fire every due schedule of the database), a first open, and a
    #: check that nothing at all was scheduled. Area tests may carry the
    #: ``fresh_database`` mark themselves instead.
    fresh_database_tests = frozenset(
        {name for name in vars(SchedulerContract) if name.startswith("test_")}
        | {
            "test_processes_opening_a_fresh_database_at_once_all_succeed",
            "test_bad_names_are_refused_everywhere",
        }
    )

    @pytest.fixture
    def store_factory(self, request: pytest.FixtureRequest) -> Iterator[StoreFactory]:
        url = os.environ[URL_VAR]
        opts = json.loads(os.environ.get(OPTS_VAR) or "{}")
        key = re.sub(r"[^a-z0-9]+", "_", request.node.name.lower())[:40]
        scheme = StoreFactory(url).scheme
        shared = "isolated" not in hooks_of(scheme)
        with hooks_for(scheme).isolated(url, opts, key) as (test_url, test_opts):
            yield StoreFactory(test_url, test_opts, shared_database=shared)
