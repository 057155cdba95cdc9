# Generated from _drain_async.py by scripts/async_to_sync.py: edit that file, not this one.
"""``drain``: run a handler inline over a queue until nothing is claimable
(SPEC FW-2). ``alkstore.testing.drain`` is the sync face's and
``alkstore.testing.adrain`` the async face's: each is the ``drain`` of its
face's module, ``_drain`` being generated from ``_drain``.

Every rule about what a handler's end means is the worker's own code
(``alkstore.worker._rules``: W-1, W-9, W-11), applied through the public
job operations. The one difference is time: where a worker's retry waits
out the backoff, ``drain`` records the delay the worker would have waited
and makes the job due at once with ``job.retry(error, delay_s=0)``, the
contract's immediate retry (Q-10). At an exhausted budget that same retry
dead-letters the job with the error, exactly as the worker's does.
"""

from __future__ import annotations

import contextlib
import inspect
import random
import time
from collections.abc import Callable
from typing import Any

from alkstore.protocols import Job, Queue
from alkstore.worker import _hooks
from alkstore.worker._rules import (
    ACK,
    FAIL,
    Outcome,
    Running,
    StopSignal,
    heartbeat_interval,
    log_outcome,
    outcome_of,
    timeout_outcome,
)
from alkstore.worker._threads import Handler, HandlerJob

from ._common import (
    DEFAULT_MAX_RUNS,
    DEFAULT_WORKER_ID,
    DrainReport,
    LazyLoop,
    Run,
    RunOf,
    await_within,
    check_args,
    check_queue,
    curve_delay,
    usable_base,
)

__all__ = ["drain"]


def drain(
    queue: Queue,
    handler: Handler,
    *,
    timeout_s: float | None = None,
    max_runs: int = DEFAULT_MAX_RUNS,
    worker_id: str = DEFAULT_WORKER_ID,
    rng: Callable[[], float] = random.random,
) -> DrainReport:
    """Claim the jobs of *queue* one at a time and run *handler* on each,
    inline, until none is claimable; return a :class:`DrainReport`.

    Each job ends as a worker's would (W-1): the handler returns, the job is
    acked; it raises ``Fail``, the job is dead-lettered with the reason; it
    raises ``Retry`` or any other exception, the job is retried, by the
    queue's backoff curve (B-1, drawn with *rng*) or the ``Retry``'s own
    delay, with the worker's ``last_error`` text, and dead-lettered when no
    attempts are left. A handler that settled its job itself is left alone
    (W-9). With *timeout_s*, a handler that runs longer is timed out as by
    the worker's ``timeout_s`` (W-11): an awaitable is cancelled, a plain
    call is judged when it returns.

    Nothing sleeps: a retried job is made due at once (the delay a worker
    would have waited is in the report) and runs again in this same drain,
    until it is acked or dead. Jobs enqueued with a delay of their own stay
    scheduled (``report.scheduled``).

    The handler gets the worker's view of the job (``should_stop()``,
    ``ack``/``retry``/``fail`` that mark it settled). A coroutine handler is
    awaited (on the sync face, on a loop of its own thread, as the worker
    does); a plain one is called directly. An exception that is not an
    ``Exception`` (``KeyboardInterrupt``, ``pytest.fail``, a cancellation)
    gives the job back unstarted (Q-26) and propagates. More than *max_runs*
    handler calls raise ``RuntimeError``.
    """
    check_queue(queue, is_async=False)
    timeout, limit, wid = check_args(handler, timeout_s, max_runs, worker_id)
    report = DrainReport(queue.name)
    loops = LazyLoop()  # W-8: awaitables run on a loop of its own thread
    try:
        while True:
            job = queue.claim(wid)
            if job is None:
                break
            if report.ran >= limit:
                job.release()
                raise RuntimeError(
                    f"drain ran {limit} handler calls on queue {queue.name!r} and it still "
                    "has claimable jobs; pass a larger max_runs if that is expected"
                )
            report.runs.append(_run_one(queue, job, handler, timeout, wid, rng, loops))
        report.scheduled = (queue.stats()).scheduled
    finally:
        if loops is not None:
            loops.stop()
    return report


def _run_one(
    queue: Queue,
    job: Job,
    handler: Handler,
    timeout_s: float | None,
    wid: str,
    rng: Callable[[], float],
    loops: LazyLoop | None,
) -> Run:
    entry = Running(job, heartbeat_interval(job, None), StopSignal(), contextlib.nullcontext())
    entry.view = HandlerJob(job, entry)
    _hooks.claimed(job)
    raised: BaseException | None = None
    try:
        with _hooks.handler_span(job):
            result = handler(entry.view)
            if inspect.isawaitable(result):
                assert loops is not None
                entry.timed_out = loops.run(await_within(result, timeout_s))
    except Exception as exc:
        raised = exc
    except BaseException:
        if not entry.settled:
            with contextlib.suppress(Exception):
                job.release()  # as if never started
        raise
    entry.handled = True
    entry.ran_s = time.monotonic() - entry.started
    if timeout_s is not None and not entry.settled and entry.ran_s >= timeout_s:
        entry.timed_out = True  # a plain call the worker would have timed out meanwhile
    done = RunOf(job, raised)
    if entry.settled:  # W-9: the worker records nothing more either
        return done("settled")
    if entry.timed_out:
        assert timeout_s is not None
        outcome = timeout_outcome(timeout_s, job.attempts, job.max_attempts)
    else:
        outcome = outcome_of(raised, job.attempts, job.max_attempts)
    landed, delay = _apply(queue, job, outcome, rng)
    log_outcome(wid, entry, outcome, landed)
    _hooks.finished(job, outcome.label if landed else "lost", entry.ran_s)
    if not landed:
        return done("lost", outcome.error, None, entry.timed_out)
    if outcome.kind == ACK:
        return done("acked")
    if outcome.kind == FAIL or job.attempts >= job.max_attempts:
        return done("dead", outcome.error, None, entry.timed_out)
    return done("retried", outcome.error, delay, entry.timed_out)


def _apply(
    queue: Queue, job: Job, outcome: Outcome, rng: Callable[[], float]
) -> tuple[bool, float | None]:
    """Record *outcome* on the job, as the worker's flush does, except that a
    retry is due at once; return whether it landed and the delay skipped."""
    if outcome.kind == ACK:
        return bool(job.ack()), None
    if outcome.kind == FAIL:
        assert outcome.error is not None
        return bool(job.fail(outcome.error)), None
    assert outcome.error is not None
    delay = outcome.delay_s
    if delay is None and job.attempts < job.max_attempts:
        delay = curve_delay(job.attempts, _backoff_base(queue, job), rng)
    return bool(job.retry(outcome.error, 0.0)), delay


def _backoff_base(queue: Queue, job: Job) -> float:
    """The job's ``backoff_base_s``: on the engine kit's handle, else from
    ``get_job`` (Q-14)."""
    base: Any = usable_base(getattr(job, "backoff_base_s", None))
    if base is None:
        info = queue.get_job(job.id)
        base = 0.0 if info is None else info.backoff_base_s
    return float(base)
