"""The published conformance suite against the in-repo SQLite engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from alkstore_conformance import StoreContract, StoreFactory

from .known_failures import KNOWN_FAILURES


class TestSQLite(StoreContract):
    known_failures = KNOWN_FAILURES

    @pytest.fixture
    def store_factory(self, tmp_path: Path) -> StoreFactory:
        return StoreFactory(f"sqlite:///{tmp_path / 'store.db'}")
