"""Lock and rate-limit handles (SPEC §8, R-1), sync and async side by side."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING

from alkstore.errors import InvalidArgument, StoreClosed
from alkstore.types import check_duration, check_int

from .prepare import check_wait
from .rows import RateSpec

if TYPE_CHECKING:
    from .seam import AsyncExecutor, Executor

__all__ = ["AsyncKitLock", "AsyncKitRateLimit", "KitLock", "KitRateLimit"]


class _LockData:
    """A held lock (L-1..L-4): its name, owner, fencing token and expiry."""

    def __init__(self, name: str, owner: str, token: int, expires_at: datetime, ttl_s: float):
        self.name = name
        self.owner = owner
        self.token = token
        self.expires_at = expires_at
        self.ttl_s = ttl_s

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, owner={self.owner!r}, token={self.token})"

    def _ttl_arg(self, ttl_s: object) -> float:
        ttl = check_duration("ttl_s", ttl_s, allow_zero=False, allow_none=True)
        return self.ttl_s if ttl is None else ttl

    def _renewed(self, expires: datetime | None, ttl: float) -> bool:
        if expires is None:
            return False
        self.expires_at = expires
        self.ttl_s = ttl
        return True


class KitLock(_LockData):
    """A held lock; ``with lock:`` releases it on exit."""

    def __init__(
        self,
        ex: Executor,
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
        return self._renewed(self._ex.renew_lock(self.name, self.owner, self.token, ttl), ttl)

    def release(self) -> bool:
        """Give the lock up; ``False`` if no longer held."""
        return self._ex.release_lock(self.name, self.owner, self.token)

    def __enter__(self) -> KitLock:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


class AsyncKitLock(_LockData):
    """A held lock of the async store; ``async with lock:`` releases it."""

    def __init__(
        self,
        ex: AsyncExecutor,
        name: str,
        owner: str,
        token: int,
        expires_at: datetime,
        ttl_s: float,
    ) -> None:
        super().__init__(name, owner, token, expires_at, ttl_s)
        self._ex = ex

    async def renew(self, ttl_s: float | None = None) -> bool:
        ttl = self._ttl_arg(ttl_s)
        expires = await self._ex.renew_lock(self.name, self.owner, self.token, ttl)
        return self._renewed(expires, ttl)

    async def release(self) -> bool:
        return await self._ex.release_lock(self.name, self.owner, self.token)

    async def __aenter__(self) -> AsyncKitLock:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.release()


class _RateCommon:
    def __init__(self, spec: RateSpec, rate: float, per_s: float, store_id: str) -> None:
        self._spec = spec
        self._rate = float(rate)
        self._per_s = per_s
        self._store_id = store_id

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self._spec.name!r}, rate={self._rate:g}, "
            f"per_s={self._per_s:g}, burst={self._spec.burst})"
        )

    @property
    def name(self) -> str:
        return self._spec.name

    @property
    def rate(self) -> float:
        return self._rate

    @property
    def per_s(self) -> float:
        return self._per_s

    @property
    def burst(self) -> int:
        return self._spec.burst

    def _acquire_args(self, n: object, wait_s: object) -> tuple[int, float]:
        count = check_int("n", n, 1, 2**31 - 1)
        if count > self._spec.burst:
            raise InvalidArgument(
                f"cannot take {count} units at once from a limiter with burst {self._spec.burst}"
            )
        return count, check_wait(wait_s)


class KitRateLimit(_RateCommon):
    """A GCRA limiter shared through the database (R-1)."""

    def __init__(
        self, ex: Executor, spec: RateSpec, rate: float, per_s: float, store_id: str
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
            time.sleep(retry_in)


class AsyncKitRateLimit(_RateCommon):
    """The async face of :class:`KitRateLimit`."""

    def __init__(
        self, ex: AsyncExecutor, spec: RateSpec, rate: float, per_s: float, store_id: str
    ) -> None:
        super().__init__(spec, rate, per_s, store_id)
        self._ex = ex

    async def acquire(self, n: int = 1, wait_s: float = 0) -> bool:
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
            await asyncio.sleep(retry_in)
