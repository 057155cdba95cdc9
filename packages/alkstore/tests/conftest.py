"""Fixtures of the contract package's own tests (CLI, specs, types).

The CLI tests run against the SQLite engine, which the development
environment installs; each test gets its own database file.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def url(tmp_path: Path) -> str:
    """A store URL on a fresh SQLite file in the test's directory."""
    return f"sqlite:///{tmp_path / 'store.db'}"


@pytest.fixture(autouse=True)
def _no_ambient_url(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never pick up a developer's ``$ALKSTORE_URL``."""
    monkeypatch.delenv("ALKSTORE_URL", raising=False)
