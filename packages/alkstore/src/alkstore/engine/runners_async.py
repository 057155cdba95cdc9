# Async source of runners.py (scripts/async_to_sync.py makes it: edit this file).
"""The runners: what carries out the kit's plans, one per face.

A plan (:func:`.wakes.blocking_plan`, :func:`.schedules.leader_plan`) is a
generator of steps that holds every decision; a runner only performs each
step with the store's I/O and sends the result back. So the blocking loop of
``claim(wait_s=...)``, ``claim_any``, ``Stream.wait`` and the rate-limit
wait, and the scheduler's leader loop, are written once and cannot differ
between the faces: the sync runners are generated from these.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import Any, TypeVar

from alkstore._acompat import AEvent, aevent_wait
from alkstore.errors import StoreClosed, TransientError

from .schedules import (
    GENERATION as LEADER_GENERATION,
)
from .schedules import (
    NEXT_FIRE,
    SCHEDULES_WAKE_KEY,
    SHOULD_STOP,
    TICK,
    Acquire,
    LeaderPlan,
    Pause,
    Release,
    Renew,
    Rest,
)
from .wakes import (
    ATTEMPT,
    CLOSE_CHECK_S,
    GENERATION,
    NEXT_READY,
    START_WAKES,
    Plan,
    Sleep,
    WakeBoard,
)

__all__ = ["run_blocking_async", "run_leader_async", "run_plan_async"]

T = TypeVar("T")
S = TypeVar("S")

_SCHEDULER_KEYS = (SCHEDULES_WAKE_KEY,)


async def run_blocking_async(
    plan: Plan,
    *,
    wakes: WakeBoard,
    keys: Sequence[str],
    attempt: Callable[[bool], Awaitable[T]],
    is_closed: Callable[[], bool],
    start_wakes: Callable[[], Awaitable[object]],
    next_ready: Callable[[], Awaitable[float | None]] | None = None,
) -> T:
    """Run *plan* (:func:`.wakes.blocking_plan`) to its result. *attempt* gets
    ``idle``: ``True`` once an earlier attempt found nothing. Waits are sliced
    so that a ``close()`` is noticed promptly, and never block an event loop."""
    value: Any = None
    attempts = 0
    try:
        while True:
            step = plan.send(value)
            value = None
            if step is GENERATION:
                if is_closed():
                    raise StoreClosed("the store was closed")
                value = wakes.generation(keys)
            elif step is ATTEMPT:
                value = await attempt(attempts > 0)
                attempts += 1
            elif step is START_WAKES:
                await start_wakes()
            elif step is NEXT_READY:
                value = None if next_ready is None else await next_ready()
            else:
                assert isinstance(step, Sleep)
                while not is_closed():
                    remaining = step.until - time.monotonic()
                    if remaining <= 0:
                        break
                    if await wakes.wait_async(keys, step.seen, min(remaining, CLOSE_CHECK_S)):
                        break
    except StopIteration as done:
        result: T = done.value
        return result


async def run_leader_async(
    plan: LeaderPlan,
    *,
    stop: AEvent,
    is_closed: Callable[[], bool],
    wakes: WakeBoard,
    acquire: Callable[[float, str], Awaitable[Any]],
    tick: Callable[[], Awaitable[object]],
    next_fire: Callable[[], Awaitable[float | None]],
) -> None:
    """Run :func:`.schedules.leader_plan` until *stop* is set; every wait is
    sliced so that a stop is honoured within a quarter of a second."""

    def stopping() -> bool:
        return stop.is_set() or is_closed()

    async def sleep(seconds: float, seen: int | None) -> None:
        deadline = time.monotonic() + max(seconds, 0.0)
        while not stopping():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            if seen is None:
                await aevent_wait(stop, min(remaining, CLOSE_CHECK_S))
            elif await wakes.wait_async(_SCHEDULER_KEYS, seen, min(remaining, CLOSE_CHECK_S)):
                return

    async def perform(step: Any) -> Any:
        if step is SHOULD_STOP:
            return stopping()
        if isinstance(step, Acquire):
            return await acquire(step.ttl_s, step.owner)
        if isinstance(step, Renew):
            return await step.lock.renew()
        if step is LEADER_GENERATION:
            return wakes.generation(_SCHEDULER_KEYS)
        if step is TICK:
            return await tick()
        if step is NEXT_FIRE:
            return await next_fire()
        if isinstance(step, Pause):
            await sleep(step.seconds, step.seen)
        elif isinstance(step, Rest):
            await sleep(step.seconds, None)
        elif isinstance(step, Release):
            return await step.lock.release()
        return None

    await run_plan_async(plan, perform, (TransientError, StoreClosed))


async def run_plan_async(
    plan: Generator[S, Any, None],
    perform: Callable[[S], Awaitable[Any]],
    thrown: tuple[type[BaseException], ...],
) -> None:
    """Run *plan* to its end: *perform* carries out each step it yields and
    the result is sent back. An error of one of the *thrown* kinds is thrown
    into the plan instead, for the plan to decide what follows; any other
    error ends the run. For plans that outlive failures, such as the
    scheduler's leader loop and an engine's listener connection."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = plan.throw(error) if error is not None else plan.send(value)
        except StopIteration:
            return
        value, error = None, None
        try:
            value = await perform(step)
        except thrown as exc:
            error = exc
