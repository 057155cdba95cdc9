"""Jobs that wait for other jobs (WF-1..WF-3).

A job enqueued with ``EnqueueOpts(after=...)`` waits, outside the claim path,
until every job it names has finished (been acked); the ack of its last
unfinished parent releases it in the same transaction. A parent that dies or
is cancelled takes its waiting jobs with it, transitively, and its redrive
brings them back. The cross-process tests ack two parents of one child from
two processes at once, and kill a worker process between a parent's ack and
the child's claim, to show that the release is the ack's own.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from datetime import datetime, timedelta, timezone
from multiprocessing.queues import Queue as MPQueue
from typing import Any

import pytest

from alkstore import (
    Capability,
    EnqueueOpts,
    InvalidArgument,
    JobState,
    QueueOpts,
    Store,
)

from . import _children_results
from ._base import ContractBase, eventually, kills_a_process, requires, spawn, unique
from ._factory import StoreFactory
from ._queue_helpers import LONG_S, WAKE_BOUND_S, claim_one, counts, info_of

__all__ = ["WorkflowContract"]


class _Rollback(Exception):
    """Raised inside a transaction to roll it back."""


def _after(*ids: int, **opts: Any) -> EnqueueOpts:
    return EnqueueOpts(after=ids, **opts)


@requires(Capability.QUEUES, Capability.WORKFLOWS)
class WorkflowContract(ContractBase):
    """Dependencies: waiting, release, failure cascades."""

    # ---------------------------------------------------------------- WF-1

    @pytest.mark.clause("WF-1", "Q-14")
    def test_a_job_after_unfinished_jobs_waits_outside_the_claim_path(self, store: Store) -> None:
        """WF-1: a job after unfinished parents is listed waiting with the parents it waits
        for, counted in stats().waiting only, and never claimed."""
        q = store.queue(unique())
        a, b = q.enqueue_many(["a", "b"])
        child = q.enqueue("child", _after(b, a, a))
        info = info_of(q, child)
        assert info.state is JobState.WAITING
        assert info.waiting_on == (a, b)
        assert info.payload == "child"
        stats = q.stats()
        assert (stats.pending, stats.scheduled, stats.waiting) == (2, 0, 1)
        assert [j.id for j in q.list_jobs(JobState.WAITING)] == [child]
        assert q.list_jobs(JobState.WAITING)[0].waiting_on == (a, b)
        got = q.claim_batch("w", 10)
        assert sorted(j.id for j in got) == [a, b]
        assert q.claim("w") is None

    @pytest.mark.clause("WF-1")
    def test_ids_naming_no_job_count_as_finished(self, store: Store) -> None:
        """WF-1: an id naming no live or dead job (acked, or never used) has finished: a
        job after only such ids is pending at once, and after some of them waits only for
        the rest."""
        q = store.queue(unique())
        done = q.enqueue("done")
        assert claim_one(q).ack()
        free = q.enqueue("free", _after(done, 2**62))
        assert info_of(q, free).state is JobState.PENDING
        assert claim_one(q).id == free
        live = q.enqueue("live")
        held = q.enqueue("held", _after(done, live, 2**62))
        assert info_of(q, held).waiting_on == (live,)

    @pytest.mark.clause("WF-1")
    def test_parents_may_be_in_any_queue(self, store: Store) -> None:
        """WF-1: ids of jobs of other queues of the store count like the queue's own; the
        child is released into its own queue."""
        first, second = store.queue(unique()), store.queue(unique())
        parent = first.enqueue("p")
        child = second.enqueue("c", _after(parent))
        assert info_of(second, child).state is JobState.WAITING
        assert second.claim("w") is None
        assert claim_one(first).ack()
        assert claim_one(second).id == child

    @pytest.mark.clause("WF-1", "C-6")
    def test_bad_after_values_are_refused_and_nothing_is_written(self, store: Store) -> None:
        """WF-1: more than 1,000 ids, a bool, a non-int, an id below 1, a string, and a
        unique job that waits are refused with InvalidArgument; duplicates count once."""
        q = store.queue(unique())
        for bad in ([True], [1.0], ["1"], [0], "12", list(range(1, 1002))):
            with pytest.raises(InvalidArgument):
                q.enqueue("x", EnqueueOpts(after=bad))  # type: ignore[arg-type]
        assert EnqueueOpts(after=[*range(1, 1001), 1]).after == tuple(range(1, 1001))
        parent = q.enqueue("p")
        with pytest.raises(InvalidArgument):
            q.enqueue_unique("k", "x", _after(parent))
        with pytest.raises(InvalidArgument):
            store.schedule(unique("s"), "@every 60s", q.name, "x", _after(parent))
        assert counts(q) == (1, 0, 0, 0) and q.stats().waiting == 0

    @pytest.mark.clause("WF-1", "Q-25")
    def test_a_waiting_job_holds_no_group_slot(self, store: Store) -> None:
        """WF-1: a waiting job of a limited group holds none of its slots: another job of
        the group is claimable; once released it takes a slot as any job does."""
        q = store.queue(unique(), QueueOpts(group_limit=1))
        parent = store.queue(unique()).enqueue("p")
        waiting = q.enqueue("w", _after(parent, group="g"))
        ready = q.enqueue("r", EnqueueOpts(group="g"))
        job = claim_one(q)
        assert job.id == ready
        assert info_of(q, waiting).state is JobState.WAITING
        assert job.ack()

    @pytest.mark.clause("WF-1", "WF-2")
    def test_enqueue_many_after_makes_every_job_wait(self, store: Store) -> None:
        """WF-1, WF-2: enqueue_many with after makes each job wait; one ack releases all."""
        q = store.queue(unique())
        parent = q.enqueue("p")
        kids = q.enqueue_many([1, 2, 3], _after(parent))
        assert q.stats().waiting == 3
        assert claim_one(q).ack()
        assert sorted(j.id for j in q.claim_batch("w", 10)) == kids

    # ---------------------------------------------------------------- WF-2

    @pytest.mark.clause("WF-2")
    def test_the_ack_of_the_last_parent_releases_the_child(self, store: Store) -> None:
        """WF-2: each parent's ack takes it off waiting_on; the last one releases the child,
        pending and claimable, counted as pending."""
        q = store.queue(unique())
        a, b = q.enqueue_many(["a", "b"])
        child = q.enqueue("child", _after(a, b))
        first = claim_one(q)
        assert first.id == a and first.ack()
        assert info_of(q, child).waiting_on == (b,)
        second = claim_one(q)
        assert second.id == b and second.ack()
        info = info_of(q, child)
        assert (info.state, info.waiting_on) == (JobState.PENDING, ())
        assert (q.stats().pending, q.stats().waiting) == (1, 0)
        assert claim_one(q).id == child

    @pytest.mark.clause("WF-2")
    def test_ack_batch_of_every_parent_releases_the_child_once(self, store: Store) -> None:
        """WF-2: a fan-in whose parents are acked in one call is released once."""
        q = store.queue(unique())
        parents = q.enqueue_many(list(range(20)))
        child = q.enqueue("child", _after(*parents))
        jobs = q.claim_batch("w", 20)
        assert q.ack_batch(jobs) == 20
        assert [j.id for j in q.claim_batch("w", 5)] == [child]

    @pytest.mark.clause("WF-2", "T-1")
    def test_the_release_is_part_of_the_acks_transaction(self, store: Store) -> None:
        """WF-2: an ack rolled back with its transaction releases nothing; committed, it does."""
        q = store.queue(unique())
        parent = q.enqueue("p")
        child = q.enqueue("c", _after(parent))
        job = claim_one(q)

        def ack_then_roll_back() -> None:
            with store.transaction() as tx:
                assert job.ack(tx=tx)
                raise _Rollback

        with pytest.raises(_Rollback):
            ack_then_roll_back()
        assert info_of(q, child).state is JobState.WAITING
        with store.transaction() as tx:
            assert job.ack(tx=tx)
        assert info_of(q, child).state is JobState.PENDING

    @pytest.mark.clause("WF-2")
    def test_delay_counts_from_the_release_and_run_at_stays_absolute(self, store: Store) -> None:
        """WF-2: a waiting job's delay_s starts at its release (scheduled after it); its
        run_at, already past at the release, makes it ready at once."""
        q = store.queue(unique())
        parent = q.enqueue("p")
        delayed = q.enqueue("d", _after(parent, delay_s=LONG_S))
        past = datetime.now(timezone.utc) - timedelta(seconds=5)
        timed = q.enqueue("t", _after(parent, run_at=past))
        time.sleep(0.05)
        released_after = datetime.now(timezone.utc)
        assert claim_one(q).ack()
        run_at = info_of(q, delayed).run_at
        assert run_at >= released_after + timedelta(seconds=LONG_S) - timedelta(seconds=1)
        assert info_of(q, timed).state is JobState.PENDING
        assert claim_one(q).id == timed
        assert q.claim("w") is None
        assert (q.stats().scheduled, q.stats().waiting) == (1, 0)

    @pytest.mark.clause("WF-2", "Q-19")
    def test_a_blocked_claim_wakes_on_the_release(self, store: Store) -> None:
        """WF-2: a claim blocked on the child's queue returns the child soon after the
        commit of its parent's ack, in another queue."""
        parents, children = store.queue(unique()), store.queue(unique())
        parent = parents.enqueue("p")
        child = children.enqueue("c", _after(parent))
        got: list[Any] = []
        waiter = threading.Thread(target=lambda: got.append(children.claim("w", wait_s=30)))
        waiter.start()
        time.sleep(0.3)
        assert not got
        acked_at = time.monotonic()
        assert claim_one(parents).ack()
        waiter.join(30)
        assert got and got[0] is not None and got[0].id == child
        assert time.monotonic() - acked_at < WAKE_BOUND_S

    @pytest.mark.clause("WF-2")
    @pytest.mark.cross_process
    def test_two_parents_acked_at_once_by_two_stores_release_the_child_once(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """WF-2: the two parents of one child acked at the same moment through two stores
        (two connections, as two processes would) release it exactly once, every time."""
        q = store.queue(unique())
        with store_factory.open() as one, store_factory.open() as two:
            for _ in range(10):
                a, b = q.enqueue_many(["a", "b"])
                child = q.enqueue("c", _after(a, b))
                ja = one.queue(q.name).claim("one")
                jb = two.queue(q.name).claim("two")
                assert ja is not None and jb is not None
                go = threading.Barrier(2)
                done: list[bool] = []

                def ack(job: Any, go: threading.Barrier, done: list[bool]) -> None:
                    go.wait(10)
                    done.append(job.ack())

                threads = [threading.Thread(target=ack, args=(j, go, done)) for j in (ja, jb)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(30)
                assert done == [True, True]
                assert info_of(q, child).state is JobState.PENDING
                assert [j.id for j in q.claim_batch("w", 5)] == [child]
                assert q.stats().waiting == 0

    # --------------------------------------------------------- crash case

    @pytest.mark.clause("WF-2", "W-6")
    @kills_a_process
    def test_a_worker_killed_after_a_parents_ack_loses_no_release(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """WF-2: the release commits with the parent's ack, so a worker process SIGKILLed
        once it acked the parent (before anyone claimed the child) loses nothing: the child
        is pending, and is claimed exactly once."""
        parents, children = store.queue(unique()), store.queue(unique())
        parent = parents.enqueue(1)
        child = children.enqueue("c", _after(parent))
        report: MPQueue[Any] = multiprocessing.get_context("spawn").Queue()
        proc = spawn(_children_results.double_in_worker, store_factory, parents.name, report)
        try:
            assert report.get(timeout=120) == ("ready",)
            eventually(lambda: info_of(children, child).state is JobState.PENDING, 60)
            assert proc.pid is not None
            os.kill(proc.pid, signal.SIGKILL)
            proc.join(30)
        finally:
            if proc.is_alive():
                proc.kill()
                proc.join(10)
        with store_factory.open() as after:
            fresh = after.queue(children.name)
            assert [j.id for j in fresh.claim_batch("rescuer", 5)] == [child]
            assert fresh.claim("rescuer") is None
            assert after.queue(parents.name).get_job(parent) is None

    # ---------------------------------------------------------------- WF-3

    @pytest.mark.clause("WF-3", "Q-11")
    def test_a_failed_parent_fails_its_waiting_jobs_transitively(self, store: Store) -> None:
        """WF-3: fail() of a parent moves its waiting children, and theirs, to dead, each
        with "dependency <its own parent> failed"; a job not after it is untouched."""
        q = store.queue(unique())
        root, other = q.enqueue_many(["root", "other"])
        kid = q.enqueue("kid", _after(root, other))
        grandkid = q.enqueue("grandkid", _after(kid))
        bystander = q.enqueue("bystander", _after(other))
        job = claim_one(q)
        assert job.id == root and job.fail("boom")
        assert info_of(q, kid).state is JobState.DEAD
        assert info_of(q, kid).last_error == f"dependency {root} failed"
        assert info_of(q, grandkid).last_error == f"dependency {kid} failed"
        assert info_of(q, bystander).state is JobState.WAITING
        assert (q.stats().dead, q.stats().waiting) == (3, 1)

    @pytest.mark.clause("WF-3", "Q-10", "Q-13")
    def test_cancel_and_an_exhausted_retry_fail_the_waiting_jobs(self, store: Store) -> None:
        """WF-3: a cancelled parent, a parent whose retry finds its budget spent, and a
        cancelled waiting job each fail the jobs waiting on them."""
        q = store.queue(unique(), QueueOpts(max_attempts=1))
        cancelled = q.enqueue("c")
        after_cancel = q.enqueue("x", _after(cancelled))
        assert q.cancel(cancelled)
        assert info_of(q, after_cancel).last_error == f"dependency {cancelled} failed"
        spent = q.enqueue("s")
        after_spent = q.enqueue("y", _after(spent))
        assert claim_one(q).retry("again")
        assert info_of(q, after_spent).last_error == f"dependency {spent} failed"
        top = q.enqueue("t")
        middle = q.enqueue("m", _after(top))
        bottom = q.enqueue("b", _after(middle))
        assert q.cancel(middle)
        assert q.get_job(middle) is None
        assert info_of(q, bottom).last_error == f"dependency {middle} failed"
        assert info_of(q, top).state is JobState.PENDING

    @pytest.mark.clause("WF-3")
    def test_a_job_after_a_dead_job_is_written_dead(self, store: Store) -> None:
        """WF-3: a job enqueued after a dead job is written dead with its error, never waits."""
        q = store.queue(unique())
        parent = q.enqueue("p")
        assert claim_one(q).fail("boom")
        child = q.enqueue("c", _after(parent))
        info = info_of(q, child)
        assert (info.state, info.last_error) == (JobState.DEAD, f"dependency {parent} failed")
        assert q.stats().waiting == 0

    @pytest.mark.clause("WF-3", "Q-21")
    def test_redriving_the_failed_parent_brings_its_cascade_back(self, store: Store) -> None:
        """WF-3: redriving the failed parent brings back, waiting on it again, the jobs that
        died by its cascade (transitively, those enqueued after it died included); the chain
        then runs to its end."""
        q = store.queue(unique())
        root = q.enqueue("root")
        kid = q.enqueue("kid", _after(root))
        grandkid = q.enqueue("grandkid", _after(kid))
        assert claim_one(q).fail("boom")
        late = q.enqueue("late", _after(root))
        assert q.stats().dead == 4
        assert q.redrive([root]) == 1
        assert info_of(q, root).state is JobState.PENDING
        assert info_of(q, kid).waiting_on == (root,)
        assert info_of(q, grandkid).waiting_on == (kid,)
        assert info_of(q, late).waiting_on == (root,)
        assert (q.stats().dead, q.stats().waiting) == (0, 3)
        order = []
        for _ in range(3):
            jobs = q.claim_batch("w", 10)
            order.append(sorted(j.id for j in jobs))
            assert q.ack_batch(jobs) == len(jobs)
        assert order == [[root], sorted([kid, late]), [grandkid]]

    # ---------------------------------------------------------------- WF-4

    @pytest.mark.clause("WF-4", "RS-1")
    def test_parent_results_gives_the_kept_results_of_the_parents(self, store: Store) -> None:
        """WF-4: a fan-in reads its parents' kept results by id (a kept null included); a
        parent without the stamp, a parent that finished before the enqueue without one, and
        an id that named no job are absent; a job after nothing gets {}."""
        kept = store.queue(unique(), QueueOpts(result_ttl_s=LONG_S))
        plain = store.queue(unique())
        a, b, n = kept.enqueue_many([1, 2, 3])
        p = plain.enqueue(4)
        child = plain.enqueue("fan-in", _after(a, b, n, p, 2**62))
        for job in kept.claim_batch("w", 3):
            assert job.ack(result=None if job.id == n else {"got": job.payload * 10})
        assert claim_one(plain).ack()
        fan_in = claim_one(plain)
        assert fan_in.id == child
        assert fan_in.parent_results() == {a: {"got": 10}, b: {"got": 20}, n: None}
        late = plain.enqueue("late", _after(a, p))
        assert fan_in.ack()
        job = claim_one(plain)
        assert job.id == late and job.parent_results() == {a: {"got": 10}}
        assert job.ack()
        lone = plain.enqueue("lone")
        job = claim_one(plain)
        assert job.id == lone and job.parent_results() == {}
