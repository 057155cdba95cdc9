"""What the lock and rate-limit handles of both faces share (SPEC §8, R-1):
their data and argument checks; :mod:`.locks_async` is the I/O."""

from __future__ import annotations

from datetime import datetime

from alkstore.errors import InvalidArgument
from alkstore.types import check_duration, check_int

from .faces import FaceMark
from .prepare import check_wait
from .rows import RateSpec

__all__ = ["LockData", "RateCommon"]


class LockData:
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


class RateCommon(FaceMark):
    _face_method = "acquire"

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
