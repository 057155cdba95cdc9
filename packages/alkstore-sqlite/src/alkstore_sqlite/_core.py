"""The store's plumbing: opening the file, connections, transactions, wakes.

The primitives (queues, streams, locks, notifications, schedules) build on the
three context managers here: :meth:`StoreCore._read` for pure reads (no
write lock, C-8), :meth:`StoreCore._write` for writes (own transaction or the
caller's, T-1), and the watcher that turns commits into wakes (Q-19).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from types import TracebackType
from typing import Any

from alkstore.engine import ALL_CAPABILITIES, QueueListener, WakeBoard
from alkstore.errors import InvalidArgument, StoreClosed
from alkstore.names import decode_payload
from alkstore.protocols import Capability
from alkstore.types import Notification

from . import _conn, _schema, _sql
from ._conn import ConnectionPool
from ._errors import is_busy, translate_errors
from ._watcher import Watcher

__all__ = ["SQLiteTx", "StoreCore"]

_SAVEPOINT = "alkstore_op"


class SQLiteTx:
    """A transaction from ``store.transaction()`` (T-1, T-2): the store's
    writes join it with ``tx=``, and :meth:`execute` runs the caller's SQL in
    it with ``sqlite3`` placeholders (``?`` or ``:name``)."""

    def __init__(self, store: StoreCore, conn: sqlite3.Connection) -> None:
        self._store = store
        self._conn = conn
        self._active = True

    @property
    def connection(self) -> sqlite3.Connection:
        """The ``sqlite3.Connection`` this transaction runs on."""
        return self._conn

    @property
    def active(self) -> bool:
        return self._active

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> sqlite3.Cursor:
        """Run *sql* in this transaction and return the ``sqlite3.Cursor`` (T-2)."""
        self._store._check_open()
        if not self._active:
            raise InvalidArgument("this transaction has already ended")
        with translate_errors():
            return self._conn.execute(sql, params)


class StoreCore:
    """Connections, transactions, wakes and listeners of one SQLite store."""

    def __init__(
        self,
        path: str,
        *,
        url: str,
        busy_timeout_s: float,
        synchronous: str,
        poll_interval_s: float,
        notifications_cap: int,
    ) -> None:
        self._path = path
        self._real_path = os.path.realpath(path)
        self._url = url
        self._busy_timeout_s = busy_timeout_s
        self._synchronous = synchronous
        self._poll_interval_s = poll_interval_s
        self._closed = False
        self._wakeboard = WakeBoard()
        self._watcher: Watcher | None = None
        self._watcher_lock = threading.Lock()
        self._listeners: dict[QueueListener, int] = {}
        self._listeners_lock = threading.Lock()
        self._pool = ConnectionPool(path, busy_timeout_s, synchronous)
        try:
            self._prepare(notifications_cap)
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
            _schema.migrate(conn)
            # N-3: the notification table is capped at open, never by a timer;
            # a read first, so that an open does not wait for the write lock.
            (excess,) = conn.execute(
                _sql.NOTIFICATIONS_EXCESS, {"cap": notifications_cap}
            ).fetchone()
            if excess:
                conn.execute(_sql.PRUNE_NOTIFICATIONS, {"cap": notifications_cap})

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
    def closed(self) -> bool:
        return self._closed

    @property
    def _wakes(self) -> WakeBoard:
        return self._wakeboard

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("the store was closed")

    def close(self) -> None:
        """Stop the watcher, close listeners and connections (ST-3)."""
        if self._closed:
            return
        self._closed = True
        self._wakeboard.close()
        with self._watcher_lock:
            watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.stop()
        with self._listeners_lock:
            listeners = list(self._listeners)
            self._listeners.clear()
        for listener in listeners:
            listener.close()
        self._pool.close()

    def __enter__(self) -> StoreCore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ------------------------------------------------------------ connections

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """A connection for pure reads: autocommit, so each statement reads
        one snapshot and no write lock is taken (C-8)."""
        self._check_open()
        with translate_errors(), self._pool.connection() as conn:
            yield conn

    @contextmanager
    def _write(self, tx: object | None = None) -> Iterator[sqlite3.Connection]:
        """A connection inside a transaction for a write.

        Without *tx*: a pooled connection under ``BEGIN IMMEDIATE``, committed
        at the end. With *tx*: the caller's connection inside a savepoint, so
        a multi-statement operation stays atomic (C-6) and the caller's
        transaction is never committed or rolled back by us (T-1).
        """
        self._check_open()
        if tx is None:
            with translate_errors(), self._pool.connection() as conn:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            return
        conn = self._resolve_tx(tx)
        with translate_errors():
            self._join(conn)
            conn.execute(f"SAVEPOINT {_SAVEPOINT}")
            try:
                yield conn
            except BaseException:
                conn.execute(f"ROLLBACK TO {_SAVEPOINT}")
                conn.execute(f"RELEASE {_SAVEPOINT}")
                raise
            conn.execute(f"RELEASE {_SAVEPOINT}")

    @staticmethod
    def _join(conn: sqlite3.Connection) -> None:
        # A connection in sqlite3's implicit-transaction mode would have begun
        # a transaction before a DML statement; SAVEPOINT does not trigger
        # that, so begin it here. The caller commits it, as they would have.
        if conn.in_transaction:
            return
        if getattr(conn, "autocommit", -1) is True:  # Python 3.12+: explicit autocommit
            return
        level = conn.isolation_level
        if level is not None:
            conn.execute(f"BEGIN {level}")

    def _resolve_tx(self, tx: object) -> sqlite3.Connection:
        """The connection behind *tx*, checked before any statement (T-2)."""
        if isinstance(tx, SQLiteTx):
            if not tx.active:
                raise InvalidArgument("this transaction has already ended")
            if tx._store is not self and os.path.realpath(tx._store._path) != self._real_path:
                raise InvalidArgument("tx belongs to a store on another database file")
            return tx.connection
        if isinstance(tx, sqlite3.Connection):
            # sqlite3 connections take no weak references, so this cheap
            # PRAGMA runs on every call rather than once per connection.
            with translate_errors():
                rows = tx.execute("PRAGMA database_list").fetchall()
            files = {os.path.realpath(row[2]) for row in rows if row[1] == "main" and row[2]}
            if self._real_path not in files:
                raise InvalidArgument("tx is a sqlite3.Connection on another database file")
            return tx
        raise InvalidArgument(
            "tx must be a transaction from store.transaction() or a sqlite3.Connection "
            f"on the same file, not {type(tx).__name__}"
        )

    def transaction(self) -> AbstractContextManager[SQLiteTx]:
        """A write transaction (``BEGIN IMMEDIATE``): committed on a normal
        exit, rolled back when the block raises (T-1..T-4)."""
        self._check_open()
        return self._transaction()

    @contextmanager
    def _transaction(self) -> Iterator[SQLiteTx]:
        self._check_open()
        with self._pool.connection() as conn:
            with translate_errors():
                conn.execute("BEGIN IMMEDIATE")
            tx = SQLiteTx(self, conn)
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

    def _ensure_watcher(self) -> None:
        """Start the wake watcher on first need; a store that never blocks
        never runs it (docs/adr/0003)."""
        with self._watcher_lock:
            if self._watcher is not None or self._closed:
                return
            watcher = Watcher(
                lambda: _conn.connect(self._path, self._busy_timeout_s, self._synchronous),
                self._poll_interval_s,
                self._on_commit,
            )
            watcher.start()
            self._watcher = watcher

    def _on_commit(self) -> None:
        self._wakeboard.bump_all()
        with self._listeners_lock:
            if not self._listeners:
                return
            after = min(self._listeners.values())
        self._dispatch(after)

    def _dispatch(self, after: int) -> None:
        try:
            with self._read() as conn:
                rows = conn.execute(_sql.NOTIFICATIONS_AFTER, {"after": after}).fetchall()
        except StoreClosed:
            return
        if not rows:
            return
        with self._listeners_lock:
            for listener, seen in list(self._listeners.items()):
                for note_id, channel, payload in rows:
                    if note_id > seen and channel in listener.channels:
                        listener.deliver(Notification(channel, decode_payload(payload)))
                self._listeners[listener] = max(seen, rows[-1][0])

    def _add_listener(self, listener: QueueListener) -> None:
        self._ensure_watcher()
        # Registered under the listeners lock with the newest id as baseline:
        # a notification committed after this point has a larger id (SQLite
        # has one writer and ids never repeat), so it is delivered (N-1).
        with self._listeners_lock, self._read() as conn:
            self._listeners[listener] = int(conn.execute(_sql.LAST_NOTIFICATION).fetchone()[0])

    def _remove_listener(self, listener: QueueListener) -> None:
        with self._listeners_lock:
            self._listeners.pop(listener, None)

    def _fallback_s(self) -> float | None:
        """Waits need no fallback poll while the watcher runs: it sees every
        commit. Without it (it failed), poll every second."""
        watcher = self._watcher
        return 1.0 if watcher is not None and not watcher.alive else None
