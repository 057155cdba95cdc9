"""What the worker runtimes share: outcomes, the handler's view of its job,
heartbeat intervals, the checks of a worker's arguments and log lines (W-1,
W-2, W-9, W-11, W-12, A-7).

:class:`~alkstore.worker.Worker` (threads) and
:class:`~alkstore.worker.AsyncWorker` (asyncio) are one code, ``_tasks``,
from which ``_threads`` is generated (docs/adr/0017); they differ only in how
they run handlers and wait. Every rule about what a handler's result means
for its claim is here, once, in plain code both faces call.
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from alkstore.errors import InvalidArgument
from alkstore.names import check_worker_id, default_owner, validate_name
from alkstore.types import check_duration, check_int

__all__ = [
    "MAX_CONCURRENCY",
    "Fail",
    "Outcome",
    "Retry",
    "Running",
    "StopSignal",
    "check_face",
    "error_text",
    "outcome_of",
]

log = logging.getLogger("alkstore.worker")

#: ``last_error`` of a job that a handler retried with a bare ``Retry()`` and
#: that dead-lettered because its budget was spent.
RETRY_DEFAULT_REASON = "retry requested"
#: Most handlers one worker runs at once.
MAX_CONCURRENCY = 1024
#: Shortest heartbeat interval: a floor for tiny visibility timeouts.
MIN_HEARTBEAT_S = 0.005
#: The longest pause after the database failed before the worker claims again.
MAX_ERROR_PAUSE_S = 5.0
#: How often waits re-check a stop request.
SLICE_S = 0.25


def error_text(exc: BaseException) -> str:
    """The ``last_error`` text for an exception: ``"<ExcType>: <message>"`` (W-1)."""
    return f"{type(exc).__name__}: {exc}"


class Retry(Exception):
    """Raise from a handler to retry the job (W-1).

    ``Retry()`` waits by the queue's backoff curve (B-1); ``Retry(delay_s=30)``
    waits 30 s; ``Retry(delay_s=0)`` leaves the job for later at once (W-12).
    *reason* becomes the job's ``last_error`` should the retry find the budget
    spent and dead-letter the job. A bad *delay_s* raises
    :class:`~alkstore.errors.InvalidArgument` at once, which the worker treats
    like any other handler exception.
    """

    def __init__(self, delay_s: float | None = None, reason: str = RETRY_DEFAULT_REASON) -> None:
        self.delay_s = check_duration("delay_s", delay_s, allow_none=True)
        self.reason = str(reason)
        super().__init__(self.reason)

    def __reduce__(self) -> tuple[type[Retry], tuple[float | None, str]]:
        return (type(self), (self.delay_s, self.reason))


class Fail(Exception):
    """Raise from a handler to dead-letter the job now with ``last_error =
    reason``, whatever budget is left (W-1)."""

    def __init__(self, reason: str) -> None:
        self.reason = str(reason)
        super().__init__(self.reason)

    def __reduce__(self) -> tuple[type[Fail], tuple[str]]:
        return (type(self), (self.reason,))


# -------------------------------------------------------------- outcomes

ACK, RETRY, FAIL = "ack", "retry", "fail"


@dataclass(slots=True)
class Outcome:
    """What a handler's end means for its claim (W-1, W-11).

    ``kind`` is the operation (``ack``, ``retry``, ``fail``); ``label`` the
    outcome the metrics count (``acked``, ``retried``, ``failed``, ``dead``,
    ``timeout``; O-1); ``what`` the words of the log line.
    """

    kind: str
    label: str
    error: str | None = None
    delay_s: float | None = None
    what: str = ""
    exc: BaseException | None = None
    #: RS-1: what the ack keeps, for a job stamped with ``result_ttl_s``.
    result: Any = None


def outcome_of(exc: BaseException | None, attempts: int, max_attempts: int) -> Outcome:
    """W-1: return acks, ``Retry`` retries (curve or delay), ``Fail``
    dead-letters, anything else retries by the curve with its text."""
    if exc is None:
        return Outcome(ACK, "acked", what="done")
    exhausted = attempts >= max_attempts
    if isinstance(exc, Fail):
        return Outcome(FAIL, "failed", exc.reason, what=f"failed: {exc.reason}")
    if isinstance(exc, Retry):
        what = "dead-lettered (no attempts left)" if exhausted else "retry requested"
        return Outcome(
            RETRY,
            "dead" if exhausted else "retried",
            exc.reason,
            exc.delay_s,
            f"{what}: {exc.reason}",
        )
    text = error_text(exc)
    what = "dead-lettered (no attempts left)" if exhausted else "will be retried"
    return Outcome(
        RETRY, "dead" if exhausted else "retried", text, None, f"raised {text}; {what}", exc
    )


def timeout_outcome(timeout_s: float, attempts: int, max_attempts: int) -> Outcome:
    """W-11: a handler that ran past ``timeout_s`` is retried by the curve
    (dead-lettered at budget) with ``"timeout after T s"``."""
    text = f"timeout after {timeout_s:g} s"
    exhausted = attempts >= max_attempts
    what = "dead-lettered (no attempts left)" if exhausted else "will be retried"
    return Outcome(RETRY, "timeout", text, None, f"{text}; {what}")


# ------------------------------------------------------- a running job


class StopSignal:
    """The worker-stop half of ``should_stop()`` (W-12): set when the session
    drains, and true as soon as any stop request of the running loop is set
    (its ``stop`` event, ``worker.stop()``). Read when the handler asks, so a
    stop shows at once rather than when the claim loop next looks."""

    __slots__ = ("_drained", "_requests")

    def __init__(self) -> None:
        self._drained = threading.Event()
        self._requests: tuple[Any, ...] = ()

    def watch(self, *requests: Any) -> None:
        """Also turn true when one of *requests* (objects with ``is_set()``:
        ``threading.Event``, ``asyncio.Event``) is set."""
        self._requests = requests

    def set(self) -> None:
        self._drained.set()

    def is_set(self) -> bool:
        return self._drained.is_set() or any(r.is_set() for r in self._requests)


class Running:
    """One started job: its claim, heartbeat schedule and fate.

    ``lock`` serializes the heartbeat thread, the timeout and the end of the
    handler, so an outcome never races a heartbeat of the same claim and a
    refused heartbeat always wins over a later ack (W-2). On an event loop,
    where code between two awaits runs alone, the async worker passes a lock
    that does nothing: a thread's lock held across an await would stall the
    loop.
    """

    __slots__ = (
        "abandoned",
        "done",
        "flushing",
        "handled",
        "interval_s",
        "job",
        "lock",
        "lost",
        "next_beat",
        "outcome",
        "ran_s",
        "refused_in_flush",
        "settled",
        "slot",
        "started",
        "stopping",
        "task",
        "timed_out",
        "view",
    )

    def __init__(
        self,
        job: Any,
        interval_s: float,
        stopping: StopSignal,
        lock: AbstractContextManager[Any] | None = None,
    ) -> None:
        self.job = job
        self.interval_s = interval_s
        self.started = time.monotonic()
        self.next_beat = self.started + first_beat_in(job, interval_s)
        self.lock: AbstractContextManager[Any] = threading.Lock() if lock is None else lock
        self.stopping = stopping  # the worker is stopping (W-12)
        self.done = False  # the handler returned (or was given up on)
        self.handled = False  # the handler call itself has ended
        self.lost = False  # a heartbeat or an op was refused: the claim is gone
        self.flushing = False  # its outcome is in the flush in flight (W-6)
        # A heartbeat was refused during that flush: maybe the flush's own
        # commit as the heartbeat ran; the flush reports what landed.
        self.refused_in_flush = False
        self.abandoned = False  # the grace period ran out: leave it to lapse
        self.timed_out = False  # W-11
        self.settled = False  # the handler settled the job itself (W-9)
        self.outcome: Outcome | None = None  # waiting for the flush (W-6)
        self.slot = True  # holds one of the worker's slots
        self.ran_s: float | None = None  # how long the handler ran (O-1)
        self.task: Any = None  # the coroutine's task or future, to cancel it
        self.view: Any = None

    @property
    def beating(self) -> bool:
        """Whether the claim still needs heartbeats: until its outcome
        committed, unless it was lost, abandoned, settled by the handler or
        timed out (W-2, W-6, W-9, W-11)."""
        return not (
            self.lost or self.abandoned or self.settled or self.timed_out or self.refused_in_flush
        )

    def should_stop(self) -> bool:
        """W-12: the worker stops, the handler timed out, or the claim was lost."""
        return self.stopping.is_set() or self.timed_out or self.lost or self.abandoned

    def beat_refused(self) -> bool:
        """Take in a refused heartbeat (under ``lock``); return whether the
        claim is lost: then nothing acks it (W-2).

        Once the outcome is in the flush in flight, the refusal can be that
        flush committing it (the job is gone) while the heartbeat ran: it
        only stops the heartbeats, and the flush reports what landed (W-6).
        Before that, the claim lapsed or the job was cancelled, unless the
        handler settled the job itself (W-9): a heartbeat that began before
        the handler's own ack waits for that ack's transaction and is refused
        once it commits. The handler's ack stands, and it is not a loss."""
        if self.settled:
            return False
        if self.flushing:
            self.refused_in_flush = True
            return False
        self.lost = True
        return True

    def ref(self) -> str:
        job = self.job
        return f"job {job.id} of queue {job.queue!r} (attempt {job.attempts}/{job.max_attempts})"


