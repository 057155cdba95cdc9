"""What the engine's tests share: a server they need, the stores they open."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from alkstore_postgres import PostgresStore
from alkstore_postgres.testing import ServerSearch

Opener = Callable[..., PostgresStore]


def found_url(found: ServerSearch, what: str) -> str:
    """The URL *found*; without one the test is skipped, or failed under CI
    (which must have *what*)."""
    if found.url is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI needs {what}: {found.reason}", pytrace=False)
        pytest.skip(found.reason)
    return found.url


@contextmanager
def opener(url: str, opts: dict[str, Any]) -> Iterator[Opener]:
    """Opens stores on *url* with *opts* (keywords may override them);
    closes them all on the way out."""
    opened: list[PostgresStore] = []

    def factory(**more: Any) -> PostgresStore:
        store = PostgresStore(url, **{**opts, **more})
        opened.append(store)
        return store

    try:
        yield factory
    finally:
        for store in opened:
            store.close()
