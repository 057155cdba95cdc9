"""What the transactions of both faces share (T-1, T-2, A-3): the checks
before ``execute`` and the refusals of a ``tx=`` that belongs to the other
face; :mod:`._tx_async` is the I/O."""

from __future__ import annotations

from collections.abc import Callable

import psycopg

from alkstore.engine import check_sql_args
from alkstore.errors import InvalidArgument, StoreClosed

__all__ = ["TxBase", "refusal"]


class TxBase:
    """A store's own transaction, either face: whether it is still open,
    and the checks before each statement."""

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
        check_sql_args(sql, params)


_NEEDS = (
    "tx must be a transaction from store.transaction(), a psycopg.Connection, or a "
    "SQLAlchemy/Django object holding one"
)


def refusal(tx: object, native: object, *, in_async: bool) -> InvalidArgument:
    """Why *tx* (*native*: the driver connection found behind it) is refused
    by a store of the face *in_async* names, once its own transactions and
    connections were let through: the error names what to use instead."""
    if isinstance(tx, TxBase):  # the other face's own transaction
        other = "a sync" if in_async else "an async"
        return InvalidArgument(f"tx is a transaction of {other} store; use that store")
    if in_async:
        if isinstance(native, psycopg.Connection):
            return InvalidArgument(
                "tx is a sync psycopg.Connection, which would block the event loop: "
                "pass a psycopg.AsyncConnection (or the async store's transaction)"
            )
        return InvalidArgument(
            "tx must be a transaction from the async store's transaction() or a "
            f"psycopg.AsyncConnection, not {type(tx).__name__}"
        )
    if isinstance(native, psycopg.AsyncConnection):
        return InvalidArgument(
            "tx is a psycopg.AsyncConnection: pass it to the async store (alkstore.open_async)"
        )
    return InvalidArgument(f"{_NEEDS}, not {type(tx).__name__}")
