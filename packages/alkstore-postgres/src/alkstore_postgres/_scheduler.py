"""The scheduler on PostgreSQL (SPEC §9).

Fire times come from the contract package's spec parser, so every engine
fires at the same times, from the server's clock (C-4). Each fire is one
statement: a compare-and-set on the schedule's ``next_fire_at`` and, only
when it matched, the enqueue. However many processes tick at once, one
compare-and-set wins per fire time, and a crash can neither lose nor double
a fire (SC-3). The leader loop is the shared ``run_scheduler_loop`` (SC-5).
"""

from __future__ import annotations

import logging
from typing import Any

from alkstore.engine import (
    SCHEDULES_WAKE_KEY,
    check_schedule_args,
    encode_enqueue_opts,
    plan_fire,
    prepare_job,
    schedule_from_row,
)
from alkstore.errors import InvalidArgument
from alkstore.names import encode_payload, validate_name
from alkstore.specs import parse
from alkstore.types import EnqueueOpts, QueueOpts, Schedule

from ._core import StoreCore, fetch_all, fetch_one, run, utc
from ._queue import insert_params

__all__ = ["ScheduleMixin"]

log = logging.getLogger("alkstore.postgres")


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
        spec and zone keeps its next fire time (SC-2). Wakes the scheduler
        leader, which may need to fire sooner."""
        self._check_open()
        sched_name, parsed, queue_name, zone = check_schedule_args(name, spec, queue, tz)
        params: dict[str, Any] = {
            "name": sched_name,
            "spec": spec,
            "queue": queue_name,
            "payload": encode_payload(payload),
            "opts": encode_enqueue_opts(opts),
            "tz": zone,
            "wake": self._wake_channel,
            "wake_key": SCHEDULES_WAKE_KEY,
        }
        with self._conn() as conn:
            now_row = fetch_one(conn, self._sql.clock, {})
            assert now_row is not None
            # Used only when the spec or zone changed: the upsert keeps the
            # stored time otherwise.
            params["next_fire_at"] = parsed.first_fire(utc(now_row[0]), zone)
            row = fetch_one(conn, self._sql.upsert_schedule, params)
        assert row is not None
        return schedule_from_row(row, utc)

    def unschedule(self, name: str) -> bool:
        """Remove a schedule; ``False`` if there was none."""
        self._check_open()
        params = {
            "name": validate_name(name, "schedule"),
            "wake": self._wake_channel,
            "wake_key": SCHEDULES_WAKE_KEY,
        }
        with self._conn() as conn:
            return run(conn, self._sql.delete_schedule, params) == 1

    def schedules(self) -> list[Schedule]:
        """Every schedule, by name."""
        self._check_open()
        with self._conn() as conn:
            return [
                schedule_from_row(row, utc) for row in fetch_all(conn, self._sql.list_schedules, {})
            ]

    def tick_schedules(self) -> int:
        """Enqueue every due fire exactly once (SC-3), one fire per schedule
        however many were missed (SC-4); return how many fired."""
        self._check_open()
        with self._conn() as conn:
            rows = fetch_all(conn, self._sql.due_schedules, {})
        fired = 0
        for row in rows:
            now, sched = utc(row[0]), schedule_from_row(row[1:], utc)
            try:
                spec = parse(sched.spec)
            except InvalidArgument as exc:  # stored by another version's parser
                log.error("schedule %r has an unusable spec, skipped: %s", sched.name, exc)
                continue
            plan = plan_fire(sched, spec, now)
            if plan is None:
                continue
            job = prepare_job(QueueOpts(), sched.payload, sched.opts)
            params = insert_params(sched.queue, job, self._wake_channel)
            params.update(
                name=sched.name,
                expected=sched.next_fire_at,
                next_fire_at=plan.next_fire_at,
                fire_at=plan.fire_at,
            )
            with self._conn() as conn:
                if run(conn, self._sql.fire_schedule, params) == 1:
                    fired += 1
                    log.debug("schedule %s fired for %s", sched.name, plan.fire_at)
        return fired

    def _seconds_to_next_fire(self) -> float | None:
        with self._conn() as conn:
            row = fetch_one(conn, self._sql.next_fire, {})
        return None if row is None or row[0] is None else float(row[0])
