# Generated from stream_async.py by scripts/async_to_sync.py: edit that file, not this one.
"""Stream handles (SPEC §7)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from alkstore.errors import StoreClosed
from alkstore.names import validate_name
from alkstore.types import Event

from .infos import events_of
from .native import resolve_sync
from .prepare import check_offset, check_wait
from .runners import run_blocking
from .stream_base import StreamBase
from .wakes import blocking_plan

if TYPE_CHECKING:
    from .seam import Executor

__all__ = ["KitStream"]


class KitStream(StreamBase):
    """An append-only log with per-consumer offsets (S-1..S-4)."""

    def __init__(self, ex: Executor[Any], name: str) -> None:
        super().__init__(name)
        self._ex = ex

    def _check_open(self) -> None:
        if self._ex.closed:
            raise StoreClosed("the store was closed")

    def publish(self, payload: Any, key: str | None = None, tx: object | None = None) -> int:
        """Append an event and return its offset; joins *tx* (T-1)."""
        self._check_open()
        text, event_key = self._publish_args(payload, key)
        return self._ex.publish(resolve_sync(tx, self._ex), self._name, event_key, text)

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
        """Wait until an event past *after* exists or *timeout_s* passes."""
        self._check_open()
        start = check_offset("after", after)
        timeout = check_wait(timeout_s, "timeout_s")

        def attempt(idle: bool) -> bool:
            return self._ex.has_event_after(self._name, start)

        found: bool = run_blocking(
            blocking_plan(timeout, self._ex.fallback_s(), lazy_wakes=True),
            wakes=self._ex.wakes,
            keys=self._keys,
            attempt=attempt,
            is_closed=lambda: self._ex.closed,
            start_wakes=self._ex.start_wakes,
        )
        return found

    def trim(self, before: int) -> int:
        """Delete events with offset < *before*; offsets are never reused."""
        self._check_open()
        return self._ex.trim(self._name, check_offset("before", before))
