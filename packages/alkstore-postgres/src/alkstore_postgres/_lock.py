"""TTL locks with fencing tokens on PostgreSQL (SPEC §8).

One upsert acquires: a free or expired row is taken with ``token + 1``, the
same owner's live row gets its TTL reset and keeps its token, another
owner's live row returns nothing. Rows are never deleted, a release only
expires them, so tokens grow forever (L-4).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from alkstore.engine import LockHandle, check_lock_args
from alkstore.protocols import Lock

from ._core import StoreCore, fetch_one, run, utc

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
        """Acquire without the reserved-name check: the engine's own locks
        (the scheduler's leader lock, SC-5)."""
        params = {"name": name, "owner": owner, "ttl_s": ttl_s}
        with self._conn() as conn:
            row = fetch_one(conn, self._sql.acquire_lock, params)
        if row is None:
            return None
        token, expires_at = row
        return LockHandle(name, owner, int(token), utc(expires_at), ttl_s, _ops=self)

    @staticmethod
    def _lock_params(lock: LockHandle) -> dict[str, Any]:
        return {"name": lock.name, "owner": lock.owner, "token": lock.token}

    def _renew_lock(self, lock: LockHandle, ttl_s: float) -> datetime | None:
        params = self._lock_params(lock)
        params["ttl_s"] = ttl_s
        with self._conn() as conn:
            row = fetch_one(conn, self._sql.renew_lock, params)
        return None if row is None else utc(row[0])

    def _release_lock(self, lock: LockHandle) -> bool:
        with self._conn() as conn:
            return run(conn, self._sql.release_lock, self._lock_params(lock)) == 1
