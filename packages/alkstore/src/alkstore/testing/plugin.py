"""The pytest plugin of ``alkstore.testing`` (SPEC FW-2), registered under the
``pytest11`` entry point as ``alkstore``: pytest loads it in every project
that has alkstore installed. Its fixtures are plain names a project's own
``conftest.py`` may define again: a fixture of the same name there wins.

- ``store_url``: the URL of a fresh store for this test alone (see
  :func:`alkstore.testing.isolated_url`): a new SQLite file in ``tmp_path``,
  or a part of its own of the store at ``$ALKSTORE_TEST_URL`` (a new schema
  on PostgreSQL), removed after the test.
- ``store``: ``alkstore.open(store_url)``, migrated, closed after the test.
- ``async_store``: ``await alkstore.open_async(store_url)``, the same
  database as ``store`` in the same test. An async fixture: it needs the
  plugin that runs the test's event loop (anyio's, with
  ``@pytest.mark.anyio``; or pytest-asyncio in ``auto`` mode; in its strict
  mode, redefine it with ``@pytest_asyncio.fixture``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

import alkstore
from alkstore.protocols import AsyncStore, Store

from ._stores import TEST_URL_VAR, isolated_url

__all__ = ["async_store", "store", "store_url"]


@pytest.fixture
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of a store of this test's own (alkstore.testing, FW-2): a new
    SQLite file in ``tmp_path``, or an isolated part of ``$ALKSTORE_TEST_URL``."""
    with isolated_url(os.environ.get(TEST_URL_VAR), tmp_path, request.node.name) as url:
        yield url


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """A fresh, migrated store for this test (alkstore.testing, FW-2); closed afterwards."""
    with contextlib.closing(alkstore.open(store_url)) as opened:
        yield opened


@pytest.fixture
async def async_store(store_url: str) -> AsyncIterator[AsyncStore]:
    """The async face of this test's store (alkstore.testing, FW-2); needs an
    async test plugin (anyio's or pytest-asyncio)."""
    opened = await alkstore.open_async(store_url)
    try:
        yield opened
    finally:
        await opened.close()
