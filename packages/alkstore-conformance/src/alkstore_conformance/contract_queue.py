"""Queues (Q-1..Q-19, C-5..C-8).

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

import multiprocessing
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, Generic, TypeVar

import pytest

from alkstore import (
    Capability,
    EnqueueOpts,
    InvalidArgument,
    Job,
    JobInfo,
    JobState,
    Queue,
    QueueOpts,
    QueueStats,
    Store,
    SweepResult,
)

from . import _children_queue
from ._base import EVENTUALLY_S, ContractBase, eventually, spawn, unique
from ._factory import StoreFactory

__all__ = ["QueueContract"]

T = TypeVar("T")

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


def run_threads(targets: Sequence[Callable[[], None]], timeout_s: float = 120.0) -> None:
    """Run *targets* in threads started together; re-raise the first error."""
    errors: list[BaseException] = []
    start = threading.Barrier(len(targets))

    def wrap(target: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                start.wait(30)
                target()
            except BaseException as exc:
                errors.append(exc)

        return run

    threads = [threading.Thread(target=wrap(t), daemon=True) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s)
    assert not any(t.is_alive() for t in threads), "a thread did not finish"
    if errors:
        raise errors[0]


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


# ------------------------------------------------------------------ the suite


class QueueContract(ContractBase):
    """Queues (Q-1..Q-19, C-5..C-8)."""

    # -----------------------------------------------------------------

    @pytest.mark.clause("Q-1", "Q-14")
    @QUEUES
    def test_enqueue_stamps_each_job_with_its_handle_opts(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """Two handles with different opts on one queue name stamp their own opts; later handles,
        here or in another store, change no stamp already written."""
        name = unique()
        a = store.queue(
            name,
            QueueOpts(
                visibility_timeout_s=11,
                max_attempts=2,
                backoff_base_s=1.5,
                dead_letter_retention_s=100,
            ),
        )
        b = store.queue(name, QueueOpts(visibility_timeout_s=22, max_attempts=4, backoff_base_s=0))
        ja = a.enqueue("a")
        jb = b.enqueue("b")
        jc = b.enqueue("c", EnqueueOpts(max_attempts=9))
        [jd] = a.enqueue_many(["d"], EnqueueOpts(max_attempts=1))
        expected = {
            ja: (11.0, 2, 1.5, 100.0),
            jb: (22.0, 4, 0.0, None),
            jc: (22.0, 9, 0.0, None),
            jd: (11.0, 1, 1.5, 100.0),
        }

        def stamps(q: Queue, job_id: int) -> tuple[float, int, float, float | None]:
            i = info_of(q, job_id)
            return (
                i.visibility_timeout_s,
                i.max_attempts,
                i.backoff_base_s,
                i.dead_letter_retention_s,
            )

        # Later handles with other opts, in this store and another, change
        # nothing of what is already stamped: the job owns its stamps.
        c = store.queue(name, QueueOpts(visibility_timeout_s=33, max_attempts=7))
        with store_factory.open() as other:
            d = other.queue(name)
            for handle in (a, b, c, d):
                for job_id, stamp in expected.items():
                    assert stamps(handle, job_id) == stamp
        je = c.enqueue("e")
        assert stamps(a, je) == (33.0, 7, 5.0, None)

    @pytest.mark.clause("Q-1", "Q-4", "Q-8", "Q-12")
    @QUEUES
    def test_claim_and_heartbeat_read_the_row_stamps_not_the_handle_opts(
        self, store: Store
    ) -> None:
        """A job stamped 0.2 s / 1 attempt, claimed through a 300 s / 5 attempts handle, lapses
        after 0.2 s and dead-letters after one attempt; and the other way round."""
        name = unique()
        short = store.queue(name, QueueOpts(visibility_timeout_s=0.2, max_attempts=1))
        long = store.queue(name, QueueOpts(visibility_timeout_s=LONG_S, max_attempts=5))
        short_id = short.enqueue("short")
        # Claimed through the other handle: deadline and budget are the row's.
        job = claim_one(long)
        assert job.id == short_id
        assert job.max_attempts == 1
        info = info_of(long, short_id)
        assert info.deadline is not None and info.claimed_at is not None
        assert abs(info.deadline - info.claimed_at - timedelta(seconds=0.2)) <= STAMP_TOLERANCE
        time.sleep(0.35)
        assert not job.ack()
        # The row's budget (1) is spent, whatever the handle says (5).
        assert long.claim("w") is None
        dead = info_of(long, short_id)
        assert dead.state is JobState.DEAD
        assert dead.last_error == "max attempts exceeded"

        long_id = long.enqueue("long")
        job = claim_one(short)
        assert job.id == long_id and job.max_attempts == 5
        info = info_of(short, long_id)
        assert info.deadline is not None and info.claimed_at is not None
        assert abs(info.deadline - info.claimed_at - timedelta(seconds=LONG_S)) <= STAMP_TOLERANCE
        # A heartbeat without extend_s uses the row's timeout too: from a far
        # deadline it comes back down to about now + 300 s, not now + 0.2 s.
        assert job.heartbeat(3600)
        far = job.deadline
        assert job.heartbeat()
        assert abs(seconds(far - job.deadline) - (3600 - LONG_S)) < 5
        assert job.ack()

    # -----------------------------------------------------------------

    @pytest.mark.clause("Q-2")
    @QUEUES
    def test_claim_batch_returns_jobs_by_priority_then_run_at_then_enqueue_order(
        self, store: Store
    ) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
        expected = fill_for_order(q)
        jobs = q.claim_batch("w", 50)
        assert [j.payload for j in jobs] == expected
        assert q.claim("w") is None, "a job with run_at in the future was claimed"

    @pytest.mark.clause("Q-2")
    @QUEUES
    def test_successive_claims_follow_the_claim_order(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
        expected = fill_for_order(q)
        got: list[Any] = []
        for _ in range(2 * len(expected)):  # bounded, in case claims repeat
            job = q.claim("w")
            if job is None:
                break
            got.append(job.payload)
        assert got == expected

    @pytest.mark.clause("Q-2", "C-5")
    @QUEUES
    def test_claim_before_run_at_gets_nothing_then_the_job(self, store: Store) -> None:
        q = store.queue(unique())
        asked = time.monotonic()  # the delay starts inside the call, not before it
        job_id = q.enqueue("later", EnqueueOpts(delay_s=1.0))
        assert q.claim("w") is None
        assert q.claim_batch("w", 10) == []
        assert counts(q) == (0, 1, 0, 0)
        # A ready job of lower priority is not held up by a future one.
        ready_id = q.enqueue("ready", EnqueueOpts(priority=-5))
        assert claim_one(q).id == ready_id
        job = claim_soon(q)
        assert job.id == job_id
        assert time.monotonic() - asked >= 0.95

    # -----------------------------------------------------------------

    @pytest.mark.clause("Q-3", "ST-4")
    @QUEUES
    def test_claims_from_many_threads_on_two_stores_hand_out_each_job_once(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """Eight threads on two stores drain 400 jobs with single and batch claims: every job is
        claimed once and every ack of a fresh claim lands."""
        name = unique()
        total = 400
        ids = store.queue(name, QueueOpts(visibility_timeout_s=LONG_S)).enqueue_many(
            [{"n": i} for i in range(total)]
        )
        claimed: list[int] = []
        refused: list[int] = []
        lock = threading.Lock()
        with store_factory.open() as other:
            handles = [store.queue(name), other.queue(name)]

            def worker(n: int) -> Callable[[], None]:
                q = handles[n % 2]

                def run() -> None:
                    empty = 0
                    i = 0
                    while empty < 3 and i < 2 * total:  # bounded, in case claims repeat
                        i += 1
                        if (n + i) % 3 == 0:
                            job = q.claim(f"w{n}")
                            jobs = [] if job is None else [job]
                        else:
                            jobs = q.claim_batch(f"w{n}", 1 + (i % 9))
                        if not jobs:
                            empty += 1
                            time.sleep(0.01)
                            continue
                        empty = 0
                        with lock:
                            claimed.extend(j.id for j in jobs)
                        if i % 2:
                            landed = q.ack_batch(jobs)
                            if landed != len(jobs):
                                with lock:
                                    refused.extend(j.id for j in jobs)
                        else:
                            for j in jobs:
                                if not j.ack():
                                    with lock:
                                        refused.append(j.id)

                return run

            run_threads([worker(n) for n in range(8)])
        assert refused == [], "acks of valid claims were refused: another claimer held them"
        assert len(claimed) == len(set(claimed)), "a job was handed out twice"
        assert sorted(claimed) == sorted(ids)
        assert counts(store.queue(name)) == (0, 0, 0, 0)

    @pytest.mark.clause("Q-3")
    @pytest.mark.cross_process
    @QUEUES
    def test_processes_draining_a_queue_get_each_job_once(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """Four processes drain 2,000 jobs: the ids they claimed are exactly the enqueued ones,
        none twice."""
        name = unique()
        total, procs_n = 2000, 4
        q = store.queue(name, QueueOpts(visibility_timeout_s=LONG_S))
        ids = q.enqueue_many([{"n": i} for i in range(total)])
        assert len(set(ids)) == total
        ctx = multiprocessing.get_context("spawn")
        go = ctx.Event()
        results: Any = ctx.Queue()
        procs = [
            spawn(_children_queue.drain_queue, store_factory, name, f"proc-{n}", go, results)
            for n in range(procs_n)
        ]
        try:
            ready = [results.get(timeout=120) for _ in procs]
            assert sorted(r[0] for r in ready) == ["ready"] * procs_n, ready
            go.set()
            outcomes = [results.get(timeout=120) for _ in procs]
        finally:
            go.set()
            for proc in procs:
                proc.join(30)
                if proc.is_alive():
                    proc.kill()
        errors = [o for o in outcomes if o[0] != "ok"]
        assert errors == []
        claimed = [job_id for o in outcomes for job_id in o[2]]
        assert len(claimed) == len(set(claimed)), "a job was handed to two processes"
        assert sorted(claimed) == sorted(ids)
        assert counts(q) == (0, 0, 0, 0)

    # -----------------------------------------------------------------

    @pytest.mark.clause("Q-4", "Q-5", "Q-14")
    @QUEUES
    def test_claim_stamps_attempt_claimed_at_deadline_and_worker(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=120, max_attempts=3))
        job_id = q.enqueue({"k": [1]}, EnqueueOpts(priority=3))
        fresh = info_of(q, job_id)
        assert (fresh.attempts, fresh.claimed_at, fresh.deadline, fresh.worker_id) == (
            0,
            None,
            None,
            None,
        )
        job = claim_one(q, "worker-7")
        assert (job.id, job.queue, job.payload, job.priority) == (job_id, q.name, {"k": [1]}, 3)
        assert (job.attempts, job.max_attempts) == (1, 3)
        first = info_of(q, job_id)
        assert first.state is JobState.PROCESSING
        assert (first.attempts, first.worker_id) == (1, "worker-7")
        assert first.claimed_at is not None and first.deadline is not None
        assert_aware_utc(first.claimed_at, first.deadline, job.deadline)
        assert first.claimed_at >= first.created_at
        assert abs(first.deadline - job.deadline) <= STAMP_TOLERANCE
        assert abs(first.deadline - first.claimed_at - timedelta(seconds=120)) <= STAMP_TOLERANCE

        # A reclaim is a new claim: new attempt, new time, new worker.
        lapse(job)
        again = claim_one(q, "worker-8")
        assert (again.id, again.attempts) == (job_id, 2)
        second = info_of(q, job_id)
        assert (second.attempts, second.worker_id) == (2, "worker-8")
        assert second.claimed_at is not None and second.deadline is not None
        assert second.claimed_at > first.claimed_at
        assert abs(second.deadline - second.claimed_at - timedelta(seconds=120)) <= STAMP_TOLERANCE

    # -----------------------------------------------------------------

    @pytest.mark.clause("Q-5", "Q-6", "Q-12")
    @QUEUES
    def test_every_claim_counts_an_attempt_until_the_budget_is_spent(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S, max_attempts=3))
        job_id = q.enqueue("x")
        first = claim_one(q)
        assert first.attempts == 1
        lapse(first)
        [second] = q.claim_batch("w", 5)  # a reclaim counts too
        assert (second.id, second.attempts) == (job_id, 2)
        assert second.retry("again", delay_s=0)
        third = claim_one(q)
        assert (third.id, third.attempts) == (job_id, 3)
        lapse(third)
        assert q.claim("w") is None, "a job was claimed past its max_attempts"
        dead = info_of(q, job_id)
        assert dead.state is JobState.DEAD
        assert dead.attempts == 3
        assert dead.last_error == "max attempts exceeded"

    @pytest.mark.clause("Q-5", "Q-10")
    @QUEUES
    def test_enqueue_max_attempts_overrides_the_handle(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(max_attempts=5))
        job_id = q.enqueue("once", EnqueueOpts(max_attempts=1))
        job = claim_one(q)
        assert job.max_attempts == 1
        assert job.retry("only one", delay_s=0)
        assert q.claim("w") is None
        dead = info_of(q, job_id)
        assert (dead.state, dead.attempts, dead.last_error) == (JobState.DEAD, 1, "only one")

    # -----------------------------------------------------------------

    @pytest.mark.clause("Q-6", "Q-14")
    @QUEUES
    def test_lapsed_claim_stays_processing_until_an_ordinary_claim_takes_it(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=0.2, max_attempts=3))
        job_id = q.enqueue({"p": 1})
        job = claim_one(q, "first")
        time.sleep(0.4)
        # Nothing fired at the deadline: the row is as the claim left it.
        with store_factory.open() as other:
            oq = other.queue(q.name)
            info = info_of(oq, job_id)
            assert (info.state, info.attempts, info.worker_id) == (JobState.PROCESSING, 1, "first")
            assert counts(oq) == (0, 0, 1, 0), "a lapsed claim counts as processing"
            again = claim_one(oq, "second")
        assert (again.id, again.attempts, again.payload) == (job_id, 2, {"p": 1})
        assert not job.ack()

    # -----------------------------------------------------------------

    @pytest.mark.clause("Q-7", "C-5")
    @QUEUES
    def test_handle_ops_after_the_deadline_are_refused_and_change_nothing(
        self, store: Store
    ) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=0.2, max_attempts=3))
        ids = q.enqueue_many(["ack", "retry", "fail", "heartbeat"])
        jobs = q.claim_batch("w", 4)
        assert [j.id for j in jobs] == ids
        time.sleep(0.35)
        before = [info_of(q, i) for i in ids]
        ack, retry, fail, heartbeat = jobs
        assert ack.ack() is False
        assert retry.retry("late", delay_s=0) is False
        assert retry.retry("late") is False
        assert fail.fail("late") is False
        assert heartbeat.heartbeat() is False
        assert heartbeat.heartbeat(60) is False
        assert [info_of(q, i) for i in ids] == before
        for info in before:
            assert (info.state, info.attempts, info.last_error) == (JobState.PROCESSING, 1, None)
        # Refused ops left every row reclaimable.
        again = q.claim_batch("w2", 10)
        assert sorted(j.id for j in again) == ids
        assert all(j.attempts == 2 for j in again)

    @pytest.mark.clause("Q-4", "Q-7")
    @QUEUES
    def test_old_claim_ops_are_refused_while_the_new_claim_is_live(self, store: Store) -> None:
        """Claim A lapses and B reclaims: every op of A is refused although the row is processing
        with a far deadline, and B's row is untouched."""
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S, max_attempts=5))
        job_id = q.enqueue("x")
        old = claim_one(q, "old")
        lapse(old)
        new = claim_one(q, "new")
        assert (new.id, new.attempts) == (job_id, 2)
        before = info_of(q, job_id)
        # Same id, older attempt: fenced, although the row is processing and
        # its (new) deadline is hours away.
        assert old.heartbeat(LONG_S) is False
        assert old.ack() is False
        assert old.retry("old", delay_s=0) is False
        assert old.fail("old") is False
        assert q.ack_batch([old]) == 0
        assert info_of(q, job_id) == before
        assert new.heartbeat()
        assert new.ack()
        assert q.get_job(job_id) is None

    @pytest.mark.clause("Q-7", "Q-3")
    @QUEUES
    def test_op_racing_a_reclaim_has_exactly_one_winner(self, store: Store) -> None:
        """Six rounds: ack, heartbeat, retry and fail run around the moment their claims lapse
        while three threads reclaim; for each job at most one side wins and the row
        shows which."""
        for r in range(6):
            q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S, max_attempts=10))
            race_round(q, r)

    # -----------------------------------------------------------------

    @pytest.mark.clause("Q-8")
    @QUEUES
    def test_heartbeat_keeps_a_claim_past_its_visibility_timeout(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        # 1 s: the loop below beats every 0.1 s, and a loaded machine once
        # let 0.5 s pass between two of its beats.
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=1.0))
        job_id = q.enqueue("long task")
        job = claim_one(q)
        with store_factory.open() as other:
            oq = other.queue(q.name)
            started = time.monotonic()
            while time.monotonic() - started < 2.0:
                time.sleep(0.1)
                assert job.heartbeat(), "a heartbeat inside the deadline was refused"
                assert oq.claim("thief") is None, "a heartbeated claim was reclaimed"
        info = info_of(q, job_id)
        assert (info.state, info.attempts) == (JobState.PROCESSING, 1)
        assert info.deadline is not None
        assert abs(info.deadline - job.deadline) <= STAMP_TOLERANCE
        assert job.ack()

    @pytest.mark.clause("Q-8")
    @QUEUES
    def test_heartbeat_sets_the_deadline_from_now_even_when_shorter(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
        job_id = q.enqueue("x")
        job = claim_one(q)
        claimed = job.deadline
        assert job.heartbeat(3600)
        assert 3000 < seconds(job.deadline - claimed) < 3400
        assert job.heartbeat(0.05)
        info = info_of(q, job_id)
        assert info.deadline is not None and info.claimed_at is not None
        assert seconds(info.deadline - info.claimed_at) < 30
        time.sleep(0.2)
        again = claim_one(q)
        assert (again.id, again.attempts) == (job_id, 2)

    @pytest.mark.clause("Q-8", "Q-5", "Q-7")
    @QUEUES
    def test_late_heartbeat_is_refused_and_never_takes_the_job_back(self, store: Store) -> None:
        """A heartbeat after the deadline returns False, changes nothing, and the job is then
        reclaimed with its attempt counted."""
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=0.2, max_attempts=3))
        job_id = q.enqueue("x")
        job = claim_one(q, "sleepy")
        time.sleep(0.35)
        before = info_of(q, job_id)
        assert job.heartbeat() is False
        assert job.heartbeat(LONG_S) is False
        after = info_of(q, job_id)
        assert after == before, "a refused heartbeat changed the row"
        assert (after.state, after.attempts, after.worker_id) == (JobState.PROCESSING, 1, "sleepy")
        # Still reclaimable, and the reclaim is counted.
        again = claim_one(q, "awake")
        assert (again.id, again.attempts) == (job_id, 2)
        assert job.heartbeat() is False

    # -----------------------------------------------------------------

    @pytest.mark.clause("Q-9", "C-5")
    @QUEUES
    def test_ack_deletes_the_row_and_lands_once(self, store: Store) -> None:
        q = store.queue(unique())
        job_id = q.enqueue("x")
        job = claim_one(q)
        assert job.ack() is True
        assert q.get_job(job_id) is None
        assert job.ack() is False
        assert job.heartbeat() is False
        assert q.claim("w") is None
        assert counts(q) == (0, 0, 0, 0)

    @pytest.mark.clause("Q-9", "Q-7", "C-5")
    @QUEUES
    def test_ack_batch_counts_only_valid_claims(self, store: Store) -> None:
        """Of six claims (two valid, one acked, one cancelled, one lapsed, one reclaimed by another
        worker), ack_batch lands and counts the two valid ones only."""
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S, max_attempts=5))
        ids = q.enqueue_many(["valid-1", "acked", "cancelled", "lapsed", "reclaimed", "valid-2"])
        jobs = q.claim_batch("w", 6)
        assert [j.id for j in jobs] == ids
        valid1, acked, cancelled, lapsed, reclaimed, valid2 = jobs
        assert acked.ack()
        assert q.cancel(cancelled.id)
        lapse(reclaimed)
        newer = claim_one(q, "newer")
        assert newer.id == reclaimed.id
        lapse(lapsed)
        landed = q.ack_batch([valid1, acked, cancelled, lapsed, reclaimed, valid2])
        assert landed == 2
        assert q.get_job(valid1.id) is None and q.get_job(valid2.id) is None
        # The invalid claims' rows are untouched.
        left = info_of(q, lapsed.id)
        assert (left.state, left.attempts) == (JobState.PROCESSING, 1)
        taken = info_of(q, reclaimed.id)
        assert (taken.state, taken.attempts, taken.worker_id) == (JobState.PROCESSING, 2, "newer")
        assert q.ack_batch([]) == 0
        assert q.ack_batch([valid1, valid2]) == 0
        assert q.ack_batch([newer]) == 1

    # ----------------------------------------------------------------

    @pytest.mark.clause("Q-10", "Q-14")
    @QUEUES
    def test_retry_with_a_delay_sets_the_job_pending_until_then(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S, max_attempts=3))
        job_id = q.enqueue("x")
        job = claim_one(q)
        asked = time.monotonic()  # the delay starts inside the call, not before it
        assert job.retry("flaky", delay_s=0.8) is True
        info = info_of(q, job_id)
        assert (info.state, info.attempts, info.last_error, info.died_at) == (
            JobState.PENDING,
            1,
            None,
            None,
        )
        assert info.claimed_at is not None
        assert 0.8 <= seconds(info.run_at - info.claimed_at) < 30
        assert counts(q) == (0, 1, 0, 0)
        assert q.claim("w") is None
        # The old claim is over.
        assert job.ack() is False
        assert job.heartbeat() is False
        again = claim_soon(q)
        assert time.monotonic() - asked >= 0.75
        assert (again.id, again.attempts) == (job_id, 2)

    @pytest.mark.clause("Q-10")
    @QUEUES
    def test_retry_at_an_exhausted_budget_dead_letters_with_the_callers_error(
        self, store: Store
    ) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S, max_attempts=2))
        job_id = q.enqueue("x")
        assert claim_one(q).retry("first", delay_s=0)
        second = claim_one(q)
        assert second.attempts == 2
        assert second.retry("second try failed", delay_s=0) is True
        dead = info_of(q, job_id)
        assert dead.state is JobState.DEAD
        assert (dead.attempts, dead.last_error) == (2, "second try failed")
        assert dead.died_at is not None
        assert q.claim("w") is None
        assert counts(q) == (0, 0, 0, 1)
        assert second.retry("again") is False

    # ----------------------------------------------------------------

    @pytest.mark.clause("Q-11", "Q-14")
    @QUEUES
    def test_fail_dead_letters_at_once_with_the_callers_error(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S, max_attempts=5))
        job_id = q.enqueue({"bad": True}, EnqueueOpts(priority=2))
        job = claim_one(q)
        assert job.fail("bad input: no address") is True
        dead = info_of(q, job_id)
        assert dead.state is JobState.DEAD
        assert (dead.attempts, dead.max_attempts, dead.last_error) == (
            1,
            5,
            "bad input: no address",
        )
        assert (dead.payload, dead.priority) == ({"bad": True}, 2)
        assert dead.died_at is not None and dead.claimed_at is not None
        assert dead.died_at >= dead.claimed_at
        assert q.claim("w") is None
        assert job.fail("again") is False
        assert job.ack() is False
        assert counts(q) == (0, 0, 0, 1)

    # ----------------------------------------------------------------

    @pytest.mark.clause("Q-12", "Q-5")
    @QUEUES
    def test_lapsed_last_attempt_is_dead_lettered_by_the_next_claim(self, store: Store) -> None:
        """A last attempt lapses; the next claim on the queue returns the other job and has moved
        the spent one to dead as "max attempts exceeded"."""
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=0.2, max_attempts=1))
        spent_id = q.enqueue("spent")
        spent = claim_one(q)
        # The fresh job's claim must outlive the checks below on a loaded machine.
        fresh_id = store.queue(q.name, QueueOpts(visibility_timeout_s=LONG_S)).enqueue(
            "fresh", EnqueueOpts(priority=-1)
        )
        time.sleep(0.35)
        fresh = claim_one(q)
        assert (fresh.id, fresh.attempts) == (fresh_id, 1), "the spent job was claimed again"
        dead = info_of(q, spent_id)
        assert dead.state is JobState.DEAD
        assert (dead.attempts, dead.last_error) == (1, "max attempts exceeded")
        assert dead.died_at is not None
        assert spent.ack() is False
        assert q.claim("w") is None
        result = q.sweep_expired()
        assert (result.expired, result.exhausted) == (0, 0)

    @pytest.mark.clause("Q-12", "Q-6")
    @QUEUES
    def test_lapsed_last_attempt_is_dead_lettered_by_the_next_sweep(self, store: Store) -> None:
        """A last attempt lapses; the next sweep moves it to dead as "max attempts exceeded",
        while a lapsed claim with budget left stays reclaimable."""
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=0.2, max_attempts=1))
        spent_id = q.enqueue("spent")
        claim_one(q)
        # A lapsed claim with budget left is reclaimable, not dead.
        spare_id = q.enqueue("spare", EnqueueOpts(max_attempts=3))
        claim_one(q)
        time.sleep(0.35)
        result = q.sweep_expired()
        assert result.expired == 0
        # SweepResult.exhausted may stay 0 on engines that do not count it.
        assert result.exhausted in (0, 1)
        dead = info_of(q, spent_id)
        assert dead.state is JobState.DEAD
        assert dead.last_error == "max attempts exceeded"
        spare = info_of(q, spare_id)
        assert (spare.state, spare.attempts) == (JobState.PROCESSING, 1)
        again = claim_one(q)
        assert (again.id, again.attempts) == (spare_id, 2)

    # ----------------------------------------------------------------

    @pytest.mark.clause("Q-13")
    @QUEUES
    def test_cancel_deletes_pending_and_processing_jobs_whoever_holds_them(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
        held_id = q.enqueue("held")
        held = claim_one(q, "holder")
        pending_id = q.enqueue("pending")
        scheduled_id = q.enqueue("scheduled", EnqueueOpts(delay_s=60))
        with store_factory.open() as other:  # the canceller is another process
            oq = other.queue(q.name)
            assert oq.cancel(pending_id) is True
            assert oq.cancel(scheduled_id) is True
            assert oq.cancel(held_id) is True
            assert oq.cancel(held_id) is False
        for job_id in (held_id, pending_id, scheduled_id):
            assert q.get_job(job_id) is None
        assert held.heartbeat() is False
        assert held.ack() is False
        assert held.retry("x", delay_s=0) is False
        assert held.fail("x") is False
        assert q.claim("w") is None
        assert counts(q) == (0, 0, 0, 0)

    @pytest.mark.clause("Q-13", "C-7", "C-5")
    @QUEUES
    def test_cancel_of_a_dead_missing_or_foreign_job_is_false(self, store: Store) -> None:
        q = store.queue(unique())
        other = store.queue(unique())
        dead_id = q.enqueue("dead")
        assert claim_one(q).fail("boom")
        foreign_id = other.enqueue("foreign")
        assert q.cancel(dead_id) is False
        dead = info_of(q, dead_id)
        assert (dead.state, dead.last_error) == (JobState.DEAD, "boom")
        assert q.cancel(foreign_id) is False
        assert info_of(other, foreign_id).state is JobState.PENDING
        assert q.cancel(max(dead_id, foreign_id) + 100_000) is False
        assert counts(q) == (0, 0, 0, 1)
        assert counts(other) == (1, 0, 0, 0)

    # ----------------------------------------------------------------

    @pytest.mark.clause("Q-14", "Q-1", "Q-15", "C-4")
    @QUEUES
    def test_get_job_returns_every_field_in_every_state(self, store: Store) -> None:
        opts = QueueOpts(
            visibility_timeout_s=45,
            max_attempts=4,
            backoff_base_s=2.5,
            dead_letter_retention_s=3600,
        )
        q = store.queue(unique(), opts)
        job_id = q.enqueue({"a": [1, 2]}, EnqueueOpts(priority=-7, expires_s=3600))
        stamps = (45.0, 4, 2.5, 3600.0)

        def common(i: JobInfo) -> None:
            assert (i.id, i.queue, i.payload, i.priority) == (job_id, q.name, {"a": [1, 2]}, -7)
            got = (i.visibility_timeout_s, i.max_attempts, i.backoff_base_s)
            assert (*got, i.dead_letter_retention_s) == stamps
            assert_aware_utc(i.created_at, i.run_at, i.expires_at)
            assert i.expires_at is not None
            assert abs(seconds(i.expires_at - i.created_at) - 3600) < 0.01

        pending = info_of(q, job_id)
        common(pending)
        assert pending.state is JobState.PENDING
        assert (pending.attempts, pending.claimed_at, pending.last_error, pending.died_at) == (
            0,
            None,
            None,
            None,
        )
        assert abs(pending.run_at - pending.created_at) < timedelta(seconds=1)
        assert abs(pending.created_at - datetime.now(timezone.utc)) < timedelta(seconds=60)

        job = claim_one(q, "inspector")
        processing = info_of(q, job_id)
        common(processing)
        assert processing.state is JobState.PROCESSING
        assert (processing.attempts, processing.last_error, processing.died_at) == (1, None, None)
        assert processing.worker_id == "inspector"
        assert_aware_utc(processing.claimed_at, processing.deadline)

        assert job.fail("why it died")
        dead = info_of(q, job_id)
        common(dead)
        assert dead.state is JobState.DEAD
        assert (dead.attempts, dead.last_error) == (1, "why it died")
        assert_aware_utc(dead.died_at, dead.claimed_at)
        assert dead.claimed_at is not None and dead.died_at is not None
        assert dead.died_at >= dead.claimed_at >= dead.created_at

        assert q.get_job(job_id + 100_000) is None

    @pytest.mark.clause("Q-14", "C-7")
    @QUEUES
    def test_list_jobs_pages_each_state_by_id(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
        noise = store.queue(unique())
        noise.enqueue_many(["noise"] * 3)
        expected: dict[JobState, list[int]] = {}
        processing = q.enqueue_many([f"p{i}" for i in range(5)])
        assert len(q.claim_batch("w", 5)) == 5
        expected[JobState.PROCESSING] = processing
        dead = q.enqueue_many([f"d{i}" for i in range(5)])
        for job in q.claim_batch("w", 5):
            assert job.fail(f"dead {job.payload}")
        expected[JobState.DEAD] = dead
        pending = q.enqueue_many([f"r{i}" for i in range(3)])
        pending += q.enqueue_many([f"s{i}" for i in range(2)], EnqueueOpts(delay_s=60))
        expected[JobState.PENDING] = pending
        for state, ids in expected.items():
            everything = q.list_jobs(state)
            assert [i.id for i in everything] == sorted(ids)
            assert all(i.state is state and i.queue == q.name for i in everything)
            paged: list[int] = []
            after = 0
            for _ in range(len(ids)):  # bounded: a broken after_id must not loop forever
                page = q.list_jobs(state, limit=2, after_id=after)
                if not page:
                    break
                assert len(page) <= 2
                paged += [i.id for i in page]
                after = page[-1].id
            assert paged == sorted(ids)
            assert q.list_jobs(state, after_id=max(ids)) == []
            middle = sorted(ids)[2]
            assert [i.id for i in q.list_jobs(state, limit=100, after_id=middle)] == sorted(ids)[3:]
        for info in q.list_jobs(JobState.DEAD):
            assert info.last_error == f"dead {info.payload}"
            assert info.died_at is not None

    @pytest.mark.clause("Q-14", "Q-6", "Q-10")
    @QUEUES
    def test_stats_count_ready_scheduled_processing_and_dead(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S, max_attempts=3))
        q.enqueue_many(["run"] * 2)
        running = q.claim_batch("w", 2)
        assert len(running) == 2
        assert running[0].retry("later", delay_s=60)  # back to pending, scheduled
        q.enqueue_many(["fail"])
        [doomed] = q.claim_batch("w", 1)
        assert doomed.fail("x")
        q.enqueue_many(["ready-1", "ready-2", "ready-3"])
        q.enqueue("scheduled", EnqueueOpts(delay_s=60))
        stats = q.stats()
        assert isinstance(stats, QueueStats)
        assert stats == QueueStats(q.name, pending=3, scheduled=2, processing=1, dead=1)
        lapse(running[1])  # a lapsed claim still counts as processing
        assert q.stats() == QueueStats(q.name, pending=3, scheduled=2, processing=1, dead=1)

    @pytest.mark.clause("Q-14", "C-7")
    @QUEUES
    def test_queue_stats_lists_every_queue_with_live_or_dead_rows(self, store: Store) -> None:
        live, dead_only, emptied, never = unique("live"), unique("dead"), unique("gone"), unique()
        store.queue(live).enqueue_many([1, 2])
        store.queue(dead_only).enqueue("x")
        assert claim_one(store.queue(dead_only)).fail("x")
        store.queue(emptied).enqueue("x")
        assert claim_one(store.queue(emptied)).ack()
        store.queue(never)
        by_name = {s.queue: s for s in store.queue_stats()}
        assert by_name[live] == QueueStats(live, pending=2, scheduled=0, processing=0, dead=0)
        assert by_name[dead_only] == QueueStats(
            dead_only, pending=0, scheduled=0, processing=0, dead=1
        )
        assert emptied not in by_name
        assert never not in by_name
        for name in (live, dead_only):
            assert by_name[name] == store.queue(name).stats()

    # ----------------------------------------------------------------

    @pytest.mark.clause("Q-15")
    @QUEUES
    def test_expired_pending_job_is_never_claimed_and_swept_as_expired(self, store: Store) -> None:
        swept = store.queue(unique())
        claimed = store.queue(unique())
        gone_id = swept.enqueue("expires", EnqueueOpts(expires_s=0.2))
        kept_id = swept.enqueue("stays", EnqueueOpts(expires_s=3600))
        plain_id = swept.enqueue("plain")
        never_id = claimed.enqueue("expires", EnqueueOpts(expires_s=0.2))
        time.sleep(0.35)

        result = swept.sweep_expired()
        assert result.expired == 1
        dead = info_of(swept, gone_id)
        assert dead.state is JobState.DEAD
        assert (dead.last_error, dead.attempts) == ("expired", 0)
        assert dead.died_at is not None
        for job_id in (kept_id, plain_id):
            assert info_of(swept, job_id).state is JobState.PENDING
        assert swept.sweep_expired().expired == 0

        assert claimed.claim("w") is None, "a job past expires_at was claimed"
        assert claimed.claim_batch("w", 5) == []
        claimed.sweep_expired()
        dead = info_of(claimed, never_id)
        assert (dead.state, dead.last_error, dead.attempts) == (JobState.DEAD, "expired", 0)

    @pytest.mark.clause("Q-15", "Q-6")
    @QUEUES
    def test_sweep_moves_processing_rows_past_expiry_to_dead(self, store: Store) -> None:
        """The zombie hole: processing rows past expires_at, their worker dead or alive, are never
        claimed and are swept to dead as "expired"."""
        # The zombie: a worker died holding a job whose expiry then passed.
        opts = QueueOpts(visibility_timeout_s=0.2, max_attempts=3)
        zombies = store.queue(unique(), opts)
        claimed = store.queue(unique(), opts)
        live = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
        zombie_id = zombies.enqueue("zombie", EnqueueOpts(expires_s=0.5))
        claim_one(zombies, "died")
        other_id = claimed.enqueue("zombie", EnqueueOpts(expires_s=0.5))
        claim_one(claimed, "died")
        live_id = live.enqueue("still held", EnqueueOpts(expires_s=0.5))
        holder = claim_one(live, "alive")
        time.sleep(0.65)

        result = zombies.sweep_expired()
        assert result.expired == 1, "an expired processing row was left behind"
        dead = info_of(zombies, zombie_id)
        assert (dead.state, dead.last_error, dead.attempts) == (JobState.DEAD, "expired", 1)

        # Reclaimable by its lapse and budget, but expired: never claimed.
        assert claimed.claim("w") is None
        claimed.sweep_expired()
        dead = info_of(claimed, other_id)
        assert (dead.state, dead.last_error) == (JobState.DEAD, "expired")

        # Past expiry with its claim still valid: moved as well.
        assert live.sweep_expired().expired == 1
        dead = info_of(live, live_id)
        assert (dead.state, dead.last_error) == (JobState.DEAD, "expired")
        assert holder.ack() is False

    # ----------------------------------------------------------------

    @pytest.mark.clause("Q-16", "Q-1")
    @QUEUES
    def test_sweep_purges_only_dead_rows_stamped_with_a_retention(self, store: Store) -> None:
        """Two handles on one queue, with and without a retention: the sweep purges only the dead
        row stamped with one, once its retention has passed."""
        name = unique()
        keep = store.queue(name)
        purge = store.queue(name, QueueOpts(dead_letter_retention_s=0.5))
        purged_id = purge.enqueue("purged")
        kept_id = keep.enqueue("kept")
        jobs = keep.claim_batch("w", 2)
        assert [j.id for j in jobs] == [purged_id, kept_id]
        for job in jobs:
            assert job.fail("dead")
        failed = time.monotonic()
        assert info_of(keep, purged_id).dead_letter_retention_s == 0.5
        assert info_of(purge, kept_id).dead_letter_retention_s is None
        early = keep.sweep_expired()
        if time.monotonic() - failed < 0.4:
            assert early.purged == 0, "a dead row was purged before its retention passed"
            assert info_of(keep, purged_id).state is JobState.DEAD
        time.sleep(0.7)
        # Swept through the handle without a retention: the rows' stamps rule.
        result = keep.sweep_expired()
        assert result.purged + early.purged == 1
        assert result.expired == 0
        assert keep.get_job(purged_id) is None
        assert info_of(keep, kept_id).state is JobState.DEAD
        assert keep.sweep_expired().purged == 0
        assert counts(keep) == (0, 0, 0, 1)

    # ----------------------------------------------------------------

    @pytest.mark.clause("Q-17", "Q-15")
    @QUEUES
    def test_concurrent_sweeps_move_each_row_once(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """Six threads on two stores sweep 150 expired rows at once: the expired counts add up to
        150 and every row is dead once."""
        name = unique()
        total = 150
        q = store.queue(name)
        ids = q.enqueue_many([{"n": i} for i in range(total)], EnqueueOpts(expires_s=0.2))
        time.sleep(0.35)
        results: list[SweepResult] = []
        lock = threading.Lock()
        with store_factory.open() as other:
            handles = [store.queue(name), other.queue(name)]

            def sweeper(n: int) -> Callable[[], None]:
                def run() -> None:
                    for _ in range(3):
                        r = handles[n % 2].sweep_expired()
                        with lock:
                            results.append(r)

                return run

            run_threads([sweeper(n) for n in range(6)])
        assert sum(r.expired for r in results) == total, "a row was moved twice or not at all"
        assert counts(q) == (0, 0, 0, total)
        dead = q.list_jobs(JobState.DEAD, limit=1000)
        assert [i.id for i in dead] == sorted(ids)
        assert all(i.last_error == "expired" for i in dead)

    # ----------------------------------------------------------------

    @pytest.mark.clause("Q-18", "Q-6", "Q-12", "Q-15")
    @QUEUES
    def test_idle_store_does_no_queue_maintenance(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """With two stores open and idle past every deadline, an expired row stays pending and a
        spent lapsed claim stays processing until the consumer sweeps."""
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=0.1, max_attempts=1))
        spent_id = q.enqueue("spent")
        claim_one(q)
        expiring_id = q.enqueue("expiring", EnqueueOpts(expires_s=0.1))
        # Both stores stay open and idle while the deadlines pass.
        with store_factory.open() as idle:
            time.sleep(0.6)
            for handle in (q, idle.queue(q.name)):
                spent = info_of(handle, spent_id)
                assert (spent.state, spent.attempts) == (JobState.PROCESSING, 1)
                assert info_of(handle, expiring_id).state is JobState.PENDING
                assert counts(handle) == (1, 0, 1, 0)
        # The consumer's sweep does the work.
        q.sweep_expired()
        assert info_of(q, spent_id).last_error == "max attempts exceeded"
        assert info_of(q, expiring_id).last_error == "expired"
        assert counts(q) == (0, 0, 0, 2)

    @pytest.mark.clause("Q-18")
    @QUEUES
    def test_queue_operations_start_no_threads(self, store_factory: StoreFactory) -> None:
        """Queue operations that never block start no thread beyond what opening the store started,
        and close() stops those."""
        before_open = set(threading.enumerate())
        s = store_factory.open()
        try:
            # Opening may start the engine's delivery thread (SPEC Q-18 allows
            # the SQLite wake watcher and the PostgreSQL listener); queue work
            # that never blocks must start nothing more.
            opened = set(threading.enumerate())
            q = s.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
            q.enqueue("a")
            q.enqueue_many(["b", "c", "d", "e"], EnqueueOpts(expires_s=60))
            jobs = q.claim_batch("w", 2)
            job = claim_one(q)
            assert job.heartbeat()
            assert jobs[0].ack() and jobs[1].retry("x", delay_s=60) and job.fail("y")
            assert q.cancel(q.enqueue("f"))
            q.sweep_expired()
            q.stats()
            q.list_jobs(JobState.PENDING)
            q.get_job(job.id)
            s.queue_stats()
            assert q.ack_batch(q.claim_batch("w", 10)) == 2  # d and e
            assert q.claim("w") is None
            time.sleep(0.2)
            # The event loop's own executor threads (name "asyncio_N": a
            # driver resolving a host name for a new pooled connection, under
            # the async face) belong to the loop, not to the engine.
            started = {
                t.name
                for t in set(threading.enumerate()) - opened
                if not t.name.startswith("asyncio_")
            }
            assert started == set(), f"queue operations started threads: {sorted(started)}"
        finally:
            s.close()

        def all_stopped() -> bool:
            return not [t for t in threading.enumerate() if t not in before_open]

        eventually(all_stopped, timeout_s=EVENTUALLY_S)

    # ----------------------------------------------------------------

    @pytest.mark.clause("Q-19", "ST-4")
    @QUEUES
    def test_blocked_claim_returns_when_another_thread_enqueues(self, store: Store) -> None:
        q = store.queue(unique())
        bg = blocked(lambda: q.claim("w", wait_s=20))
        job_id = q.enqueue("wake up")
        enqueued = time.monotonic()
        job = bg.result()
        assert job is not None and job.id == job_id
        assert bg.returned_at - enqueued < WAKE_BOUND_S

    @pytest.mark.clause("Q-19")
    @pytest.mark.requires(Capability.QUEUES, Capability.CROSS_PROCESS_WAKES)
    def test_blocked_claim_returns_when_another_store_enqueues(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        q = store.queue(unique())
        with store_factory.open() as other:
            oq = other.queue(q.name)
            bg = blocked(lambda: q.claim_batch("w", 10, wait_s=20))
            ids = oq.enqueue_many(["one", "two"])
            enqueued = time.monotonic()
            jobs = bg.result()
            assert bg.returned_at - enqueued < WAKE_BOUND_S
            assert [j.id for j in jobs] == ids
            # And the other way round.
            bg2 = blocked(lambda: oq.claim("w", wait_s=20))
            job_id = q.enqueue("three")
            enqueued = time.monotonic()
            job = bg2.result()
            assert job is not None and job.id == job_id
            assert bg2.returned_at - enqueued < WAKE_BOUND_S

    @pytest.mark.clause("Q-19", "C-5")
    @QUEUES
    def test_blocked_claim_returns_nothing_after_wait_s(self, store: Store) -> None:
        q = store.queue(unique())
        q.enqueue("not yet", EnqueueOpts(delay_s=60))
        started = time.monotonic()
        assert q.claim("w", wait_s=0.5) is None
        waited = time.monotonic() - started
        assert 0.45 <= waited < 0.5 + WAKE_BOUND_S
        started = time.monotonic()
        assert q.claim_batch("w", 5, wait_s=0.5) == []
        waited = time.monotonic() - started
        assert 0.45 <= waited < 0.5 + WAKE_BOUND_S

    @pytest.mark.clause("Q-19", "Q-10")
    @QUEUES
    def test_blocked_claim_wakes_when_a_retry_makes_work(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S, max_attempts=5))
        job_id = q.enqueue("x")
        held = claim_one(q, "first")
        # A retry without delay commits work: the blocked claim wakes.
        bg = blocked(lambda: q.claim("second", wait_s=20))
        assert held.retry("again", delay_s=0)
        retried = time.monotonic()
        job = bg.result()
        assert job is not None and (job.id, job.attempts) == (job_id, 2)
        assert bg.returned_at - retried < WAKE_BOUND_S
        # A retry with a delay: the claim wakes when the delay ends, with no
        # other write to wake it. The delay runs from a moment inside the
        # retry call: not before the call began, at most its return.
        asked = time.monotonic()
        assert job.retry("later", delay_s=0.5)
        retried = time.monotonic()
        again = q.claim("third", wait_s=20)
        returned = time.monotonic()
        assert again is not None and (again.id, again.attempts) == (job_id, 3)
        assert returned - asked >= 0.45
        assert returned - retried < 0.5 + WAKE_BOUND_S

    @pytest.mark.clause("Q-19", "Q-6")
    @QUEUES
    def test_blocked_claim_wakes_when_a_claim_lapses(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=0.5, max_attempts=3))
        job_id = q.enqueue("x")
        asked = time.monotonic()  # the claim's deadline is set inside the call
        claim_one(q, "dies")
        claimed = time.monotonic()
        job = q.claim("rescuer", wait_s=20)
        returned = time.monotonic()
        assert job is not None and (job.id, job.attempts) == (job_id, 2)
        assert returned - asked >= 0.45
        assert returned - claimed < 0.5 + WAKE_BOUND_S

    @pytest.mark.clause("Q-19", "Q-2")
    @QUEUES
    def test_blocked_claim_wakes_when_a_delayed_job_turns_ready(self, store: Store) -> None:
        q = store.queue(unique())
        asked = time.monotonic()  # the delay starts inside the call
        job_id = q.enqueue("x", EnqueueOpts(delay_s=0.5))
        enqueued = time.monotonic()
        job = q.claim("w", wait_s=20)
        returned = time.monotonic()
        assert job is not None and job.id == job_id
        assert returned - asked >= 0.45
        assert returned - enqueued < 0.5 + WAKE_BOUND_S

    @pytest.mark.clause("Q-19", "T-3")
    @QUEUES
    def test_blocked_claim_is_not_ended_by_a_rolled_back_enqueue(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """A claim blocked for 1.5 s while another store enqueues and rolls back returns None after
        the full wait."""
        q = store.queue(unique())

        class Rollback(Exception):
            pass

        with store_factory.open() as writer:
            wq = writer.queue(q.name)
            bg = blocked(lambda: q.claim("w", wait_s=1.5))

            def enqueue_and_roll_back() -> None:
                with writer.transaction() as tx:
                    wq.enqueue("never", tx=tx)
                    wq.enqueue_many(["never", "never"], tx=tx)
                    raise Rollback

            with pytest.raises(Rollback):
                enqueue_and_roll_back()
            assert bg.result() is None
            assert bg.returned_at - bg.started_at >= 1.4
        assert counts(q) == (0, 0, 0, 0)

    @pytest.mark.clause("Q-19", "Q-3")
    @QUEUES
    def test_blocked_claimers_share_a_batch_of_new_jobs(self, store: Store) -> None:
        q = store.queue(unique())
        waiters = [Background(lambda: q.claim("w", wait_s=20)) for _ in range(3)]
        time.sleep(SETTLE_S)
        assert not any(w.done for w in waiters)
        ids = q.enqueue_many(["a", "b", "c"])
        enqueued = time.monotonic()
        got = [w.result() for w in waiters]
        assert sorted(j.id for j in got if j is not None) == ids
        assert max(w.returned_at for w in waiters) - enqueued < WAKE_BOUND_S

    @pytest.mark.clause("Q-19")
    @pytest.mark.cross_process
    @pytest.mark.requires(Capability.QUEUES, Capability.CROSS_PROCESS_WAKES)
    def test_claim_blocked_in_another_process_wakes_on_enqueue(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """A child process blocks in claim(wait_s=30); an enqueue here ends its wait within the
        wake bound."""
        name = unique()
        ctx = multiprocessing.get_context("spawn")
        report: Any = ctx.Queue()
        proc = spawn(_children_queue.claim_blocking, store_factory, name, "child", 30.0, report)
        try:
            assert report.get(timeout=120) == ("ready",)
            time.sleep(1.0)  # let the child block in its claim
            job_id = store.queue(name).enqueue("across processes")
            enqueued = time.monotonic()
            outcome = report.get(timeout=60)
            received = time.monotonic()
        finally:
            proc.join(30)
            if proc.is_alive():
                proc.kill()
        assert outcome[0] == "claimed", outcome
        _, claimed_id, waited = outcome
        assert claimed_id == job_id
        assert waited >= 0.5, "the child's claim did not block"
        assert received - enqueued < WAKE_BOUND_S

    # -------------------------------------------------------- Q-5, Q-6 (crash)

    @pytest.mark.clause("Q-5", "Q-6")
    @pytest.mark.cross_process
    @QUEUES
    def test_job_of_a_killed_worker_is_reclaimed_after_its_timeout(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """A child claims a 1 s job and is killed with SIGKILL: the row stays processing until its
        deadline, then an ordinary blocking claim takes it as attempt 2."""
        name = unique()
        q = store.queue(name, QueueOpts(visibility_timeout_s=1.0, max_attempts=3))
        job_id = q.enqueue({"crash": "me"})
        ctx = multiprocessing.get_context("spawn")
        report: Any = ctx.Queue()
        proc = spawn(_children_queue.claim_and_hang, store_factory, name, "doomed", report)
        try:
            outcome = report.get(timeout=120)
            assert outcome[0] == "claimed", outcome
            _, claimed_id, attempts, deadline = outcome
            assert (claimed_id, attempts) == (job_id, 1)
            proc.kill()  # SIGKILL: no cleanup, no ack, no retry
            proc.join(30)
            assert proc.exitcode is not None and proc.exitcode < 0
        finally:
            if proc.is_alive():
                proc.kill()
                proc.join(30)
        held = info_of(q, job_id)
        assert (held.state, held.attempts, held.worker_id) == (JobState.PROCESSING, 1, "doomed")
        job = q.claim("survivor", wait_s=20)
        assert job is not None
        assert (job.id, job.attempts, job.payload) == (job_id, 2, {"crash": "me"})
        info = info_of(q, job_id)
        assert info.claimed_at is not None and info.claimed_at >= deadline
        assert info.worker_id == "survivor"
        assert job.ack()

    # ----------------------------------------------------------------- C-5

    @pytest.mark.clause("C-5")
    @QUEUES
    def test_no_work_is_a_value_never_an_exception(self, store: Store) -> None:
        q = store.queue(unique())
        missing = q.enqueue("probe")
        assert claim_one(q).ack()
        assert q.claim("w") is None
        assert q.claim_batch("w", 10) == []
        assert q.claim("w", wait_s=0.05) is None
        assert q.claim_batch("w", 10, wait_s=0.05) == []
        assert q.ack_batch([]) == 0
        assert q.cancel(missing) is False
        assert q.get_job(missing) is None
        assert q.sweep_expired() == SweepResult(expired=0, purged=0, exhausted=0)
        assert q.stats() == QueueStats(q.name, pending=0, scheduled=0, processing=0, dead=0)
        for state in JobState:
            assert q.list_jobs(state) == []
        assert q.name not in {s.queue for s in store.queue_stats()}
        fresh = store.queue(unique())
        assert fresh.stats() == QueueStats(fresh.name, 0, 0, 0, 0)
        assert fresh.claim("w") is None

    # ----------------------------------------------------------------- C-6

    @pytest.mark.clause("C-6", "C-3")
    @QUEUES
    def test_failing_enqueue_many_writes_nothing(self, store: Store) -> None:
        q = store.queue(unique())
        q.enqueue("before")
        with pytest.raises(InvalidArgument):
            q.enqueue_many(["a", "b", float("nan"), "d"])
        with pytest.raises(InvalidArgument):
            q.enqueue_many(["a", {"b": {1, 2}}])
        with pytest.raises(InvalidArgument):
            q.enqueue_many(["a", "b", {"lone": "\ud800"}])
        assert counts(q) == (1, 0, 0, 0)
        # Inside the caller's transaction: the failed batch leaves no row and
        # the transaction goes on.
        with store.transaction() as tx:
            q.enqueue("in tx", tx=tx)
            with pytest.raises(InvalidArgument):
                q.enqueue_many(["x", float("inf")], tx=tx)
            q.enqueue_many(["after 1", "after 2"], tx=tx)
        payloads = [i.payload for i in q.list_jobs(JobState.PENDING)]
        assert payloads == ["before", "in tx", "after 1", "after 2"]

    @pytest.mark.clause("C-6", "Q-7")
    @QUEUES
    def test_refused_handle_input_changes_nothing(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
        job_id = q.enqueue("x")
        job = claim_one(q)
        before = info_of(q, job_id)
        bad_calls: list[Callable[[], object]] = [
            lambda: job.retry(42),  # type: ignore[arg-type]
            lambda: job.retry("x", delay_s=-1),
            lambda: job.retry("x", delay_s=float("nan")),
            lambda: job.fail(None),  # type: ignore[arg-type]
            lambda: job.heartbeat(-1),
        ]
        for call in bad_calls:
            with pytest.raises(InvalidArgument):
                call()
        assert info_of(q, job_id) == before
        assert job.ack()

    # ----------------------------------------------------------------- C-7

    @pytest.mark.clause("C-7")
    @QUEUES
    def test_queues_never_see_each_others_jobs(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        base = unique()
        # Names that a LIKE, a case fold or a trimmed comparison would confuse.
        names = [f"{base}-jobs", f"{base}-job_", f"{base}-JOBS", f"{base}-jobs ", f"{base}-%"]
        ids: dict[str, list[int]] = {}
        expiring: dict[str, int] = {}
        for name in names:
            q = store.queue(name, QueueOpts(visibility_timeout_s=LONG_S))
            ids[name] = q.enqueue_many([name, name])
            expiring[name] = q.enqueue(name, EnqueueOpts(expires_s=0.1))
        everyone = {i for v in ids.values() for i in v} | set(expiring.values())
        with store_factory.open() as other:
            for name in names:
                own = {*ids[name], expiring[name]}
                for s in (store, other):
                    q = s.queue(name)
                    for foreign in everyone - own:
                        assert q.get_job(foreign) is None
                        assert q.cancel(foreign) is False
                    listed = q.list_jobs(JobState.PENDING)
                    assert {i.id for i in listed} == own
                    assert {i.queue for i in listed} == {name}
            time.sleep(0.2)
            assert other.queue(names[0]).sweep_expired().expired == 1
            assert info_of(store.queue(names[0]), expiring[names[0]]).state is JobState.DEAD
            for name in names[1:]:
                assert info_of(store.queue(name), expiring[name]).state is JobState.PENDING
            for n, name in enumerate(names):
                q = (store, other)[n % 2].queue(name)
                jobs = q.claim_batch("w", 10)
                assert {j.payload for j in jobs} == {name}
                assert {j.queue for j in jobs} == {name}
                assert {j.id for j in jobs} == set(ids[name])
                assert q.ack_batch(jobs) == 2
                assert counts(q)[2:] == (0, 0 if n else 1)

    # ----------------------------------------------------------------- C-8

    @pytest.mark.clause("C-8")
    @QUEUES
    def test_pure_reads_do_not_wait_for_an_open_write_transaction(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """While another store holds a write transaction open, get_job, stats, list_jobs,
        queue_stats (and stream reads) complete and see only committed rows."""
        q = store.queue(unique())
        committed = q.enqueue("committed")
        stream_name = unique("s")
        has_streams = Capability.STREAMS in store.capabilities
        if has_streams:
            store.stream(stream_name).publish("committed")

        with store_factory.open() as writer:
            with writer.transaction() as tx:
                uncommitted = writer.queue(q.name).enqueue("uncommitted", tx=tx)
                if has_streams:
                    writer.stream(stream_name).publish("uncommitted", tx=tx)

                def reads() -> tuple[Any, ...]:
                    return (
                        q.get_job(committed),
                        q.get_job(uncommitted),
                        q.stats(),
                        [i.id for i in q.list_jobs(JobState.PENDING)],
                        {s.queue: s for s in store.queue_stats()}.get(q.name),
                        [e.payload for e in store.stream(stream_name).read()]
                        if has_streams
                        else None,
                    )

                reader = Background(reads)
                finished = reader.finished_within(WAKE_BOUND_S)
            assert finished, "pure reads waited for another store's write transaction"
            found, hidden, stats, listed, listed_stats, events = reader.result()
        assert found is not None and found.payload == "committed"
        assert hidden is None
        assert (stats.pending, stats.dead) == (1, 0)
        assert listed == [committed]
        assert listed_stats == stats
        if has_streams:
            assert events == ["committed"]
        assert counts(q) == (2, 0, 0, 0)

    @pytest.mark.clause("C-8", "Q-12")
    @QUEUES
    def test_claims_work_with_many_dead_rows(self, store: Store) -> None:
        """With 2,000 dead rows in the queue, a fresh job is claimed and acked normally."""
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=0.2, max_attempts=1))
        total = 2000
        q.enqueue_many([{"n": i} for i in range(total)])
        claimed = 0
        while claimed < total:
            batch = q.claim_batch("w", 500)
            assert batch, "claimable jobs were not claimed"
            claimed += len(batch)
        time.sleep(0.35)
        q.sweep_expired()
        assert counts(q) == (0, 0, 0, total)
        # Its claim must outlive the ack on a loaded machine: the row's own timeout.
        fresh_id = store.queue(q.name, QueueOpts(visibility_timeout_s=LONG_S)).enqueue("fresh")
        job = claim_one(q)
        assert (job.id, job.attempts) == (fresh_id, 1)
        assert job.ack()
        assert q.claim("w") is None
        assert len(q.list_jobs(JobState.DEAD, limit=total)) == total
