"""Streams, locks, notifications and schedules of the SQLite executor
(SPEC §7-§10); their SQL is in :mod:`._sql`, the design in docs/adr/0005 and
docs/adr/0006.

Streams take offsets from a per-stream counter row bumped in the same
transaction as the event insert. SQLite has one writer at a time, so offsets
are handed out and committed in order (S-2), and a rolled-back publish takes
its counter bump with it (S-4). A notification is a row inserted in the
writer's transaction, so it exists only after commit (T-3); the wake watcher
hands new rows to the listeners of their channel (N-1).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from alkstore.engine import EventRow, NewJob, ScheduleRow, schedule_row, stream_stats_of
from alkstore.types import LockInfo, StreamStats

from . import _sql
from ._queues import QueueOps, insert_params
from ._time import from_datetime, micros, now_us, to_datetime

__all__ = ["SQLiteExecutor"]


def _schedule_row(row: Sequence[Any]) -> ScheduleRow:
    return schedule_row(row, to_datetime)


class SQLiteExecutor(QueueOps):
    """The whole :class:`~alkstore.engine.seam.Executor` of the SQLite engine."""

    # -------------------------------------------------------------- streams

    def publish(self, tx: object | None, stream: str, key: str | None, payload: str) -> int:
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

    # ---------------------------------------------------------------- locks

    def acquire_lock(self, name: str, owner: str, ttl_s: float) -> tuple[int, datetime] | None:
        def run(conn: sqlite3.Connection) -> tuple[int, datetime] | None:
            now = now_us()
            params = {"name": name, "owner": owner, "expires_at": now + micros(ttl_s), "now": now}
            rows = conn.execute(_sql.ACQUIRE_LOCK, params).fetchall()
            if not rows:
                return None
            token, expires_at = rows[0]
            return int(token), to_datetime(expires_at)

        return self._write(None, run, single=True)

    def renew_lock(self, name: str, owner: str, token: int, ttl_s: float) -> datetime | None:
        def run(conn: sqlite3.Connection) -> datetime | None:
            now = now_us()
            params = {"name": name, "owner": owner, "token": token, "now": now}
            params["expires_at"] = now + micros(ttl_s)
            rows = conn.execute(_sql.RENEW_LOCK, params).fetchall()
            return to_datetime(rows[0][0]) if rows else None

        return self._write(None, run, single=True)

    def release_lock(self, name: str, owner: str, token: int) -> bool:
        def run(conn: sqlite3.Connection) -> bool:
            params = {"name": name, "owner": owner, "token": token, "now": now_us()}
            return conn.execute(_sql.RELEASE_LOCK, params).rowcount == 1

        return self._write(None, run, single=True)

    def held_locks(self) -> list[LockInfo]:
        with self._read() as conn:
            rows = conn.execute(_sql.HELD_LOCKS, {"now": now_us()}).fetchall()
        return [LockInfo(n, o, int(t), to_datetime(e)) for n, o, t, e in rows]

    # -------------------------------------------------------- notifications

    def notify(self, tx: object | None, channel: str, payload: str) -> None:
        every = self._prune_every
        keep = max(self._notifications_cap, every)

        def run(conn: sqlite3.Connection) -> None:
            params = {"channel": channel, "payload": payload, "now": now_us()}
            note_id = int(conn.execute(_sql.NOTIFY, params).fetchall()[0][0])
            # EN-1: the notifying writes keep the table within cap + cap/10.
            if note_id % every == 0 and note_id > keep:
                conn.execute(_sql.PRUNE_NOTIFICATIONS_BELOW, {"below": note_id - keep})

        self._write(tx, run)

    # ------------------------------------------------------------ schedules

    def clock(self) -> datetime:
        return to_datetime(now_us())

    def upsert_schedule(self, row: ScheduleRow) -> ScheduleRow:
        params = {
            "name": row.name,
            "spec": row.spec,
            "queue": row.queue,
            "payload": row.payload,
            "opts": row.opts,
            "tz": row.tz,
            "next_fire_at": from_datetime(row.next_fire_at),
        }

        def run(conn: sqlite3.Connection) -> ScheduleRow:
            stored = conn.execute(_sql.UPSERT_SCHEDULE, {**params, "now": now_us()}).fetchall()
            return _schedule_row(stored[0])

        return self._write(None, run, single=True)

    def delete_schedule(self, name: str) -> bool:
        return self._write(
            None,
            lambda conn: conn.execute(_sql.DELETE_SCHEDULE, {"name": name}).rowcount == 1,
            single=True,
        )

    def list_schedules(self) -> list[ScheduleRow]:
        with self._read() as conn:
            return [_schedule_row(r) for r in conn.execute(_sql.LIST_SCHEDULES)]

    def due_schedules(self) -> tuple[datetime, list[ScheduleRow]]:
        now = now_us()
        with self._read() as conn:
            rows = [_schedule_row(r) for r in conn.execute(_sql.DUE_SCHEDULES, {"now": now})]
        return to_datetime(now), rows

    def fire_schedule(
        self,
        name: str,
        expected: datetime,
        fire_at: datetime,
        next_fire_at: datetime,
        queue: str,
        job: NewJob,
    ) -> bool:
        cas = {
            "name": name,
            "expected": from_datetime(expected),
            "next_fire_at": from_datetime(next_fire_at),
            "fire_at": from_datetime(fire_at),
        }

        def run(conn: sqlite3.Connection) -> bool:
            if conn.execute(_sql.ADVANCE_SCHEDULE, cas).rowcount != 1:
                return False  # another tick fired it first
            conn.execute(_sql.ENQUEUE, insert_params(queue, job, now_us())).fetchall()
            return True

        return self._write(None, run)

    def seconds_to_next_fire(self) -> float | None:
        with self._read() as conn:
            (next_fire,) = conn.execute(_sql.NEXT_FIRE).fetchone()
        return None if next_fire is None else (next_fire - now_us()) / 1_000_000
