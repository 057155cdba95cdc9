"""Streams on PostgreSQL (SPEC §7).

Offsets come from a per-stream counter row, bumped by an upsert in the same
statement as the event insert. The upsert locks the counter row until the
publishing transaction ends, so publishers of one stream take offsets one
after the other: a reader never sees offset n+1 before n is committed (S-2),
and a rolled-back publish takes its counter bump with it (S-4). A sequence
would hand out numbers that commit out of order and leave gaps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from alkstore.engine import check_limit, check_offset, check_wait, events_from_rows, wait_for
from alkstore.names import encode_payload, validate_key, validate_name
from alkstore.types import Event

from ._core import fetch_all, fetch_one, run, utc

if TYPE_CHECKING:
    from ._core import StoreCore

__all__ = ["PostgresStream", "stream_wake_key"]


def stream_wake_key(name: str) -> str:
    """The wake key of stream *name* (queues use their bare name)."""
    return "stream:" + name


class PostgresStream:
    """An append-only log with per-consumer offsets (S-1..S-4)."""

    def __init__(self, store: StoreCore, name: str) -> None:
        self._store = store
        self._name = name
        self._sql = store._sql

    def __repr__(self) -> str:
        return f"PostgresStream({self._name!r})"

    @property
    def name(self) -> str:
        return self._name

    def publish(self, payload: Any, key: str | None = None, tx: object | None = None) -> int:
        """Append an event and return its offset (S-1); wakes waiters at
        commit; joins *tx* (T-1, T-3)."""
        self._store._check_open()
        params = {
            "stream": self._name,
            "payload": encode_payload(payload),
            "key": validate_key(key),
            "wake": self._store._wake_channel,
            "wake_key": stream_wake_key(self._name),
        }
        with self._store._conn(tx) as conn:
            row = fetch_one(conn, self._sql.publish, params)
        assert row is not None
        return int(row[0])

    def read(self, after: int = 0, limit: int = 100) -> list[Event]:
        """Events past *after*, in offset order (S-2)."""
        self._store._check_open()
        params = {
            "stream": self._name,
            "after": check_offset("after", after),
            "limit": check_limit(limit),
        }
        with self._store._conn() as conn:
            rows = fetch_all(conn, self._sql.read_events, params)
        return events_from_rows(rows, utc)

    def commit(self, consumer: str, offset: int) -> bool:
        """Move *consumer* forward to *offset*; ``False`` if not forward (S-3)."""
        self._store._check_open()
        name = validate_name(consumer, "consumer")
        seq = check_offset("offset", offset)
        if seq == 0:
            return False  # every consumer starts at 0
        params = {"stream": self._name, "consumer": name, "seq": seq}
        with self._store._conn() as conn:
            return run(conn, self._sql.commit_offset, params) == 1

    def offset(self, consumer: str) -> int:
        """*consumer*'s committed offset, 0 when none."""
        self._store._check_open()
        name = validate_name(consumer, "consumer")
        with self._store._conn() as conn:
            row = fetch_one(conn, self._sql.get_offset, {"stream": self._name, "consumer": name})
        return 0 if row is None else int(row[0])

    def wait(self, after: int, timeout_s: float) -> bool:
        """Block until an event past *after* exists or *timeout_s* passes."""
        self._store._check_open()
        params = {"stream": self._name, "after": check_offset("after", after)}
        timeout = check_wait(timeout_s)

        def exists() -> bool:
            with self._store._conn() as conn:
                row = fetch_one(conn, self._sql.has_event_after, params)
            return bool(row is not None and row[0])

        found: bool = wait_for(
            exists,
            wakes=self._store._wakes,
            key=stream_wake_key(self._name),
            wait_s=timeout,
            is_closed=lambda: self._store.closed,
            on_wait=self._store._ensure_listener,
            fallback_s=self._store._fallback_s(),
        )
        return found

    def trim(self, before: int) -> int:
        """Delete events with offset < *before*; offsets are never reused
        (the counter row stays)."""
        self._store._check_open()
        params = {"stream": self._name, "before": check_offset("before", before)}
        with self._store._conn() as conn:
            return run(conn, self._sql.trim, params)
