"""Dead letters: redrive and purge (Q-21, Q-22).

A redrive puts a dead job back in its queue as if it had just been enqueued,
without making a new job of it: the id, the payload and what the enqueue
stamped stay, the run-time state starts over. The tests compare the job's
``JobInfo`` before its death and after its redrive field by field.

Purges by age compare the engine's own timestamps (C-4): a job is made to
die well after it was created, so that an engine measuring the age from
``created_at`` instead of ``died_at`` fails.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

import pytest

from alkstore import Capability, EnqueueOpts, InvalidArgument, JobState, Queue, QueueOpts, Store

from ._base import ContractBase, unique
from ._factory import StoreFactory
from ._queue_helpers import LONG_S, WAKE_BOUND_S, blocked, claim_one, counts, info_of, lapse

__all__ = ["DeadLetterContract"]

ADMIN = pytest.mark.requires(Capability.QUEUES, Capability.DEAD_LETTER_ADMIN)


class _Rollback(Exception):
    """Raised inside a transaction to roll it back."""


def _dead_ids(store: Store, name: str) -> list[int]:
    return [i.id for i in store.queue(name).list_jobs(JobState.DEAD, limit=1000)]


def _one_dead(store: Store) -> tuple[Queue, int]:
    """A fresh queue holding one dead job; the queue and the job's id."""
    q = store.queue(unique())
    job_id = q.enqueue("x")
    assert claim_one(q).fail("dead")
    return q, job_id


def _rolled_back_then_committed(
    store: Store, q: Queue, job_id: int, admin: Callable[..., int]
) -> None:
    """*admin* (``redrive`` or ``purge_dead``) of the dead *job_id* in a
    transaction that rolls back leaves it dead; in one that commits, it lands."""
    with contextlib.suppress(_Rollback), store.transaction() as tx:
        assert admin([job_id], tx=tx) == 1
        raise _Rollback
    assert info_of(q, job_id).state is JobState.DEAD
    with store.transaction() as tx:
        assert admin(tx=tx) == 1


