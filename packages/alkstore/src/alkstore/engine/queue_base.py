"""What both faces of a queue handle share (SPEC §5, §15, §16): argument
checks, payload encoding and stamping (Q-1), the rate-limit pause. The
handles are in :mod:`.queue_async` (the source) and :mod:`.queue`
(generated)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from alkstore._protocols_base import Capability
from alkstore._tracecontext import trace_context_text
from alkstore.errors import InvalidArgument
from alkstore.types import EnqueueOpts, JobState, QueueOpts, check_duration, check_int

from .capabilities import require
from .codec import let_the_loop_run
from .faces import FaceMark, check_face
from .jobs_base import JobData, handle_of
from .named import NamedHandle
from .prepare import (
    MAX_CLAIM_BATCH,
    check_conflict,
    check_ids,
    check_limit,
    check_unique_key,
    check_wait,
    check_worker_id,
    prepare_job,
)
from .rows import NewJob, RateSpec

__all__ = [
    "FULL_FIRST_PAUSE_S",
    "FULL_MAX_PAUSE_S",
    "QueueBase",
    "check_bounded_wait",
    "check_conflict_args",
    "check_items",
    "check_payloads",
    "claim_args",
    "jobs_of",
    "rate_pause",
    "rate_spec",
]

#: First and longest pause of ``enqueue(..., wait_s=)`` on a full queue:
#: acks send no wake for it (Q-24), so it polls, backing off.
FULL_FIRST_PAUSE_S = 0.01
FULL_MAX_PAUSE_S = 0.5


# ----------------------------------------------------------- shared checks


def check_payloads(payloads: object) -> Sequence[Any]:
    if isinstance(payloads, (str, bytes)) or not isinstance(payloads, Sequence):
        raise InvalidArgument("payloads must be a sequence (list or tuple) of payloads")
    return payloads


def check_items(items: object) -> list[tuple[str, Any]]:
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise InvalidArgument("items must be a sequence of (key, payload) pairs")
    pairs: list[tuple[str, Any]] = []
    for item in items:
        if not isinstance(item, tuple) or len(item) != 2:
            raise InvalidArgument("items must be (key, payload) pairs")
        pairs.append((check_unique_key(item[0]), item[1]))
    return pairs


def jobs_of(
    opts: QueueOpts,
    payloads: Sequence[Any],
    eopts: EnqueueOpts | None,
    keys: Sequence[str | None] | None = None,
) -> list[NewJob]:
    """Every payload encoded before any statement runs (C-3, C-6)."""
    trace = trace_context_text()
    first = prepare_job(
        opts, payloads[0], eopts, unique_key=None if keys is None else keys[0], trace_context=trace
    )
    jobs = [first]
    let_the_loop_run(first.payload)
    for i in range(1, len(payloads)):
        job = prepare_job(
            opts,
            payloads[i],
            eopts,
            unique_key=None if keys is None else keys[i],
            trace_context=trace,
        )
        jobs.append(job)
        let_the_loop_run(job.payload)
    return jobs


def check_conflict_args(
    capabilities: frozenset[Capability],
    on_conflict: object,
    debounce_s: object,
    max_wait_s: object,
    opts: object,
) -> tuple[bool, float | None, float | None]:
    """Q-29's arguments of ``enqueue_unique`` checked (:func:`check_conflict`),
    and refused with ``UnsupportedOperation`` by an engine that does not
    declare ``replace_debounce`` (CF-1)."""
    replace, debounce, wait = check_conflict(on_conflict, debounce_s, max_wait_s, opts)
    if replace or debounce is not None:
        require(capabilities, Capability.REPLACE_DEBOUNCE)
    return replace, debounce, wait


def check_bounded_wait(wait_s: object, tx: object | None) -> float:
    wait = check_wait(wait_s)
    if wait and tx is not None:
        raise InvalidArgument("wait_s cannot be used with tx: waiting would hold the transaction")
    return wait


def claim_args(worker_id: object, n: object, wait_s: object) -> tuple[str, int, float]:
    return (
        check_worker_id(worker_id),
        check_int("n", n, 1, MAX_CLAIM_BATCH),
        check_wait(wait_s),
    )


def rate_spec(rate_limit: object, store_id: str, async_face: bool) -> RateSpec | None:
    """The limiter a claim takes its units from (R-1), checked: one of this
    store and of this face (A-7)."""
    if rate_limit is None:
        return None
    spec = getattr(rate_limit, "_spec", None)
    if not isinstance(spec, RateSpec) or getattr(rate_limit, "_store_id", None) != store_id:
        raise InvalidArgument("rate_limit must be a rate limit of this store (store.rate_limit)")
    check_face("rate_limit", rate_limit, "acquire", async_face)
    return spec


def rate_pause(ready_in: float | None, rate: RateSpec | None) -> float | None:
    """With a limiter, a ready row is retried no sooner than the next unit
    could come, rather than every few milliseconds."""
    if ready_in is None or rate is None:
        return ready_in
    return max(ready_in, min(rate.interval_s, 1.0))


class QueueBase(FaceMark, NamedHandle):
    """Name, opts and the checks both faces share."""

    _face_method = "claim_batch"

    def __init__(self, name: str, opts: QueueOpts) -> None:
        super().__init__(name)
        self._opts = opts
        self._names = (name,)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._name!r}, {self._opts!r})"

    @property
    def opts(self) -> QueueOpts:
        """The opts every enqueue through this handle is stamped with (Q-1)."""
        return self._opts

    @staticmethod
    def _state_arg(state: object) -> JobState:
        try:
            return JobState(state)
        except ValueError as exc:
            raise InvalidArgument(f"unknown job state {state!r}") from exc

    @staticmethod
    def _list_args(limit: object, after_id: object) -> tuple[int, int]:
        return check_limit(limit), check_int("after_id", after_id, 0, 2**63 - 1)

    @staticmethod
    def _purge_args(job_ids: object, older_than_s: object) -> tuple[list[int] | None, float | None]:
        return check_ids(job_ids), check_duration("older_than_s", older_than_s, allow_none=True)

    def _mine_with(
        self, jobs: object, store_id: str, results: object
    ) -> tuple[list[JobData], list[Any] | None]:
        """:meth:`_mine`, and the results (RS-1) of the handles it keeps, in
        step with them; ``None`` when no results were given."""
        if results is None:
            return self._mine(jobs, store_id), None
        if isinstance(jobs, (str, bytes)) or not isinstance(jobs, Sequence):
            raise InvalidArgument("jobs must be a sequence of claimed jobs")
        if isinstance(results, (str, bytes)) or not isinstance(results, Sequence):
            raise InvalidArgument("results must be a sequence with one result per job")
        if len(results) != len(jobs):
            raise InvalidArgument(
                f"results must hold one result per job: {len(results)} for {len(jobs)} jobs"
            )
        handles: list[JobData] = []
        kept: list[Any] = []
        for job, value in zip(jobs, results, strict=True):
            h = handle_of(job, self._async_face)
            if h.queue == self._name and h._store_id == store_id:
                handles.append(h)
                kept.append(value)
        return handles, kept

    def _mine(self, jobs: object, store_id: str) -> list[JobData]:
        """The handles that belong to this queue of this store; the rest
        count 0 (C-7)."""
        if isinstance(jobs, (str, bytes)) or not isinstance(jobs, Sequence):
            raise InvalidArgument("jobs must be a sequence of claimed jobs")
        handles = [handle_of(job, self._async_face) for job in jobs]
        return [h for h in handles if h.queue == self._name and h._store_id == store_id]
