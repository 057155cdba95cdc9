"""Helpers and bounds shared by the queue contract modules (Q-1..Q-19).

Timing rules are checked with short real timeouts (0.1-0.5 s) and generous
upper bounds, so that a loaded machine does not flake; nothing here measures
speed (that belongs to ``bench/``).

Two tricks recur:

- A claim is made to lapse at once with ``job.heartbeat(0.01)``: Q-8 makes a
  heartbeat set the deadline to *now + extend_s*, shorter or longer. This
  keeps the row's own visibility timeout long, so that the claim that follows
  (the reclaim) stays valid however slow the machine is.
- Engines read time from different clocks (C-4), so durations are compared
  between two timestamps of the engine, never with the test's clock, except
  for loose sanity bounds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Generic, TypeVar

import pytest

from alkstore import (
    Capability,
    EnqueueOpts,
    Job,
    JobInfo,
    JobState,
    Queue,
)

from ._base import eventually, run_threads

__all__ = [
    "LONG_S",
    "QUEUES",
    "SETTLE_S",
    "STAMP_TOLERANCE",
    "WAKE_BOUND_S",
    "Background",
    "assert_aware_utc",
    "blocked",
    "claim_one",
    "claim_soon",
    "counts",
    "fill_for_order",
    "info_of",
    "lapse",
    "race_round",
    "run_threads",
    "seconds",
    "spoil_claims",
    "woken_by",
]


T = TypeVar("T")
R = TypeVar("R")

#: A visibility timeout no test outlives: a claim made with it stays valid.
LONG_S = 300.0
#: A blocked claim must return this soon after the commit that made work
#: (Q-19). Generous: wakes take milliseconds, but the machine may be loaded.
WAKE_BOUND_S = 3.0
#: How long a blocking call is given to show that it is really blocked.
SETTLE_S = 0.3
#: Tolerance for durations computed from one engine timestamp to another.
STAMP_TOLERANCE = timedelta(milliseconds=5)

QUEUES = pytest.mark.requires(Capability.QUEUES)


# --------------------------------------------------------------------- helpers


def info_of(q: Queue, job_id: int) -> JobInfo:
    """``q.get_job(job_id)``, failing the test when the job is gone."""
    info = q.get_job(job_id)
    assert info is not None, f"job {job_id} of queue {q.name!r} is gone"
    return info


def counts(q: Queue) -> tuple[int, int, int, int]:
    """``(pending, scheduled, processing, dead)`` of *q*."""
    s = q.stats()
    return (s.pending, s.scheduled, s.processing, s.dead)


def claim_one(q: Queue, worker: str = "w") -> Job:
    """A claim that must succeed."""
    job = q.claim(worker)
    assert job is not None, f"nothing claimable on {q.name!r}"
    return job


def claim_soon(q: Queue, worker: str = "w") -> Job:
    """A claim that must succeed within :data:`EVENTUALLY_S`, polling without ``wait_s``."""
    job = eventually(lambda: q.claim(worker), interval_s=0.02)
    assert job is not None
    return job


def lapse(*jobs: Job) -> None:
    """End the claims of *jobs* now: a 10 ms heartbeat (Q-8), then wait past it."""
    for job in jobs:
        assert job.heartbeat(0.01), f"job {job.id}: the claim had already lapsed"
    time.sleep(0.1)


def spoil_claims(q: Queue, acked: Job, cancelled: Job, lapsed: Job, reclaimed: Job) -> Job:
    """Make four claims of *q* invalid: ack *acked*, cancel *cancelled*'s job,
    let *reclaimed* lapse and be claimed by worker "newer", let *lapsed*
    lapse; return the new claim of *reclaimed*'s job."""
    assert acked.ack()
    assert q.cancel(cancelled.id)
    lapse(reclaimed)
    newer = claim_one(q, "newer")
    assert newer.id == reclaimed.id
    lapse(lapsed)
    return newer


def seconds(delta: timedelta) -> float:
    return delta / timedelta(seconds=1)


def assert_aware_utc(*stamps: datetime | None) -> None:
    for stamp in stamps:
        assert stamp is not None
        assert stamp.utcoffset() == timedelta(0), f"{stamp!r} is not timezone-aware UTC"


class Background(Generic[T]):
    """Run *call* in a daemon thread; keep what it returned or raised, and when.

    Blocking calls (``claim(wait_s=...)``) run here so that the test thread can
    commit the write that should end them and measure how soon they return.
    """

    def __init__(self, call: Callable[[], T], name: str = "alkstore-conformance") -> None:
        self._call = call
        self._result: list[T] = []
        self._error: BaseException | None = None
        self._done = threading.Event()
        self.started_at = time.monotonic()
        self.returned_at = float("inf")
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._result.append(self._call())
        except BaseException as exc:  # handed to the test thread by result()
            self._error = exc
        finally:
            self.returned_at = time.monotonic()
            self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def finished_within(self, timeout_s: float) -> bool:
        """Wait up to *timeout_s* for the call to return; ``True`` if it did."""
        return self._done.wait(timeout_s)

    def result(self, timeout_s: float = 30.0) -> T:
        """What the call returned (re-raising what it raised), waiting up to
        *timeout_s*; fails the test when it is still running."""
        if not self._done.wait(timeout_s):
            pytest.fail(f"the background call is still running after {timeout_s} s")
        if self._error is not None:
            raise self._error
        return self._result[0]


