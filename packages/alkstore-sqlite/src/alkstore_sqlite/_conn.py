"""Connections: opening them the engine's way, and a small pool."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from alkstore.errors import StoreClosed

__all__ = ["ConnectionPool", "connect"]

_SYNCHRONOUS = {"full": "FULL", "normal": "NORMAL"}


def connect(path: str, busy_timeout_s: float, synchronous: str) -> sqlite3.Connection:
    """A connection in autocommit mode (the engine issues BEGIN itself), usable
    from any thread (the pool hands it to one thread at a time)."""
    conn = sqlite3.connect(
        path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
    )
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
    conn.execute(f"PRAGMA synchronous = {_SYNCHRONOUS[synchronous]}")
    return conn


class ConnectionPool:
    """Idle connections kept for reuse; a caller holds one at a time.

    SQLite connections are cheap but not free (each open reads the schema),
    and WAL readers need their own connection, so every operation checks one
    out rather than sharing a connection between threads (ST-4).
    """

    def __init__(self, path: str, busy_timeout_s: float, synchronous: str, keep: int = 8) -> None:
        self._path = path
        self._busy_timeout_s = busy_timeout_s
        self._synchronous = synchronous
        self._keep = keep
        self._idle: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False

    def get(self) -> sqlite3.Connection:
        with self._lock:
            if self._closed:
                raise StoreClosed("the store was closed")
            if self._idle:
                return self._idle.pop()
        return connect(self._path, self._busy_timeout_s, self._synchronous)

    def put(self, conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            # Only after a failure that left the transaction open.
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                conn.close()
                return
        with self._lock:
            if not self._closed and len(self._idle) < self._keep:
                self._idle.append(conn)
                return
        conn.close()

    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        conn = self.get()
        try:
            yield conn
        finally:
            self.put(conn)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
