"""Transactions: ``store.transaction()`` and the ``tx=`` seam (T-1, T-2, A-3,
docs/adr/0004).

:class:`PostgresTx` (sync) and :class:`AsyncPostgresTx` (async) are what the
store's own ``transaction()`` yields. :func:`resolve_sync` and
:func:`resolve_async` find the connection behind what a caller passes as
``tx=`` and refuse anything else before any statement runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from alkstore.engine import unwrap
from alkstore.errors import InvalidArgument, StoreClosed

from ._errors import translate_errors

__all__ = ["AsyncPostgresTx", "PostgresTx", "resolve_async", "resolve_sync"]


def _check_sql(sql: object, params: object) -> None:
    if not isinstance(sql, str):
        raise InvalidArgument(f"sql must be a str, not {type(sql).__name__}")
    if not isinstance(params, (Sequence, dict)) or isinstance(params, (str, bytes)):
        raise InvalidArgument("params must be a sequence or a dict")


class _TxBase:
    def __init__(self, is_closed: Callable[[], bool], prepare: bool | None) -> None:
        self._is_closed = is_closed
        self._prepare = prepare
        self._active = True

    def __repr__(self) -> str:
        return f"{type(self).__name__}(active={self._active})"

    @property
    def active(self) -> bool:
        """``False`` once the ``with`` block ended."""
        return self._active

    def _check(self, sql: object, params: object) -> None:
        if self._is_closed():
            raise StoreClosed("the store was closed")
        if not self._active:
            raise InvalidArgument("this transaction has already ended")
        _check_sql(sql, params)


class PostgresTx(_TxBase):
    """A transaction from ``store.transaction()`` (T-1, T-2): the store's
    writes join it with ``tx=``, and :meth:`execute` runs the caller's SQL in
    it with psycopg placeholders (``%s`` or ``%(name)s``)."""

    def __init__(
        self, conn: psycopg.Connection[Any], is_closed: Callable[[], bool], prepare: bool | None
    ) -> None:
        super().__init__(is_closed, prepare)
        self._conn = conn

    @property
    def connection(self) -> psycopg.Connection[Any]:
        """The ``psycopg.Connection`` this transaction runs on."""
        return self._conn

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> psycopg.Cursor[Any]:
        """Run *sql* in this transaction and return the psycopg cursor (T-2).
        Without *params* the text is sent as is, so a literal ``%`` needs no
        escaping."""
        self._check(sql, params)
        with translate_errors():
            cur = self._conn.cursor()
            cur.execute(sql, params or None, prepare=self._prepare)
            return cur


class AsyncPostgresTx(_TxBase):
    """A transaction from the async store's ``transaction()`` (T-2, A-3)."""

    def __init__(
        self,
        conn: psycopg.AsyncConnection[Any],
        is_closed: Callable[[], bool],
        prepare: bool | None,
    ) -> None:
        super().__init__(is_closed, prepare)
        self._conn = conn

    @property
    def connection(self) -> psycopg.AsyncConnection[Any]:
        """The ``psycopg.AsyncConnection`` this transaction runs on."""
        return self._conn

    async def execute(
        self, sql: str, params: Sequence[Any] | dict[str, Any] = ()
    ) -> psycopg.AsyncCursor[Any]:
        """Run *sql* in this transaction and return the psycopg cursor."""
        self._check(sql, params)
        with translate_errors():
            cur = self._conn.cursor()
            await cur.execute(sql, params or None, prepare=self._prepare)
            return cur


_NEEDS = (
    "tx must be a transaction from store.transaction(), a psycopg.Connection, or a "
    "SQLAlchemy/Django object holding one"
)


def resolve_sync(tx: object) -> tuple[psycopg.Connection[Any], bool]:
    """The connection behind *tx* (T-2) and whether it is one of a store's
    own transactions (whose lock timeout is already set). A native connection
    is trusted to point at the store's database; a transaction of another
    store is accepted like its connection would be."""
    if isinstance(tx, PostgresTx):
        if not tx.active:
            raise InvalidArgument("this transaction has already ended")
        return tx.connection, True
    if isinstance(tx, AsyncPostgresTx):
        raise InvalidArgument("tx is a transaction of an async store; use that store")
    native = unwrap(tx)
    if isinstance(native, psycopg.Connection):
        if native.closed:
            raise InvalidArgument("tx is a closed psycopg connection")
        return native, False
    if isinstance(native, psycopg.AsyncConnection):
        raise InvalidArgument(
            "tx is a psycopg.AsyncConnection: pass it to the async store (alkstore.open_async)"
        )
    raise InvalidArgument(f"{_NEEDS}, not {type(tx).__name__}")


def resolve_async(tx: object) -> tuple[psycopg.AsyncConnection[Any], bool]:
    """:func:`resolve_sync` for the async store (A-3): its own transaction or
    a ``psycopg.AsyncConnection``; a sync connection would block the loop."""
    if isinstance(tx, AsyncPostgresTx):
        if not tx.active:
            raise InvalidArgument("this transaction has already ended")
        return tx.connection, True
    if isinstance(tx, PostgresTx):
        raise InvalidArgument("tx is a transaction of a sync store; use that store")
    native = unwrap(tx)
    if isinstance(native, psycopg.AsyncConnection):
        if native.closed:
            raise InvalidArgument("tx is a closed psycopg connection")
        return native, False
    if isinstance(native, psycopg.Connection):
        raise InvalidArgument(
            "tx is a sync psycopg.Connection, which would block the event loop: "
            "pass a psycopg.AsyncConnection (or the async store's transaction)"
        )
    raise InvalidArgument(
        "tx must be a transaction from the async store's transaction() or a "
        f"psycopg.AsyncConnection, not {type(tx).__name__}"
    )
