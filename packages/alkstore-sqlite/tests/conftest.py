from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from alkstore_sqlite import SQLiteStore


@pytest.fixture
def db_path(tmp_path: Path) -> str:
    return str(tmp_path / "app.db")


@pytest.fixture
def store(db_path: str) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(db_path)
    try:
        yield opened
    finally:
        opened.close()
