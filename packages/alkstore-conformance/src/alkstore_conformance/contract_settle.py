"""Settling claims across queues, giving claims back, claiming from several
queues (Q-9's ``store.ack_each``, Q-26, W-10's ``store.claim_any``).

These are the store-level operations the worker runtime is built on: one
transaction settles many jobs of many queues (W-6's group commit), a claim
that will not be started is handed back without costing an attempt (W-3,
A-4), and one blocking claim serves several queues in a fixed order (W-10).

A claim is made to lapse at once with ``job.heartbeat(0.01)`` (Q-8), as in
the queue tests, so that the row's own visibility timeout can stay long.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from alkstore import (
    Capability,
    EnqueueOpts,
    InvalidArgument,
    Job,
    JobState,
    QueueOpts,
    ReservedName,
    Store,
)

from ._base import ContractBase, requires, unique
from ._factory import StoreFactory, hooks_for, hooks_of
from ._queue_helpers import (
    LONG_S,
    WAKE_BOUND_S,
    blocked,
    claim_one,
    counts,
    info_of,
    lapse,
    spoil_claims,
    woken_by,
)
from .contract_transaction import roll_back

__all__ = ["SettleContract"]


@contextmanager
def other_database(factory: StoreFactory) -> Iterator[Store]:
    """A store on a second, empty database of the same engine (C-7: handles
    of another database), from the engine's ``isolated`` hook; the test is
    skipped when the engine has none."""
    if "isolated" not in hooks_of(factory.scheme):
        pytest.skip(factory.skip_reason("isolated"))
    with hooks_for(factory.scheme).isolated(factory.url, factory.opts, "other-database") as (
        url,
        opts,
    ):
        store = StoreFactory(url, opts, face=factory.face).open()
        try:
            yield store
        finally:
            store.close()


def _ids(jobs: list[Job]) -> list[int]:
    return [j.id for j in jobs]


@requires(Capability.QUEUES)
class SettleContract(ContractBase):
    """``store.ack_each`` (Q-9), ``job.release()`` (Q-26), ``store.claim_any`` (W-10)."""

    # ---------------------------------------------------------- Q-9 ack_each

    @pytest.mark.clause("Q-9")
    def test_ack_each_acks_handles_of_several_queues_with_one_result_each_in_order(
        self, store: Store
    ) -> None:
        a = store.queue(unique("a"), QueueOpts(visibility_timeout_s=LONG_S))
        b = store.queue(unique("b"), QueueOpts(visibility_timeout_s=LONG_S))
        a.enqueue_many(["a1", "a2"])
        b.enqueue_many(["b1", "b2"])
        a1, a2 = a.claim_batch("w", 2)
        b1, b2 = b.claim_batch("w", 2)
        mixed = [b2, a1, b1, a2]
        assert store.ack_each(mixed) == [True, True, True, True]
        for job in mixed:
            assert (a if job.queue == a.name else b).get_job(job.id) is None
        assert counts(a) == counts(b) == (0, 0, 0, 0)
        # Each landed once: a second ack of any of them is refused.
        assert store.ack_each([a1, b1]) == [False, False]
        assert a1.ack() is False
        assert store.ack_each([]) == []

    @pytest.mark.clause("Q-9", "Q-7", "Q-13", "C-5")
    def test_ack_each_answers_false_for_refused_handles_and_changes_nothing_else(
        self, store: Store
    ) -> None:
        """Of a valid, an acked, a cancelled, a lapsed and a reclaimed claim
        (the latter also in its new claim's hands), only the valid and the new
        claim land; the others' rows are untouched."""
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S, max_attempts=5))
        q.enqueue_many(["valid", "acked", "cancelled", "lapsed", "reclaimed"])
        valid, acked, cancelled, lapsed, reclaimed = q.claim_batch("w", 5)
        newer = spoil_claims(q, acked, cancelled, lapsed, reclaimed)
        results = store.ack_each([valid, acked, cancelled, lapsed, reclaimed, newer])
        assert results == [True, False, False, False, False, True]
        assert q.get_job(valid.id) is None
        assert q.get_job(newer.id) is None
        left = info_of(q, lapsed.id)
        assert (left.state, left.attempts) == (JobState.PROCESSING, 1)
        # The same handle twice in one call lands once.
        q.enqueue("twice")
        twice = claim_one(q)
        assert store.ack_each([twice, twice]).count(True) == 1
        assert q.get_job(twice.id) is None

    @pytest.mark.clause("Q-9", "C-7")
    def test_ack_each_answers_false_for_handles_of_another_database(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        name = unique()
        q = store.queue(name, QueueOpts(visibility_timeout_s=LONG_S))
        q.enqueue("here")
        mine = claim_one(q)
        with other_database(store_factory) as elsewhere:
            oq = elsewhere.queue(name, QueueOpts(visibility_timeout_s=LONG_S))
            oq.enqueue("there")
            theirs = claim_one(oq)
            # Same queue name, maybe even the same id: still another database.
            assert store.ack_each([theirs, mine]) == [False, True]
            assert info_of(oq, theirs.id).state is JobState.PROCESSING
            assert elsewhere.ack_each([theirs]) == [True]
        # Two stores on one database are one database.
        with store_factory.open() as same:
            q.enqueue("again")
            job = claim_one(q)
            assert same.ack_each([job]) == [True]
            assert q.get_job(job.id) is None

    @pytest.mark.clause("Q-9")
    def test_ack_batch_counts_what_ack_each_lands_for_its_own_queue(self, store: Store) -> None:
        a = store.queue(unique("a"), QueueOpts(visibility_timeout_s=LONG_S))
        b = store.queue(unique("b"), QueueOpts(visibility_timeout_s=LONG_S))
        a.enqueue_many(list(range(4)))
        b.enqueue_many(list(range(2)))
        first, second, third, fourth = a.claim_batch("w", 4)
        others = b.claim_batch("w", 2)
        assert first.ack()
        lapse(second)
        # Same situations through both calls: ack_batch is ack_each's sum for
        # one queue, counting 0 for another queue's handles.
        probe = [first, second, *others]
        assert a.ack_batch([first, second, *others]) == 0
        assert store.ack_each(probe) == [False, False, True, True]
        assert b.ack_batch(others) == sum(store.ack_each(others)) == 0
        results = store.ack_each([third])
        assert a.ack_batch([fourth]) == 1 == sum(results)

    @pytest.mark.clause("Q-9", "T-1")
    def test_ack_each_joins_the_callers_transaction(self, store: Store) -> None:
        a = store.queue(unique("a"), QueueOpts(visibility_timeout_s=LONG_S))
        b = store.queue(unique("b"), QueueOpts(visibility_timeout_s=LONG_S))
        a.enqueue("a")
        b.enqueue("b")
        ja, jb = claim_one(a), claim_one(b)

        def ack_both(tx: object) -> None:
            assert store.ack_each([ja, jb], tx=tx) == [True, True]

        roll_back(store, ack_both)
        # Rolled back: both claims are still held and still valid.
        assert info_of(a, ja.id).state is JobState.PROCESSING
        assert info_of(b, jb.id).state is JobState.PROCESSING
        with store.transaction() as tx:
            assert store.ack_each([ja, jb], tx=tx) == [True, True]
            assert info_of(a, ja.id).state is JobState.PROCESSING  # not committed yet
        assert a.get_job(ja.id) is None
        assert b.get_job(jb.id) is None

    @pytest.mark.clause("Q-9")
    def test_ack_each_refuses_what_is_not_a_sequence_of_claimed_jobs(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
        q.enqueue("x")
        job = claim_one(q)
        bad: list[Any] = [None, job, "jobs", 42, [job, "not a job"], [None], [job.id]]
        for value in bad:
            with pytest.raises(InvalidArgument):
                store.ack_each(value)
        with pytest.raises(InvalidArgument):
            store.ack_each([job], tx="not a transaction")
        # Nothing was acked by the refused calls.
        assert info_of(q, job.id).state is JobState.PROCESSING
        assert store.ack_each((job,)) == [True]

    # --------------------------------------------------------------

    @pytest.mark.clause("Q-26", "Q-5")
    def test_release_makes_the_job_pending_and_ready_with_the_attempt_not_counted(
        self, store: Store
    ) -> None:
        q = store.queue(
            unique(), QueueOpts(visibility_timeout_s=LONG_S, max_attempts=2, backoff_base_s=0)
        )
        job_id = q.enqueue({"n": 1})
        first = claim_one(q)
        assert first.attempts == 1
        assert first.release() is True
        info = info_of(q, job_id)
        assert (info.state, info.attempts) == (JobState.PENDING, 0)
        assert q.stats().pending == 1
        # Ready at once, with the attempt given back: a whole budget of two
        # claims remains.
        again = claim_one(q)
        assert (again.id, again.attempts) == (job_id, 1)
        assert again.retry("once more", delay_s=0)
        last = claim_one(q)
        assert last.attempts == 2
        assert last.release() is True
        info = info_of(q, job_id)
        assert (info.state, info.attempts) == (JobState.PENDING, 1)
        final = claim_one(q)
        assert final.attempts == 2
        assert final.ack()

    @pytest.mark.clause("Q-26", "Q-7", "Q-4")
    def test_release_of_a_lapsed_reclaimed_or_settled_claim_is_refused(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S, max_attempts=5))
        lapsed_id, reclaimed_id, acked_id, released_id = q.enqueue_many(["l", "r", "a", "x"])
        lapsed, reclaimed, acked, released = q.claim_batch("w", 4)
        # Lapsed, not reclaimed: refused, the row stays as it was.
        lapse(lapsed)
        assert lapsed.release() is False
        info = info_of(q, lapsed_id)
        assert (info.state, info.attempts) == (JobState.PROCESSING, 1)
        # Reclaimed by another worker: the old claim's release never touches
        # the new claim.
        lapse(reclaimed)
        taken = q.claim_batch("rival", 2)
        assert sorted(_ids(taken)) == sorted([lapsed_id, reclaimed_id])
        assert reclaimed.release() is False
        info = info_of(q, reclaimed_id)
        assert (info.state, info.attempts, info.worker_id) == (JobState.PROCESSING, 2, "rival")
        # Settled claims: acked, or released already.
        assert acked.ack()
        assert acked.release() is False
        assert q.get_job(acked_id) is None
        assert released.release() is True
        assert released.release() is False
        assert released.ack() is False
        info = info_of(q, released_id)
        assert (info.state, info.attempts) == (JobState.PENDING, 0)
        # The new claims are untouched and still valid.
        assert store.ack_each(taken) == [True, True]

    @pytest.mark.clause("Q-26", "Q-2")
    def test_released_job_keeps_its_place_in_claim_order(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
        ids = q.enqueue_many(["first", "second", "third"])
        q.enqueue("urgent", EnqueueOpts(priority=5))
        urgent = claim_one(q)
        assert urgent.payload == "urgent"
        first, second = q.claim_batch("w", 2)
        assert _ids([first, second]) == ids[:2]
        # Given back in the reverse order: each goes back to where it stood,
        # not behind the jobs that waited meanwhile.
        assert second.release() and first.release()
        assert urgent.release()
        again = q.claim_batch("w", 4)
        assert [j.payload for j in again] == ["urgent", "first", "second", "third"]
        assert [j.attempts for j in again] == [1, 1, 1, 1]
        assert q.ack_batch(again) == 4

    # -------------------------------------------------------------- W-10

    @pytest.mark.clause("W-10", "Q-2")
    def test_claim_any_serves_a_later_queue_only_while_earlier_ones_have_nothing(
        self, store: Store
    ) -> None:
        a = store.queue(unique("a"), QueueOpts(visibility_timeout_s=LONG_S, backoff_base_s=0))
        b = store.queue(unique("b"), QueueOpts(visibility_timeout_s=LONG_S))
        c = store.queue(unique("c"), QueueOpts(visibility_timeout_s=LONG_S))
        order = [a, b, c]
        c.enqueue("c1", EnqueueOpts(priority=100))  # priority does not cross queues
        b.enqueue_many(["b1", "b2"])
        a.enqueue("a1")
        a.enqueue("a-later", EnqueueOpts(delay_s=60))  # not claimable: does not hold b back
        (first,) = store.claim_any(order, "w")
        assert first.payload == "a1"
        # Back to a: the next claim serves it again before b.
        assert first.retry("again", delay_s=0)
        (again,) = store.claim_any(order, "w")
        assert (again.payload, again.attempts) == ("a1", 2)
        assert again.ack()
        # a has nothing claimable now (a-later waits): b is served.
        assert [j.payload for j in store.claim_any(order, "w")] == ["b1"]
        b.enqueue("b3")
        a.enqueue("a2")
        assert [j.payload for j in store.claim_any(order, "w")] == ["a2"]
        assert [j.payload for j in store.claim_any(order, "w")] == ["b2"]
        assert [j.payload for j in store.claim_any(order, "w")] == ["b3"]
        assert [j.payload for j in store.claim_any(order, "w")] == ["c1"]
        assert store.claim_any(order, "w") == []

    @pytest.mark.clause("W-10", "Q-4")
    def test_claim_any_n_spans_the_queues_in_order(self, store: Store) -> None:
        a = store.queue(unique("a"), QueueOpts(visibility_timeout_s=LONG_S))
        b = store.queue(unique("b"), QueueOpts(visibility_timeout_s=LONG_S))
        c = store.queue(unique("c"), QueueOpts(visibility_timeout_s=LONG_S))
        a.enqueue_many(["a1", "a2"])
        b.enqueue("b-low", EnqueueOpts(priority=-1))
        b.enqueue_many(["b1", "b2"])
        c.enqueue("c1")
        jobs = store.claim_any([a, b.name, c], "w", n=5)
        assert [j.payload for j in jobs] == ["a1", "a2", "b1", "b2", "b-low"]
        assert [j.queue for j in jobs] == [a.name] * 2 + [b.name] * 3
        assert all(j.attempts == 1 for j in jobs)
        assert info_of(b, jobs[2].id).worker_id == "w"
        assert c.stats().pending == 1
        # The handles are ordinary claims of their own queues.
        assert a.ack_batch(jobs) == 2
        assert store.ack_each(jobs[2:]) == [True, True, True]
        rest = store.claim_any([a, b, c], "w", n=10)
        assert [j.payload for j in rest] == ["c1"]
        assert rest[0].ack()

    @pytest.mark.clause("W-10", "Q-19")
    def test_claim_any_blocks_until_a_commit_on_any_of_its_queues(self, store: Store) -> None:
        a = store.queue(unique("a"))
        b = store.queue(unique("b"))
        bystander = store.queue(unique("other"))
        bg = blocked(lambda: store.claim_any([a, b], "w", n=3, wait_s=20))
        bystander.enqueue("not for it")
        time.sleep(0.2)
        assert not bg.done, "an enqueue on another queue ended the claim"
        job_id = b.enqueue("wake")
        enqueued = time.monotonic()
        jobs = bg.result()
        assert bg.returned_at - enqueued < WAKE_BOUND_S
        assert _ids(jobs) == [job_id]
        assert jobs[0].ack()
        # And on the first queue; and nothing after wait_s.
        jobs, job_id = woken_by(
            lambda: store.claim_any([a, b], "w", wait_s=20), lambda: a.enqueue("wake")
        )
        assert _ids(jobs) == [job_id]
        started = time.monotonic()
        assert store.claim_any([a, b], "w", wait_s=0.3) == []
        assert 0.25 <= time.monotonic() - started < 0.3 + WAKE_BOUND_S
        assert bystander.stats().pending == 1

    @pytest.mark.clause("W-10", "C-1", "C-2")
    def test_claim_any_refuses_bad_arguments_and_claims_nothing(self, store: Store) -> None:
        q = store.queue(unique())
        q.enqueue("untouched")
        bad: list[Callable[[], object]] = [
            lambda: store.claim_any([], "w"),
            lambda: store.claim_any(q.name, "w"),  # a str is not a list of names
            lambda: store.claim_any(None, "w"),  # type: ignore[arg-type]
            lambda: store.claim_any([q, 42], "w"),  # type: ignore[list-item]
            lambda: store.claim_any([q, ""], "w"),
            lambda: store.claim_any([q, "x" * 201], "w"),
            lambda: store.claim_any([q, "bad\x00name"], "w"),
            lambda: store.claim_any([q], "w", n=0),
            lambda: store.claim_any([q], "w", n=-1),
            lambda: store.claim_any([q], "w", n=True),
            lambda: store.claim_any([q], "w", n=2.5),  # type: ignore[arg-type]
            lambda: store.claim_any([q], "w", wait_s=-1),
            lambda: store.claim_any([q], "w", wait_s=float("nan")),
            lambda: store.claim_any([q], 42),  # type: ignore[arg-type]
            lambda: store.claim_any([q], "w", rate_limit="fast"),  # type: ignore[arg-type]
        ]
        for call in bad:
            with pytest.raises(InvalidArgument):
                call()
        with pytest.raises(ReservedName):
            store.claim_any([q, "__alkstore.outbox.x"], "w")
        info = q.list_jobs(JobState.PENDING)
        assert [(i.payload, i.attempts) for i in info] == [("untouched", 0)]

    @pytest.mark.clause("W-10", "Q-20")
    @pytest.mark.requires(Capability.OUTBOX)
    def test_claim_any_takes_names_and_handles_alike(self, store: Store) -> None:
        box = store.outbox(unique("box"))
        q = store.queue(unique())
        box.put("message")
        q.enqueue("job")
        # A handle may name a queue the caller could not spell (C-2): the
        # outbox's backing queue is served through its handle.
        jobs = store.claim_any([q.name, box.queue], "w", n=5)
        assert [j.payload for j in jobs] == ["job", "message"]
        assert [j.queue for j in jobs] == [q.name, box.queue.name]
        # The same queue twice counts once.
        q.enqueue("again")
        twice = store.claim_any([q, q.name], "w", n=5)
        assert [j.payload for j in twice] == ["again"]
        assert store.ack_each([*jobs, *twice]) == [True, True, True]
