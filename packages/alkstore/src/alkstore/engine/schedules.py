"""The scheduler (SPEC §9), written once for every engine and both faces.

Fire planning (:func:`plan_fire`) is pure. A tick asks the engine for the
due schedules at its own clock and fires each with one compare-and-set
(SC-3). The leader-elected loop of ``run_schedules`` (SC-5) is one plan,
:func:`leader_plan`, run by :func:`run_leader` on a thread or by
:func:`run_leader_async` in a task.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Generator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from alkstore.errors import InvalidArgument, StoreClosed, TransientError
from alkstore.specs import ScheduleSpec, parse
from alkstore.types import QueueOpts, check_duration

from .prepare import decode_enqueue_opts, default_owner, prepare_job
from .rows import NewJob, ScheduleRow
from .wakes import Step

__all__ = [
    "GENERATION",
    "NEXT_FIRE",
    "SCHEDULER_LOCK",
    "SCHEDULES_WAKE_KEY",
    "SHOULD_STOP",
    "TICK",
    "Acquire",
    "FirePlan",
    "LeaderPlan",
    "Pause",
    "Release",
    "Renew",
    "Rest",
    "leader_plan",
    "plan_fire",
    "schedule_job",
]

log = logging.getLogger("alkstore.scheduler")

#: The leader lock of ``run_schedules`` (SC-5).
SCHEDULER_LOCK = "__alkstore.scheduler"
#: Wake key bumped when a schedule is created, changed or removed.
SCHEDULES_WAKE_KEY = "__alkstore.schedules"
_PLAIN = QueueOpts()


@dataclass(frozen=True)
class FirePlan:
    """What a due schedule does at a tick: enqueue once for ``fire_at`` (the
    latest missed fire), then wait for ``next_fire_at`` (SC-4)."""

    fire_at: datetime
    next_fire_at: datetime


def plan_fire(
    next_fire_at: datetime, spec: ScheduleSpec, now: datetime, tz: str
) -> FirePlan | None:
    """The fire a tick at *now* owes a schedule due at *next_fire_at*, or
    ``None`` if none is due."""
    if next_fire_at > now:
        return None
    return FirePlan(
        fire_at=spec.latest_fire(next_fire_at, now, tz),
        next_fire_at=spec.next_fire(next_fire_at, now, tz),
    )


def schedule_job(row: ScheduleRow) -> NewJob:
    """The job a fire of *row* enqueues: its stored payload with its opts
    (plain queue defaults), stamped like any enqueue (Q-1)."""
    job = prepare_job(_PLAIN, None, decode_enqueue_opts(row.opts))
    return NewJob(
        payload=row.payload,
        priority=job.priority,
        delay_s=job.delay_s,
        run_at=None,
        max_attempts=job.max_attempts,
        visibility_timeout_s=job.visibility_timeout_s,
        backoff_base_s=job.backoff_base_s,
        dead_letter_retention_s=job.dead_letter_retention_s,
        expires_s=job.expires_s,
        group=job.group,
        result_ttl_s=job.result_ttl_s,
    )


def due_fires(now: datetime, rows: list[ScheduleRow]) -> list[tuple[ScheduleRow, FirePlan]]:
    """The fires a tick at *now* owes; a schedule whose stored spec this
    version cannot parse is logged and skipped."""
    fires = []
    for row in rows:
        try:
            spec = parse(row.spec)
        except InvalidArgument as exc:
            log.error("schedule %r has an unusable spec, skipped: %s", row.name, exc)
            continue
        plan = plan_fire(row.next_fire_at, spec, now, row.tz)
        if plan is not None:
            fires.append((row, plan))
    return fires


def log_fire(row: ScheduleRow, plan: FirePlan) -> None:
    log.info(
        "schedule %s fired for %s on queue %r; next at %s",
        row.name,
        plan.fire_at.isoformat(),
        row.queue,
        plan.next_fire_at.isoformat(),
    )


def check_loop_args(owner: object, lock_ttl_s: object) -> tuple[str, float]:
    from alkstore.names import validate_name

    ttl = check_duration("lock_ttl_s", lock_ttl_s, allow_zero=False)
    assert ttl is not None
    me = (
        validate_name(owner, "owner", allow_reserved=True) if owner is not None else default_owner()
    )
    return me, ttl


# ------------------------------------------------------------- the loop


SHOULD_STOP = Step("should_stop")
GENERATION = Step("generation")
TICK = Step("tick")
NEXT_FIRE = Step("next_fire")


@dataclass(frozen=True)
class Acquire:
    ttl_s: float
    owner: str


@dataclass(frozen=True)
class Renew:
    lock: Any


@dataclass(frozen=True)
class Release:
    lock: Any


@dataclass(frozen=True)
class Rest:
    """Sleep *seconds* unless stopped."""

    seconds: float


@dataclass(frozen=True)
class Pause:
    """Sleep *seconds* unless stopped or a schedule changed (past *seen*)."""

    seconds: float
    seen: int


LeaderPlan = Generator[Any, Any, None]


def leader_plan(ttl_s: float, owner: str) -> LeaderPlan:
    """The leader-elected scheduler (SC-5) as steps for a runner.

    The leader holds :data:`SCHEDULER_LOCK`, renews it every third of its
    TTL, ticks, and sleeps until the soonest fire, a schedule change or the
    next renewal. A standby retries the lock at the same cadence, so it takes
    over within the TTL after the leader dies. Exactly-once firing does not
    rest on the lock: ticks compare-and-set each fire (SC-3). A busy database
    or a dropped connection (``TransientError``) is retried next round.
    """
    renew_every = max(ttl_s / 3.0, 0.01)
    lock: Any = None
    renewed_at = 0.0
    standby = False
    while not (yield SHOULD_STOP):
        try:
            if lock is None:
                lock = yield Acquire(ttl_s, owner)
                if lock is None:
                    if not standby:
                        log.info("scheduler %s: standby (another scheduler leads)", owner)
                        standby = True
                    yield Rest(renew_every)
                    continue
                standby = False
                log.info("scheduler %s: leader (token %s)", owner, lock.token)
                renewed_at = time.monotonic()
            elif time.monotonic() - renewed_at >= renew_every:
                if not (yield Renew(lock)):
                    log.warning("scheduler %s: lost the leader lock", owner)
                    lock = None
                    continue
                renewed_at = time.monotonic()
            # Read before the tick: a change committed meanwhile still wakes us.
            seen = yield GENERATION
            yield TICK
            until_fire = yield NEXT_FIRE
        except TransientError as exc:
            log.warning("scheduler %s: %s; retrying", owner, exc)
            yield Rest(renew_every)
            continue
        except StoreClosed:
            return
        until_renew = renew_every - (time.monotonic() - renewed_at)
        yield Pause(until_renew if until_fire is None else min(until_fire, until_renew), seen)
    if lock is not None:
        try:
            yield Release(lock)
        except (TransientError, StoreClosed):
            log.warning("scheduler %s: could not release the leader lock; it expires", owner)
