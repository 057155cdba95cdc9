"""Operating live work: pause and resume (Q-27), run now (O-6).

A pause is a row in the store, so it is durable and seen by every store on
the database, in any process, from the next claim on. The tests check the
three ways a claim can ask (``claim``/``claim_batch``, ``claim_any``, a
``Worker``), that a blocked claim keeps waiting through a pause and wakes at
the resume, and that nothing but claiming stops: enqueues, and the acks,
heartbeats and retries of jobs claimed before the pause. Run now moves a
pending job's time back to now (never forwards) and wakes blocked claims.
"""

from __future__ import annotations

import queue as stdlib_queue
import time
from datetime import datetime, timedelta, timezone

import pytest

from alkstore import (
    Capability,
    EnqueueOpts,
    InvalidArgument,
    JobState,
    QueueOpts,
    QueueStats,
    StoreClosed,
    Worker,
)
from alkstore.protocols import Store

from . import _children_operate
from ._base import ContractBase, reap, requires, signals, spawn, unique
from ._factory import StoreFactory
from ._queue_helpers import (
    LONG_S,
    SETTLE_S,
    WAKE_BOUND_S,
    blocked,
    claim_one,
    info_of,
    woken_by,
)
from .contract_transaction import roll_back

__all__ = ["OperateContract"]

RUN_NOW = pytest.mark.requires(Capability.QUEUES, Capability.RUN_NOW)


