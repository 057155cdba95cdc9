"""The worker runtime (W-1..W-5).

The worker is engine-agnostic, so these tests check the pair: the runtime
built on the contract, and an engine whose claims, heartbeats and wakes make
it behave. Timing rules use short real timeouts (visibility timeouts of
0.3-0.6 s, a grace of 0.2 s) and generous upper bounds, so that a loaded
machine makes them slower, never wrong.

The tests watch the worker from the outside through the thin wrappers of
:mod:`alkstore_conformance._doubles` (``CountingQueue``, ``RecordingJob``,
``SettleStore``), which do not touch the engine.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import queue as queue_mod
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from itertools import pairwise
from multiprocessing.queues import Queue as MPQueue
from pathlib import Path
from typing import Any

import pytest

from alkstore import (
    AsyncStore,
    AsyncWorker,
    Capability,
    EnqueueOpts,
    Fail,
    InvalidArgument,
    Job,
    JobState,
    Queue,
    QueueOpts,
    QueueStats,
    ReservedName,
    Retry,
    Store,
    Worker,
)

from ._base import (
    ContractBase,
    eventually,
    kill_hard,
    kills_a_process,
    own_table,
    requires,
    spawn,
    unique,
)
from ._children_worker import run_worker_until_signalled, run_worker_with_stuck_settles
from ._doubles import (
    CountingQueue,
    SettleStore,
)
from ._factory import StoreFactory
from ._queue_helpers import Background
from .contract_async import ASYNC_ONLY, run_async
from .contract_transaction import table_rows

#: Visibility timeout of the heartbeat tests: it runs out several times over
#: while their handlers run. 1 s, not less: beats come every third of it, and
#: on a loaded 2-core CI machine one SQLite fsync or PostgreSQL round trip
#: has taken a third of a second.
SHORT_VT_S = 1.0
#: Long enough never to run out during a test.
LONG_VT_S = 60.0
#: How much clock difference the retry-time checks allow (C-4: PostgreSQL
#: stamps with the server's clock).
CLOCK_SLACK_S = 2.0


def _now() -> datetime:
    return datetime.now(timezone.utc)


class _Boom(Exception):
    """A handler's own exception type (W-1: its name goes into last_error)."""


# ------------------------------------------------------------------- helpers


@contextmanager
def running(worker: Worker, stop: threading.Event) -> Iterator[Background[None]]:
    """Run ``worker.run(stop)`` in a thread; on exit set *stop*, join, and fail
    the test if ``run`` raised or did not return."""
    run = Background(lambda: worker.run(stop), name="worker-under-test")
    try:
        yield run
    finally:
        stop.set()
        returned = run.finished_within(30)
    assert returned, "Worker.run did not return after stop"
    run.result(0)


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


def _assert_run_once_then_pending_within(
    store: Store,
    q: Queue,
    job_id: int,
    handler: Callable[[Job], None],
    low_s: float,
    high_s: float,
) -> None:
    """A worker runs the one job through *handler* once; the job is pending
    again after its first attempt, due between *low_s* and *high_s* from the
    run (give or take the clock slack)."""
    before = _now()
    assert Worker(store, q, handler).run_until_empty() == 1
    after = _now()
    info = q.get_job(job_id)
    assert info is not None
    assert info.state is JobState.PENDING
    assert info.attempts == 1
    slack = timedelta(seconds=CLOCK_SLACK_S)
    assert before + timedelta(seconds=low_s) - slack <= info.run_at
    assert info.run_at <= after + timedelta(seconds=high_s) + slack


