"""The worker runtime (W-1..W-5).

The worker is engine-agnostic, so these tests check the pair: the runtime
built on the contract, and an engine whose claims, heartbeats and wakes make
it behave. Timing rules use short real timeouts (visibility timeouts of
0.3-0.6 s, a grace of 0.2 s) and generous upper bounds, so that a loaded
machine makes them slower, never wrong.

Two thin wrappers let the tests watch the worker from the outside without
touching the engine: :class:`CountingQueue` records every ``claim_batch``
call, and :class:`RecordingJob` every operation on a claim. ``RecordingJob``
deliberately hides the engine's ``visibility_timeout_s`` attribute, so the
worker's fallback (a third of ``deadline - now`` at claim time) is exercised
too.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import queue as queue_mod
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from itertools import pairwise
from multiprocessing.queues import Queue as MPQueue
from typing import Any

import pytest

from alkstore import (
    Capability,
    EnqueueOpts,
    Fail,
    InvalidArgument,
    Job,
    JobInfo,
    JobState,
    Queue,
    QueueOpts,
    QueueStats,
    ReservedName,
    Retry,
    Store,
    SweepResult,
    Worker,
)

from ._base import ContractBase, eventually, requires, spawn, unique
from ._children_worker import run_worker_until_signalled
from ._factory import StoreFactory

#: Visibility timeout of the heartbeat tests: it runs out several times over
#: while their handlers run.
SHORT_VT_S = 0.5
#: Long enough never to run out during a test.
LONG_VT_S = 60.0
#: How much clock difference the retry-time checks allow (C-4: PostgreSQL
#: stamps with the server's clock).
CLOCK_SLACK_S = 2.0


def _now() -> datetime:
    return datetime.now(timezone.utc)


class _Boom(Exception):
    """A handler's own exception type (W-1: its name goes into last_error)."""


# ------------------------------------------------------------------ wrappers


@dataclass
class Op:
    """One operation the worker made on a claim."""

    name: str
    result: bool
    at: float = field(default_factory=time.monotonic)


class RecordingJob:
    """A :class:`~alkstore.Job` that records what the worker does with it.

    *before_heartbeat* runs before each heartbeat is passed on (to stall one).
    It has no ``visibility_timeout_s``: the worker must fall back to the claim's
    deadline.
    """

    def __init__(self, job: Job, before_heartbeat: Callable[[int], None] | None = None) -> None:
        self.inner = job
        self.ops: list[Op] = []
        self.claimed_at = time.monotonic()
        self._before_heartbeat = before_heartbeat
        self._lock = threading.Lock()

    def _record(self, name: str, result: bool) -> bool:
        with self._lock:
            self.ops.append(Op(name, result))
        return result

    def names(self) -> list[str]:
        with self._lock:
            return [op.name for op in self.ops]

    def beats(self) -> list[Op]:
        with self._lock:
            return [op for op in self.ops if op.name == "heartbeat"]

    @property
    def id(self) -> int:
        return self.inner.id

    @property
    def queue(self) -> str:
        return self.inner.queue

    @property
    def payload(self) -> Any:
        return self.inner.payload

    @property
    def attempts(self) -> int:
        return self.inner.attempts

    @property
    def max_attempts(self) -> int:
        return self.inner.max_attempts

    @property
    def priority(self) -> int:
        return self.inner.priority

    @property
    def deadline(self) -> datetime:
        return self.inner.deadline

    def ack(self, tx: object | None = None) -> bool:
        return self._record("ack", self.inner.ack(tx))

    def retry(self, error: str, delay_s: float | None = None, tx: object | None = None) -> bool:
        return self._record("retry", self.inner.retry(error, delay_s, tx))

    def fail(self, error: str, tx: object | None = None) -> bool:
        return self._record("fail", self.inner.fail(error, tx))

    def heartbeat(self, extend_s: float | None = None) -> bool:
        if self._before_heartbeat is not None:
            self._before_heartbeat(len(self.beats()))
        return self._record("heartbeat", self.inner.heartbeat(extend_s))


