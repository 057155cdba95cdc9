"""What both faces of ``drain`` share (SPEC FW-2): the report, the checks of
its arguments, the retry curve's delay, and the coroutine that awaits a
handler within its time budget.

The coroutine lives here rather than in ``_drain_async`` because the sync
face is generated from that module and keeps no coroutine of its own: the
sync ``drain`` runs it on the worker's handler loop (W-8).
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from alkstore.backoff import delay as backoff_delay
from alkstore.errors import InvalidArgument
from alkstore.names import check_worker_id
from alkstore.types import check_duration, check_int
from alkstore.worker._loop import HandlerLoop

T = TypeVar("T")

__all__ = [
    "DEFAULT_MAX_RUNS",
    "DrainReport",
    "LazyLoop",
    "Run",
    "RunOf",
    "await_within",
    "check_args",
    "check_queue",
    "curve_delay",
]

#: How many handler calls one ``drain`` makes before it gives up: a handler
#: that enqueues a new job every time would otherwise never let it end.
DEFAULT_MAX_RUNS = 10_000
#: The worker id ``drain`` claims with (shown in ``JobInfo.worker_id``).
DEFAULT_WORKER_ID = "alkstore-drain"


@dataclass(frozen=True)
class Run:
    """One handler call of :func:`~alkstore.testing.drain` and what became of
    its job.

    ``outcome`` is ``"acked"``, ``"retried"`` (pending again at once; a
    worker would have waited ``delay_s``), ``"dead"`` (``Fail``, or no
    attempts left), ``"settled"`` (the handler acked, retried or failed the
    job itself, W-9) or ``"lost"`` (the store refused the outcome: the claim
    lapsed or the job was cancelled meanwhile). ``error`` is the
    ``last_error`` text the worker writes; ``exc`` what the handler raised.
    """

    job_id: int
    queue: str
    attempt: int
    max_attempts: int
    outcome: str
    error: str | None = None
    delay_s: float | None = None
    timed_out: bool = False
    exc: BaseException | None = field(default=None, compare=False, repr=False)


@dataclass
class DrainReport:
    """What one :func:`~alkstore.testing.drain` did, in the order it did it."""

    queue: str
    runs: list[Run] = field(default_factory=list)
    #: Jobs of the queue still waiting for their time when the drain ended
    #: (enqueued with a delay or ``run_at``): ``drain`` does not move them.
    scheduled: int = 0

    @property
    def ran(self) -> int:
        """How many handler calls ran."""
        return len(self.runs)

    @property
    def acked(self) -> list[Run]:
        return [r for r in self.runs if r.outcome == "acked"]

    @property
    def retried(self) -> list[Run]:
        return [r for r in self.runs if r.outcome == "retried"]

    @property
    def dead(self) -> list[Run]:
        return [r for r in self.runs if r.outcome == "dead"]

    @property
    def delays(self) -> list[float]:
        """The backoff a worker would have slept through, one per retry."""
        return [r.delay_s for r in self.runs if r.delay_s is not None]

    @property
    def errors(self) -> list[BaseException]:
        """What the handler raised, one per call that raised (``Retry`` and
        ``Fail`` included)."""
        return [r.exc for r in self.runs if r.exc is not None]

    def raise_errors(self) -> None:
        """Raise the first exception a handler raised that was not ``Retry``
        or ``Fail``: a failed ``assert`` inside a handler is a retry to the
        worker, and this puts its traceback in the test's report."""
        from alkstore.worker import Fail, Retry

        for exc in self.errors:
            if not isinstance(exc, (Retry, Fail)):
                raise exc


class RunOf:
    """Makes the :class:`Run` of one handler call once its outcome is known."""

    __slots__ = ("_exc", "_job")

    def __init__(self, job: Any, exc: BaseException | None) -> None:
        self._job = job
        self._exc = exc

    def __call__(
        self,
        outcome: str,
        error: str | None = None,
        delay_s: float | None = None,
        timed_out: bool = False,
    ) -> Run:
        job = self._job
        return Run(
            job_id=int(job.id),
            queue=str(job.queue),
            attempt=int(job.attempts),
            max_attempts=int(job.max_attempts),
            outcome=outcome,
            error=error,
            delay_s=delay_s,
            timed_out=timed_out,
            exc=self._exc,
        )


class LazyLoop:
    """The sync ``drain``'s event loop for handlers that return awaitables:
    the worker's handler loop (W-8), on a thread of its own, made at the
    first one and stopped when the drain ends."""

    __slots__ = ("_loop",)

    def __init__(self) -> None:
        self._loop: HandlerLoop | None = None

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            self._loop = HandlerLoop()
        result: T = self._loop.submit(coro).result()
        return result

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.stop()
            self._loop = None


def check_args(
    handler: object, timeout_s: object, max_runs: object, worker_id: object
) -> tuple[float | None, int, str]:
    if not callable(handler):
        raise InvalidArgument(f"handler must be callable, not {type(handler).__name__}")
    timeout = check_duration("timeout_s", timeout_s, allow_zero=False, allow_none=True)
    runs = check_int("max_runs", max_runs, 1, 2**31)
    return timeout, runs, check_worker_id(worker_id)


def check_queue(queue: object, is_async: bool) -> None:
    """A queue handle of the right face: ``drain`` takes the sync face's,
    ``adrain`` the async face's (A-7)."""
    claim = getattr(queue, "claim", None)
    if claim is None or not hasattr(queue, "name"):
        raise InvalidArgument(f"queue must be a queue handle, not {type(queue).__name__}")
    if inspect.iscoroutinefunction(claim) != is_async:
        if is_async:
            raise InvalidArgument("adrain needs an async queue handle; for a sync one use drain")
        raise InvalidArgument("drain needs a sync queue handle; for an async one use adrain")


def curve_delay(attempt: int, base_s: float, rng: Callable[[], float]) -> float:
    """The delay a ``retry`` without one waits: the queue's curve (B-1), as
    the engine kit computes it."""
    return backoff_delay(max(attempt, 1), base_s, rng)


def usable_base(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) and number >= 0 else None


async def await_within(awaitable: Awaitable[Any], timeout_s: float | None) -> bool:
    """Await a handler's awaitable; with *timeout_s*, cancel it when it runs
    longer and return ``True`` (W-11). What it raises is raised."""
    if timeout_s is None:
        await awaitable
        return False
    task = asyncio.ensure_future(awaitable)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout_s)
    except BaseException:  # the drain itself was cancelled
        task.cancel()
        raise
    if task in done:
        task.result()
        return False
    task.cancel()
    try:
        await task
    except BaseException as exc:  # its cancellation, or what it raised while stopping
        if not isinstance(exc, (asyncio.CancelledError, Exception)):
            raise
    return True
