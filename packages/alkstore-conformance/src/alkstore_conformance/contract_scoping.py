"""Scoping (C-7): every name-keyed operation sees only its own name, and
only its own database.

Each scoped operation is tried twice: against another queue (stream, lock,
schedule, channel) of the same store, and against the same name in another
database, which the engine's conformance hooks make (a second file, a second
schema). Two fresh databases hand out the same ids, so a handle or an id
that leaks across databases lands on a real row of the wrong database:
exactly the bug these tests are built to catch. Two store objects on one
database are the same store, and that is checked too, so that scoping is not
overdone.
"""

from __future__ import annotations

import time

import pytest

from alkstore import Capability, EnqueueOpts, JobState, Queue, QueueOpts, Store

from ._base import ContractBase, requires, unique
from ._factory import StoreFactory

__all__ = ["ScopingContract"]

LONG_S = 300.0
ALL_STATES = (JobState.PENDING, JobState.PROCESSING, JobState.DEAD)


def _ids(q: Queue) -> set[int]:
    return {info.id for state in ALL_STATES for info in q.list_jobs(state, limit=1000)}


def _state(q: Queue, job_id: int) -> JobState | None:
    info = q.get_job(job_id)
    return None if info is None else info.state


def _counts(q: Queue) -> tuple[int, int, int, int]:
    s = q.stats()
    return (s.pending, s.scheduled, s.processing, s.dead)


