"""The published conformance suite against the in-repo SQLite engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from alkstore_conformance import StoreContract, StoreFactory


class TestSQLite(StoreContract):
    @pytest.fixture
    def store_factory(self, tmp_path: Path) -> StoreFactory:
        return StoreFactory(f"sqlite:///{tmp_path / 'store.db'}")
