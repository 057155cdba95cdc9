"""Transactions: ``store.transaction()`` and the ``tx=`` seam (T-1, T-2, docs/adr/0004)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from types import TracebackType
from typing import TYPE_CHECKING, Any

import psycopg

from alkstore.errors import InvalidArgument

from ._errors import translate_errors

if TYPE_CHECKING:
    from ._core import StoreCore

__all__ = ["PostgresTx", "TransactionContext", "resolve_tx"]


class PostgresTx:
    """A transaction from ``store.transaction()`` (T-1, T-2): the store's
    writes join it with ``tx=``, and :meth:`execute` runs the caller's SQL in
    it with psycopg placeholders (``%s`` or ``%(name)s``)."""

    def __init__(self, store: StoreCore, conn: psycopg.Connection[Any]) -> None:
        self._store = store
        self._conn = conn
        self._active = True

    def __repr__(self) -> str:
        return f"PostgresTx(active={self._active})"

    @property
    def connection(self) -> psycopg.Connection[Any]:
        """The ``psycopg.Connection`` this transaction runs on."""
        return self._conn

    @property
    def active(self) -> bool:
        """``False`` once the ``with`` block ended."""
        return self._active

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> psycopg.Cursor[Any]:
        """Run *sql* in this transaction and return the psycopg cursor (T-2).

        Without *params* the text is sent as is, so a literal ``%`` needs no
        escaping."""
        self._store._check_open()
        if not self._active:
            raise InvalidArgument("this transaction has already ended")
        with translate_errors():
            cur = self._conn.cursor()
            cur.execute(sql, params or None)
            return cur


class TransactionContext:
    """What ``store.transaction()`` returns: a pooled connection inside
    ``BEGIN ... COMMIT``, rolled back when the block raises. Exceptions of the
    block pass through unchanged; a failing commit is wrapped (E-1)."""

    def __init__(self, store: StoreCore) -> None:
        self._store = store
        self._stack: ExitStack | None = None
        self._tx: PostgresTx | None = None

    def __enter__(self) -> PostgresTx:
        self._store._check_open()
        if self._stack is not None:
            raise InvalidArgument("a transaction context can be entered only once")
        stack = ExitStack()
        with translate_errors():
            try:
                conn = stack.enter_context(self._store._pool.connection())
                stack.enter_context(conn.transaction())
            except BaseException:
                stack.close()
                raise
        self._stack = stack
        self._tx = PostgresTx(self._store, conn)
        return self._tx

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        assert self._stack is not None and self._tx is not None
        self._tx._active = False
        with translate_errors():
            # True only for psycopg's own ``Rollback``, which it swallows.
            return bool(self._stack.__exit__(exc_type, exc, tb))


def resolve_tx(tx: object) -> psycopg.Connection[Any]:
    """The connection behind *tx*, checked before any statement (T-2).

    A :class:`PostgresTx` (still open) or a native ``psycopg.Connection``,
    used as given: it is trusted to point at the store's database. A
    transaction of another store is accepted like its connection would be.
    """
    if isinstance(tx, PostgresTx):
        if not tx.active:
            raise InvalidArgument("this transaction has already ended")
        return tx.connection
    if isinstance(tx, psycopg.Connection):
        if tx.closed:
            raise InvalidArgument("tx is a closed psycopg connection")
        return tx
    raise InvalidArgument(
        "tx must be a transaction from store.transaction() or a psycopg.Connection, "
        f"not {type(tx).__name__}"
    )
