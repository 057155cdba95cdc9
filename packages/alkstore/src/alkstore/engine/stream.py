"""Stream handles (SPEC §7), sync and async side by side."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from alkstore.errors import StoreClosed
from alkstore.names import encode_payload, validate_key, validate_name
from alkstore.types import Event

from .infos import events_of
from .prepare import check_limit, check_offset, check_wait
from .wakes import blocking_plan, run_blocking, run_blocking_async

if TYPE_CHECKING:
    from .seam import AsyncExecutor, Executor

__all__ = ["AsyncKitStream", "KitStream"]


class _StreamCommon:
    def __init__(self, name: str) -> None:
        self._name = name
        self._keys = ("stream:" + name,)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._name!r})"

    @property
    def name(self) -> str:
        return self._name

    @staticmethod
    def _publish_args(payload: Any, key: object) -> tuple[str, str | None]:
        return encode_payload(payload), validate_key(key)

    @staticmethod
    def _read_args(after: object, limit: object) -> tuple[int, int]:
        return check_offset("after", after), check_limit(limit)

    @staticmethod
    def _commit_args(consumer: object, offset: object) -> tuple[str, int]:
        return validate_name(consumer, "consumer"), check_offset("offset", offset)


class KitStream(_StreamCommon):
    """An append-only log with per-consumer offsets (S-1..S-4)."""

    def __init__(self, ex: Executor, name: str) -> None:
        super().__init__(name)
        self._ex = ex

    def _check_open(self) -> None:
        if self._ex.closed:
            raise StoreClosed("the store was closed")

    def publish(self, payload: Any, key: str | None = None, tx: object | None = None) -> int:
        """Append an event and return its offset; joins *tx* (T-1)."""
        self._check_open()
        text, event_key = self._publish_args(payload, key)
        return self._ex.publish(tx, self._name, event_key, text)

    def read(self, after: int = 0, limit: int = 100) -> list[Event]:
        """Events past *after*, in offset order (S-2)."""
        self._check_open()
        start, count = self._read_args(after, limit)
        return events_of(self._ex.read_events(self._name, start, count))

    def commit(self, consumer: str, offset: int) -> bool:
        """Move *consumer* forward to *offset*; ``False`` if not forward (S-3)."""
        self._check_open()
        name, seq = self._commit_args(consumer, offset)
        if seq == 0:
            return False  # every consumer starts at 0
        return self._ex.commit_offset(self._name, name, seq)

    def offset(self, consumer: str) -> int:
        """*consumer*'s committed offset, 0 when none."""
        self._check_open()
        return self._ex.get_offset(self._name, validate_name(consumer, "consumer"))

    def wait(self, after: int, timeout_s: float) -> bool:
        """Block until an event past *after* exists or *timeout_s* passes."""
        self._check_open()
        start = check_offset("after", after)
        timeout = check_wait(timeout_s, "timeout_s")
        found: bool = run_blocking(
            blocking_plan(timeout, self._ex.fallback_s(), lazy_wakes=True),
            wakes=self._ex.wakes,
            keys=self._keys,
            attempt=lambda idle: self._ex.has_event_after(self._name, start),
            is_closed=lambda: self._ex.closed,
            start_wakes=self._ex.start_wakes,
        )
        return found

    def trim(self, before: int) -> int:
        """Delete events with offset < *before*; offsets are never reused."""
        self._check_open()
        return self._ex.trim(self._name, check_offset("before", before))


class AsyncKitStream(_StreamCommon):
    """The async face of :class:`KitStream`."""

    def __init__(self, ex: AsyncExecutor, name: str) -> None:
        super().__init__(name)
        self._ex = ex

    def _check_open(self) -> None:
        if self._ex.closed:
            raise StoreClosed("the store was closed")

    async def publish(self, payload: Any, key: str | None = None, tx: object | None = None) -> int:
        self._check_open()
        text, event_key = self._publish_args(payload, key)
        return await self._ex.publish(tx, self._name, event_key, text)

    async def read(self, after: int = 0, limit: int = 100) -> list[Event]:
        self._check_open()
        start, count = self._read_args(after, limit)
        return events_of(await self._ex.read_events(self._name, start, count))

    async def commit(self, consumer: str, offset: int) -> bool:
        self._check_open()
        name, seq = self._commit_args(consumer, offset)
        if seq == 0:
            return False
        return await self._ex.commit_offset(self._name, name, seq)

    async def offset(self, consumer: str) -> int:
        self._check_open()
        return await self._ex.get_offset(self._name, validate_name(consumer, "consumer"))

    async def wait(self, after: int, timeout_s: float) -> bool:
        self._check_open()
        start = check_offset("after", after)
        timeout = check_wait(timeout_s, "timeout_s")

        async def attempt(idle: bool) -> bool:
            return await self._ex.has_event_after(self._name, start)

        found: bool = await run_blocking_async(
            blocking_plan(timeout, self._ex.fallback_s(), lazy_wakes=True),
            wakes=self._ex.wakes,
            keys=self._keys,
            attempt=attempt,
            is_closed=lambda: self._ex.closed,
            start_wakes=self._ex.start_wakes,
        )
        return found

    async def trim(self, before: int) -> int:
        self._check_open()
        return await self._ex.trim(self._name, check_offset("before", before))
