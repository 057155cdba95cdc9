"""Queues, lapses and maintenance: exhausted lapsed claims (Q-12), expiry (Q-15),
sweep (Q-16, Q-17) and an idle store's silence (Q-18).

Timing and the tricks that recur: :mod:`alkstore_conformance._queue_helpers`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from alkstore import EnqueueOpts, JobState, QueueOpts, Store, SweepResult

from ._base import EVENTUALLY_S, ContractBase, eventually, unique
from ._factory import StoreFactory
from ._queue_helpers import LONG_S, QUEUES, claim_one, counts, info_of, run_threads

__all__ = ["QueueSweepContract"]


class QueueSweepContract(ContractBase):
    """Lapses and maintenance: exhausted lapsed claims (Q-12), expiry (Q-15),
    sweep (Q-16, Q-17) and an idle store's silence (Q-18)."""

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
