"""The published suite against the example engine, in one file."""

from pathlib import Path

import pytest

from alkstore_conformance import StoreContract, StoreFactory


class TestDelegateSQLite(StoreContract):
    # Known failures would go here, as strict xfails:
    # known_failures = {"test_name": "reason"}

    @pytest.fixture
    def store_factory(self, tmp_path: Path) -> StoreFactory:
        # A fresh database per test; the factory pickles into child processes.
        return StoreFactory(f"delegate-sqlite:///{tmp_path / 'store.db'}")