class HandlerJobBase:
    """What both faces' view of a running job share: the claim's handle and
    its fields, ``should_stop()`` (W-12), and the note that the handler
    settled its job itself (W-9). The settle operations are each face's
    (``HandlerJob`` of ``_threads``, ``AsyncHandlerJob`` of ``_tasks``)."""

    __slots__ = ("_entry", "_job")

    def __init__(self, job: Any, entry: Running) -> None:
        self._job = job
        self._entry = entry

    def __repr__(self) -> str:
        return f"HandlerJob({self._job!r})"

    def __getattr__(self, name: str) -> Any:
        return getattr(self._job, name)

    @property
    def __alkstore_job__(self) -> Any:
        return getattr(self._job, "__alkstore_job__", self._job)

    @property
    def id(self) -> int:
        return int(self._job.id)

    @property
    def queue(self) -> str:
        return str(self._job.queue)

    @property
    def payload(self) -> Any:
        return self._job.payload

    @property
    def attempts(self) -> int:
        return int(self._job.attempts)

    @property
    def max_attempts(self) -> int:
        return int(self._job.max_attempts)

    @property
    def priority(self) -> int:
        return int(self._job.priority)

    @property
    def deadline(self) -> datetime:
        deadline: datetime = self._job.deadline
        return deadline

    @property
    def checkpoint(self) -> Any:
        """Q-28: the job's last stored progress, ``None`` when never set."""
        return getattr(self._job, "checkpoint", None)

    def _settled(self, ok: bool) -> bool:
        if ok:
            self._entry.settled = True
        return ok

    def should_stop(self) -> bool:
        if self._entry.should_stop():
            return True
        inner = getattr(self._job, "should_stop", None)
        return bool(inner()) if callable(inner) else False


