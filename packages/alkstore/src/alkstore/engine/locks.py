# Generated from locks_async.py by scripts/async_to_sync.py: edit that file, not this one.
"""Lock and rate-limit handles (SPEC §8, R-1)."""

from __future__ import annotations

import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

from alkstore._acompat import sleep
from alkstore.errors import StoreClosed

from .locks_base import LockData, RateCommon
from .rows import RateSpec

if TYPE_CHECKING:
    from .seam import Executor

__all__ = ["KitLock", "KitRateLimit"]


class KitLock(LockData):
    """A held lock; ``with lock:`` releases it on exit."""

    def __init__(
        self,
        ex: Executor[Any],
        name: str,
        owner: str,
        token: int,
        expires_at: datetime,
        ttl_s: float,
    ) -> None:
        super().__init__(name, owner, token, expires_at, ttl_s)
        self._ex = ex

    def renew(self, ttl_s: float | None = None) -> bool:
        """Extend while held; ``False`` once it lapsed or was released (L-3)."""
        ttl = self._ttl_arg(ttl_s)
        expires = self._ex.renew_lock(self.name, self.owner, self.token, ttl)
        return self._renewed(expires, ttl)

    def release(self) -> bool:
        """Give the lock up; ``False`` if no longer held."""
        return self._ex.release_lock(self.name, self.owner, self.token)

    def __enter__(self) -> KitLock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


class KitRateLimit(RateCommon):
    """A GCRA limiter shared through the database (R-1)."""

    def __init__(
        self, ex: Executor[Any], spec: RateSpec, rate: float, per_s: float, store_id: str
    ) -> None:
        super().__init__(spec, rate, per_s, store_id)
        self._ex = ex

    def acquire(self, n: int = 1, wait_s: float = 0) -> bool:
        """Take *n* units, waiting up to *wait_s* for them (C-5: ``False``,
        not an error, when they do not come in time)."""
        count, wait = self._acquire_args(n, wait_s)
        deadline = time.monotonic() + wait
        while True:
            if self._ex.closed:
                raise StoreClosed("the store was closed")
            retry_in = self._ex.acquire_rate(self._spec, count)
            if retry_in <= 0:
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0 or retry_in > remaining:
                return False
            sleep(retry_in)
