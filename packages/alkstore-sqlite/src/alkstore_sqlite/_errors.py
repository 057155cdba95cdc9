"""The one place where ``sqlite3`` errors become alkstore errors (E-1, E-2, E-3)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from alkstore.errors import AlkstoreError, EngineError, InvalidArgument, TransientError

__all__ = ["BUSY_CODES", "DRIVER_ERRORS", "is_busy", "translate", "translate_errors"]

# Primary result codes; an extended code carries its primary code in the low
# byte (SQLITE_BUSY_SNAPSHOT = SQLITE_BUSY | 2 << 8, and so on).
_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6
#: Every busy or locked code SQLite documents, extended codes included: a
#: retry of the whole operation (or transaction) may succeed (E-2).
BUSY_CODES = frozenset(
    {
        _SQLITE_BUSY,
        _SQLITE_BUSY | 1 << 8,  # SQLITE_BUSY_RECOVERY: another connection recovers the WAL
        _SQLITE_BUSY | 2 << 8,  # SQLITE_BUSY_SNAPSHOT: a read snapshot went stale
        _SQLITE_BUSY | 3 << 8,  # SQLITE_BUSY_TIMEOUT: a blocking lock timed out
        _SQLITE_LOCKED,
        _SQLITE_LOCKED | 1 << 8,  # SQLITE_LOCKED_SHAREDCACHE
        _SQLITE_LOCKED | 2 << 8,  # SQLITE_LOCKED_VTAB
    }
)
# Without the code (Python < 3.11) only the message tells; these are the
# messages of the codes above.
_BUSY_MESSAGES = ("database is locked", "database is busy", "database table is locked")


def is_busy(exc: sqlite3.Error) -> bool:
    """True for "database is locked/busy" in every form: another connection
    held the lock past the busy timeout, or a read snapshot went stale
    (``SQLITE_BUSY_SNAPSHOT``, raised at once). Safe to retry."""
    code = getattr(exc, "sqlite_errorcode", None)  # Python >= 3.11
    if isinstance(code, int):
        return code in BUSY_CODES or code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)
    text = str(exc).lower()
    return any(message in text for message in _BUSY_MESSAGES)


#: What :func:`translate` maps: the driver's errors and the plain errors it
#: raises while binding values.
DRIVER_ERRORS = (sqlite3.Error, UnicodeEncodeError, OverflowError)


def translate(exc: BaseException) -> AlkstoreError:
    """The alkstore error for a driver error (see :func:`translate_errors`);
    the caller raises it ``from exc``."""
    if isinstance(exc, sqlite3.Error):
        if is_busy(exc):
            return TransientError(f"SQLite is busy: {exc}")
        return EngineError(f"SQLite failed: {exc}")
    if isinstance(exc, UnicodeEncodeError):
        return InvalidArgument(f"text SQLite cannot store (not valid UTF-8): {exc.reason}")
    return InvalidArgument(f"a number SQLite cannot store: {exc}")


@contextmanager
def translate_errors() -> Iterator[None]:
    """Wrap every driver error raised inside: ``TransientError`` for busy and
    locked, ``EngineError`` for the rest, the driver error as ``__cause__``.

    ``sqlite3`` refuses some values while binding them with plain Python
    errors: text holding a lone surrogate (``UnicodeEncodeError``) and
    integers beyond 64 bits (``OverflowError``). Those are bad input, so they
    become :class:`InvalidArgument` (E-3); the statement never ran.
    """
    try:
        yield
    except AlkstoreError:
        raise
    except DRIVER_ERRORS as exc:
        raise translate(exc) from exc
