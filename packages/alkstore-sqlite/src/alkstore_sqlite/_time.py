"""The engine's clock: integer microseconds since the epoch (C-4)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

__all__ = ["from_datetime", "micros", "now_us", "to_datetime"]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICRO = timedelta(microseconds=1)


def now_us() -> int:
    """The process clock, in microseconds. SQLite has no server clock: every
    process on the file reads its own, which on one host is the same clock."""
    return time.time_ns() // 1000


def micros(seconds: float) -> int:
    """A duration in seconds as whole microseconds."""
    return round(seconds * 1_000_000)


def to_datetime(us: int) -> datetime:
    """Exact conversion of stored microseconds to an aware UTC datetime."""
    return _EPOCH + us * _MICRO


def from_datetime(value: datetime) -> int:
    """Exact conversion of an aware datetime to stored microseconds."""
    return (value - _EPOCH) // _MICRO