@dataclass
class ClaimCall:
    """One ``claim_batch`` call: what was asked and how many jobs came back."""

    n: int
    wait_s: float
    got: int
    started: float
    ended: float


class CountingQueue:
    """A :class:`~alkstore.Queue` that records ``claim_batch`` calls and wraps
    the claimed jobs in :class:`RecordingJob`. *on_claim* runs before each
    call with the number of jobs asked for."""

    def __init__(
        self,
        inner: Queue,
        *,
        before_heartbeat: Callable[[int], None] | None = None,
        on_claim: Callable[[int], None] | None = None,
    ) -> None:
        self.inner = inner
        self.calls: list[ClaimCall] = []
        self.jobs: list[RecordingJob] = []
        self._before_heartbeat = before_heartbeat
        self._on_claim = on_claim
        self._lock = threading.Lock()

    def job(self, job_id: int) -> RecordingJob:
        with self._lock:
            matches = [j for j in self.jobs if j.id == job_id]
        assert matches, f"job {job_id} was never claimed through the wrapper"
        return matches[-1]

    def call_count(self) -> int:
        with self._lock:
            return len(self.calls)

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def opts(self) -> QueueOpts:
        return self.inner.opts

    def enqueue(
        self, payload: Any, opts: EnqueueOpts | None = None, tx: object | None = None
    ) -> int:
        return self.inner.enqueue(payload, opts, tx)

    def enqueue_many(
        self, payloads: Sequence[Any], opts: EnqueueOpts | None = None, tx: object | None = None
    ) -> list[int]:
        return self.inner.enqueue_many(payloads, opts, tx)

    def claim(self, worker_id: str, wait_s: float = 0) -> Job | None:
        jobs = self.claim_batch(worker_id, 1, wait_s)
        return jobs[0] if jobs else None

    def claim_batch(self, worker_id: str, n: int, wait_s: float = 0) -> list[Job]:
        if self._on_claim is not None:
            self._on_claim(n)
        started = time.monotonic()
        got = self.inner.claim_batch(worker_id, n, wait_s)
        wrapped = [RecordingJob(j, self._before_heartbeat) for j in got]
        with self._lock:
            self.calls.append(ClaimCall(n, wait_s, len(got), started, time.monotonic()))
            self.jobs.extend(wrapped)
        return list(wrapped)

    def ack_batch(self, jobs: Sequence[Job]) -> int:
        return self.inner.ack_batch([j.inner if isinstance(j, RecordingJob) else j for j in jobs])

    def cancel(self, job_id: int, tx: object | None = None) -> bool:
        return self.inner.cancel(job_id, tx)

    def get_job(self, job_id: int) -> JobInfo | None:
        return self.inner.get_job(job_id)

    def sweep_expired(self) -> SweepResult:
        return self.inner.sweep_expired()

    def stats(self) -> QueueStats:
        return self.inner.stats()

    def list_jobs(self, state: JobState, limit: int = 100, after_id: int = 0) -> list[JobInfo]:
        return self.inner.list_jobs(state, limit, after_id)


# ------------------------------------------------------------------- helpers


