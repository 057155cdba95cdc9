"""The one place where psycopg errors become alkstore errors (E-1, E-2, E-3)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from types import TracebackType

import psycopg
from psycopg_pool import PoolClosed, PoolTimeout

from alkstore.errors import (
    AlkstoreError,
    EngineError,
    InvalidArgument,
    StoreClosed,
    TransientError,
)

__all__ = ["TRANSIENT_STATES", "is_transient", "translate_errors"]

#: SQLSTATEs after which a retry of the whole operation (with ``tx=``, the
#: whole transaction) may succeed (E-2), besides class 08 (connection
#: exceptions), which is transient as a whole. A statement timeout or a
#: cancel (57014) is not among them: the caller asked for it, and the same
#: statement would meet the same limit.
TRANSIENT_STATES = frozenset(
    {
        "40001",  # serialization_failure
        "40P01",  # deadlock_detected
        "55P03",  # lock_not_available: lock_timeout or NOWAIT
        "53300",  # too_many_connections
        "57P01",  # admin_shutdown: the backend was terminated, or a fast shutdown
        "57P02",  # crash_shutdown: another backend crashed
        "57P03",  # cannot_connect_now: starting up or in recovery
        "57P05",  # idle_session_timeout: the server closed an idle session
        "25P03",  # idle_in_transaction_session_timeout: the same, inside a transaction
        "72000",  # snapshot_too_old
    }
)
# The same conditions in a login refusal, which carries no SQLSTATE.
_TRANSIENT_FATAL_HINTS = (
    "too many clients",
    "connection slots are reserved",
    "starting up",
    "shutting down",
    "in recovery",
    "not yet accepting connections",
    "terminating connection",
)
# libpq errors without SQLSTATE that no retry can cure: a connection
# setting it refuses, or a security requirement the server cannot meet.
_PERMANENT_HINTS = (
    "invalid integer value",
    "invalid port number",
    "invalid connection option",
    "invalid sslmode value",
    "invalid gssencmode value",
    "invalid channel_binding value",
    "invalid target_session_attrs value",
    "invalid load_balance_hosts value",
    "invalid require_auth",
    "invalid sslnegotiation value",
    "invalid value for",
    "no password supplied",
    "server does not support SSL",
    "certificate",
)


def is_transient(exc: psycopg.Error) -> bool:
    """True when *exc* is worth retrying as is (E-2): a conflict with another
    transaction, a lock or statement timeout, or a connection that was lost
    or refused by a busy or restarting server."""
    state = exc.sqlstate
    if state is not None:
        return state in TRANSIENT_STATES or state.startswith("08")
    if not isinstance(exc, psycopg.OperationalError):
        return False
    # Without SQLSTATE the error comes from libpq: the connection broke or
    # could not be made. A server that answered a login with FATAL refused
    # it for good (unknown role or database, bad password) unless it was
    # busy or restarting; libpq gives only the message to tell them apart.
    text = str(exc)
    if "FATAL:" in text:
        return any(hint in text for hint in _TRANSIENT_FATAL_HINTS)
    return not any(hint in text for hint in _PERMANENT_HINTS)


def translate_errors() -> AbstractContextManager[None]:
    """Wrap every driver error raised inside: ``TransientError`` for the
    retryable ones, ``EngineError`` for the rest, the driver error as
    ``__cause__``. Alkstore errors pass through untouched.

    Values psycopg cannot send at all are bad input, refused before any
    statement reached the server (E-3): text with a lone surrogate or a host
    name that does not encode (``UnicodeError``), or text with a NUL (a
    ``DataError`` raised by psycopg itself, without SQLSTATE). They become
    :class:`InvalidArgument`.
    """
    return _TRANSLATING


def _translated(exc: BaseException) -> AlkstoreError | None:
    """The alkstore error for *exc*; ``None``: it passes as it is."""
    if isinstance(exc, AlkstoreError):
        return None
    if isinstance(exc, PoolClosed):
        # Only a closed store closes its pool: a call that raced close().
        return StoreClosed("the store was closed")
    if isinstance(exc, PoolTimeout):
        return TransientError(f"no PostgreSQL connection available: {exc}")
    if isinstance(exc, psycopg.DataError):
        if exc.sqlstate is None:
            return InvalidArgument(f"a value PostgreSQL cannot store: {exc}")
        return EngineError(f"PostgreSQL failed [{exc.sqlstate}]: {exc}")
    if isinstance(exc, UnicodeError):
        # A lone surrogate in a value, or a host name that does not encode
        # (psycopg resolves host names itself, through the idna codec).
        return InvalidArgument(f"text that cannot be sent to PostgreSQL: {exc}")
    if isinstance(exc, psycopg.Error):
        state = f" [{exc.sqlstate}]" if exc.sqlstate else ""
        if is_transient(exc):
            return TransientError(f"PostgreSQL failed, retry later{state}: {exc}")
        return EngineError(f"PostgreSQL failed{state}: {exc}")
    return None


class _Translating:
    """:func:`translate_errors`' context manager: one shared instance of a
    class, not a generator made per use, since it wraps every call."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        translated = None if exc is None else _translated(exc)
        if translated is not None:
            raise translated from exc


_TRANSLATING = _Translating()
