"""Queues, claiming: order (Q-2), exclusivity (Q-3), stamps and budgets (Q-4, Q-5),
lapsed claims and crashed workers (Q-6), no work as a value (C-5), queues
apart (C-7), and reads beside writes (C-8).

Timing and the tricks that recur: :mod:`alkstore_conformance._queue_helpers`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from alkstore import Capability, EnqueueOpts, JobState, QueueOpts, QueueStats, Store, SweepResult

from . import _children_queue
from ._base import ContractBase, kill_hard, race, signals, spawn, unique
from ._factory import StoreFactory
from ._queue_helpers import (
    LONG_S,
    QUEUES,
    STAMP_TOLERANCE,
    WAKE_BOUND_S,
    Background,
    assert_aware_utc,
    claim_one,
    claim_soon,
    counts,
    fill_for_order,
    info_of,
    lapse,
    run_threads,
)

__all__ = ["QueueClaimContract"]


class QueueClaimContract(ContractBase):
    """Claiming: order (Q-2), exclusivity (Q-3), stamps and budgets (Q-4, Q-5),
    lapsed claims and crashed workers (Q-6), no work as a value (C-5), queues
    apart (C-7), and reads beside writes (C-8)."""

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
        go, results = signals()
        procs = [
            spawn(_children_queue.drain_queue, store_factory, name, f"proc-{n}", go, results)
            for n in range(procs_n)
        ]
        outcomes = race(procs, go, results)
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
        _, report = signals()
        proc = spawn(_children_queue.claim_and_hang, store_factory, name, "doomed", report)
        try:
            outcome = report.get(timeout=120)
            assert outcome[0] == "claimed", outcome
            _, claimed_id, attempts, deadline = outcome
            assert (claimed_id, attempts) == (job_id, 1)
            kill_hard(proc)
            assert proc.exitcode is not None and proc.exitcode < 0
        finally:
            if proc.is_alive():
                kill_hard(proc)
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