# ------------------------------------------------------------- checks


def heartbeat_interval(job: Any, every_s: float | None) -> float:
    """A third of the claim's visibility timeout (W-2): read from the handle
    when it has the row's stamp, else from the time left on the claim."""
    if every_s is not None:
        return every_s
    timeout = getattr(job, "visibility_timeout_s", None)
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
        timeout = (job.deadline - datetime.now(timezone.utc)).total_seconds()
    return max(float(timeout) / 3.0, MIN_HEARTBEAT_S)


def first_beat_in(job: Any, interval_s: float) -> float:
    """Seconds from a job's start to its first heartbeat (W-2): one interval,
    or less when the claim's clock has already run (a slow hand-off, a busy
    machine): the beat then comes when the claim has two intervals left."""
    deadline = getattr(job, "deadline", None)
    if not isinstance(deadline, datetime) or deadline.tzinfo is None:
        return interval_s
    left = (deadline - datetime.now(timezone.utc)).total_seconds()
    return min(interval_s, max(left - 2 * interval_s, 0.0))


def unit_wait_s(job: Any) -> float:
    """How long ``run_until_empty`` holds a job it claimed past its limiter
    while it waits for the limiter's unit (R-1): half the time left on the
    claim, so that a job the unit does not come for goes back long before
    its claim would lapse."""
    deadline = getattr(job, "deadline", None)
    if not isinstance(deadline, datetime) or deadline.tzinfo is None:
        return 0.0
    return max((deadline - datetime.now(timezone.utc)).total_seconds() / 2, 0.0)


def unit_pause_s(limiter: Any) -> float:
    """The pause after a limiter refused a unit for that long: one emission
    interval (``per_s / rate``), at most a second."""
    return float(min(limiter.per_s / limiter.rate, 1.0))


def is_coroutine_handler(handler: Callable[..., Any]) -> bool:
    """An ``async def`` function, or an object whose ``__call__`` is one (W-8)."""
    if inspect.iscoroutinefunction(handler):
        return True
    call = getattr(handler, "__call__", None)  # noqa: B004 - the method itself
    return inspect.iscoroutinefunction(call)


@dataclass(frozen=True)
class Settings:
    """A worker's checked options."""

    concurrency: int
    worker_id: str
    heartbeat_every_s: float | None
    grace_s: float
    claim_wait_s: float
    timeout_s: float | None
    flush_s: float


