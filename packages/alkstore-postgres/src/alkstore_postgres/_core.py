"""The store's plumbing: the pool, connections, transactions, wakes.

The primitives (queues, streams, locks, notifications, schedules) build on
:meth:`StoreCore._conn`, which hands out a pooled autocommit connection or
the caller's transaction (T-1), with driver errors wrapped (E-1), and on the
listener that turns NOTIFYs into wakes (docs/adr/0003).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timezone
from types import TracebackType
from typing import Any

import psycopg
from psycopg.rows import tuple_row
from psycopg_pool import ConnectionPool

from alkstore.engine import ALL_CAPABILITIES, FALLBACK_POLL_S, QueueListener, WakeBoard
from alkstore.errors import StoreClosed
from alkstore.protocols import Capability

from . import _schema, _sql
from ._errors import translate_errors
from ._listener import PgListener
from ._tx import PostgresTx, TransactionContext, resolve_tx

__all__ = ["StoreCore", "fetch_all", "fetch_one", "run", "utc", "wake_channel"]

log = logging.getLogger("alkstore.postgres")

#: Poll interval of blocked calls while the listener is reconnecting.
_DEGRADED_POLL_S = 1.0
#: A poke only saves the listener its idle timeout: never wait long for it.
_POKE_TIMEOUT_S = 1.0


def utc(value: datetime) -> datetime:
    """A timestamp from the server as an aware UTC datetime (C-4), whatever
    the session's ``TimeZone``."""
    return value.astimezone(timezone.utc)


def wake_channel(schema: str) -> str:
    """The NOTIFY channel of the wakes of *schema*: one per schema, so stores
    on different schemas of a database do not wake each other."""
    return "alkstore_wake_" + hashlib.sha256(schema.encode()).hexdigest()[:16]


def user_channel(schema: str, channel: str) -> str:
    """The PostgreSQL channel of notification channel *channel*: a hash of
    both names, so that any name of up to 200 characters fits the 63-byte
    identifier limit and two schemas never share a channel."""
    digest = hashlib.sha256(f"{schema}\x00{channel}".encode()).hexdigest()
    return "alkn_" + digest[:40]


Params = dict[str, Any]


def fetch_one(conn: psycopg.Connection[Any], stmt: str, params: Params) -> tuple[Any, ...] | None:
    """The first row of *stmt*, as a tuple whatever the connection's row factory."""
    with conn.cursor(row_factory=tuple_row) as cur:
        return cur.execute(stmt, params).fetchone()


def fetch_all(conn: psycopg.Connection[Any], stmt: str, params: Params) -> list[tuple[Any, ...]]:
    """Every row of *stmt*, as tuples."""
    with conn.cursor(row_factory=tuple_row) as cur:
        return cur.execute(stmt, params).fetchall()


def run(conn: psycopg.Connection[Any], stmt: str, params: Params) -> int:
    """Run *stmt*; return its row count."""
    with conn.cursor(row_factory=tuple_row) as cur:
        return cur.execute(stmt, params).rowcount


class StoreCore:
    """Pool, schema, transactions, wakes and listeners of one store."""

    def __init__(
        self,
        conninfo: str,
        *,
        url: str,
        schema: str,
        min_size: int,
        max_size: int,
        connect_kwargs: dict[str, Any],
        pool_timeout_s: float,
        listen_timeout_s: float,
    ) -> None:
        self._url = url
        self._schema = schema
        self._sql = _sql.Statements(schema)
        self._wake_channel = wake_channel(schema)
        self._closed = False
        self._close_lock = threading.Lock()
        self._wakeboard = WakeBoard()
        self._listen_timeout_s = listen_timeout_s
        self._listeners: set[QueueListener] = set()
        self._listeners_lock = threading.Lock()
        # Migrate on a connection of its own, so that a refused login or a
        # missing database surfaces with the server's own message.
        with (
            translate_errors(),
            psycopg.connect(conninfo, autocommit=True, **connect_kwargs) as conn,
        ):
            _schema.migrate(conn, self._sql, schema)
        self._pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            conninfo,
            min_size=min_size,
            max_size=max_size,
            kwargs={"autocommit": True, **connect_kwargs},
            timeout=pool_timeout_s,
            open=True,
            name=f"alkstore:{schema}",
        )
        self._listener = PgListener(
            conninfo,
            connect_kwargs,
            wake_channel=self._wake_channel,
            wakes=self._wakeboard,
            channel_for=lambda name: user_channel(schema, name),
            poke=self._poke,
        )

    # ------------------------------------------------------------------ state

    @property
    def url(self) -> str:
        """The URL the store was opened with, without a password."""
        return self._url

    @property
    def schema(self) -> str:
        """The PostgreSQL schema holding the engine's tables."""
        return self._schema

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
        """Stop the listener, close listeners and the pool (ST-3)."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self._wakeboard.close()
        self._listener.stop()
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
    def _conn(self, tx: object | None = None) -> Iterator[psycopg.Connection[Any]]:
        """A connection for one statement: a pooled autocommit one, or the
        one behind the caller's *tx* (checked before any statement, T-2).
        Every operation is a single statement, atomic in either case (C-6)."""
        self._check_open()
        if tx is None:
            with translate_errors(), self._pool.connection() as conn:
                yield conn
            return
        conn = resolve_tx(tx)
        with translate_errors():
            yield conn

    def transaction(self) -> AbstractContextManager[PostgresTx]:
        """A transaction on a pooled connection: committed on a normal exit,
        rolled back when the block raises (T-1..T-4)."""
        self._check_open()
        return TransactionContext(self)

    # ------------------------------------------------------------------ wakes

    def _ensure_listener(self) -> None:
        """Start the listener connection on first need; a store that never
        blocks or listens never opens it (docs/adr/0003)."""
        if not self._closed:
            self._listener.start()

    def _fallback_s(self) -> float:
        """How often a blocked call polls without a wake: rarely while the
        listener is connected, often while it reconnects."""
        if self._listener.started and not self._listener.connected:
            return _DEGRADED_POLL_S
        return FALLBACK_POLL_S

    def _poke(self, channel: str) -> None:
        """Send an empty NOTIFY on *channel* through the pool (the listener's
        way to interrupt its own wait); best effort."""
        try:
            with self._pool.connection(timeout=_POKE_TIMEOUT_S) as conn:
                run(conn, self._sql.notify, {"channel": channel, "payload": ""})
        except Exception as exc:  # the listener falls back to its idle timeout
            log.debug("listener poke failed: %s", exc)

    def _add_listener(self, listener: QueueListener) -> None:
        with self._listeners_lock:
            self._check_open()
            self._listeners.add(listener)
        self._ensure_listener()
        self._listener.subscribe(listener, self._listen_timeout_s)

    def _remove_listener(self, listener: QueueListener) -> None:
        with self._listeners_lock:
            self._listeners.discard(listener)
        self._listener.unsubscribe(listener)
