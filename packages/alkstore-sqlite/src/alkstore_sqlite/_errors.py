"""The one place where ``sqlite3`` errors become alkstore errors (E-1, E-2)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from alkstore.errors import AlkstoreError, EngineError, TransientError

__all__ = ["is_busy", "translate_errors"]

# Primary result codes (the low byte of an extended code).
_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6


def is_busy(exc: sqlite3.Error) -> bool:
    """True for "database is locked/busy": another connection held the lock
    past the busy timeout. Safe to retry."""
    code = getattr(exc, "sqlite_errorcode", None)  # Python >= 3.11
    if isinstance(code, int):
        return code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)
    text = str(exc).lower()
    return "database is locked" in text or "database is busy" in text or "locked" in text


@contextmanager
def translate_errors() -> Iterator[None]:
    """Wrap every driver error raised inside: ``TransientError`` for busy and
    locked, ``EngineError`` for the rest, the driver error as ``__cause__``."""
    try:
        yield
    except AlkstoreError:
        raise
    except sqlite3.Error as exc:
        if is_busy(exc):
            raise TransientError(f"SQLite is busy: {exc}") from exc
        raise EngineError(f"SQLite failed: {exc}") from exc