class DeadLetterContract(ContractBase):
    """Redrive and purge of dead jobs (Q-21, Q-22)."""

    # ----------------------------------------------------------------

    @pytest.mark.clause("Q-21", "Q-1", "Q-14")
    @ADMIN
    @pytest.mark.requires(Capability.UNIQUE_KEYS, Capability.GROUPS)
    def test_redrive_keeps_the_job_and_its_stamps_and_starts_its_run_over(
        self, store: Store
    ) -> None:
        """A job that ran, expired-stamped and grouped, dies; its redrive keeps id, payload,
        priority, created_at, group, unique key and the Q-1 stamps, and clears the rest."""
        opts = QueueOpts(
            visibility_timeout_s=77,
            max_attempts=2,
            backoff_base_s=1.5,
            dead_letter_retention_s=3600,
            group_limit=4,
        )
        q = store.queue(unique(), opts)
        made = q.enqueue_unique(
            "order-7",
            {"order": 7, "lines": [1, 2]},
            EnqueueOpts(priority=6, expires_s=LONG_S, group="tenant-1"),
        )
        assert made.created
        before = info_of(q, made.id)
        job = claim_one(q, "w-old")
        assert job.fail("broken")
        dead = info_of(q, made.id)
        assert (dead.state, dead.last_error, dead.attempts) == (JobState.DEAD, "broken", 1)
        assert dead.died_at is not None

        assert q.redrive([made.id]) == 1
        after = info_of(q, made.id)
        # Kept: what the enqueue gave the job.
        assert (after.id, after.queue, after.payload, after.priority) == (
            made.id,
            q.name,
            {"order": 7, "lines": [1, 2]},
            6,
        )
        assert after.created_at == before.created_at
        assert (after.unique_key, after.group, after.group_limit) == ("order-7", "tenant-1", 4)
        assert (
            after.visibility_timeout_s,
            after.max_attempts,
            after.backoff_base_s,
            after.dead_letter_retention_s,
        ) == (77.0, 2, 1.5, 3600.0)
        # Started over: pending, ready now, a fresh budget, no claim, no expiry, no error.
        assert after.state is JobState.PENDING
        assert after.attempts == 0
        assert (after.claimed_at, after.deadline, after.worker_id) == (None, None, None)
        assert after.expires_at is None
        assert (after.last_error, after.died_at) == (None, None)
        assert after.run_at >= dead.died_at
        assert counts(q) == (1, 0, 0, 0)

        again = claim_one(q, "w-new")
        assert (again.id, again.attempts, again.max_attempts, again.payload) == (
            made.id,
            1,
            2,
            {"order": 7, "lines": [1, 2]},
        )
        assert again.ack()

    @pytest.mark.clause("Q-21", "Q-4", "Q-7")
    @ADMIN
    def test_claim_from_before_the_death_cannot_touch_the_redriven_job(self, store: Store) -> None:
        """The claim number survives the redrive: the handle of the claim that ended in the dead
        letters is refused after the redrive and after the job's next claim."""
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S, max_attempts=1))
        job_id = q.enqueue("x")
        old = claim_one(q, "old")
        lapse(old)
        assert q.claim("w") is None  # the exhausted claim goes to dead
        assert info_of(q, job_id).state is JobState.DEAD

        assert q.redrive() == 1
        assert old.heartbeat(LONG_S) is False
        assert old.ack() is False
        new = claim_one(q, "new")
        assert (new.id, new.attempts) == (job_id, 1)
        # Same id, same attempt number as the old claim, a new claim number:
        # the old handle is fenced out although the row is processing.
        before = info_of(q, job_id)
        assert old.ack() is False
        assert old.retry("old", delay_s=0) is False
        assert old.fail("old") is False
        assert old.heartbeat(LONG_S) is False
        assert q.ack_batch([old]) == 0
        assert info_of(q, job_id) == before
        assert new.ack()
        assert q.get_job(job_id) is None

    @pytest.mark.clause("Q-21", "Q-19")
    @ADMIN
    def test_redrive_wakes_a_blocked_claim(self, store: Store, store_factory: StoreFactory) -> None:
        name = unique()
        q = store.queue(name, QueueOpts(visibility_timeout_s=LONG_S))
        job_id = q.enqueue("x")
        assert claim_one(q).fail("dead")
        with store_factory.open() as other:
            oq = other.queue(name, QueueOpts(visibility_timeout_s=LONG_S))
            waiting = blocked(lambda: oq.claim("waiter", wait_s=30))
            redriven_at = time.monotonic()
            assert q.redrive([job_id]) == 1
            job = waiting.result(30)
            assert job is not None and job.id == job_id
            assert waiting.returned_at - redriven_at < WAKE_BOUND_S
            assert job.ack()

    @pytest.mark.clause("Q-21", "C-7", "C-5")
    @ADMIN
    def test_redrive_counts_only_dead_jobs_of_its_queue(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
        other = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
        dead_a, dead_b, claimed, waiting = q.enqueue_many(["a", "b", "p", "c"])
        for job in q.claim_batch("w", 2):
            assert job.fail("dead")
        claim_one(q)  # "p" is next by id
        assert [info_of(q, i).state for i in (dead_a, dead_b, claimed, waiting)] == [
            JobState.DEAD,
            JobState.DEAD,
            JobState.PROCESSING,
            JobState.PENDING,
        ]
        foreign = other.enqueue("foreign")
        assert claim_one(other).fail("dead")

        # Not dead, another queue's, unknown: not moved, not counted.
        assert q.redrive([claimed, waiting, foreign, 10**15]) == 0
        assert q.redrive([]) == 0
        assert counts(q) == (1, 0, 1, 2)
        assert info_of(other, foreign).state is JobState.DEAD
        # A mix counts only what moved; ids given twice count once.
        assert q.redrive([dead_a, dead_a, foreign, waiting]) == 1
        assert info_of(q, dead_a).state is JobState.PENDING
        assert info_of(q, dead_b).state is JobState.DEAD
        # None: every dead job of this queue, and only of this queue.
        assert q.redrive() == 1
        assert q.redrive() == 0
        assert counts(q) == (3, 0, 1, 0)
        assert info_of(other, foreign).state is JobState.DEAD
        assert other.redrive() == 1

    @pytest.mark.clause("Q-21", "Q-23")
    @ADMIN
    @pytest.mark.requires(Capability.UNIQUE_KEYS)
    def test_redrive_skips_dead_jobs_whose_key_a_live_job_holds(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
        first = q.enqueue_unique("k", "first")
        assert claim_one(q).fail("dead")
        second = q.enqueue_unique("k", "second")  # the key is free again: a new job
        assert second.created and second.id != first.id
        freed = q.enqueue_unique("free", "free")
        assert claim_one(q).id == second.id
        assert claim_one(q).fail("dead")  # "free" dies; "second" holds "k", processing

        assert q.redrive() == 1, "only the dead job whose key no live job holds moves"
        assert info_of(q, first.id).state is JobState.DEAD
        assert info_of(q, freed.id).state is JobState.PENDING
        assert q.redrive([first.id]) == 0
        # The redriven job holds its key again.
        again = q.enqueue_unique("free", "again")
        assert (again.id, again.created) == (freed.id, False)

    @pytest.mark.clause("Q-21", "Q-24")
    @ADMIN
    @pytest.mark.requires(Capability.BOUNDED_QUEUES)
    def test_redrive_is_never_refused_by_max_depth(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S, max_depth=2))
        doomed = q.enqueue_many(["a", "b"])
        for job in q.claim_batch("w", 2):
            assert job.fail("dead")
        q.enqueue_many(["c", "d"])  # full again
        assert q.redrive() == 2
        assert counts(q) == (4, 0, 0, 0)
        assert all(info_of(q, i).state is JobState.PENDING for i in doomed)

    @pytest.mark.clause("Q-21", "Q-15")
    @ADMIN
    def test_redriven_expired_job_no_longer_expires(self, store: Store) -> None:
        q = store.queue(unique())
        job_id = q.enqueue("late", EnqueueOpts(expires_s=0.2))
        time.sleep(0.35)
        assert q.sweep_expired().expired == 1
        assert info_of(q, job_id).last_error == "expired"
        assert q.redrive([job_id]) == 1
        assert info_of(q, job_id).expires_at is None
        job = claim_one(q)
        assert job.id == job_id
        assert job.ack()

    @pytest.mark.clause("Q-21", "T-1")
    @ADMIN
    def test_redrive_in_a_transaction_lands_with_it_or_not_at_all(self, store: Store) -> None:
        q, job_id = _one_dead(store)
        _rolled_back_then_committed(store, q, job_id, q.redrive)
        assert info_of(q, job_id).state is JobState.PENDING

    @pytest.mark.clause("Q-21", "C-6", "E-3")
    @ADMIN
    def test_redrive_refuses_ids_that_are_not_ints(self, store: Store) -> None:
        q, job_id = _one_dead(store)
        for bad in ([True], [job_id, "1"], [1.0], "12", 12, [None], [2**64]):
            with pytest.raises(InvalidArgument):
                q.redrive(bad)  # type: ignore[arg-type]
        assert info_of(q, job_id).state is JobState.DEAD

    # ----------------------------------------------------------------

    @pytest.mark.clause("Q-22", "C-7")
    @ADMIN
    def test_purge_dead_by_ids_deletes_only_those_dead_jobs_of_its_queue(
        self, store: Store
    ) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
        other = store.queue(unique())
        a, b, c, live = q.enqueue_many(["a", "b", "c", "live"])
        for job in q.claim_batch("w", 3):
            assert job.fail("dead")
        foreign = other.enqueue("foreign")
        assert claim_one(other).fail("dead")

        assert q.purge_dead([]) == 0
        assert q.purge_dead([live, foreign, 10**15]) == 0
        assert q.purge_dead([a, a, b]) == 2, "an id given twice counts once"
        assert (q.get_job(a), q.get_job(b)) == (None, None)
        assert info_of(q, c).state is JobState.DEAD
        assert info_of(q, live).state is JobState.PENDING
        assert info_of(other, foreign).state is JobState.DEAD
        assert q.purge_dead([a]) == 0

    @pytest.mark.clause("Q-22")
    @ADMIN
    def test_purge_dead_without_arguments_deletes_every_dead_job_of_the_queue(
        self, store: Store
    ) -> None:
        q = store.queue(unique())
        other = store.queue(unique())
        q.enqueue_many(["a", "b", "c"])
        for job in q.claim_batch("w", 3):
            assert job.fail("dead")
        kept = other.enqueue("kept")
        assert claim_one(other).fail("dead")
        assert q.purge_dead() == 3
        assert counts(q) == (0, 0, 0, 0)
        assert q.purge_dead() == 0
        assert info_of(other, kept).state is JobState.DEAD

    @pytest.mark.clause("Q-22", "C-4")
    @ADMIN
    def test_purge_dead_by_age_counts_from_the_death_not_the_enqueue(self, store: Store) -> None:
        """The old job was created long before it died: by its death it is young, so a purge of
        jobs dead for 0.5 s keeps it until 0.5 s after its death."""
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
        old_id = q.enqueue("created early")
        time.sleep(0.8)
        assert claim_one(q).fail("dead")
        died = time.monotonic()
        info = info_of(q, old_id)
        assert info.died_at is not None
        assert (info.died_at - info.created_at).total_seconds() >= 0.7
        assert q.purge_dead(older_than_s=0.5) == 0, "the age was counted from created_at"
        time.sleep(max(0.0, died + 0.7 - time.monotonic()))
        young_id = q.enqueue("young")
        assert claim_one(q).fail("dead")
        assert q.purge_dead(older_than_s=0.5) == 1
        assert q.get_job(old_id) is None
        assert info_of(q, young_id).state is JobState.DEAD
        # older_than_s=0: dead at or before now, that is every dead job.
        assert q.purge_dead(older_than_s=0) == 1
        assert counts(q) == (0, 0, 0, 0)

    @pytest.mark.clause("Q-22")
    @ADMIN
    def test_purge_dead_with_ids_and_an_age_deletes_the_listed_jobs_dead_long_enough(
        self, store: Store
    ) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
        old_a, old_b = q.enqueue_many(["old-a", "old-b"])
        for job in q.claim_batch("w", 2):
            assert job.fail("dead")
        time.sleep(0.7)
        new = q.enqueue("new")
        assert claim_one(q).fail("dead")
        assert q.purge_dead([old_a, new], older_than_s=0.5) == 1
        assert q.get_job(old_a) is None
        assert info_of(q, old_b).state is JobState.DEAD, "an unlisted job was purged"
        assert info_of(q, new).state is JobState.DEAD, "a listed young job was purged"
        assert q.purge_dead([], older_than_s=0) == 0
        assert counts(q) == (0, 0, 0, 2)

    @pytest.mark.clause("Q-22", "T-1")
    @ADMIN
    def test_purge_dead_in_a_transaction_lands_with_it_or_not_at_all(self, store: Store) -> None:
        q, job_id = _one_dead(store)
        _rolled_back_then_committed(store, q, job_id, q.purge_dead)
        assert q.get_job(job_id) is None

    @pytest.mark.clause("Q-22", "C-6", "E-3")
    @ADMIN
    def test_purge_dead_refuses_bad_ids_and_ages_and_deletes_nothing(self, store: Store) -> None:
        q, job_id = _one_dead(store)
        bad_calls: list[Callable[[], object]] = [
            lambda: q.purge_dead([True]),
            lambda: q.purge_dead([False, job_id]),
            lambda: q.purge_dead([job_id, "1"]),  # type: ignore[list-item]
            lambda: q.purge_dead([float(job_id)]),  # type: ignore[list-item]
            lambda: q.purge_dead(str(job_id)),  # type: ignore[arg-type]
            lambda: q.purge_dead(job_id),  # type: ignore[arg-type]
            lambda: q.purge_dead(older_than_s=-1),
            lambda: q.purge_dead(older_than_s=float("nan")),
            lambda: q.purge_dead(older_than_s="1d"),  # type: ignore[arg-type]
            lambda: q.purge_dead([job_id], older_than_s=True),
        ]
        for call in bad_calls:
            with pytest.raises(InvalidArgument):
                call()
        assert info_of(q, job_id).state is JobState.DEAD
