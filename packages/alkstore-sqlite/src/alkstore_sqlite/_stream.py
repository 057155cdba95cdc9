"""Streams on SQLite (SPEC §7).

Offsets come from a per-stream counter row bumped in the same transaction as
the event insert. SQLite has one writer at a time, so offsets are handed out
and committed in order: readers never see offset n+1 before n (S-2), and a
rolled-back publish takes its counter bump with it (S-4).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from alkstore.engine import check_limit, check_offset, check_wait, events_from_rows, wait_for
from alkstore.names import encode_payload, validate_key, validate_name
from alkstore.types import Event

from . import _sql
from ._time import now_us, to_datetime

if TYPE_CHECKING:
    from ._core import StoreCore

__all__ = ["SQLiteStream"]


class SQLiteStream:
    """An append-only log with per-consumer offsets (S-1..S-4)."""

    def __init__(self, store: StoreCore, name: str) -> None:
        self._store = store
        self._name = name

    def __repr__(self) -> str:
        return f"SQLiteStream({self._name!r})"

    @property
    def name(self) -> str:
        return self._name

    def publish(self, payload: Any, key: str | None = None, tx: object | None = None) -> int:
        """Append an event and return its offset; joins *tx* (T-1)."""
        self._store._check_open()
        text = encode_payload(payload)
        event_key = validate_key(key)
        with self._store._write(tx) as conn:
            seq = int(conn.execute(_sql.NEXT_SEQ, {"stream": self._name}).fetchone()[0])
            conn.execute(
                _sql.PUBLISH,
                {
                    "stream": self._name,
                    "seq": seq,
                    "key": event_key,
                    "payload": text,
                    "now": now_us(),
                },
            )
        return seq

    def read(self, after: int = 0, limit: int = 100) -> list[Event]:
        """Events past *after*, in offset order (S-2)."""
        self._store._check_open()
        params = {
            "stream": self._name,
            "after": check_offset("after", after),
            "limit": check_limit(limit),
        }
        with self._store._read() as conn:
            rows = conn.execute(_sql.READ_EVENTS, params).fetchall()
        return events_from_rows(rows, to_datetime)

    def commit(self, consumer: str, offset: int) -> bool:
        """Move *consumer* forward to *offset*; ``False`` if not forward (S-3)."""
        self._store._check_open()
        name = validate_name(consumer, "consumer")
        seq = check_offset("offset", offset)
        if seq == 0:
            return False  # every consumer starts at 0
        with self._store._write() as conn:
            params = {"stream": self._name, "consumer": name, "seq": seq}
            return conn.execute(_sql.COMMIT_OFFSET, params).rowcount == 1

    def offset(self, consumer: str) -> int:
        """*consumer*'s committed offset, 0 when none."""
        self._store._check_open()
        name = validate_name(consumer, "consumer")
        with self._store._read() as conn:
            row = conn.execute(_sql.GET_OFFSET, {"stream": self._name, "consumer": name}).fetchone()
        return 0 if row is None else int(row[0])

    def wait(self, after: int, timeout_s: float) -> bool:
        """Block until an event past *after* exists or *timeout_s* passes."""
        self._store._check_open()
        params = {"stream": self._name, "after": check_offset("after", after)}
        timeout = check_wait(timeout_s)

        def exists() -> bool:
            with self._store._read() as conn:
                return bool(conn.execute(_sql.HAS_EVENT_AFTER, params).fetchone()[0])

        found: bool = wait_for(
            exists,
            wakes=self._store._wakes,
            key="stream:" + self._name,
            wait_s=timeout,
            is_closed=lambda: self._store.closed,
            on_wait=self._store._ensure_watcher,
            fallback_s=self._store._fallback_s(),
        )
        return found

    def trim(self, before: int) -> int:
        """Delete events with offset < *before*; offsets are never reused."""
        self._store._check_open()
        params = {"stream": self._name, "before": check_offset("before", before)}
        with self._store._write() as conn:
            return conn.execute(_sql.TRIM, params).rowcount
