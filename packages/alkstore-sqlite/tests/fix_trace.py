"""What the SQLite engine's own tests read of the statements it runs (the
``traced`` fixture of ``conftest.py``)."""

from __future__ import annotations

import threading

__all__ = ["Traced"]


class Traced:
    """Every statement the engine's connections run, in order (SQLite's trace
    callback on each connection opened after the fixture is set up)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: list[str] = []

    def add(self, statement: str) -> None:
        with self._lock:
            self._seen.append(statement)

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()

    def seen(self) -> list[str]:
        with self._lock:
            return list(self._seen)