@requires(Capability.QUEUES, Capability.PAUSE)
class OperateContract(ContractBase):
    """Pause, resume and run now."""

    # ----------------------------------------------------------------

    @pytest.mark.clause("Q-27")
    def test_a_paused_queue_hands_out_nothing_until_resumed(self, store: Store) -> None:
        """Q-27: claim, claim_batch and run_until_empty find nothing on a paused queue
        that holds ready jobs; after resume they are claimable in their usual order."""
        q = store.queue(unique())
        ids = q.enqueue_many(["a", "b", "c"])
        assert q.pause() is True
        assert q.claim("w") is None
        assert q.claim_batch("w", 10) == []
        assert Worker(store, q.name, lambda job: None).run_until_empty() == 0
        assert q.stats().pending == 3
        assert q.resume() is True
        assert [j.id for j in q.claim_batch("w", 10)] == ids

    @pytest.mark.clause("Q-27")
    def test_pause_and_resume_say_whether_they_changed_anything(self, store: Store) -> None:
        """Q-27: pause is True the first time and False while paused; resume is True
        once and False on a queue that is not paused; is_paused follows."""
        q = store.queue(unique())
        assert q.is_paused() is False
        assert q.resume() is False
        assert q.pause() is True
        assert q.pause() is False
        assert q.is_paused() is True
        assert q.resume() is True
        assert q.resume() is False
        assert q.is_paused() is False

    @pytest.mark.clause("Q-27", "C-7")
    def test_a_pause_is_per_queue_name_and_claim_any_skips_it(self, store: Store) -> None:
        """Q-27: a pause stops only its queue: claim_any over a paused and a running
        queue takes the running queue's jobs, whatever their order in the call."""
        paused, running = store.queue(unique("paused")), store.queue(unique("running"))
        paused.enqueue_many([1, 2])
        wanted = running.enqueue_many([3, 4])
        paused.pause()
        assert running.is_paused() is False
        got = store.claim_any([paused.name, running.name], "w", n=5)
        assert sorted(j.id for j in got) == wanted
        assert store.claim_any([paused.name], "w") == []
        assert paused.stats().pending == 2

    @pytest.mark.clause("Q-27", "O-4")
    def test_stats_and_queue_stats_show_the_pause(self, store: Store) -> None:
        """Q-27: stats().paused, and store.queue_stats() marks paused queues, listing a
        paused queue even when it holds no rows."""
        busy, empty = store.queue(unique("busy")), store.queue(unique("empty"))
        busy.enqueue("x")
        assert busy.stats() == QueueStats(busy.name, 1, 0, 0, 0)
        assert busy.stats().paused is False
        busy.pause()
        empty.pause()
        assert busy.stats().paused is True and busy.stats().pending == 1
        assert empty.stats() == QueueStats(empty.name, 0, 0, 0, 0, paused=True)
        listed = {s.queue: s for s in store.queue_stats()}
        assert listed[busy.name].paused and listed[busy.name].pending == 1
        assert listed[empty.name] == QueueStats(empty.name, 0, 0, 0, 0, paused=True)
        empty.resume()
        assert empty.name not in {s.queue for s in store.queue_stats()}

    @pytest.mark.clause("Q-27", "Q-7", "Q-8", "Q-10", "Q-11")
    def test_work_already_claimed_goes_on_while_paused(self, store: Store) -> None:
        """Q-27: while paused, enqueues are taken, and the jobs claimed before the pause
        ack, heartbeat, retry and fail as usual; a retried job waits pending for the
        resume."""
        q = store.queue(unique())
        q.enqueue_many(["ack", "beat", "retry", "fail"])
        jobs = {j.payload: j for j in q.claim_batch("w", 4)}
        q.pause()
        new_id = q.enqueue("new")
        assert q.enqueue_many(["more"]) != []
        assert jobs["beat"].heartbeat()
        assert jobs["ack"].ack()
        assert jobs["retry"].retry("again", delay_s=0)
        assert jobs["fail"].fail("broken")
        assert info_of(q, jobs["retry"].id).state is JobState.PENDING
        assert info_of(q, jobs["fail"].id).state is JobState.DEAD
        assert jobs["beat"].ack()
        assert q.claim("w") is None
        assert q.stats().pending == 3
        q.resume()
        got = {j.payload: j.id for j in q.claim_batch("w", 10)}
        assert set(got) == {"retry", "new", "more"} and got["new"] == new_id

    @pytest.mark.clause("Q-27", "Q-19")
    def test_a_blocked_claim_keeps_waiting_through_a_pause(self, store: Store) -> None:
        """Q-27: a claim with wait_s on a paused queue does not return early: it returns
        None at the end of its wait, even when an enqueue commits meanwhile."""
        q = store.queue(unique())
        q.enqueue("held")
        q.pause()
        started = time.monotonic()
        waiter = blocked(lambda: q.claim("w", wait_s=1.5))
        q.enqueue("another")  # a commit that wakes the queue's claims
        assert waiter.result() is None
        assert time.monotonic() - started >= 1.4
        assert q.stats().pending == 2

    @pytest.mark.clause("Q-27", "Q-19")
    def test_resume_wakes_a_blocked_claim(self, store: Store) -> None:
        """Q-27: a claim blocked on a paused queue with ready jobs keeps waiting, then
        returns a job within the wake bound of the resume."""
        q = store.queue(unique())
        job_id = q.enqueue("held")
        q.pause()
        waiter = blocked(lambda: q.claim("w", wait_s=LONG_S))
        time.sleep(SETTLE_S)
        assert not waiter.done, "the claim returned on a paused queue"
        resumed = q.resume()
        at = time.monotonic()
        job = waiter.result(timeout_s=60)
        assert resumed and job is not None and job.id == job_id
        assert waiter.returned_at - at < WAKE_BOUND_S
        assert job.ack()

    @pytest.mark.clause("Q-27", "W-10")
    def test_a_blocked_claim_any_takes_from_the_running_queue(self, store: Store) -> None:
        """Q-27: claim_any blocked over a paused queue with jobs wakes for an enqueue on
        the running queue and takes that job, not the paused queue's."""
        paused, running = store.queue(unique("paused")), store.queue(unique("running"))
        paused.enqueue("held")
        paused.pause()
        got, new_id = woken_by(
            lambda: store.claim_any([paused.name, running.name], "w", wait_s=LONG_S),
            lambda: running.enqueue("fresh"),
        )
        assert [j.id for j in got] == [new_id]

    @pytest.mark.clause("Q-27", "T-1")
    def test_pause_and_resume_join_the_callers_transaction(self, store: Store) -> None:
        """Q-27, T-1: a pause or resume in a transaction rolled back leaves nothing; one
        committed takes effect at the commit."""
        q = store.queue(unique())
        q.enqueue("x")
        roll_back(store, lambda tx: q.pause(tx=tx))
        assert q.is_paused() is False
        assert q.claim_batch("w", 1, wait_s=0) != []
        with store.transaction() as tx:
            assert q.pause(tx=tx) is True
        assert q.is_paused() is True
        roll_back(store, lambda tx: q.resume(tx=tx))
        assert q.is_paused() is True
        with store.transaction() as tx:
            assert q.resume(tx=tx) is True
        assert q.is_paused() is False

    @pytest.mark.clause("Q-27", "ST-1")
    def test_a_pause_is_durable_and_seen_by_every_store(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """Q-27: a pause is stored: another store on the database sees it, claims there
        find nothing, and it outlives the store that made it; the other store resumes."""
        name = unique()
        store.queue(name).enqueue("x")
        with store_factory.open() as maker:
            maker.queue(name).pause()
        with store_factory.open() as other:
            q = other.queue(name)
            assert q.is_paused() is True and q.claim("w") is None
            assert q.resume() is True
        assert store.queue(name).is_paused() is False
        assert store.queue(name).claim("w") is not None

    @pytest.mark.clause("Q-27", "C-7")
    def test_a_pause_stays_in_its_database(
        self, store: Store, other_database: StoreFactory
    ) -> None:
        """Q-27, C-7: pausing a queue name on one database leaves the same name on
        another database running."""
        name = unique()
        store.queue(name).pause()
        with other_database.open() as other:
            q = other.queue(name)
            job_id = q.enqueue("x")
            assert q.is_paused() is False
            job = q.claim("w")
            assert job is not None and job.id == job_id

    @pytest.mark.clause("Q-27", "Q-19")
    @pytest.mark.cross_process
    @pytest.mark.sync_only("spawns processes, which open the sync face")
    @pytest.mark.requires(Capability.CROSS_PROCESS_WAKES)
    def test_a_worker_in_another_process_sees_the_pause_at_its_next_claim(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """Q-27 across processes: a child's Worker is blocked in a claim; after the pause
        commits here, an enqueue's wake reaches that claim and it hands out nothing
        (it keeps waiting); the resume here wakes it and it takes the job within the
        wake bound."""
        q = store.queue(unique())
        _, report = signals()
        proc = spawn(_children_operate.worker_until_stop, store_factory, q.name, 30.0, report)
        try:
            assert report.get(timeout=120) == ("ready",)
            first = q.enqueue("first")
            assert report.get(timeout=60) == ("handled", first, "first")
            time.sleep(1.0)  # the worker is back in a blocked claim
            assert q.pause()
            held = q.enqueue("held")
            with pytest.raises(stdlib_queue.Empty):
                report.get(timeout=2.0)  # nothing handled while paused
            assert info_of(q, held).state is JobState.PENDING
            assert q.resume()
            resumed = time.monotonic()
            assert report.get(timeout=60) == ("handled", held, "held")
            assert time.monotonic() - resumed < WAKE_BOUND_S
            stop = q.enqueue("stop")
            assert report.get(timeout=60) == ("handled", stop, "stop")
            assert report.get(timeout=60) == ("stopped",)
        finally:
            reap([proc])

    @pytest.mark.clause("Q-27", "ST-3", "E-1")
    def test_pause_calls_are_refused_with_alkstore_errors(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """Q-27: a tx that is not a transaction is InvalidArgument and writes nothing;
        on a closed store every call is StoreClosed."""
        q = store.queue(unique())
        for bad in (object(), "tx", 5):
            with pytest.raises(InvalidArgument):
                q.pause(tx=bad)
            with pytest.raises(InvalidArgument):
                q.resume(tx=bad)
        assert q.is_paused() is False
        closed = store_factory.open()
        handle = closed.queue(q.name)
        closed.close()
        for call in (handle.pause, handle.resume, handle.is_paused, lambda: handle.run_now(1)):
            with pytest.raises(StoreClosed):
                call()
        assert q.is_paused() is False

    # ------------------------------------------------------- O-6 run now

    @pytest.mark.clause("O-6", "Q-2")
    @RUN_NOW
    def test_run_now_makes_a_scheduled_job_ready(self, store: Store) -> None:
        """O-6: a job scheduled an hour ahead (delay_s or run_at) is claimable at once
        after run_now; it comes after the jobs that were ready before it."""
        q = store.queue(unique())
        later = q.enqueue("later", EnqueueOpts(delay_s=3600))
        at = q.enqueue("at", EnqueueOpts(run_at=datetime.now(timezone.utc) + timedelta(hours=2)))
        ready = q.enqueue("ready")
        assert q.stats().scheduled == 2
        assert q.run_now(later) is True
        assert q.run_now(at) is True
        info = info_of(q, later)
        assert info.state is JobState.PENDING
        assert info.run_at <= datetime.now(timezone.utc) + timedelta(seconds=1)
        assert q.stats().scheduled == 0 and q.stats().pending == 3
        assert [j.id for j in q.claim_batch("w", 3)] == [ready, later, at]

    @pytest.mark.clause("O-6", "Q-2")
    @RUN_NOW
    def test_run_now_keeps_a_ready_jobs_place(self, store: Store) -> None:
        """O-6: run_now of a job that is ready already is True and changes nothing: it
        keeps its place in claim order and its run_at."""
        q = store.queue(unique())
        ids = q.enqueue_many(["a", "b"])
        before = info_of(q, ids[0]).run_at
        time.sleep(0.05)
        assert q.run_now(ids[0]) is True
        assert info_of(q, ids[0]).run_at == before
        assert [j.id for j in q.claim_batch("w", 2)] == ids

    @pytest.mark.clause("O-6", "Q-10", "C-7")
    @RUN_NOW
    def test_run_now_is_false_for_jobs_that_are_not_pending(self, store: Store) -> None:
        """O-6: run_now is False for a processing job, a dead job, an id that names no
        job and another queue's job, and changes none of them; a job waiting out a
        retry's backoff is pending and runs now."""
        q = store.queue(unique())
        other = store.queue(unique("other"))
        processing_id, dead_id, backoff_id = q.enqueue_many(["p", "d", "b"])
        jobs = {j.payload: j for j in q.claim_batch("w", 3)}
        assert jobs["d"].fail("gone")
        assert jobs["b"].retry("later", delay_s=3600)
        foreign = other.enqueue("x", EnqueueOpts(delay_s=3600))
        assert q.run_now(processing_id) is False
        assert q.run_now(dead_id) is False
        assert q.run_now(2**62) is False
        assert q.run_now(foreign) is False
        assert info_of(q, processing_id).state is JobState.PROCESSING
        assert info_of(q, dead_id).state is JobState.DEAD
        assert other.stats().scheduled == 1
        assert q.claim("w2") is None
        assert q.run_now(backoff_id) is True
        job = claim_one(q, "w2")
        assert job.id == backoff_id and job.attempts == 2

    @pytest.mark.clause("O-6", "WF-1")
    @pytest.mark.requires(Capability.QUEUES, Capability.RUN_NOW, Capability.WORKFLOWS)
    def test_run_now_leaves_a_waiting_job_waiting(self, store: Store) -> None:
        """O-6: a job waiting for its parents is not pending: run_now is False."""
        q = store.queue(unique())
        parent = q.enqueue("parent")
        child = q.enqueue("child", EnqueueOpts(after=(parent,)))
        assert q.run_now(child) is False
        assert info_of(q, child).state is JobState.WAITING

    @pytest.mark.clause("O-6", "T-1")
    @RUN_NOW
    def test_run_now_joins_the_callers_transaction(self, store: Store) -> None:
        """O-6, T-1: run_now in a transaction rolled back leaves the job scheduled; one
        committed makes it ready."""
        q = store.queue(unique())
        job_id = q.enqueue("x", EnqueueOpts(delay_s=3600))
        roll_back(store, lambda tx: q.run_now(job_id, tx=tx))
        assert q.stats().scheduled == 1 and q.claim("w") is None
        with store.transaction() as tx:
            assert q.run_now(job_id, tx=tx) is True
        assert claim_one(q).id == job_id

    @pytest.mark.clause("O-6", "Q-19")
    @RUN_NOW
    def test_run_now_wakes_a_blocked_claim(self, store: Store) -> None:
        """O-6: a claim blocked on a queue whose only job is scheduled an hour ahead
        returns that job within the wake bound of run_now."""
        q = store.queue(unique())
        job_id = q.enqueue("x", EnqueueOpts(delay_s=3600))
        job, moved = woken_by(lambda: q.claim("w", wait_s=LONG_S), lambda: q.run_now(job_id))
        assert moved is True and job is not None and job.id == job_id

    @pytest.mark.clause("O-6", "Q-27")
    @RUN_NOW
    def test_run_now_on_a_paused_queue_waits_for_the_resume(self, store: Store) -> None:
        """O-6 with Q-27: run_now readies a job of a paused queue; it is claimed only
        after the resume."""
        q = store.queue(unique())
        job_id = q.enqueue("x", EnqueueOpts(delay_s=3600))
        q.pause()
        assert q.run_now(job_id) is True
        assert q.claim("w") is None and q.stats().pending == 1
        q.resume()
        assert claim_one(q).id == job_id

    @pytest.mark.clause("O-6", "Q-25")
    @pytest.mark.requires(Capability.QUEUES, Capability.RUN_NOW, Capability.GROUPS)
    def test_run_now_hands_a_groups_slot_to_the_job_made_ready(self, store: Store) -> None:
        """O-6 with Q-25: in a group limited to one, the slot goes to a ready row first;
        a parked job made ready by run_now takes the slot from one that still waits."""
        q = store.queue(unique(), QueueOpts(group_limit=1))
        waits = q.enqueue("waits", EnqueueOpts(delay_s=3600, group="g"))
        parked = q.enqueue("parked", EnqueueOpts(delay_s=7200, group="g"))
        assert q.claim("w") is None
        assert q.run_now(parked) is True
        job = claim_one(q)
        assert job.id == parked
        assert q.claim("w") is None
        assert info_of(q, waits).state is JobState.PENDING

    @pytest.mark.clause("O-6", "E-1")
    @RUN_NOW
    def test_run_now_checks_its_job_id(self, store: Store) -> None:
        """O-6: a job id that is not a 64-bit int is InvalidArgument; so is a tx that is
        not a transaction, and nothing moves."""
        q = store.queue(unique())
        job_id = q.enqueue("x", EnqueueOpts(delay_s=3600))
        for bad in ("1", 1.5, None, 2**70, True):
            with pytest.raises(InvalidArgument):
                q.run_now(bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            q.run_now(job_id, tx=object())
        assert q.stats().scheduled == 1
