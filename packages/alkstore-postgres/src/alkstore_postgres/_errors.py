"""The one place where psycopg errors become alkstore errors (E-1, E-2)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg_pool import PoolClosed, PoolTimeout

from alkstore.errors import AlkstoreError, EngineError, StoreClosed, TransientError

__all__ = ["is_transient", "translate_errors"]

# SQLSTATEs that are safe to retry: serialization failure, deadlock, lock not
# available, too many connections, the server shutting down or starting up.
_TRANSIENT_STATES = frozenset({"40001", "40P01", "55P03", "53300", "57P01", "57P02", "57P03"})
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


def is_transient(exc: psycopg.Error) -> bool:
    """True when *exc* is worth retrying as is (E-2): a conflict with another
    transaction, or a connection that was lost or refused."""
    state = exc.sqlstate
    if state is not None:
        # Class 08: connection exceptions.
        return state in _TRANSIENT_STATES or state.startswith("08")
    if not isinstance(exc, psycopg.OperationalError):
        return False
    # Without SQLSTATE the error comes from libpq: the connection broke or
    # could not be made. A server that answered a login with FATAL refused
    # it for good (unknown role or database, bad password) unless it was
    # busy or restarting; libpq gives only the message to tell them apart.
    text = str(exc)
    if "FATAL:" in text:
        return any(hint in text for hint in _TRANSIENT_FATAL_HINTS)
    return True


@contextmanager
def translate_errors() -> Iterator[None]:
    """Wrap every driver error raised inside: ``TransientError`` for the
    retryable ones, ``EngineError`` for the rest, the driver error as
    ``__cause__``. Alkstore errors pass through untouched."""
    try:
        yield
    except AlkstoreError:
        raise
    except PoolClosed as exc:
        # Only a closed store closes its pool: a call that raced close().
        raise StoreClosed("the store was closed") from exc
    except PoolTimeout as exc:
        raise TransientError(f"no PostgreSQL connection available: {exc}") from exc
    except psycopg.Error as exc:
        state = f" [{exc.sqlstate}]" if exc.sqlstate else ""
        if is_transient(exc):
            raise TransientError(f"PostgreSQL failed, retry later{state}: {exc}") from exc
        raise EngineError(f"PostgreSQL failed{state}: {exc}") from exc
