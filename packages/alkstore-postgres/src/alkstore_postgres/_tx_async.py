# Async source of _tx.py (scripts/async_to_sync.py makes it: edit this file).
# mypy: warn-unreachable=False
"""Transactions: ``store.transaction()`` and the ``tx=`` seam (T-1, T-2, A-3,
docs/adr/0004).

:class:`AsyncPostgresTx` is what the store's own ``transaction()`` yields.
:func:`resolve_async` finds the connection behind what a caller passes as
``tx=`` and refuses anything else before any statement runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import psycopg

from alkstore.engine import unwrap
from alkstore.errors import InvalidArgument

from ._errors import translate_errors
from ._tx_base import TxBase, refusal

__all__ = ["AsyncJoined", "AsyncPostgresTx", "resolve_async"]


class AsyncPostgresTx(TxBase):
    """A transaction from ``store.transaction()`` (T-1, T-2, A-3): the
    store's writes join it with ``tx=``, and :meth:`execute` runs the
    caller's SQL in it with psycopg placeholders (``%s`` or ``%(name)s``)."""

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
        """Run *sql* in this transaction and return the psycopg cursor (T-2).
        Without *params* the text is sent as is, so a literal ``%`` needs no
        escaping."""
        self._check(sql, params)
        with translate_errors():
            cur = self._conn.cursor()
            await cur.execute(sql, params or None, prepare=self._prepare)
            return cur


class AsyncJoined(NamedTuple):
    """A caller's ``tx=``, resolved: the connection to run on, and whether it
    is one of a store's own transactions (whose lock timeout is already
    set)."""

    conn: psycopg.AsyncConnection[Any]
    ours: bool


def resolve_async(tx: object) -> AsyncJoined:
    """The connection behind *tx* (T-2, A-3) and whether it is one of a
    store's own transactions (whose lock timeout is already set): this
    face's transaction or a ``psycopg.AsyncConnection``; the other face's
    are refused by name. A native connection is trusted to point at the
    store's database; a transaction of another store is accepted like its
    connection would be."""
    if isinstance(tx, AsyncPostgresTx):
        if not tx.active:
            raise InvalidArgument("this transaction has already ended")
        return AsyncJoined(tx.connection, True)
    native = unwrap(tx)
    if isinstance(native, psycopg.AsyncConnection):
        if native.closed:
            raise InvalidArgument("tx is a closed psycopg connection")
        return AsyncJoined(native, False)
    if True:  # ASYNC
        raise refusal(tx, native, in_async=True)
    else:
        raise refusal(tx, native, in_async=False)
