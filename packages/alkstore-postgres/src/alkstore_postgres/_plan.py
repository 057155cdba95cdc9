"""Operations as plans, run by a sync or an async driver (docs/adr/0008).

Every operation of the engine is written once, as a *plan*: a generator that
yields :class:`Q` steps (a statement, its parameters, what to fetch) and
receives each step's result, so it can decide what to run next from what
came back. The driver (:mod:`._drive_async`, and :mod:`._drive` made from
it) runs a plan on a ``psycopg.AsyncConnection`` or a ``psycopg.Connection``:
the only code that differs between the two faces. A driver error is thrown
into the plan at the step that failed, so plans (and the scopes below) can
roll back what they began.

An :class:`Op` is a plan factory plus what the runner must know: whether it
writes, whether its statements must commit together, and what a blocked
claim returns instead of an error while the database is out of reach.
:func:`pooled_scope` and :func:`caller_scope` wrap a plan in the transaction
handling of the connection it runs on (our own autocommit connection, or
the caller's ``tx=``), including the lock timeout (E-2):

- our pooled connections carry ``SET lock_timeout`` for the session, except
  behind a transaction pooler (EN-4), where a write runs in its own
  transaction opened with ``SET LOCAL lock_timeout``;
- a caller's connection inside a transaction gets ``set_config(...,
  is_local => true)`` for the operation and its own value back after it
  (``SET LOCAL`` lasts to the end of the transaction, so it must be
  restored; when the operation fails the transaction or savepoint it ran in
  is rolled back, and with it the setting);
- a caller's autocommit connection gets a transaction of ours around the
  operation, with ``SET LOCAL`` inside: it commits when the operation
  returns, exactly as autocommit would have.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus

__all__ = [
    "ALL",
    "NOTHING",
    "ONE",
    "ROWCOUNT",
    "Op",
    "Plan",
    "Progress",
    "Q",
    "caller_scope",
    "pooled_scope",
]

T = TypeVar("T")

#: What a step fetches.
ONE, ALL, ROWCOUNT, NOTHING = "one", "all", "rowcount", "nothing"


@dataclass(frozen=True, slots=True)
class Q:
    """One statement of a plan. *params* is always a mapping (maybe empty),
    so every ``%`` of the text is read as a placeholder; ``None`` only for
    fixed statements of our own that may go out as a simple query."""

    text: str
    params: Mapping[str, Any] | None = field(default_factory=dict)
    fetch: str = NOTHING
    #: ``"stmt"``: a statement of the operation; ``"control"``: transaction
    #: control that changes nothing (BEGIN, SAVEPOINT, ROLLBACK);
    #: ``"commit"``: the step that commits.
    kind: str = "stmt"


Plan = Generator[Q, Any, T]


@dataclass(frozen=True)
class Op(Generic[T]):
    """An operation: how to make its plan, and how it must be run."""

    make: Callable[[], Plan[T]]
    #: Whether it may change the database (reads need no lock timeout and
    #: can always be retried on a fresh connection).
    writes: bool = True
    #: Whether its statements must commit together (several statements).
    atomic: bool = False
    #: For the re-attempts of a blocked call: what to return instead of a
    #: ``TransientError`` when no connection can be had (the wait goes on).
    soft: bool = False
    soft_value: Any = None


@dataclass
class Progress:
    """What a driver did on its connection, for the runner's retry decision
    (E-2): a call on a connection found dead is retried once on a fresh one
    only when it cannot have changed anything."""

    unsafe: bool = False


# --------------------------------------------------------------------- scopes

_SAVEPOINT = "SAVEPOINT alkstore_op"
_RELEASE = "RELEASE SAVEPOINT alkstore_op"
_ROLLBACK_TO = "ROLLBACK TO SAVEPOINT alkstore_op"
# Read the caller's value and set ours, in that order, in one round trip.
_SWAP_LOCK_TIMEOUT = """
WITH old AS MATERIALIZED (SELECT current_setting('lock_timeout') AS v)
SELECT v, set_config('lock_timeout', %(value)s::text, true) FROM old
"""
_RESTORE_LOCK_TIMEOUT = "SELECT set_config('lock_timeout', %(value)s::text, true)"


def begin_with_lock_timeout(lock_timeout_ms: int) -> str:
    """``BEGIN`` and a transaction-local lock timeout, as one simple query
    (one round trip; no session state is left behind, EN-4)."""
    return (
        sql.SQL("BEGIN; SET LOCAL lock_timeout = {}")
        .format(sql.Literal(f"{lock_timeout_ms}ms"))
        .as_string(None)
    )


def _begin(text: str) -> Q:
    return Q(text, None, kind="control")


def _in_transaction(begin: Q, inner: Plan[T]) -> Plan[T]:
    """*inner* inside a transaction of ours: ``COMMIT`` on success,
    ``ROLLBACK`` when it raised (the original error wins)."""
    yield begin
    try:
        result = yield from inner
    except Exception:
        # When the connection is gone, the transaction went with it.
        with contextlib.suppress(Exception):
            yield Q("ROLLBACK", None, kind="control")
        raise
    yield Q("COMMIT", None, kind="commit")
    return result


def _in_savepoint(inner: Plan[T]) -> Plan[T]:
    yield Q(_SAVEPOINT, None, kind="control")
    try:
        result = yield from inner
    except Exception:
        with contextlib.suppress(Exception):
            yield Q(_ROLLBACK_TO, None, kind="control")
            yield Q(_RELEASE, None, kind="control")
        raise
    yield Q(_RELEASE, None, kind="control")
    return result


def _with_local_lock_timeout(value: str, inner: Plan[T]) -> Plan[T]:
    old, _ = yield Q(_SWAP_LOCK_TIMEOUT, {"value": value}, ONE)
    result = yield from inner
    if old != value:
        yield Q(_RESTORE_LOCK_TIMEOUT, {"value": old})
    return result


def pooled_scope(op: Op[T], *, pooler: bool, lock_timeout_ms: int) -> Plan[T]:
    """The plan of *op* on one of our own autocommit connections."""
    if pooler and op.writes:
        return _in_transaction(_begin(begin_with_lock_timeout(lock_timeout_ms)), op.make())
    if op.atomic:
        return _in_transaction(_begin("BEGIN"), op.make())
    return op.make()


def caller_scope(
    op: Op[T],
    conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any],
    *,
    ours: bool,
    lock_timeout_ms: int,
) -> Plan[T]:
    """The plan of *op* on the connection behind a caller's ``tx=``: never
    committed or rolled back by us unless we began its transaction (T-1).
    *ours*: the connection comes from this store's pool, where the lock
    timeout is already in force."""
    idle = conn.info.transaction_status == TransactionStatus.IDLE
    if idle and conn.autocommit:
        begin = "BEGIN" if ours else begin_with_lock_timeout(lock_timeout_ms)
        return _in_transaction(_begin(begin), op.make())
    # In a transaction (or about to be: psycopg begins one on a connection
    # that is not in autocommit): a savepoint when the statements must
    # commit together, so a refusal leaves the caller's transaction usable.
    inner = op.make()
    if not ours:
        inner = _with_local_lock_timeout(f"{lock_timeout_ms}ms", inner)
    return _in_savepoint(inner) if op.atomic else inner