def check_settings(
    handler: object,
    concurrency: object,
    worker_id: object,
    heartbeat_every_s: object,
    grace_s: object,
    claim_wait_s: object,
    timeout_s: object,
    flush_s: object,
) -> Settings:
    """Every argument of a worker, checked at construction (W-8: a handler that
    is not callable is refused here, before anything is claimed)."""
    if not callable(handler):
        raise InvalidArgument(f"handler must be callable, not {type(handler).__name__}")
    grace = check_duration("grace_s", grace_s)
    wait = check_duration("claim_wait_s", claim_wait_s, allow_zero=False)
    flush = check_duration("flush_s", flush_s, allow_zero=False)
    assert grace is not None and wait is not None and flush is not None
    return Settings(
        concurrency=check_int("concurrency", concurrency, 1, MAX_CONCURRENCY),
        worker_id=default_owner() if worker_id is None else check_worker_id(worker_id),
        heartbeat_every_s=check_duration(
            "heartbeat_every_s", heartbeat_every_s, allow_zero=False, allow_none=True
        ),
        grace_s=grace,
        claim_wait_s=wait,
        timeout_s=check_duration("timeout_s", timeout_s, allow_zero=False, allow_none=True),
        flush_s=min(flush, 1.0),
    )


def check_face(obj: object, is_async: bool) -> None:
    """A-7: a worker of one face refuses a store or a queue handle of the
    other at construction, naming the worker to use. Told without I/O: the
    async face's claim methods are coroutine functions."""
    method = getattr(obj, "claim_any", None)
    kind = "store"
    if method is None:
        method, kind = getattr(obj, "claim_batch", None), "queue handle"
    if method is None or inspect.iscoroutinefunction(method) == is_async:
        return
    name = type(obj).__name__
    if is_async:
        raise InvalidArgument(
            f"AsyncWorker needs an async {kind}; for a {name} use alkstore.Worker"
        )
    raise InvalidArgument(f"Worker needs a sync {kind}; for an {name} use alkstore.AsyncWorker")


def queue_names_of(queue: object) -> list[object] | None:
    """The queues of a several-queue worker (W-10), or ``None`` for one queue."""
    if isinstance(queue, (str, bytes)) or not isinstance(queue, Sequence):
        return None
    if not queue:
        raise InvalidArgument("a worker needs at least one queue")
    for q in queue:
        if isinstance(q, str):
            validate_name(q, "queue")
        elif not hasattr(q, "claim_batch"):
            raise InvalidArgument(f"not a queue name or handle: {type(q).__name__}")
    return list(queue)


# -------------------------------------------------------------- logging


def log_outcome(wid: str, entry: Running, outcome: Outcome, landed: bool) -> None:
    ref = entry.ref()
    if not landed:
        log.warning(
            "worker %s: %s of %s was refused: the claim lapsed or the job was cancelled",
            wid,
            outcome.kind,
            ref,
        )
        return
    if outcome.kind == ACK:
        log.debug("worker %s: %s done", wid, ref)
    elif outcome.kind == FAIL:
        log.warning("worker %s: %s %s", wid, ref, outcome.what)
    elif outcome.exc is not None:
        level = logging.ERROR if outcome.label == "dead" else logging.WARNING
        log.log(level, "worker %s: %s %s", wid, ref, outcome.what, exc_info=outcome.exc)
    else:
        level = logging.WARNING if outcome.label in ("dead", "timeout") else logging.INFO
        log.log(level, "worker %s: %s %s", wid, ref, outcome.what)


def log_dropped(wid: str, entry: Running, why: str) -> None:
    log.warning("worker %s: %s finished but %s; the result is dropped", wid, entry.ref(), why)


# ---------------------------------------------------------------- flushes


def split_flush(entries: Sequence[Running]) -> tuple[list[Running], list[Running]]:
    """A flush's acks of handles the store can settle in one statement
    (``store.ack_each``), and every other outcome (one operation each, in
    the flush's transaction)."""
    batch: list[Running] = []
    rest: list[Running] = []
    for entry in entries:
        assert entry.outcome is not None
        if entry.outcome.kind == ACK and hasattr(entry.job, "__alkstore_job__"):
            batch.append(entry)
        else:
            rest.append(entry)
    return batch, rest


def apply_args(entry: Running) -> tuple[str, tuple[Any, ...]]:
    """The handle operation that records *entry*'s outcome, and its arguments
    (before ``tx``)."""
    outcome = entry.outcome
    assert outcome is not None
    if outcome.kind == ACK:
        return "ack", ()
    if outcome.kind == FAIL:
        return "fail", (outcome.error,)
    return "retry", (outcome.error, outcome.delay_s)
