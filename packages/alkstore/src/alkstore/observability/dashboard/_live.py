"""Live jobs as the dashboard lists them (O-6): the states it offers, a page
of one queue's jobs in a state, and the count of each state.

Only the public API is read: ``Queue.list_jobs`` and ``queue_stats()``.

The states are the contract's :class:`~alkstore.types.JobState`, in its
order, with one view added: ``scheduled``, a pending job whose ``run_at``
is still ahead (``queue_stats()`` counts it apart from the ready ones, and
so does the CLI). A state the contract gains later is listed by itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from alkstore.errors import AlkstoreError
from alkstore.protocols import Queue
from alkstore.types import JobInfo, JobState, QueueStats

__all__ = [
    "COUNT_CAP",
    "PAGE_SIZE",
    "SCAN_CAP",
    "SCHEDULED",
    "Listing",
    "job_states",
    "list_state",
    "shown_state",
    "state_counts",
]

#: The view of a pending job whose ``run_at`` is ahead.
SCHEDULED = "scheduled"
#: Jobs on one page of a listing.
PAGE_SIZE = 50
#: Most pending rows one request reads to split ready from scheduled ones.
SCAN_CAP = 2_000
#: A state that ``queue_stats()`` does not count is counted by listing it,
#: up to this many (shown as ``1,000+`` beyond).
COUNT_CAP = 1_000
_SCAN_PAGE = 500


def job_states() -> tuple[str, ...]:
    """The states a queue's page offers: the contract's, in the order of a
    job's life (``waiting`` before ``pending``, whatever place ``JobState``
    gives it), with ``scheduled`` right after ``pending``."""
    states: list[str] = []
    for state in sorted(JobState, key=lambda s: s is not JobState.WAITING):  # stable
        states.append(state.value)
        if state is JobState.PENDING:
            states.append(SCHEDULED)
    return tuple(states)


def is_scheduled(info: JobInfo, now: datetime) -> bool:
    return info.state is JobState.PENDING and info.run_at > now


def shown_state(info: JobInfo, now: datetime) -> str:
    """The state the dashboard shows for *info*: ``scheduled`` for a pending
    job not ready yet."""
    return SCHEDULED if is_scheduled(info, now) else info.state.value


@dataclass(frozen=True)
class Listing:
    """One page of a state: its *jobs*, and where the next page starts
    (``None``: this is the last). *scanned_to* is set when the page stopped
    at :data:`SCAN_CAP` rows read with fewer jobs found than a page holds."""

    jobs: list[JobInfo]
    next_after: int | None
    scanned_to: int | None = None


def list_state(queue: Queue, state: str, after: int, now: datetime) -> Listing:
    """The page of *queue*'s jobs in *state* (one of :func:`job_states`)
    with ids above *after*, ascending."""
    if state in (JobState.PENDING.value, SCHEDULED):
        return _split_pending(queue, state == SCHEDULED, after, now)
    found = queue.list_jobs(JobState(state), limit=PAGE_SIZE + 1, after_id=after)
    if len(found) > PAGE_SIZE:
        return Listing(found[:PAGE_SIZE], found[PAGE_SIZE - 1].id)
    return Listing(found, None)


def _split_pending(queue: Queue, scheduled: bool, after: int, now: datetime) -> Listing:
    """Pending jobs that are ready (or, with *scheduled*, not yet): pages of
    ``list_jobs(PENDING)`` filtered by ``run_at``, reading at most
    :data:`SCAN_CAP` rows."""
    found: list[JobInfo] = []
    scanned = 0
    cursor = after
    while scanned < SCAN_CAP:
        page = queue.list_jobs(JobState.PENDING, limit=_SCAN_PAGE, after_id=cursor)
        scanned += len(page)
        for info in page:
            if is_scheduled(info, now) == scheduled:
                found.append(info)
                if len(found) > PAGE_SIZE:
                    return Listing(found[:PAGE_SIZE], found[PAGE_SIZE - 1].id)
        if len(page) < _SCAN_PAGE:
            return Listing(found, None)
        cursor = page[-1].id
    return Listing(found, cursor, scanned_to=cursor)


def state_counts(
    stats: QueueStats | None, queue: Queue, states: tuple[str, ...]
) -> Mapping[str, tuple[int, bool]]:
    """``{state: (count, exact)}``: from *stats* where it counts the state
    (``None``: the queue has no live or dead rows), else by listing up to
    :data:`COUNT_CAP` jobs (``exact`` is false when there were more). A state
    the engine cannot list is left out."""
    counted_by = stats or QueueStats(queue.name, 0, 0, 0, 0)
    counts: dict[str, tuple[int, bool]] = {}
    for state in states:
        counted = getattr(counted_by, state, None)
        if isinstance(counted, int):
            counts[state] = (counted, True)
            continue
        try:
            found = queue.list_jobs(JobState(state), limit=COUNT_CAP + 1)
        except AlkstoreError:  # an engine without that state (CF-1): no count
            continue
        counts[state] = (min(len(found), COUNT_CAP), len(found) <= COUNT_CAP)
    return counts