@requires(Capability.QUEUES)
class ScopingContract(ContractBase):
    """C-7 across queues and across databases, for every scoped operation."""

    # ----------------------------------------------------------- queue handles

    @pytest.mark.clause("C-7", "Q-9", "Q-13", "Q-14")
    def test_scoped_queue_operations_ignore_another_queues_jobs(self, store: Store) -> None:
        base = unique()
        mine = store.queue(f"{base}-a", QueueOpts(visibility_timeout_s=LONG_S))
        theirs = store.queue(f"{base}-b", QueueOpts(visibility_timeout_s=LONG_S, max_attempts=1))
        theirs.enqueue("claimed")
        their_claimed = theirs.claim("w")
        assert their_claimed is not None
        their_dead = theirs.enqueue("dead")
        dead_job = theirs.claim("w")
        assert dead_job is not None and dead_job.id == their_dead and dead_job.fail("x")
        their_pending = theirs.enqueue("pending")
        my_job = mine.enqueue("mine")

        for foreign in (their_pending, their_claimed.id, their_dead):
            assert mine.get_job(foreign) is None
            assert mine.cancel(foreign) is False
        assert mine.ack_batch([their_claimed]) == 0
        assert _ids(mine) == {my_job}
        assert _counts(mine) == (1, 0, 0, 0)
        assert _counts(theirs) == (1, 0, 1, 1)
        # Their claim was left alone: it still acks.
        assert their_claimed.ack()

    @pytest.mark.clause("C-7", "Q-15", "Q-16", "Q-17")
    def test_sweep_moves_and_purges_only_its_own_queue(self, store: Store) -> None:
        base = unique()
        opts = QueueOpts(dead_letter_retention_s=0.05, max_attempts=1)
        mine, theirs = store.queue(f"{base}-a", opts), store.queue(f"{base}-b", opts)
        for q in (mine, theirs):
            dying = q.enqueue("dies")
            job = q.claim("w")
            assert job is not None and job.id == dying and job.fail("x")
            q.enqueue("expiring", EnqueueOpts(expires_s=0.05))
        time.sleep(0.2)
        before = _counts(theirs)
        result = mine.sweep_expired()
        assert (result.expired, result.purged) == (1, 1)
        assert _counts(mine) == (0, 0, 0, 1)
        assert _counts(theirs) == before
        result = theirs.sweep_expired()
        assert (result.expired, result.purged) == (1, 1)

    @pytest.mark.clause("C-7", "Q-9", "Q-13", "Q-14", "Q-15")
    def test_scoped_queue_operations_ignore_another_databases_jobs(
        self, store: Store, other_database: StoreFactory
    ) -> None:
        name = unique()
        opts = QueueOpts(visibility_timeout_s=LONG_S)
        with other_database.open() as other:
            mine, theirs = store.queue(name, opts), other.queue(name, opts)
            my_id = mine.enqueue("mine")
            their_id = theirs.enqueue("theirs")
            my_job, their_job = mine.claim("w"), theirs.claim("w")
            assert my_job is not None and their_job is not None
            # Ids only the other database has, pending, scheduled and expiring.
            extra = theirs.enqueue_many(["x", "y"])
            extra.append(theirs.enqueue("later", EnqueueOpts(delay_s=LONG_S)))
            extra.append(theirs.enqueue("expiring", EnqueueOpts(expires_s=0.05)))
            extra = [i for i in extra if i != my_id]

            # A handle of the other database: never acks here, however its id
            # matches (fresh databases hand out the same ids).
            assert mine.ack_batch([their_job]) == 0
            assert _state(mine, my_id) is JobState.PROCESSING
            assert _state(theirs, their_id) is JobState.PROCESSING
            for foreign in extra:
                assert mine.get_job(foreign) is None
                assert mine.cancel(foreign) is False
            time.sleep(0.2)
            assert mine.sweep_expired().expired == 0
            assert _ids(mine) == {my_id}
            assert _counts(mine) == (0, 0, 1, 0)
            assert {s.queue: s.processing for s in store.queue_stats()} == {name: 1}
            assert theirs.sweep_expired().expired == 1
            assert _counts(theirs) == (2, 1, 1, 1)
            # Both claims are intact.
            assert my_job.ack() and their_job.ack()
            assert mine.get_job(my_id) is None

    @pytest.mark.clause("C-7", "Q-9")
    def test_ack_batch_takes_handles_of_another_store_object_on_the_same_database(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        name = unique()
        store.queue(name).enqueue_many([1, 2])
        with store_factory.open() as twin:
            jobs = twin.queue(name).claim_batch("w", 2)
            assert len(jobs) == 2
            assert store.queue(name).ack_batch(jobs) == 2
        assert _counts(store.queue(name)) == (0, 0, 0, 0)

    # ------------------------------------------------------- other primitives

    @pytest.mark.clause("C-7", "S-1", "S-3")
    @pytest.mark.requires(Capability.STREAMS)
    def test_streams_of_one_name_in_two_databases_never_meet(
        self, store: Store, other_database: StoreFactory
    ) -> None:
        name = unique("s")
        with other_database.open() as other:
            mine, theirs = store.stream(name), other.stream(name)
            assert theirs.publish("t1") == 1
            assert theirs.publish("t2") == 2
            assert theirs.commit("c", 2)
            assert mine.read() == []
            assert mine.offset("c") == 0
            assert mine.wait(0, 0.2) is False
            assert mine.publish("m1") == 1
            assert mine.commit("c", 1)
            assert theirs.offset("c") == 2
            assert mine.trim(10) == 1
            assert [e.payload for e in theirs.read()] == ["t1", "t2"]

    @pytest.mark.clause("C-7", "L-1")
    @pytest.mark.requires(Capability.LOCKS)
    def test_locks_of_one_name_in_two_databases_are_two_locks(
        self, store: Store, other_database: StoreFactory
    ) -> None:
        name = unique("l")
        with other_database.open() as other:
            theirs = other.lock(name, LONG_S, owner="them")
            assert theirs is not None
            mine = store.lock(name, LONG_S, owner="me")
            assert mine is not None
            assert mine.release()
            assert other.lock(name, LONG_S, owner="someone-else") is None
            assert theirs.renew() and theirs.release()

    @pytest.mark.clause("C-7", "L-1")
    @pytest.mark.requires(Capability.LOCKS)
    def test_locks_with_confusable_names_are_separate(self, store: Store) -> None:
        base = unique("l")
        names = [f"{base}-x", f"{base}-X", f"{base}-_", f"{base}-%", f"{base}-x "]
        held = [store.lock(n, LONG_S, owner="a") for n in names]
        assert all(held)
        for n in names:
            assert store.lock(n, LONG_S, owner="b") is None

    @pytest.mark.clause("C-7", "SC-2", "SC-3")
    @pytest.mark.requires(Capability.SCHEDULER)
    def test_schedules_of_one_name_in_two_databases_never_meet(
        self, store: Store, other_database: StoreFactory
    ) -> None:
        name, queue = unique("sched"), unique()
        with other_database.open() as other:
            store.schedule(name, "@hourly", queue, "mine")
            other.schedule(name, "@every 1s", queue, "theirs")
            other.schedule(f"{name}-only-there", "@daily", queue)
            assert [(s.name, s.spec) for s in store.schedules()] == [(name, "@hourly")]
            time.sleep(1.1)
            assert store.tick_schedules() == 0
            assert store.queue(queue).stats().pending == 0
            assert other.tick_schedules() == 1
            assert other.unschedule(name) is True
            assert [s.name for s in store.schedules()] == [name]
            assert store.unschedule(f"{name}-only-there") is False
            assert store.unschedule(name) is True

    @pytest.mark.clause("C-7", "SC-2")
    @pytest.mark.requires(Capability.SCHEDULER)
    def test_schedules_with_confusable_names_are_separate(self, store: Store) -> None:
        base = unique("sched")
        names = [f"{base}-x", f"{base}-X", f"{base}-_", f"{base}-%"]
        for n in names:
            store.schedule(n, "@hourly", unique(), n)
        assert store.unschedule(f"{base}-_") is True
        assert sorted(s.name for s in store.schedules()) == sorted(
            n for n in names if n != f"{base}-_"
        )

    @pytest.mark.clause("C-7", "N-1")
    @pytest.mark.requires(Capability.NOTIFICATIONS)
    def test_channels_of_one_name_in_two_databases_never_meet(
        self, store: Store, other_database: StoreFactory
    ) -> None:
        channel = unique("ch")
        with other_database.open() as other, store.listen(channel) as listener:
            other.notify(channel, "theirs")
            store.notify(f"{channel}-other", "another channel")
            store.notify(channel, "mine")
            note = listener.get(5.0)
            assert note is not None and note.payload == "mine"
            assert listener.get(0.3) is None
