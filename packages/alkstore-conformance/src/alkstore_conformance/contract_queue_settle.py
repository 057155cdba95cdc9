"""Queues, settling a claim: fencing (Q-7), heartbeat (Q-8), ack and ack_batch (Q-9),
retry (Q-10), fail (Q-11).

Timing and the tricks that recur: :mod:`alkstore_conformance._queue_helpers`.
"""

from __future__ import annotations

import time

import pytest

from alkstore import EnqueueOpts, JobState, QueueOpts, Store

from ._base import ContractBase, unique
from ._factory import StoreFactory
from ._queue_helpers import (
    LONG_S,
    QUEUES,
    STAMP_TOLERANCE,
    claim_one,
    claim_soon,
    counts,
    info_of,
    lapse,
    race_round,
    seconds,
    spoil_claims,
)

__all__ = ["QueueSettleContract"]


class QueueSettleContract(ContractBase):
    """Settling a claim: fencing (Q-7), heartbeat (Q-8), ack and ack_batch (Q-9),
    retry (Q-10), fail (Q-11)."""

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
        newer = spoil_claims(q, acked, cancelled, lapsed, reclaimed)
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
