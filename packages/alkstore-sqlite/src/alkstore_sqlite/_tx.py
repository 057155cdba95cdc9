"""Transactions: ``store.transaction()`` and the ``tx=`` seam (T-1, T-2, docs/adr/0004)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from alkstore.engine import check_sql_args, unwrap
from alkstore.errors import InvalidArgument, StoreClosed

from ._errors import translate_errors

__all__ = ["SQLiteTx", "join_implicit", "resolve_tx", "run_on"]

T = TypeVar("T")
_SAVEPOINT = "alkstore_op"


class SQLiteTx:
    """A transaction from ``store.transaction()`` (T-1, T-2): the store's
    writes join it with ``tx=``, and :meth:`execute` runs the caller's SQL in
    it with ``sqlite3`` placeholders (``?`` or ``:name``)."""

    def __init__(self, path: str, conn: sqlite3.Connection, is_closed: Callable[[], bool]) -> None:
        self._real_path = os.path.realpath(path)
        self._conn = conn
        self._is_closed = is_closed
        self._active = True

    def __repr__(self) -> str:
        return f"SQLiteTx(active={self._active})"

    @property
    def connection(self) -> sqlite3.Connection:
        """The ``sqlite3.Connection`` this transaction runs on."""
        return self._conn

    @property
    def active(self) -> bool:
        return self._active

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> sqlite3.Cursor:
        """Run *sql* in this transaction and return the ``sqlite3.Cursor`` (T-2)."""
        if self._is_closed():
            raise StoreClosed("the store was closed")
        if not self._active:
            raise InvalidArgument("this transaction has already ended")
        check_sql_args(sql, params)
        with translate_errors():
            try:
                return self._conn.execute(sql, params)
            except (ValueError, TypeError, OverflowError) as exc:  # bad parameters
                raise InvalidArgument(f"cannot run this SQL with these parameters: {exc}") from exc


def resolve_tx(tx: object, real_path: str) -> sqlite3.Connection:
    """The connection behind *tx*, checked before any statement (T-2): this
    store's transaction (or another's on the same file), a ``sqlite3``
    connection on the same file, or a framework's object holding one."""
    if isinstance(tx, SQLiteTx):
        if not tx.active:
            raise InvalidArgument("this transaction has already ended")
        if tx._real_path != real_path:
            raise InvalidArgument("tx belongs to a store on another database file")
        return tx.connection
    native = unwrap(tx)
    if isinstance(native, sqlite3.Connection):
        # sqlite3 connections take no weak references, so this cheap PRAGMA
        # runs on every call rather than once per connection.
        with translate_errors():
            try:
                rows = native.execute("PRAGMA database_list").fetchall()
            except sqlite3.ProgrammingError as exc:  # closed
                raise InvalidArgument(f"tx is not a usable sqlite3.Connection: {exc}") from exc
        files = {os.path.realpath(row[2]) for row in rows if row[1] == "main" and row[2]}
        if real_path not in files:
            raise InvalidArgument("tx is a sqlite3.Connection on another database file")
        return native
    raise InvalidArgument(
        "tx must be a transaction from store.transaction(), a sqlite3.Connection on the same "
        f"file, or a SQLAlchemy/Django object holding one, not {type(tx).__name__}"
    )


def join_implicit(conn: sqlite3.Connection) -> None:
    """A connection in sqlite3's implicit-transaction mode would have begun a
    transaction before a DML statement; SAVEPOINT does not trigger that, so
    begin it here. The caller commits it, as they would have."""
    if conn.in_transaction:
        return
    if getattr(conn, "autocommit", -1) is True:  # Python 3.12+: explicit autocommit
        return
    level = conn.isolation_level
    if level is not None:
        conn.execute(f"BEGIN {level}")


def run_on(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T], single: bool) -> T:
    """Run the write *fn* on the caller's connection: atomic in a savepoint
    (C-6), never committed or rolled back by us (T-1)."""
    with translate_errors():
        join_implicit(conn)
        if single:
            return fn(conn)
        conn.execute(f"SAVEPOINT {_SAVEPOINT}")
        try:
            result = fn(conn)
        except BaseException:
            conn.execute(f"ROLLBACK TO {_SAVEPOINT}")
            conn.execute(f"RELEASE {_SAVEPOINT}")
            raise
        conn.execute(f"RELEASE {_SAVEPOINT}")
        return result
