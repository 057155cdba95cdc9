# Async source of locks.py (scripts/async_to_sync.py makes it: edit this file).
"""Lock and rate-limit handles (SPEC §8, R-1)."""

from __future__ import annotations

import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

from alkstore._acompat import asleep
from alkstore.errors import StoreClosed

from .locks_base import LockData, RateCommon
from .rows import RateSpec

if TYPE_CHECKING:
    from .seam_async import AsyncExecutor

__all__ = ["AsyncKitLock", "AsyncKitRateLimit"]


class AsyncKitLock(LockData):
    """A held lock; ``async with lock:`` releases it on exit."""

    def __init__(
        self,
        ex: AsyncExecutor[Any],
        name: str,
        owner: str,
        token: int,
        expires_at: datetime,
        ttl_s: float,
    ) -> None:
        super().__init__(name, owner, token, expires_at, ttl_s)
        self._ex = ex

    async def renew(self, ttl_s: float | None = None) -> bool:
        """Extend while held; ``False`` once it lapsed or was released (L-3)."""
        ttl = self._ttl_arg(ttl_s)
        expires = await self._ex.renew_lock(self.name, self.owner, self.token, ttl)
        return self._renewed(expires, ttl)

    async def release(self) -> bool:
        """Give the lock up; ``False`` if no longer held."""
        return await self._ex.release_lock(self.name, self.owner, self.token)

    async def __aenter__(self) -> AsyncKitLock:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.release()


class AsyncKitRateLimit(RateCommon):
    """A GCRA limiter shared through the database (R-1)."""

    def __init__(
        self, ex: AsyncExecutor[Any], spec: RateSpec, rate: float, per_s: float, store_id: str
    ) -> None:
        super().__init__(spec, rate, per_s, store_id)
        self._ex = ex

    async def acquire(self, n: int = 1, wait_s: float = 0) -> bool:
        """Take *n* units, waiting up to *wait_s* for them (C-5: ``False``,
        not an error, when they do not come in time)."""
        count, wait = self._acquire_args(n, wait_s)
        deadline = time.monotonic() + wait
        while True:
            if self._ex.closed:
                raise StoreClosed("the store was closed")
            retry_in = await self._ex.acquire_rate(self._spec, count)
            if retry_in <= 0:
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0 or retry_in > remaining:
                return False
            await asleep(retry_in)
