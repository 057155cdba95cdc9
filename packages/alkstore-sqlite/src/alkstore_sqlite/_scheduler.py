"""The scheduler on SQLite (SPEC §9).

Fire times come from the contract package's spec parser, so every engine
fires at the same times. Each fire is a compare-and-set on the schedule's
``next_fire_at`` in the same transaction as the enqueue: a tick that loses
the race enqueues nothing, and a crash between the two cannot lose or double
a fire (SC-3). The leader loop is the shared ``run_scheduler_loop`` (SC-5).
"""

from __future__ import annotations

import logging
from typing import Any

from alkstore.engine import (
    check_schedule_args,
    encode_enqueue_opts,
    plan_fire,
    prepare_job,
    schedule_from_row,
)
from alkstore.names import encode_payload, validate_name
from alkstore.specs import parse
from alkstore.types import EnqueueOpts, QueueOpts, Schedule

from . import _sql
from ._core import StoreCore
from ._queue import insert_params
from ._time import from_datetime, now_us, to_datetime

__all__ = ["ScheduleMixin"]

log = logging.getLogger("alkstore.sqlite")


class ScheduleMixin(StoreCore):
    """``schedule``, ``unschedule``, ``schedules`` and ``tick_schedules``
    (``run_schedules`` is on the store, which has the lock it needs)."""

    def schedule(
        self,
        name: str,
        spec: str,
        queue: str,
        payload: Any = None,
        opts: EnqueueOpts | None = None,
        tz: str = "UTC",
    ) -> Schedule:
        """Create or update a schedule (SC-1). Re-registering it with the same
        spec and zone keeps its next fire time (SC-2)."""
        self._check_open()
        sched_name, parsed, queue_name, zone = check_schedule_args(name, spec, queue, tz)
        text = encode_payload(payload)
        opts_text = encode_enqueue_opts(opts)
        with self._write() as conn:
            now = now_us()
            existing = conn.execute(_sql.GET_SCHEDULE, {"name": sched_name}).fetchone()
            if existing is not None and existing[1] == spec and existing[5] == zone:
                next_fire = int(existing[6])
            else:
                next_fire = from_datetime(parsed.first_fire(to_datetime(now), zone))
            conn.execute(
                _sql.UPSERT_SCHEDULE,
                {
                    "name": sched_name,
                    "spec": spec,
                    "queue": queue_name,
                    "payload": text,
                    "opts": opts_text,
                    "tz": zone,
                    "next_fire_at": next_fire,
                    "now": now,
                },
            )
            row = conn.execute(_sql.GET_SCHEDULE, {"name": sched_name}).fetchone()
        return schedule_from_row(row, to_datetime)

    def unschedule(self, name: str) -> bool:
        """Remove a schedule; ``False`` if there was none."""
        self._check_open()
        sched_name = validate_name(name, "schedule")
        with self._write() as conn:
            return conn.execute(_sql.DELETE_SCHEDULE, {"name": sched_name}).rowcount == 1

    def schedules(self) -> list[Schedule]:
        """Every schedule, by name."""
        self._check_open()
        with self._read() as conn:
            return [
                schedule_from_row(row, to_datetime) for row in conn.execute(_sql.LIST_SCHEDULES)
            ]

    def tick_schedules(self) -> int:
        """Enqueue every due fire exactly once (SC-3), one fire per schedule
        however many were missed (SC-4); return how many fired."""
        self._check_open()
        now = now_us()
        with self._read() as conn:
            due = [
                schedule_from_row(row, to_datetime)
                for row in conn.execute(_sql.DUE_SCHEDULES, {"now": now})
            ]
        fired = 0
        for sched in due:
            plan = plan_fire(sched, parse(sched.spec), to_datetime(now))
            if plan is None:
                continue
            if self._fire(sched, from_datetime(plan.fire_at), from_datetime(plan.next_fire_at)):
                fired += 1
        return fired

    def _fire(self, sched: Schedule, fire_at: int, next_fire_at: int) -> bool:
        job = prepare_job(QueueOpts(), sched.payload, sched.opts)
        with self._write() as conn:
            advanced = conn.execute(
                _sql.ADVANCE_SCHEDULE,
                {
                    "name": sched.name,
                    "expected": from_datetime(sched.next_fire_at),
                    "next_fire_at": next_fire_at,
                    "fire_at": fire_at,
                },
            ).rowcount
            if advanced != 1:
                return False  # another tick fired it first
            conn.execute(_sql.ENQUEUE, insert_params(sched.queue, job, now_us()))
        log.debug("schedule %s fired for %s", sched.name, to_datetime(fire_at))
        return True

    def _seconds_to_next_fire(self) -> float | None:
        with self._read() as conn:
            (next_fire,) = conn.execute(_sql.NEXT_FIRE).fetchone()
        return None if next_fire is None else (next_fire - now_us()) / 1_000_000
