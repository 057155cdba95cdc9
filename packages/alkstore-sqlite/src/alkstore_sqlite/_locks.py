"""Locks of the SQLite executor (SPEC §8, docs/adr/0005): one row per lock
name, whose fencing token grows by one for each new holder (L-4)."""

from __future__ import annotations

import sqlite3
from datetime import datetime

from alkstore.types import LockInfo

from . import _sql
from ._core import Core
from ._time import micros, now_us, to_datetime

__all__ = ["LockOps"]


class LockOps:
    """Acquiring, renewing, releasing and listing locks."""

    def __init__(self, core: Core) -> None:
        self._read = core.read
        self._write = core.write

    def acquire_lock(self, name: str, owner: str, ttl_s: float) -> tuple[int, datetime] | None:
        def run(conn: sqlite3.Connection) -> tuple[int, datetime] | None:
            now = now_us()
            params = {"name": name, "owner": owner, "expires_at": now + micros(ttl_s), "now": now}
            rows = conn.execute(_sql.ACQUIRE_LOCK, params).fetchall()
            if not rows:
                return None
            token, expires_at = rows[0]
            return int(token), to_datetime(expires_at)

        return self._write(None, run, single=True)

    def renew_lock(self, name: str, owner: str, token: int, ttl_s: float) -> datetime | None:
        def run(conn: sqlite3.Connection) -> datetime | None:
            now = now_us()
            params = {"name": name, "owner": owner, "token": token, "now": now}
            params["expires_at"] = now + micros(ttl_s)
            rows = conn.execute(_sql.RENEW_LOCK, params).fetchall()
            return to_datetime(rows[0][0]) if rows else None

        return self._write(None, run, single=True)

    def release_lock(self, name: str, owner: str, token: int) -> bool:
        def run(conn: sqlite3.Connection) -> bool:
            params = {"name": name, "owner": owner, "token": token, "now": now_us()}
            return conn.execute(_sql.RELEASE_LOCK, params).rowcount == 1

        return self._write(None, run, single=True)

    def held_locks(self) -> list[LockInfo]:
        with self._read() as conn:
            rows = conn.execute(_sql.HELD_LOCKS, {"now": now_us()}).fetchall()
        return [LockInfo(n, o, int(t), to_datetime(e)) for n, o, t, e in rows]
