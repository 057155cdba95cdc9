"""Streams of the SQLite executor (SPEC §7, docs/adr/0005).

Offsets come from a per-stream counter row bumped in the same transaction as
the event insert. SQLite has one writer at a time, so offsets are handed out
and committed in order (S-2), and a rolled-back publish takes its counter
bump with it (S-4).
"""

from __future__ import annotations

import sqlite3

from alkstore.engine import EventRow, stream_stats_of
from alkstore.types import StreamStats

from . import _sql
from ._core import Core
from ._time import now_us, to_datetime

__all__ = ["StreamOps"]


class StreamOps:
    """Publishing, reading, consumer offsets and trimming."""

    def __init__(self, core: Core) -> None:
        self._read = core.read
        self._write = core.write

    def publish(
        self, tx: sqlite3.Connection | None, stream: str, key: str | None, payload: str
    ) -> int:
        def run(conn: sqlite3.Connection) -> int:
            seq = int(conn.execute(_sql.NEXT_SEQ, {"stream": stream}).fetchall()[0][0])
            params = {"stream": stream, "seq": seq, "key": key, "payload": payload}
            conn.execute(_sql.PUBLISH, {**params, "now": now_us()})
            return seq

        return self._write(tx, run)

    def read_events(self, stream: str, after: int, limit: int) -> list[EventRow]:
        params = {"stream": stream, "after": after, "limit": limit}
        with self._read() as conn:
            rows = conn.execute(_sql.READ_EVENTS, params).fetchall()
        return [EventRow(int(seq), key, payload, to_datetime(at)) for seq, key, payload, at in rows]

    def has_event_after(self, stream: str, after: int) -> bool:
        with self._read() as conn:
            row = conn.execute(_sql.HAS_EVENT_AFTER, {"stream": stream, "after": after}).fetchone()
        return bool(row[0])

    def commit_offset(self, stream: str, consumer: str, offset: int) -> bool:
        params = {"stream": stream, "consumer": consumer, "seq": offset}
        return self._write(
            None, lambda conn: conn.execute(_sql.COMMIT_OFFSET, params).rowcount == 1, single=True
        )

    def get_offset(self, stream: str, consumer: str) -> int:
        with self._read() as conn:
            row = conn.execute(_sql.GET_OFFSET, {"stream": stream, "consumer": consumer}).fetchone()
        return 0 if row is None else int(row[0])

    def trim(self, stream: str, before: int) -> int:
        params = {"stream": stream, "before": before}
        return self._write(None, lambda conn: conn.execute(_sql.TRIM, params).rowcount, single=True)

    def stream_stats(self) -> list[StreamStats]:
        with self._read() as conn:
            streams = conn.execute(_sql.STREAM_STATS).fetchall()
            consumers = conn.execute(_sql.CONSUMERS).fetchall()
        return stream_stats_of(streams, consumers)