@contextmanager
def running(worker: Worker, stop: threading.Event) -> Iterator[threading.Thread]:
    """Run ``worker.run(stop)`` in a thread; on exit set *stop*, join, and fail
    the test if ``run`` raised or did not return."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            worker.run(stop)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target, name="worker-under-test", daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive(), "Worker.run did not return after stop"
    assert errors == [], f"Worker.run raised: {errors!r}"


def _background(call: Callable[[], int]) -> tuple[threading.Thread, list[int]]:
    """Run ``run_until_empty``-like *call* in a thread; its result lands in the list."""
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(call()), daemon=True)
    thread.start()
    return thread, result


def _worker_records(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "alkstore.worker" and r.levelno >= level]


def _noop(job: Job) -> None:
    return None


@requires(Capability.QUEUES)
class WorkerContract(ContractBase):
    """The worker runtime (W-1..W-5)."""

    # ------------------------------------------------------------------ W-1

    @pytest.mark.clause("W-1", "Q-9")
    def test_worker_handler_return_acks_the_job(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_VT_S))
        ids = q.enqueue_many([{"n": n} for n in range(6)])
        seen: list[tuple[int, Any, int]] = []
        lock = threading.Lock()

        def handler(job: Job) -> None:
            with lock:
                seen.append((job.id, job.payload, job.attempts))

        ran = Worker(store, q.name, handler, concurrency=3).run_until_empty()
        assert ran == 6
        assert sorted(seen) == [(i, {"n": n}, 1) for n, i in enumerate(ids)]
        assert all(q.get_job(i) is None for i in ids)
        assert q.stats() == QueueStats(q.name, 0, 0, 0, 0)

    @pytest.mark.clause("W-1")
    def test_run_until_empty_on_an_empty_queue_returns_zero_at_once(self, store: Store) -> None:
        q = store.queue(unique())
        started = time.monotonic()
        assert Worker(store, q, _noop).run_until_empty() == 0
        assert time.monotonic() - started < 5.0
        # A worker may run again after a run returned.
        q.enqueue(1)
        worker = Worker(store, q, _noop, concurrency=1)
        assert worker.run_until_empty() == 1
        assert worker.run_until_empty() == 0

    @pytest.mark.clause("W-1", "Q-10")
    def test_worker_retry_with_delay_reschedules_after_that_delay(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(backoff_base_s=0))
        job_id = q.enqueue("later")

        def handler(job: Job) -> None:
            raise Retry(delay_s=60)

        before = _now()
        assert Worker(store, q, handler).run_until_empty() == 1
        after = _now()
        info = q.get_job(job_id)
        assert info is not None
        assert info.state is JobState.PENDING
        assert info.attempts == 1
        slack = timedelta(seconds=CLOCK_SLACK_S)
        assert before + timedelta(seconds=60) - slack <= info.run_at
        assert info.run_at <= after + timedelta(seconds=60) + slack
        assert q.claim("rival") is None

    @pytest.mark.clause("W-1", "Q-10", "B-1")
    @pytest.mark.parametrize("raised", ["retry", "exception"])
    def test_worker_retry_without_delay_follows_the_curve(self, store: Store, raised: str) -> None:
        base = 100.0
        q = store.queue(unique(), QueueOpts(backoff_base_s=base, max_attempts=3))
        job_id = q.enqueue("x")

        def handler(job: Job) -> None:
            if raised == "retry":
                raise Retry()
            raise _Boom("flaky")

        before = _now()
        assert Worker(store, q, handler).run_until_empty() == 1
        after = _now()
        info = q.get_job(job_id)
        assert info is not None
        assert info.state is JobState.PENDING
        assert info.attempts == 1
        # B-1, attempt 1: uniform in [base/2, base].
        slack = timedelta(seconds=CLOCK_SLACK_S)
        assert before + timedelta(seconds=base / 2) - slack <= info.run_at
        assert info.run_at <= after + timedelta(seconds=base) + slack

    @pytest.mark.clause("W-1", "Q-10")
    def test_worker_retry_at_an_exhausted_budget_dead_letters_with_its_reason(
        self, store: Store
    ) -> None:
        q = store.queue(unique(), QueueOpts(max_attempts=2, backoff_base_s=0))
        reasoned = q.enqueue("reasoned")
        bare = q.enqueue("bare", EnqueueOpts(max_attempts=1))

        def handler(job: Job) -> None:
            if job.payload == "reasoned":
                raise Retry(0, "upstream busy")
            raise Retry()

        assert Worker(store, q, handler).run_until_empty() == 3
        info = q.get_job(reasoned)
        assert info is not None
        assert (info.state, info.attempts, info.last_error) == (JobState.DEAD, 2, "upstream busy")
        info = q.get_job(bare)
        assert info is not None
        assert (info.state, info.attempts) == (JobState.DEAD, 1)
        assert isinstance(info.last_error, str) and info.last_error

    @pytest.mark.clause("W-1", "Q-11")
    def test_worker_fail_dead_letters_at_once(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(max_attempts=5))
        job_id = q.enqueue({"to": ""})

        def handler(job: Job) -> None:
            raise Fail("no recipient")

        assert Worker(store, q, handler).run_until_empty() == 1
        info = q.get_job(job_id)
        assert info is not None
        assert (info.state, info.attempts, info.last_error) == (JobState.DEAD, 1, "no recipient")

    @pytest.mark.clause("W-1", "Q-5", "Q-10")
    def test_worker_exception_retries_until_the_budget_then_dead_letters(
        self, store: Store
    ) -> None:
        q = store.queue(unique(), QueueOpts(max_attempts=3, backoff_base_s=0))
        job_id = q.enqueue("fragile")
        attempts: list[int] = []

        def handler(job: Job) -> None:
            attempts.append(job.attempts)
            raise _Boom("disk full")

        assert Worker(store, q, handler, concurrency=2).run_until_empty() == 3
        assert attempts == [1, 2, 3]
        info = q.get_job(job_id)
        assert info is not None
        assert info.state is JobState.DEAD
        assert info.attempts == 3
        assert info.last_error == "_Boom: disk full"

    @pytest.mark.clause("W-1")
    def test_worker_refuses_bad_arguments(self, store: Store) -> None:
        name = unique()
        for bad in (0, -1, True, 1.5, "2"):
            with pytest.raises(InvalidArgument):
                Worker(store, name, _noop, concurrency=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            Worker(store, name, "not callable")  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            Worker(store, name, _noop, worker_id="")
        with pytest.raises(InvalidArgument):
            Worker(store, name, _noop, grace_s=-1)
        with pytest.raises(InvalidArgument):
            Worker(store, name, _noop, heartbeat_every_s=0)
        with pytest.raises(ReservedName):
            Worker(store, "__alkstore.mine", _noop)
        with pytest.raises(InvalidArgument):
            Retry(delay_s=-1)
        with pytest.raises(InvalidArgument):
            Worker(store, store.queue(name), _noop, queue_opts=QueueOpts())

    # ------------------------------------------------------------------ W-2

    @pytest.mark.clause("W-2", "Q-8", "Q-3")
    def test_worker_heartbeats_keep_a_slow_job_from_being_reclaimed(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        name = unique()
        q = store.queue(name, QueueOpts(visibility_timeout_s=SHORT_VT_S))
        job_id = q.enqueue("slow")
        started = threading.Event()
        attempts: list[int] = []

        def handler(job: Job) -> None:
            attempts.append(job.attempts)
            started.set()
            time.sleep(SHORT_VT_S * 3)

        other = store_factory.open()
        try:
            rival = other.queue(name)
            thread, result = _background(Worker(store, q, handler, concurrency=1).run_until_empty)
            assert started.wait(10)
            stolen: list[Job] = []
            while thread.is_alive():
                job = rival.claim("rival")
                if job is not None:
                    stolen.append(job)
                time.sleep(0.02)
            thread.join()
        finally:
            other.close()
        assert stolen == [], "a rival claimed the job while its worker was heartbeating"
        assert result == [1]
        assert attempts == [1]
        assert q.get_job(job_id) is None

    @pytest.mark.clause("W-2", "Q-8")
    def test_worker_heartbeats_well_inside_the_visibility_timeout(self, store: Store) -> None:
        vt = 0.6
        q = CountingQueue(store.queue(unique(), QueueOpts(visibility_timeout_s=vt)))
        job_id = q.enqueue("slow")

        def handler(job: Job) -> None:
            time.sleep(vt * 2)

        assert Worker(store, q, handler, concurrency=1).run_until_empty() == 1
        job = q.job(job_id)
        beats = job.beats()
        assert len(beats) >= 2
        assert all(b.result for b in beats)
        times = [job.claimed_at] + [b.at for b in beats]
        gaps = [later - earlier for earlier, later in pairwise(times)]
        assert max(gaps) < vt, f"heartbeat gaps {gaps} reach the visibility timeout {vt}"
        assert job.names()[-1] == "ack"
        assert q.get_job(job_id) is None

    @pytest.mark.clause("W-2", "Q-13", "W-5")
    def test_worker_drops_the_result_of_a_cancelled_job(
        self, store: Store, caplog: pytest.LogCaptureFixture
    ) -> None:
        caplog.set_level(logging.DEBUG, logger="alkstore.worker")
        q = CountingQueue(store.queue(unique(), QueueOpts(visibility_timeout_s=0.3)))
        job_id = q.enqueue("doomed")
        started, release = threading.Event(), threading.Event()

        def handler(job: Job) -> None:
            started.set()
            release.wait(30)

        thread, result = _background(Worker(store, q, handler, concurrency=1).run_until_empty)
        try:
            assert started.wait(10)
            assert q.cancel(job_id)
            job = q.job(job_id)
            eventually(lambda: any(not b.result for b in job.beats()))
            eventually(lambda: _worker_records(caplog, logging.WARNING))
        finally:
            release.set()
            thread.join(30)
        assert result == [1]
        assert [n for n in job.names() if n != "heartbeat"] == [], (
            "the worker acted on a lost claim"
        )
        assert [b.result for b in job.beats()][-1] is False
        assert q.get_job(job_id) is None

    @pytest.mark.clause("W-2", "Q-6", "Q-7")
    def test_worker_drops_the_result_of_a_claim_that_lapsed(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        vt = 0.3
        name = unique()
        stalled = threading.Event()

        def stall_first_heartbeat(done: int) -> None:
            # A worker paused (a long GC, a suspended VM) past its deadline.
            if done == 0:
                time.sleep(vt * 3)
                stalled.set()

        q = CountingQueue(
            store.queue(name, QueueOpts(visibility_timeout_s=vt)),
            before_heartbeat=stall_first_heartbeat,
        )
        job_id = q.enqueue("stalled")
        release = threading.Event()

        def handler(job: Job) -> None:
            release.wait(30)

        other = store_factory.open()
        try:
            thread, result = _background(Worker(store, q, handler, concurrency=1).run_until_empty)
            try:
                assert stalled.wait(10)
                job = q.job(job_id)
                eventually(lambda: job.beats())
                assert job.beats()[0].result is False
                rescued = eventually(lambda: other.queue(name).claim("rescuer"))
                assert rescued is not None
                assert rescued.attempts == 2
            finally:
                release.set()
                thread.join(30)
            assert result == [1]
            assert [n for n in job.names() if n != "heartbeat"] == []
            assert rescued.ack()
        finally:
            other.close()

    # ------------------------------------------------------------------ W-3

    @pytest.mark.clause("W-3")
    def test_stop_lets_a_running_handler_finish_and_acks_it(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_VT_S))
        first, *rest = q.enqueue_many(["a", "b", "c"])
        started = threading.Event()
        handled: list[int] = []

        def handler(job: Job) -> None:
            started.set()
            time.sleep(0.5)
            handled.append(job.id)

        stop = threading.Event()
        worker = Worker(store, q, handler, concurrency=1, claim_wait_s=0.2)
        with running(worker, stop):
            assert started.wait(10)
            stop.set()
        assert handled == [first]
        assert q.get_job(first) is None
        for job_id in rest:
            info = q.get_job(job_id)
            assert info is not None
            assert (info.state, info.attempts) == (JobState.PENDING, 0)
        assert q.stats().processing == 0

    @pytest.mark.clause("W-3", "Q-6")
    def test_stop_leaves_a_handler_past_the_grace_period_to_lapse(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        vt, grace = 0.5, 0.2
        name = unique()
        q = CountingQueue(store.queue(name, QueueOpts(visibility_timeout_s=vt)))
        job_id = q.enqueue("stuck")
        started, release = threading.Event(), threading.Event()

        def handler(job: Job) -> None:
            started.set()
            release.wait(30)

        stop = threading.Event()
        worker = Worker(store, q, handler, concurrency=1, grace_s=grace, claim_wait_s=0.2)
        other = store_factory.open()
        try:
            with running(worker, stop) as thread:
                assert started.wait(10)
                stopped_at = time.monotonic()
                stop.set()
                thread.join(30)
                assert time.monotonic() - stopped_at < grace + 5.0
            info = q.get_job(job_id)
            assert info is not None
            assert (info.state, info.attempts) == (JobState.PROCESSING, 1)
            # Nothing is lost: once the claim lapses, the job is claimed again.
            rescued = eventually(lambda: other.queue(name).claim("rescuer"))
            assert rescued is not None
            assert (rescued.id, rescued.attempts) == (job_id, 2)
            release.set()
            time.sleep(0.3)  # the abandoned handler returns; its result is dropped
            assert [n for n in q.job(job_id).names() if n != "heartbeat"] == []
            assert rescued.ack()
        finally:
            release.set()
            other.close()

    @pytest.mark.clause("W-3", "Q-5")
    def test_stop_burns_no_attempt_of_an_unstarted_job(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_VT_S))
        ids = q.enqueue_many(list(range(10)))
        started: list[int] = []
        lock = threading.Lock()

        def handler(job: Job) -> None:
            with lock:
                started.append(job.id)
            time.sleep(0.2)

        stop = threading.Event()
        worker = Worker(store, q, handler, concurrency=2, claim_wait_s=0.2)
        with running(worker, stop):
            eventually(lambda: len(started) >= 2)
            stop.set()
        assert len(started) < len(ids), "the worker drained the queue before it stopped"
        for job_id in ids:
            info = q.get_job(job_id)
            if job_id in started:
                assert info is None, f"started job {job_id} was not acked: {info}"
            else:
                assert info is not None
                assert (info.state, info.attempts) == (JobState.PENDING, 0), info
        assert q.stats().processing == 0

    @pytest.mark.clause("W-3")
    def test_worker_claims_no_more_jobs_than_it_has_free_threads(self, store: Store) -> None:
        concurrency = 3
        running_now = 0
        most = 0
        lock = threading.Lock()
        over: list[tuple[int, int]] = []

        def on_claim(n: int) -> None:
            with lock:
                if n + running_now > concurrency:
                    over.append((n, running_now))

        q = CountingQueue(
            store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_VT_S)), on_claim=on_claim
        )
        q.enqueue_many(list(range(12)))

        def handler(job: Job) -> None:
            nonlocal running_now, most
            with lock:
                running_now += 1
                most = max(most, running_now)
            time.sleep(0.05)
            with lock:
                running_now -= 1

        assert Worker(store, q, handler, concurrency=concurrency).run_until_empty() == 12
        assert over == [], f"claims beyond the free threads: (asked, running) {over}"
        assert 1 <= most <= concurrency
        assert sum(c.got for c in q.calls) == 12

    @pytest.mark.clause("W-3")
    @pytest.mark.cross_process
    @pytest.mark.skipif(not hasattr(signal, "SIGTERM") or os.name == "nt", reason="POSIX signals")
    def test_sigterm_stops_a_worker_process_gracefully(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        name = unique()
        q = store.queue(name, QueueOpts(visibility_timeout_s=LONG_VT_S))
        ids = q.enqueue_many([{"sleep_s": 1.0} for _ in range(4)])
        results: MPQueue[Any] = multiprocessing.get_context("spawn").Queue()
        proc = spawn(run_worker_until_signalled, store_factory, name, 1, results)
        try:
            assert results.get(timeout=60) == ("ready", None)
            eventually(lambda: q.stats().processing == 1, timeout_s=30)
            assert proc.pid is not None
            os.kill(proc.pid, signal.SIGTERM)
            proc.join(30)
            assert proc.exitcode == 0
            assert results.get(timeout=10) == ("ok", None)
        finally:
            if proc.is_alive():
                proc.kill()
                proc.join(10)
        # Whatever had started finished within the grace period and was acked;
        # the rest was never claimed (no attempt burnt, nothing processing).
        infos = [q.get_job(i) for i in ids]
        acked = [i for i, info in zip(ids, infos, strict=True) if info is None]
        untouched = [info for info in infos if info is not None]
        assert acked, "the running handler's job was not acked"
        assert untouched, "the worker did not stop before draining the queue"
        for info in untouched:
            assert (info.state, info.attempts) == (JobState.PENDING, 0), info

    # ------------------------------------------------------------------ W-4

    @pytest.mark.clause("W-4", "Q-19")
    def test_idle_worker_is_woken_by_an_enqueue_from_another_store(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        name = unique()
        q = store.queue(name)
        handled: queue_mod.SimpleQueue[tuple[Any, float]] = queue_mod.SimpleQueue()

        def handler(job: Job) -> None:
            handled.put((job.payload, time.monotonic()))

        # A claim slice far longer than the pickup we demand: only a wake can
        # explain a prompt pickup.
        wait_s = 5.0
        worker = Worker(store, q, handler, concurrency=1, claim_wait_s=wait_s)
        other = store_factory.open()
        try:
            stop = threading.Event()
            with running(worker, stop):
                time.sleep(0.5)  # the worker is blocked in its claim by now
                sent = time.monotonic()
                other.queue(name).enqueue("wake up")
                payload, at = handled.get(timeout=30)
                assert payload == "wake up"
                assert at - sent < wait_s / 2, f"picked up after {at - sent:.2f} s"
                stop.set()
                # Wake the blocked claim so that the stop is seen at once.
                other.queue(name).enqueue("poke")
        finally:
            other.close()

    @pytest.mark.clause("W-4")
    def test_idle_worker_does_not_poll_in_a_loop(self, store: Store) -> None:
        q = CountingQueue(store.queue(unique()))
        bystander = store.queue(unique())
        untouched = bystander.enqueue("not mine")
        wait_s, idle_s = 0.5, 2.0
        worker = Worker(store, q, _noop, concurrency=2, claim_wait_s=wait_s)
        stop = threading.Event()
        with running(worker, stop):
            time.sleep(idle_s)
        calls = list(q.calls)
        # About idle_s / wait_s blocking calls; a polling loop makes thousands.
        assert 1 <= len(calls) <= idle_s / wait_s + 4, f"{len(calls)} claim calls in {idle_s} s"
        assert all(c.wait_s > 0 for c in calls)
        assert sum(c.got for c in calls) == 0
        info = bystander.get_job(untouched)
        assert info is not None
        assert (info.state, info.attempts) == (JobState.PENDING, 0)

    # ------------------------------------------------------------------ W-5

    @pytest.mark.clause("W-5")
    def test_worker_logs_through_alkstore_worker_and_never_prints(
        self,
        store: Store,
        caplog: pytest.LogCaptureFixture,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        caplog.set_level(logging.DEBUG)
        q = store.queue(unique(), QueueOpts(max_attempts=2, backoff_base_s=0))
        q.enqueue_many(["ok", "retry", "fail", "boom"])
        boom = _Boom("kaput")

        def handler(job: Job) -> None:
            if job.payload == "retry":
                raise Retry(0)
            if job.payload == "fail":
                raise Fail("refused")
            if job.payload == "boom":
                raise boom

        stop = threading.Event()
        assert Worker(store, q, handler, concurrency=2).run_until_empty() == 6
        with running(Worker(store, q, handler, claim_wait_s=0.2), stop):
            time.sleep(0.3)
        records = [r for r in caplog.records if os.path.basename(r.pathname) == "worker.py"]
        assert records, "the worker logged nothing about failing handlers"
        assert {r.name for r in records} == {"alkstore.worker"}
        # The unexpected exception is logged with its traceback.
        assert any(r.exc_info is not None and r.exc_info[1] is boom for r in records)
        out, err = capsys.readouterr()
        assert (out, err) == ("", "")