def blocked(call: Callable[[], T]) -> Background[T]:
    """Start a blocking *call* and check that it is still blocked a little later."""
    bg = Background(call)
    time.sleep(SETTLE_S)
    assert not bg.done, "the blocking call returned before anything happened"
    return bg


def woken_by(call: Callable[[], T], act: Callable[[], R]) -> tuple[T, R]:
    """Start the blocking *call* (:func:`blocked`), then run *act*, the write
    that must end its wait: the call must return within :data:`WAKE_BOUND_S`
    of *act*'s return (Q-19). Returns what the call and *act* returned."""
    bg = blocked(call)
    acted = act()
    acted_at = time.monotonic()
    got = bg.result()
    assert bg.returned_at - acted_at < WAKE_BOUND_S
    return got, acted


def fill_for_order(q: Queue) -> list[str]:
    """Enqueue jobs whose claim order (Q-2) is known; return their payloads in
    that order. Times in the past are far in the past, so that an engine
    whose clock differs a little from the test's (C-4) orders them the same."""
    now = datetime.now(timezone.utc)

    def ago(s: float) -> datetime:
        return now - timedelta(seconds=s)

    q.enqueue("p0-now-1")
    q.enqueue("p5-600s", EnqueueOpts(priority=5, run_at=ago(600)))
    q.enqueue("p0-1200s", EnqueueOpts(run_at=ago(1200)))
    q.enqueue("p5-1200s", EnqueueOpts(priority=5, run_at=ago(1200)))
    q.enqueue("p-1-now", EnqueueOpts(priority=-1))
    q.enqueue("p0-now-2")
    q.enqueue("p5-600s-later", EnqueueOpts(priority=5, run_at=ago(600)))
    q.enqueue("p9-future", EnqueueOpts(priority=9, delay_s=60))
    q.enqueue_many(["p0-2400s-a", "p0-2400s-b"], EnqueueOpts(run_at=ago(2400)))
    return [
        "p5-1200s",
        "p5-600s",
        "p5-600s-later",
        "p0-2400s-a",
        "p0-2400s-b",
        "p0-1200s",
        "p0-now-1",
        "p0-now-2",
        "p-1-now",
    ]


RACE_OPS: list[tuple[str, Callable[[Job], bool]]] = [
    ("ack", lambda j: j.ack()),
    ("heartbeat", lambda j: j.heartbeat(LONG_S)),
    ("retry", lambda j: j.retry("raced", delay_s=LONG_S)),
    ("fail", lambda j: j.fail("raced")),
]


def race_round(q: Queue, r: int, per_round: int = 8, claimers: int = 3) -> None:
    """One round of Q-7's race: claims lapse about 60 ms from now; one thread
    runs a handle op on each around that moment while others reclaim. For each
    job, the op and a reclaim never both win, and the row shows the winner."""
    ids = q.enqueue_many([{"round": r, "i": i} for i in range(per_round)])
    holders = q.claim_batch("holder", per_round)
    assert sorted(j.id for j in holders) == sorted(ids)
    for job in holders:
        assert job.heartbeat(0.06)
    outcome: dict[int, tuple[str, bool]] = {}
    grabbed: list[Job] = []
    lock = threading.Lock()
    skew = (-0.015, -0.006, 0.0, 0.004, 0.008, 0.015)[r % 6]

    def run_ops() -> None:
        time.sleep(max(0.05 + skew, 0.0))
        for i, job in enumerate(holders):
            name, op = RACE_OPS[(i + r) % len(RACE_OPS)]
            outcome[job.id] = (name, op(job))

    def reclaim() -> None:
        stop = time.monotonic() + 0.4
        while time.monotonic() < stop:
            got = q.claim_batch("reclaimer", 2)
            with lock:
                grabbed.extend(got)

    run_threads([run_ops] + [reclaim] * claimers)
    taken = [j.id for j in grabbed]
    for job_id in ids:
        name, won = outcome[job_id]
        n = taken.count(job_id)
        assert n <= 1, f"round {r}: job {job_id} was reclaimed {n} times"
        assert not (won and n), f"round {r}: both {name} and a reclaim won job {job_id}"
        info = q.get_job(job_id)
        if n:
            assert info is not None
            assert (info.state, info.attempts, info.worker_id) == (
                JobState.PROCESSING,
                2,
                "reclaimer",
            )
        elif not won:  # refused at the deadline and not reclaimed (yet)
            assert info is not None
            assert (info.state, info.attempts) == (JobState.PROCESSING, 1)
        elif name == "ack":
            assert info is None
        else:
            assert info is not None and info.attempts == 1
            expected = {
                "heartbeat": JobState.PROCESSING,
                "retry": JobState.PENDING,
                "fail": JobState.DEAD,
            }[name]
            assert info.state is expected
            if name == "fail":
                assert info.last_error == "raced"
