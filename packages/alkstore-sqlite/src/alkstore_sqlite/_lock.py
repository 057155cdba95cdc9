"""TTL locks with fencing tokens on SQLite (SPEC §8)."""

from __future__ import annotations

from datetime import datetime

from alkstore.engine import LockHandle, check_lock_args
from alkstore.protocols import Lock

from . import _sql
from ._core import StoreCore
from ._time import micros, now_us, to_datetime

__all__ = ["LockMixin"]


class LockMixin(StoreCore):
    """``store.lock`` and the :class:`~alkstore.engine.LockOps` of its handles."""

    def lock(self, name: str, ttl_s: float, owner: str | None = None) -> Lock | None:
        """Acquire *name* for *ttl_s* seconds, or ``None`` while another owner
        holds it (L-1); the same owner re-acquires with the same token (L-2);
        every fresh acquisition gets a larger token (L-4)."""
        self._check_open()
        lock_name, ttl, lock_owner = check_lock_args(name, ttl_s, owner)
        return self._acquire_internal_lock(lock_name, ttl, lock_owner)

    def _acquire_internal_lock(self, name: str, ttl_s: float, owner: str) -> LockHandle | None:
        """Acquire without the reserved-name check: the engine's own locks."""
        with self._write() as conn:
            now = now_us()
            row = conn.execute(
                _sql.ACQUIRE_LOCK,
                {"name": name, "owner": owner, "expires_at": now + micros(ttl_s), "now": now},
            ).fetchone()
        if row is None:
            return None
        token, expires_at = row
        return LockHandle(name, owner, int(token), to_datetime(expires_at), ttl_s, _ops=self)

    def _lock_params(self, lock: LockHandle, now: int) -> dict[str, object]:
        return {"name": lock.name, "owner": lock.owner, "token": lock.token, "now": now}

    def _renew_lock(self, lock: LockHandle, ttl_s: float) -> datetime | None:
        with self._write() as conn:
            now = now_us()
            params = self._lock_params(lock, now)
            params["expires_at"] = now + micros(ttl_s)
            row = conn.execute(_sql.RENEW_LOCK, params).fetchone()
        return None if row is None else to_datetime(row[0])

    def _release_lock(self, lock: LockHandle) -> bool:
        with self._write() as conn:
            return conn.execute(_sql.RELEASE_LOCK, self._lock_params(lock, now_us())).rowcount == 1
