"""The suite wired to the URL given to ``python -m alkstore_conformance``.

Collected only when that command names this file; it reads the URL and the
engine options from the environment the command sets.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator

import pytest

from ._factory import StoreFactory, hooks_for
from .contract import StoreContract

URL_VAR = "ALKSTORE_CONFORMANCE_URL"
OPTS_VAR = "ALKSTORE_CONFORMANCE_OPTS"


class TestEngineAtURL(StoreContract):
    """The whole contract against the engine behind ``$ALKSTORE_CONFORMANCE_URL``."""

    @pytest.fixture
    def store_factory(self, request: pytest.FixtureRequest) -> Iterator[StoreFactory]:
        url = os.environ[URL_VAR]
        opts = json.loads(os.environ.get(OPTS_VAR) or "{}")
        key = re.sub(r"[^a-z0-9]+", "_", request.node.name.lower())[:40]
        factory = StoreFactory(url, opts)
        with hooks_for(factory.scheme).isolated(url, opts, key) as (test_url, test_opts):
            yield StoreFactory(test_url, test_opts)
