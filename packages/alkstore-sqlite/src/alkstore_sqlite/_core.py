"""The shared core of the SQLite executor: connections, the write queue
(W-7), transactions (T-1, T-2) and the wake watcher (Q-19).

Every area of :class:`~._executor.SQLiteExecutor` (queues, streams, locks,
notifications, schedules) runs its statements through one :class:`Core`:
:meth:`Core.read` for pure reads, :meth:`Core.write` for writes, alone or in
the caller's transaction.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TypeVar

from alkstore.engine import ALL_CAPABILITIES, WakeBoard
from alkstore.errors import InvalidArgument, SchemaVersionError, StoreClosed
from alkstore.protocols import Capability

from . import _conn, _schema, _sql
from ._conn import ConnectionPool
from ._errors import is_busy, translate_errors
from ._tx import SQLiteTx, resolve_tx, run_on
from ._watcher import Watcher
from ._writer import queue_for

__all__ = ["Core"]

T = TypeVar("T")


def _nothing() -> None:
    pass


class Core:
    """Connections, the write queue, transactions and wakes of one SQLite
    store, shared by the areas of its executor."""

    def __init__(
        self,
        path: str,
        *,
        url: str,
        busy_timeout_s: float,
        synchronous: str,
        poll_interval_s: float,
        notifications_cap: int,
        migrate: bool = True,
    ) -> None:
        self._path = path
        self._real_path = os.path.realpath(path)
        self._url = url
        self._busy_timeout_s = busy_timeout_s
        self._synchronous = synchronous
        self._poll_interval_s = poll_interval_s
        #: Rows the notification table keeps (N-3, EN-1).
        self.notifications_cap = notifications_cap
        #: Called by the wake watcher after every commit it sees, once the
        #: wakes are bumped: the executor hands new notifications to their
        #: listeners here. Set before the watcher can start.
        self.after_commit: Callable[[], None] = _nothing
        #: Set by :meth:`close`; an attribute, not a property: every call reads it.
        self.closed = False
        self._wakeboard = WakeBoard()
        self._watcher: Watcher | None = None
        self._watcher_lock = threading.Lock()
        self._writes = queue_for(path)
        if not migrate and not os.path.isfile(path):
            # Checked before any connection: connecting would create the file.
            missing = f"no SQLite database at {path!r} (opened with migrate=False)"
            raise SchemaVersionError(0, _sql.SCHEMA_VERSION, missing)
        self._pool = ConnectionPool(path, busy_timeout_s, synchronous)
        #: The schema version this open found (0: none) and the one the file
        #: holds now: what ``alkstore migrate`` reports.
        self.schema_migration = (_sql.SCHEMA_VERSION, _sql.SCHEMA_VERSION)
        try:
            if migrate:
                self._prepare(notifications_cap)
            else:
                self._check_schema()
        except BaseException:
            self._pool.close()
            raise

    # ------------------------------------------------------------------ opening

    def _prepare(self, notifications_cap: int) -> None:
        with translate_errors(), self._pool.connection() as conn:
            # Refuse a newer schema before touching anything, WAL included (ST-2).
            found = _schema.stored_version(conn)
            if found > _sql.SCHEMA_VERSION:
                _schema.migrate(conn)  # raises SchemaVersionError
            self._enable_wal(conn)
            self.schema_migration = _schema.migrate(conn)
            # N-3: the notification table is capped at open; a read first, so
            # that an open does not wait for the write lock.
            (excess,) = conn.execute(
                _sql.NOTIFICATIONS_EXCESS, {"cap": notifications_cap}
            ).fetchone()
            if excess:
                conn.execute(_sql.PRUNE_NOTIFICATIONS, {"cap": notifications_cap})

    def _check_schema(self) -> None:
        """``migrate=False``: the file must hold the current schema; nothing is written."""
        with translate_errors(), self._pool.connection() as conn:
            found = _schema.stored_version(conn)
        if found != _sql.SCHEMA_VERSION:
            reason = None
            if found < _sql.SCHEMA_VERSION:
                what = "no alkstore schema" if found == 0 else f"alkstore schema version {found}"
                reason = (
                    f"{self._path!r} holds {what}; this engine needs version "
                    f"{_sql.SCHEMA_VERSION} (run `alkstore migrate`; opened with migrate=False)"
                )
            raise SchemaVersionError(found, _sql.SCHEMA_VERSION, reason)

    def _enable_wal(self, conn: sqlite3.Connection) -> None:
        # Switching to WAL needs a moment alone with the file; concurrent
        # openers can find it busy even with a busy timeout. WAL is a
        # property of the file, so once one opener succeeds all see it.
        if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
            return
        deadline = time.monotonic() + max(self._busy_timeout_s, 1.0)
        while True:
            try:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            except sqlite3.OperationalError as exc:
                if not is_busy(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
                continue
            if str(mode).lower() != "wal":
                raise InvalidArgument(f"cannot use WAL on {self._path!r} (journal mode {mode})")
            return

    # ------------------------------------------------------------------ state

    @property
    def url(self) -> str:
        return self._url

    @property
    def path(self) -> str:
        """The database file."""
        return self._path

    @property
    def capabilities(self) -> frozenset[Capability]:
        return ALL_CAPABILITIES

    @property
    def store_id(self) -> str:
        return self._real_path

    @property
    def wakes(self) -> WakeBoard:
        return self._wakeboard

    def close(self) -> None:
        """Stop the watcher and close every connection (ST-3)."""
        if self.closed:
            return
        self.closed = True
        self._wakeboard.close()
        with self._watcher_lock:
            watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.stop()
        self._pool.close()

    def check_open(self) -> None:
        """Refuse any I/O once the store is closed."""
        if self.closed:
            raise StoreClosed("the store was closed")

    # ------------------------------------------------------------ connections

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A connection for pure reads: autocommit, so each statement reads
        one snapshot and no write lock is taken (C-8)."""
        self.check_open()
        with translate_errors(), self._pool.connection() as conn:
            yield conn

    def write(
        self,
        tx: sqlite3.Connection | None,
        fn: Callable[[sqlite3.Connection], T],
        *,
        single: bool = False,
    ) -> T:
        """Run the write *fn*: without *tx* through the write queue (W-7) in a
        transaction of its own (or its group's); with *tx* on the caller's
        connection, never committed by us (T-1)."""
        self.check_open()
        if tx is None:
            result: T = self._writes.write(
                self._pool, fn, timeout_s=self._busy_timeout_s, single=single
            )
            return result
        return run_on(tx, fn, single)

    def resolve_tx(self, tx: object) -> sqlite3.Connection:
        """The connection behind *tx* (T-2), on an open store."""
        self.check_open()
        return resolve_tx(tx, self._real_path)

    def transaction(self) -> AbstractContextManager[SQLiteTx]:
        """A write transaction (``BEGIN IMMEDIATE``) holding this process's
        write queue: committed on a normal exit, rolled back when the block
        raises (T-1..T-4)."""
        self.check_open()
        return self._transaction()

    @contextmanager
    def _transaction(self) -> Iterator[SQLiteTx]:
        self.check_open()
        with self._pool.connection() as conn, self._writes.exclusive(conn, self._busy_timeout_s):
            with translate_errors():
                conn.execute("BEGIN IMMEDIATE")
            tx = SQLiteTx(self._path, conn, lambda: self.closed)
            try:
                yield tx
            except BaseException:
                tx._active = False
                if conn.in_transaction:
                    with translate_errors():
                        conn.execute("ROLLBACK")
                raise
            tx._active = False
            with translate_errors():
                try:
                    conn.execute("COMMIT")
                except sqlite3.Error:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise

    # ------------------------------------------------------------------ wakes

    def start_wakes(self) -> None:
        """Start the wake watcher on first need; a store that never blocks
        never runs it (docs/adr/0003)."""
        with self._watcher_lock:
            if self._watcher is not None or self.closed:
                return
            watcher = Watcher(
                lambda: _conn.connect(self._path, self._busy_timeout_s, self._synchronous),
                self._poll_interval_s,
                self._on_commit,
            )
            watcher.start()
            self._watcher = watcher

    def fallback_s(self) -> float | None:
        """Waits need no fallback poll while the watcher runs: it sees every
        commit. Without it (it failed), poll every second."""
        watcher = self._watcher
        return 1.0 if watcher is not None and not watcher.alive else None

    def _on_commit(self) -> None:
        self._wakeboard.bump_all()
        self.after_commit()
