"""Schedules of the SQLite executor (SPEC §9, docs/adr/0006): the rows the
kit's scheduler plans over, and the compare-and-set that fires one."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from alkstore.engine import Fire, ScheduleRow, schedule_row

from . import _sql
from ._core import Core
from ._queues import insert_params
from ._time import from_datetime, now_us, to_datetime

__all__ = ["ScheduleOps"]


def _schedule_row(row: Sequence[Any]) -> ScheduleRow:
    return schedule_row(row, to_datetime)


class ScheduleOps:
    """The engine's clock and the schedule rows."""

    def __init__(self, core: Core) -> None:
        self._read = core.read
        self._write = core.write

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

    def fire_schedule(self, fire: Fire) -> bool:
        cas = {
            "name": fire.name,
            "expected": from_datetime(fire.expected),
            "next_fire_at": from_datetime(fire.next_fire_at),
            "last_fire_at": from_datetime(fire.fire_at),
        }
        queue, job = fire.queue, fire.job

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
