"""The kit's plans, step by step, with no engine and no clock but the real one.

:func:`~alkstore.engine.wakes.blocking_plan` (Q-19) and
:func:`~alkstore.engine.schedules.leader_plan` (SC-5) are generators that
say what to do next; these tests play the runner and check each step.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from alkstore.engine import schedules
from alkstore.engine.schedules import Acquire, Pause, Release, Renew, Rest, leader_plan
from alkstore.engine.wakes import (
    ATTEMPT,
    GENERATION,
    NEXT_READY,
    RETRY_READY_S,
    START_WAKES,
    Sleep,
    blocking_plan,
)
from alkstore.errors import StoreClosed, TransientError

# ------------------------------------------------------------ blocking_plan


def test_blocking_plan_returns_the_first_truthy_attempt_without_sleeping() -> None:
    plan = blocking_plan(5.0, None, lazy_wakes=False)
    assert next(plan) is GENERATION
    assert plan.send(7) is ATTEMPT
    with pytest.raises(StopIteration) as done:
        plan.send(["job"])
    assert done.value.value == ["job"]


def test_blocking_plan_with_no_wait_attempts_once_and_returns_the_empty_result() -> None:
    plan = blocking_plan(0.0, None, lazy_wakes=True)
    assert next(plan) is GENERATION
    assert plan.send(0) is ATTEMPT
    with pytest.raises(StopIteration) as done:
        plan.send([])
    assert done.value.value == []


def test_blocking_plan_sleeps_on_the_generation_it_read_before_the_attempt() -> None:
    plan = blocking_plan(5.0, None, lazy_wakes=False)
    next(plan)
    assert plan.send(41) is ATTEMPT
    assert plan.send(None) is NEXT_READY
    before = time.monotonic()
    sleep = plan.send(None)
    assert isinstance(sleep, Sleep)
    assert sleep.seen == 41, "a commit between the read and the attempt must wake the sleep"
    assert before + 4.0 < sleep.until <= before + 5.0  # no fallback: until the deadline


def test_blocking_plan_wakes_for_the_next_ready_row_and_caps_at_the_fallback() -> None:
    plan = blocking_plan(60.0, 2.0, lazy_wakes=False)
    next(plan)
    plan.send(0)
    assert plan.send(None) is NEXT_READY
    before = time.monotonic()
    sleep = plan.send(0.5)
    assert isinstance(sleep, Sleep)
    assert before < sleep.until <= before + 0.5 + 0.1  # the row, not the fallback
    assert plan.send(None) is GENERATION
    plan.send(1)
    plan.send(None)
    before = time.monotonic()
    sleep = plan.send(None)  # no row is coming: the fallback bounds the sleep
    assert isinstance(sleep, Sleep)
    assert before + 1.5 < sleep.until <= before + 2.0 + 0.1


def test_blocking_plan_retries_a_ready_but_untaken_row_after_a_short_pause() -> None:
    plan = blocking_plan(60.0, None, lazy_wakes=False)
    next(plan)
    plan.send(0)
    plan.send(None)
    before = time.monotonic()
    sleep = plan.send(-3.0)  # ready three seconds ago, yet the attempt got nothing
    assert isinstance(sleep, Sleep)
    assert before + RETRY_READY_S * 0.5 <= sleep.until <= before + RETRY_READY_S + 0.1


def test_blocking_plan_with_lazy_wakes_starts_them_then_attempts_again_before_sleeping() -> None:
    plan = blocking_plan(5.0, None, lazy_wakes=True)
    next(plan)
    assert plan.send(0) is ATTEMPT
    assert plan.send(None) is START_WAKES
    assert plan.send(None) is GENERATION, "a commit made while wakes started must not be missed"
    assert plan.send(3) is ATTEMPT
    assert plan.send(None) is NEXT_READY  # started once: no second START_WAKES
    sleep = plan.send(None)
    assert isinstance(sleep, Sleep) and sleep.seen == 3


def test_blocking_plan_returns_the_empty_result_once_wait_s_is_spent() -> None:
    plan = blocking_plan(0.05, None, lazy_wakes=False)
    next(plan)
    plan.send(0)
    plan.send(None)
    assert isinstance(plan.send(None), Sleep)
    time.sleep(0.06)
    assert plan.send(None) is GENERATION
    assert plan.send(0) is ATTEMPT
    with pytest.raises(StopIteration) as done:
        plan.send(None)
    assert done.value.value is None


# -------------------------------------------------------------- leader_plan


class _Lock:
    token = 7


def _drive(plan: Any, replies: list[Any]) -> list[Any]:
    """Send *replies* one by one (an exception is thrown in); the steps seen."""
    steps = [next(plan)]
    for reply in replies:
        try:
            step = plan.throw(reply) if isinstance(reply, BaseException) else plan.send(reply)
        except StopIteration:
            steps.append(StopIteration)
            break
        steps.append(step)
    return steps


def test_leader_plan_takes_the_lock_ticks_and_pauses_until_the_soonest_fire() -> None:
    plan = leader_plan(3.0, "me")
    lock = _Lock()
    steps = _drive(plan, [False, lock, 12, None, 0.2])
    assert steps[0] is schedules.SHOULD_STOP
    assert steps[1] == Acquire(3.0, "me")
    assert steps[2] is schedules.GENERATION
    assert steps[3] is schedules.TICK
    assert steps[4] is schedules.NEXT_FIRE
    pause = steps[5]
    assert isinstance(pause, Pause)
    assert pause.seen == 12 and pause.seconds == pytest.approx(0.2, abs=0.05)


def test_leader_plan_pause_is_bounded_by_the_renewal_without_a_fire() -> None:
    plan = leader_plan(3.0, "me")
    steps = _drive(plan, [False, _Lock(), 1, None, None])
    pause = steps[-1]
    assert isinstance(pause, Pause)
    assert 0.9 < pause.seconds <= 1.0  # a third of the TTL


def test_leader_plan_standby_rests_and_retries_the_lock(caplog: pytest.LogCaptureFixture) -> None:
    plan = leader_plan(0.3, "me")
    with caplog.at_level(logging.INFO, logger="alkstore"):
        steps = _drive(plan, [False, None, None, False])
    assert steps[1] == Acquire(0.3, "me")
    assert isinstance(steps[2], Rest) and steps[2].seconds == pytest.approx(0.1)
    assert steps[3] is schedules.SHOULD_STOP
    assert steps[4] == Acquire(0.3, "me")
    assert sum("standby" in r.getMessage() for r in caplog.records) == 1


def test_leader_plan_renews_after_a_third_of_the_ttl_and_drops_a_lost_lock() -> None:
    plan = leader_plan(0.03, "me")
    lock = _Lock()
    steps = _drive(plan, [False, lock, 1, None, None])
    assert isinstance(steps[-1], Pause)
    time.sleep(0.02)
    assert plan.send(None) is schedules.SHOULD_STOP
    assert plan.send(False) == Renew(lock)
    assert plan.send(False) is schedules.SHOULD_STOP, "a lost lock starts the round again"
    assert plan.send(False) == Acquire(0.03, "me")


def test_leader_plan_rests_after_a_transient_error_and_ends_on_store_closed() -> None:
    plan = leader_plan(3.0, "me")
    steps = _drive(plan, [False, _Lock(), 1, TransientError("busy")])
    assert isinstance(steps[-1], Rest) and steps[-1].seconds == pytest.approx(1.0)
    assert plan.send(None) is schedules.SHOULD_STOP
    assert plan.send(False) is schedules.GENERATION  # still the leader: no new Acquire
    plan.send(2)
    with pytest.raises(StopIteration):
        plan.throw(StoreClosed("closed"))


def test_leader_plan_releases_the_lock_when_stopped() -> None:
    plan = leader_plan(3.0, "me")
    lock = _Lock()
    _drive(plan, [False, lock, 1, None, None])
    assert plan.send(None) is schedules.SHOULD_STOP
    assert plan.send(True) == Release(lock)
    with pytest.raises(StopIteration):
        plan.send(True)


def test_leader_plan_stopped_before_leading_releases_nothing() -> None:
    plan = leader_plan(3.0, "me")
    assert next(plan) is schedules.SHOULD_STOP
    with pytest.raises(StopIteration):
        plan.send(True)