@requires(Capability.QUEUES)
class WorkerContract(ContractBase):
    """The worker runtime (W-1..W-6, W-8..W-12)."""

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

        _assert_run_once_then_pending_within(store, q, job_id, handler, 60, 60)
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

        # B-1, attempt 1: uniform in [base/2, base].
        _assert_run_once_then_pending_within(store, q, job_id, handler, base / 2, base)

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
    @pytest.mark.alone
    def test_worker_heartbeats_well_inside_the_visibility_timeout(self, store: Store) -> None:
        # Long enough that one slow commit on a loaded machine (a SQLite
        # fsync behind other processes' disk traffic) is not a lapsed claim.
        # It times the heartbeat's cadence, so it runs alone: four test
        # processes on two cores delayed a beat by more than 0.8 s.
        vt = 1.5
        q = CountingQueue(store.queue(unique(), QueueOpts(visibility_timeout_s=vt)))
        job_id = q.enqueue("slow")
        ended: list[float] = []

        def handler(job: Job) -> None:
            time.sleep(vt * 2)
            ended.append(time.monotonic())

        assert Worker(store, q, handler, concurrency=1).run_until_empty() == 1
        job = q.job(job_id)
        beats = job.beats()
        assert len(beats) >= 2
        # Every beat while the handler ran was accepted. One after it may meet
        # the ack's commit (the job is gone): only the flush's word counts then.
        assert all(b.result for b in beats if b.at <= ended[0]), beats
        times = [job.claimed_at] + [b.at for b in beats]
        gaps = [later - earlier for earlier, later in pairwise(times)]
        assert max(gaps) < vt, f"heartbeat gaps {gaps} reach the visibility timeout {vt}"
        # The job ends acked. A beat already on its way when the ack committed
        # may be recorded after it (and refused: the job is gone).
        assert [(op.name, op.result) for op in job.ops if op.name != "heartbeat"] == [("ack", True)]
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
                assert rescued.heartbeat(LONG_VT_S)  # kept while the test looks on
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
            with running(worker, stop) as run:
                assert started.wait(10)
                stopped_at = time.monotonic()
                stop.set()
                run.finished_within(30)
                assert time.monotonic() - stopped_at < grace + 5.0
            info = q.get_job(job_id)
            assert info is not None
            assert (info.state, info.attempts) == (JobState.PROCESSING, 1)
            # Nothing is lost: once the claim lapses, the job is claimed again.
            rescued = eventually(lambda: other.queue(name).claim("rescuer"))
            assert rescued is not None
            assert (rescued.id, rescued.attempts) == (job_id, 2)
            # The rescuer keeps its claim while the test looks on (a loaded
            # machine can spend the 0.5 s before the ack below).
            assert rescued.heartbeat(LONG_VT_S)
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
        self, store: Store, store_factory: StoreFactory, tmp_path: Path
    ) -> None:
        name = unique()
        q = store.queue(name, QueueOpts(visibility_timeout_s=LONG_VT_S))
        started = tmp_path / "started"
        ids = q.enqueue_many([{"sleep_s": 1.0, "started": str(started)} for _ in range(4)])
        results: MPQueue[Any] = multiprocessing.get_context("spawn").Queue()
        proc = spawn(run_worker_until_signalled, store_factory, name, 1, results)
        try:
            assert results.get(timeout=60) == ("ready", None)
            # A handler runs (a signal between a claim and its start gives the
            # job back untouched instead, Q-26: also right, but not this test).
            eventually(started.exists, timeout_s=30)
            assert q.stats().processing == 1
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
        records = [r for r in caplog.records if f"{os.sep}alkstore{os.sep}worker" in r.pathname]
        assert records, "the worker logged nothing about failing handlers"
        assert {r.name for r in records} == {"alkstore.worker"}
        # The unexpected exception is logged with its traceback.
        assert any(r.exc_info is not None and r.exc_info[1] is boom for r in records)
        out, err = capsys.readouterr()
        assert (out, err) == ("", "")

    # ------------------------------------------------------------------ W-6

    @pytest.mark.clause("W-6", "Q-9")
    def test_worker_settles_a_thousand_jobs_in_fewer_than_500_transactions(
        self, store: Store
    ) -> None:
        name = unique()
        q = store.queue(name, QueueOpts(visibility_timeout_s=LONG_VT_S))
        ids = q.enqueue_many(list(range(1000)))
        counted = SettleStore(store)
        ran = Worker(counted.as_store(), name, _noop, concurrency=16).run_until_empty()
        assert ran == 1000
        assert q.stats() == QueueStats(name, 0, 0, 0, 0)
        settled = counted.settled_ids()
        assert sorted(settled) == sorted(ids), "a job was settled twice, or not through the store"
        assert all(all(s.landed) for s in counted.settles)
        assert len(counted.settles) < 500, (
            f"{len(counted.settles)} settle transactions for 1,000 jobs: no group commit"
        )

    @pytest.mark.clause("W-6")
    @pytest.mark.sync_only("spies on the sync store's ack_each (the async form: engine tests)")
    def test_a_worker_given_only_a_queue_handle_settles_in_groups_too(
        self, store: Store, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """``Worker(None, handle)`` (the outbox's form) settles through the
        store that made the handle, one ``ack_each`` per flush."""
        name = unique()
        q = store.queue(name, QueueOpts(visibility_timeout_s=LONG_VT_S))
        ids = q.enqueue_many(list(range(1000)))
        flushes: list[int] = []
        real = store.ack_each

        def spy(jobs: Sequence[Any], *args: Any, **kwargs: Any) -> list[bool]:
            flushes.append(len(jobs))
            return real(jobs, *args, **kwargs)

        monkeypatch.setattr(store, "ack_each", spy)
        assert Worker(None, q, _noop, concurrency=16).run_until_empty() == 1000
        assert q.stats() == QueueStats(name, 0, 0, 0, 0)
        assert sum(flushes) == len(ids), "a job was settled outside the store's ack_each"
        assert len(flushes) < 500, f"{len(flushes)} flushes for 1,000 jobs: no group commit"

    @pytest.mark.clause("W-6", "W-2")
    def test_worker_heartbeats_a_finished_job_until_its_ack_commits_and_reports_it_after(
        self,
        store: Store,
        store_factory: StoreFactory,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """The first flush stalls for three visibility timeouts: the jobs stay
        claimed (heartbeated), the acks land, and neither the log nor
        ``run_until_empty`` says a job is done before its commit."""
        caplog.set_level(logging.DEBUG, logger="alkstore.worker")
        # Beats every third of it for three jobs: 1 s leaves a loaded
        # machine room for a slow round of heartbeats (0.4 s lapsed in CI).
        vt = 1.0
        name = unique()
        q = store.queue(name, QueueOpts(visibility_timeout_s=vt))
        ids = q.enqueue_many(["a", "b", "c"])
        stalled = threading.Event()
        first = [True]

        def stall() -> None:
            if first[0]:
                first[0] = False
                stalled.set()
                time.sleep(vt * 3)

        counted = SettleStore(store, before_settle=stall)
        worker = Worker(counted.as_store(), name, _noop, concurrency=3)
        thread, result = _background(worker.run_until_empty)
        with store_factory.open() as other:
            assert stalled.wait(10)
            time.sleep(vt * 1.5)
            assert thread.is_alive(), "run_until_empty returned before the acks committed"
            assert other.queue(name).claim("rival") is None, "a finished job was not heartbeated"
            assert q.stats().processing >= 1
            thread.join(30)
        assert result and result[0] == 3
        returned = time.time()
        assert all(all(s.landed) for s in counted.settles), counted.settles
        assert sorted(counted.settled_ids()) == sorted(ids)
        committed = {i: s.committed_at for s in counted.settles for i in s.job_ids}
        done = {}
        for record in _worker_records(caplog, logging.DEBUG):
            message = record.getMessage()
            for job_id in ids:
                if f"job {job_id} " in message and message.endswith("done"):
                    done[job_id] = record.created
        assert set(done) == set(ids), "the worker did not report each job done"
        for job_id in ids:
            assert done[job_id] >= committed[job_id], f"job {job_id} reported done before commit"
            assert committed[job_id] <= returned
        assert q.stats().processing == 0

    @pytest.mark.clause("W-6", "Q-6")
    @kills_a_process
    def test_jobs_whose_flush_never_committed_run_again_after_a_crash(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """A worker process whose settles never return is killed after its
        handlers returned: nothing was acked, and the jobs run again once
        their claims lapse. Its slots freed as handlers returned, so it
        handled more jobs than it has slots."""
        # 2 s: a child on a loaded machine once let a claim lapse at 1 s and
        # took the job again itself (attempt 3 after the kill).
        vt = 2.0
        name = unique()
        q = store.queue(name, QueueOpts(visibility_timeout_s=vt))
        ids = q.enqueue_many(list(range(6)))
        results: MPQueue[Any] = multiprocessing.get_context("spawn").Queue()
        proc = spawn(run_worker_with_stuck_settles, store_factory, name, 4, results)
        handled: set[int] = set()
        try:
            assert results.get(timeout=60) == ("ready", None)
            while handled != set(ids):
                kind, value = results.get(timeout=30)
                assert kind == "handled", f"the child worker failed: {value}"
                handled.add(value)
            # Past the visibility timeout: still held, by heartbeats.
            time.sleep(vt * 1.5)
            assert q.claim("rival") is None
            infos = [q.get_job(i) for i in ids]
            assert all(i is not None and i.state is JobState.PROCESSING for i in infos), infos
            kill_hard(proc)
        finally:
            if proc.is_alive():
                kill_hard(proc)
        again: list[Job] = []

        def reclaimed() -> bool:
            again.extend(q.claim_batch("rescuer", 10))
            return len(again) == len(ids)

        eventually(reclaimed, interval_s=0.05)
        assert sorted(j.id for j in again) == sorted(ids)
        assert {j.attempts for j in again} == {2}
        assert q.ack_batch(again) == len(ids)

    # ------------------------------------------------------------------ W-8

    @pytest.mark.clause("W-8", "W-1")
    def test_worker_awaits_coroutine_handlers_on_one_loop_before_acking(self, store: Store) -> None:
        q = CountingQueue(store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_VT_S)))
        ids = q.enqueue_many(list(range(8)))
        finished: dict[int, float] = {}
        loops: set[int] = set()
        threads: set[int] = set()
        running_now = most = 0

        async def handler(job: Job) -> None:
            nonlocal running_now, most
            loops.add(id(asyncio.get_running_loop()))
            threads.add(threading.get_ident())
            running_now += 1
            most = max(most, running_now)
            await asyncio.sleep(0.1)
            running_now -= 1
            finished[job.id] = time.monotonic()

        assert Worker(store, q, handler, concurrency=4).run_until_empty() == 8
        assert sorted(finished) == sorted(ids), "a coroutine handler was not run to its end"
        assert len(loops) == 1 and len(threads) == 1, "handlers ran on more than one loop"
        assert threading.get_ident() not in threads
        assert 2 <= most <= 4, f"{most} coroutine handlers at once with concurrency 4"
        for job_id in ids:
            acks = [op for op in q.job(job_id).ops if op.name == "ack"]
            assert len(acks) == 1 and acks[0].result
            assert acks[0].at >= finished[job_id], f"job {job_id} was acked before it finished"
            assert q.get_job(job_id) is None

    @pytest.mark.clause("W-8", "W-1")
    def test_worker_awaits_what_a_plain_handler_returns(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(max_attempts=1, visibility_timeout_s=LONG_VT_S))
        ok, failed, broken = q.enqueue_many(["ok", "fail", "boom"])
        finished: list[Any] = []

        async def finish(job: Job) -> None:
            await asyncio.sleep(0.05)
            finished.append(job.payload)
            if job.payload == "fail":
                raise Fail("refused late")
            if job.payload == "boom":
                raise _Boom("late")

        def handler(job: Job) -> Any:
            return finish(job)  # an awaitable, not None

        assert Worker(store, q, handler, concurrency=3).run_until_empty() == 3
        assert sorted(finished) == ["boom", "fail", "ok"]
        assert q.get_job(ok) is None
        info = q.get_job(failed)
        assert info is not None and (info.state, info.last_error) == (JobState.DEAD, "refused late")
        info = q.get_job(broken)
        assert info is not None and (info.state, info.last_error) == (JobState.DEAD, "_Boom: late")

    @pytest.mark.clause("W-8", "Q-20")
    @pytest.mark.requires(Capability.OUTBOX)
    def test_handlers_that_are_not_callable_are_refused_before_anything_is_claimed(
        self, store: Store
    ) -> None:
        q = store.queue(unique())
        job_id = q.enqueue("x")
        box = store.outbox(unique("box"))
        message = box.put("m")
        for bad in (None, 42, "handler", ["handler"]):
            with pytest.raises(InvalidArgument):
                Worker(store, q, bad)  # type: ignore[arg-type]
            with pytest.raises(InvalidArgument):
                box.run(bad)  # type: ignore[arg-type]
        info = q.get_job(job_id)
        assert info is not None and (info.state, info.attempts) == (JobState.PENDING, 0)
        info = box.queue.get_job(message)
        assert info is not None and (info.state, info.attempts) == (JobState.PENDING, 0)

    # ------------------------------------------------------------------ W-9

    @pytest.fixture
    def result_table(self, store: Store) -> Iterator[str]:
        """A table of the caller's own for the result-row recipe (T-4)."""
        with own_table(store) as name:
            yield name

    @pytest.mark.clause("W-9", "T-4")
    def test_worker_does_nothing_more_for_a_job_its_handler_acked_with_its_result(
        self, store: Store, result_table: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        caplog.set_level(logging.DEBUG, logger="alkstore.worker")
        q = CountingQueue(store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_VT_S)))
        ids = q.enqueue_many([1, 2, 3])

        def handler(job: Job) -> None:
            with store.transaction() as tx:
                tx.execute(f"INSERT INTO {result_table} (id, note) VALUES ({job.payload}, 'done')")
                assert job.ack(tx=tx) is True

        assert Worker(store, q, handler, concurrency=3).run_until_empty() == 3
        for job_id in ids:
            assert q.job(job_id).names() == ["ack"], "the worker acted on a handler-settled job"
            assert q.get_job(job_id) is None
        assert table_rows(store, result_table) == [(1, "done"), (2, "done"), (3, "done")]
        assert _worker_records(caplog, logging.WARNING) == []

    @pytest.mark.clause("W-9", "Q-10", "Q-11")
    def test_worker_does_nothing_more_for_a_job_its_handler_retried_or_failed(
        self, store: Store, caplog: pytest.LogCaptureFixture
    ) -> None:
        caplog.set_level(logging.DEBUG, logger="alkstore.worker")
        q = CountingQueue(
            store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_VT_S, max_attempts=3))
        )
        retried, failed = q.enqueue_many(["retry", "fail"])

        def handler(job: Job) -> None:
            if job.payload == "retry":
                assert job.retry("by the handler", delay_s=60) is True
                return
            assert job.fail("failed by the handler") is True
            raise _Boom("after settling")  # settled first: the worker ignores it

        before = _now()
        assert Worker(store, q, handler, concurrency=2).run_until_empty() == 2
        assert q.job(retried).names() == ["retry"]
        assert q.job(failed).names() == ["fail"]
        info = q.get_job(retried)
        assert info is not None and (info.state, info.attempts) == (JobState.PENDING, 1)
        assert info.run_at >= before + timedelta(seconds=60 - CLOCK_SLACK_S)
        info = q.get_job(failed)
        assert info is not None
        assert (info.state, info.last_error) == (JobState.DEAD, "failed by the handler")
        assert _worker_records(caplog, logging.WARNING) == []

    @pytest.mark.clause("W-9", "Q-6", "T-4")
    def test_job_acked_in_a_rolled_back_transaction_runs_again_after_its_claim_lapses(
        self, store: Store, result_table: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        caplog.set_level(logging.DEBUG, logger="alkstore.worker")
        # The second run must ack before its claim lapses: 1 s, since CI
        # once saw a loaded pooler run pass 0.5 s between claim and ack.
        vt = 1.0
        q = CountingQueue(store.queue(unique(), QueueOpts(visibility_timeout_s=vt)))
        job_id = q.enqueue(7)
        attempts: list[int] = []
        acked_at: list[float] = []
        done = threading.Event()

        def handler(job: Job) -> None:
            attempts.append(job.attempts)
            try:
                with store.transaction() as tx:
                    tx.execute(f"INSERT INTO {result_table} (id, note) VALUES (7, 'done')")
                    assert job.ack(tx=tx) is True
                    acked_at.append(time.monotonic())
                    if job.attempts == 1:
                        raise _Boom("roll back")
            except _Boom:
                return
            done.set()

        stop = threading.Event()
        worker = Worker(store, q, handler, concurrency=1, claim_wait_s=0.2)
        with running(worker, stop):
            assert done.wait(30), "the job did not run again after its claim lapsed"
        assert attempts == [1, 2]
        first = q.jobs[0]
        # (A beat may come before the handler's ack on a loaded machine.)
        settled = [n for n in first.names() if n != "heartbeat"]
        assert settled == ["ack"], "the worker acted on a handler-settled job"
        # A beat that began before the ack landed may return after it: it
        # waits for the handler's transaction. One the worker chose just
        # before may begin just after; more would be heartbeats going on
        # (and would have kept the claim from lapsing for the second run).
        late = [b for b in first.beats() if b.started > acked_at[0]]
        assert len(late) <= 1, f"heartbeats went on after the ack: {late}"
        assert q.get_job(job_id) is None
        assert table_rows(store, result_table) == [(7, "done")]
        assert _worker_records(caplog, logging.WARNING) == []

    # ----------------------------------------------------------------- W-10

    @pytest.mark.clause("W-10")
    def test_worker_over_several_queues_serves_them_in_strict_order(self, store: Store) -> None:
        a = store.queue(unique("a"), QueueOpts(visibility_timeout_s=LONG_VT_S))
        b = store.queue(unique("b"), QueueOpts(visibility_timeout_s=LONG_VT_S))
        b.enqueue_many(["b1", "b2"])
        a.enqueue_many(["a1", "a2"])
        handled: list[Any] = []

        def handler(job: Job) -> None:
            handled.append(job.payload)
            if job.payload == "b1":
                a.enqueue("a-late")  # the next claim serves a again

        worker = Worker(store, [a.name, b], handler, concurrency=1)
        assert [x.name for x in worker.queues] == [a.name, b.name]
        assert worker.run_until_empty() == 5
        assert handled == ["a1", "a2", "b1", "a-late", "b2"]
        assert a.stats() == QueueStats(a.name, 0, 0, 0, 0)
        assert b.stats() == QueueStats(b.name, 0, 0, 0, 0)

    @pytest.mark.clause("W-10", "W-4", "Q-19")
    def test_idle_worker_over_several_queues_blocks_on_wakes_of_each(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        a, b = unique("a"), unique("b")
        counted = SettleStore(store)
        handled: queue_mod.SimpleQueue[tuple[Any, float]] = queue_mod.SimpleQueue()

        def handler(job: Job) -> None:
            handled.put((job.payload, time.monotonic()))

        wait_s, idle_s = 5.0, 1.5
        worker = Worker(counted.as_store(), [a, b], handler, concurrency=2, claim_wait_s=wait_s)
        other = store_factory.open()
        try:
            stop = threading.Event()
            with running(worker, stop):
                time.sleep(idle_s)
                calls = list(counted.any_calls)
                # One blocking call (a polling loop makes thousands).
                assert 1 <= len(calls) <= 2, f"{len(calls)} claim_any calls while idle"
                assert all(c.wait_s > 0 and c.queues == [a, b] for c in calls)
                for name in (b, a):
                    sent = time.monotonic()
                    other.queue(name).enqueue(f"wake {name}")
                    payload, at = handled.get(timeout=30)
                    assert payload == f"wake {name}"
                    assert at - sent < wait_s / 2, f"picked up after {at - sent:.2f} s"
                stop.set()
                other.queue(a).enqueue("poke")  # end the blocked claim at once
        finally:
            other.close()

    # ----------------------------------------------------------------- W-11

    @pytest.mark.clause("W-11", "W-1", "B-1")
    def test_timed_out_thread_handler_is_retried_by_the_curve_and_its_late_result_dropped(
        self, store: Store
    ) -> None:
        base, timeout = 100.0, 0.3
        q = CountingQueue(
            store.queue(
                unique(), QueueOpts(visibility_timeout_s=0.6, max_attempts=3, backoff_base_s=base)
            )
        )
        curved = q.enqueue("curve")
        last = q.enqueue("last", EnqueueOpts(max_attempts=1))
        returned: list[int] = []

        def handler(job: Job) -> None:
            time.sleep(1.0)
            returned.append(job.id)

        before = _now()
        worker = Worker(store, q, handler, concurrency=2, timeout_s=timeout)
        assert worker.run_until_empty() == 2
        after = _now()
        assert sorted(returned) == sorted([curved, last])
        info = q.get_job(curved)
        assert info is not None
        assert (info.state, info.attempts) == (JobState.PENDING, 1)
        slack = timedelta(seconds=CLOCK_SLACK_S)
        assert before + timedelta(seconds=base / 2) - slack <= info.run_at
        assert info.run_at <= after + timedelta(seconds=base) + slack
        info = q.get_job(last)
        assert info is not None
        assert (info.state, info.last_error) == (JobState.DEAD, "timeout after 0.3 s")
        for job_id in (curved, last):
            job = q.job(job_id)
            assert [n for n in job.names() if n != "heartbeat"] == ["retry"]
            (retry,) = [op for op in job.ops if op.name == "retry"]
            assert retry.result
            assert retry.at - job.claimed_at < 1.0, "the timeout waited for the handler"
            assert [b for b in job.beats() if b.started > retry.at] == [], "heartbeats went on"

    @pytest.mark.clause("W-11", "W-3")
    def test_timed_out_thread_handler_keeps_its_slot_until_it_returns(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_VT_S, backoff_base_s=60))
        q.enqueue_many(["first", "second"])
        spans: list[tuple[str, float, float]] = []
        running_now = most = 0
        lock = threading.Lock()

        def handler(job: Job) -> None:
            nonlocal running_now, most
            with lock:
                running_now += 1
                most = max(most, running_now)
            started = time.monotonic()
            time.sleep(0.8)
            with lock:
                running_now -= 1
            spans.append((job.payload, started, time.monotonic()))

        assert Worker(store, q, handler, concurrency=1, timeout_s=0.2).run_until_empty() == 2
        assert most == 1
        (_, _, first_end), (_, second_start, _) = sorted(spans, key=lambda s: s[1])
        assert second_start >= first_end, "a new handler started while a timed-out one ran"
        assert q.stats().scheduled == 2  # both retried by the curve

    @pytest.mark.clause("W-11", "W-8")
    def test_timed_out_coroutine_handler_is_cancelled(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_VT_S, max_attempts=1))
        job_id = q.enqueue("slow")
        cancelled = threading.Event()

        async def handler(job: Job) -> None:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.set()
                raise

        started = time.monotonic()
        assert Worker(store, q, handler, timeout_s=0.3).run_until_empty() == 1
        assert cancelled.is_set(), "the timed-out coroutine was not cancelled"
        assert time.monotonic() - started < 10
        info = q.get_job(job_id)
        assert info is not None
        assert (info.state, info.last_error) == (JobState.DEAD, "timeout after 0.3 s")

    # ----------------------------------------------------------------- W-12

    @pytest.mark.clause("W-12", "W-3", "W-1")
    def test_should_stop_turns_true_at_once_when_the_worker_stops(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_VT_S))
        job_id = q.enqueue("long")
        started = threading.Event()
        seen: list[tuple[bool, float]] = []

        def handler(job: Job) -> None:
            seen.append((job.should_stop(), time.monotonic()))
            started.set()
            while not job.should_stop():
                time.sleep(0.005)
            seen.append((True, time.monotonic()))

        stop = threading.Event()
        # Free slots and a long claim slice: the claim loop is blocked, so
        # only a stop signal that does not wait for it is "at once".
        worker = Worker(store, q, handler, concurrency=2, claim_wait_s=5.0)
        with running(worker, stop):
            assert started.wait(10)
            time.sleep(0.3)
            stopped = time.monotonic()
            stop.set()
            eventually(lambda: len(seen) == 2)
            q.enqueue("poke")  # end the blocked claim; it is given back unstarted
        assert seen[0][0] is False
        assert seen[1][1] - stopped < 1.0, f"should_stop took {seen[1][1] - stopped:.2f} s"
        assert q.get_job(job_id) is None, "a handler returning after the stop is still acked"

    @pytest.mark.clause("W-12", "W-11")
    def test_should_stop_turns_true_at_once_on_timeout(self, store: Store) -> None:
        q = CountingQueue(
            store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_VT_S, max_attempts=1))
        )
        job_id = q.enqueue("long")
        noticed: list[float] = []

        def handler(job: Job) -> None:
            started = time.monotonic()
            while not job.should_stop():
                time.sleep(0.005)
                assert time.monotonic() - started < 30
            noticed.append(time.monotonic() - started)

        assert Worker(store, q, handler, timeout_s=0.3).run_until_empty() == 1
        assert noticed and 0.25 <= noticed[0] < 0.3 + 1.0, noticed
        info = q.get_job(job_id)
        assert info is not None
        assert (info.state, info.last_error) == (JobState.DEAD, "timeout after 0.3 s")
        assert [n for n in q.job(job_id).names() if n != "heartbeat"] == ["retry"]

    @pytest.mark.clause("W-12", "W-2", "Q-13")
    def test_should_stop_turns_true_within_a_heartbeat_interval_of_a_lost_claim(
        self, store: Store
    ) -> None:
        every = 0.2
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_VT_S))
        job_id = q.enqueue("doomed")
        started = threading.Event()
        noticed: list[float] = []

        def handler(job: Job) -> None:
            started.set()
            deadline = time.monotonic() + 30
            while not job.should_stop() and time.monotonic() < deadline:
                time.sleep(0.005)
            noticed.append(time.monotonic())

        worker = Worker(store, q, handler, concurrency=1, heartbeat_every_s=every)
        thread, result = _background(worker.run_until_empty)
        assert started.wait(10)
        time.sleep(every * 1.5)
        assert noticed == [], "should_stop was true while the claim was held"
        assert q.cancel(job_id)
        cancelled = time.monotonic()
        thread.join(40)
        assert result == [1]
        assert noticed and noticed[0] - cancelled < every + 1.5, (
            f"should_stop took {noticed[0] - cancelled:.2f} s after the cancel"
        )

    @pytest.mark.clause("W-12", "W-1", "Q-10")
    def test_retry_with_no_delay_leaves_the_job_claimable_at_once(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        name = unique()
        q = store.queue(name, QueueOpts(visibility_timeout_s=LONG_VT_S, backoff_base_s=100))
        job_id = q.enqueue("resumable")
        started = threading.Event()

        def handler(job: Job) -> None:
            started.set()
            while not job.should_stop():
                time.sleep(0.005)
            raise Retry(delay_s=0)  # stop early, leave the job for later

        stop = threading.Event()
        with running(Worker(store, q, handler, concurrency=1, claim_wait_s=0.2), stop):
            assert started.wait(10)
            stop.set()
        info = q.get_job(job_id)
        assert info is not None
        assert (info.state, info.attempts) == (JobState.PENDING, 1)
        with store_factory.open() as other:
            job = other.queue(name).claim("next worker")
            assert job is not None, "the job left for later is not claimable at once"
            assert (job.id, job.attempts) == (job_id, 2)
            assert job.ack()

    # ----------------------------------------------------- W-1 with R-1

    @pytest.mark.clause("W-1", "R-1")
    @pytest.mark.requires(Capability.RATE_LIMITS)
    def test_run_until_empty_with_a_rate_limit_runs_every_job_paced(self, store: Store) -> None:
        """'Empty' is no job left, not a limiter without a unit this instant:
        12 jobs at 5 units/s (burst 1) all run, one unit each."""
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_VT_S))
        ids = q.enqueue_many(list(range(12)))
        limiter = store.rate_limit(unique("r"), 5, 1.0)  # a unit every 0.2 s
        seen: list[int] = []
        lock = threading.Lock()

        def handler(job: Job) -> None:
            with lock:
                seen.append(job.id)

        worker = Worker(store, q, handler, concurrency=4, rate_limit=limiter)
        began = time.monotonic()
        assert worker.run_until_empty() == 12
        took = time.monotonic() - began
        assert sorted(seen) == ids, "every job ran once"
        assert q.stats() == QueueStats(q.name, 0, 0, 0, 0)
        # The first job spends the burst's unit, each of the 11 others waits
        # for one: paced, not 12 at once (a loaded machine only adds time).
        assert took >= 11 * 0.2 * 0.9, f"12 jobs in {took:.2f} s at 5 units/s"
        # An empty queue under a spent limiter is empty at once: no unit is
        # needed to find out.
        assert Worker(store, q, handler, rate_limit=limiter).run_until_empty() == 0

    @pytest.mark.clause("A-5", "W-1", "R-1")
    @pytest.mark.requires(Capability.RATE_LIMITS)
    @ASYNC_ONLY
    def test_async_run_until_empty_with_a_rate_limit_runs_every_job_paced(
        self, store_factory: StoreFactory
    ) -> None:
        """The async face of the test above, on ``AsyncWorker``."""

        async def body(astore: AsyncStore) -> float:
            q = astore.queue(unique(), QueueOpts(visibility_timeout_s=LONG_VT_S))
            ids = await q.enqueue_many(list(range(12)))
            limiter = astore.rate_limit(unique("r"), 5, 1.0)
            seen: list[int] = []

            async def handler(job: Any) -> None:
                seen.append(job.id)

            began = time.monotonic()
            worker = AsyncWorker(astore, q, handler, concurrency=4, rate_limit=limiter)
            assert await worker.run_until_empty() == 12
            took = time.monotonic() - began
            assert sorted(seen) == ids, "every job ran once"
            assert await q.stats() == QueueStats(q.name, 0, 0, 0, 0)
            again = AsyncWorker(astore, q, handler, rate_limit=limiter)
            assert await again.run_until_empty() == 0
            return took

        took = run_async(store_factory, body)
        assert took >= 11 * 0.2 * 0.9, f"12 jobs in {took:.2f} s at 5 units/s"
