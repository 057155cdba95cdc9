"""Queues, cancel (Q-13) and the read side: get_job, list_jobs, stats (Q-14).

Timing and the tricks that recur: :mod:`alkstore_conformance._queue_helpers`.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from alkstore import EnqueueOpts, JobInfo, JobState, QueueOpts, QueueStats, Store

from ._base import ContractBase, unique
from ._factory import StoreFactory
from ._queue_helpers import (
    LONG_S,
    QUEUES,
    assert_aware_utc,
    claim_one,
    counts,
    info_of,
    lapse,
    seconds,
)

__all__ = ["QueueInspectContract"]


class QueueInspectContract(ContractBase):
    """Cancel (Q-13) and the read side: get_job, list_jobs, stats (Q-14)."""

    # ----------------------------------------------------------------

    @pytest.mark.clause("Q-13")
    @QUEUES
    def test_cancel_deletes_pending_and_processing_jobs_whoever_holds_them(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
        held_id = q.enqueue("held")
        held = claim_one(q, "holder")
        pending_id = q.enqueue("pending")
        scheduled_id = q.enqueue("scheduled", EnqueueOpts(delay_s=60))
        with store_factory.open() as other:  # the canceller is another process
            oq = other.queue(q.name)
            assert oq.cancel(pending_id) is True
            assert oq.cancel(scheduled_id) is True
            assert oq.cancel(held_id) is True
            assert oq.cancel(held_id) is False
        for job_id in (held_id, pending_id, scheduled_id):
            assert q.get_job(job_id) is None
        assert held.heartbeat() is False
        assert held.ack() is False
        assert held.retry("x", delay_s=0) is False
        assert held.fail("x") is False
        assert q.claim("w") is None
        assert counts(q) == (0, 0, 0, 0)

    @pytest.mark.clause("Q-13", "C-7", "C-5")
    @QUEUES
    def test_cancel_of_a_dead_missing_or_foreign_job_is_false(self, store: Store) -> None:
        q = store.queue(unique())
        other = store.queue(unique())
        dead_id = q.enqueue("dead")
        assert claim_one(q).fail("boom")
        foreign_id = other.enqueue("foreign")
        assert q.cancel(dead_id) is False
        dead = info_of(q, dead_id)
        assert (dead.state, dead.last_error) == (JobState.DEAD, "boom")
        assert q.cancel(foreign_id) is False
        assert info_of(other, foreign_id).state is JobState.PENDING
        assert q.cancel(max(dead_id, foreign_id) + 100_000) is False
        assert counts(q) == (0, 0, 0, 1)
        assert counts(other) == (1, 0, 0, 0)

    # ----------------------------------------------------------------

    @pytest.mark.clause("Q-14", "Q-1", "Q-15", "C-4")
    @QUEUES
    def test_get_job_returns_every_field_in_every_state(self, store: Store) -> None:
        opts = QueueOpts(
            visibility_timeout_s=45,
            max_attempts=4,
            backoff_base_s=2.5,
            dead_letter_retention_s=3600,
        )
        q = store.queue(unique(), opts)
        job_id = q.enqueue({"a": [1, 2]}, EnqueueOpts(priority=-7, expires_s=3600))
        stamps = (45.0, 4, 2.5, 3600.0)

        def common(i: JobInfo) -> None:
            assert (i.id, i.queue, i.payload, i.priority) == (job_id, q.name, {"a": [1, 2]}, -7)
            got = (i.visibility_timeout_s, i.max_attempts, i.backoff_base_s)
            assert (*got, i.dead_letter_retention_s) == stamps
            assert_aware_utc(i.created_at, i.run_at, i.expires_at)
            assert i.expires_at is not None
            assert abs(seconds(i.expires_at - i.created_at) - 3600) < 0.01

        pending = info_of(q, job_id)
        common(pending)
        assert pending.state is JobState.PENDING
        assert (pending.attempts, pending.claimed_at, pending.last_error, pending.died_at) == (
            0,
            None,
            None,
            None,
        )
        assert abs(pending.run_at - pending.created_at) < timedelta(seconds=1)
        assert abs(pending.created_at - datetime.now(timezone.utc)) < timedelta(seconds=60)

        job = claim_one(q, "inspector")
        processing = info_of(q, job_id)
        common(processing)
        assert processing.state is JobState.PROCESSING
        assert (processing.attempts, processing.last_error, processing.died_at) == (1, None, None)
        assert processing.worker_id == "inspector"
        assert_aware_utc(processing.claimed_at, processing.deadline)

        assert job.fail("why it died")
        dead = info_of(q, job_id)
        common(dead)
        assert dead.state is JobState.DEAD
        assert (dead.attempts, dead.last_error) == (1, "why it died")
        assert_aware_utc(dead.died_at, dead.claimed_at)
        assert dead.claimed_at is not None and dead.died_at is not None
        assert dead.died_at >= dead.claimed_at >= dead.created_at

        assert q.get_job(job_id + 100_000) is None

    @pytest.mark.clause("Q-14", "C-7")
    @QUEUES
    def test_list_jobs_pages_each_state_by_id(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
        noise = store.queue(unique())
        noise.enqueue_many(["noise"] * 3)
        expected: dict[JobState, list[int]] = {}
        processing = q.enqueue_many([f"p{i}" for i in range(5)])
        assert len(q.claim_batch("w", 5)) == 5
        expected[JobState.PROCESSING] = processing
        dead = q.enqueue_many([f"d{i}" for i in range(5)])
        for job in q.claim_batch("w", 5):
            assert job.fail(f"dead {job.payload}")
        expected[JobState.DEAD] = dead
        pending = q.enqueue_many([f"r{i}" for i in range(3)])
        pending += q.enqueue_many([f"s{i}" for i in range(2)], EnqueueOpts(delay_s=60))
        expected[JobState.PENDING] = pending
        for state, ids in expected.items():
            everything = q.list_jobs(state)
            assert [i.id for i in everything] == sorted(ids)
            assert all(i.state is state and i.queue == q.name for i in everything)
            paged: list[int] = []
            after = 0
            for _ in range(len(ids)):  # bounded: a broken after_id must not loop forever
                page = q.list_jobs(state, limit=2, after_id=after)
                if not page:
                    break
                assert len(page) <= 2
                paged += [i.id for i in page]
                after = page[-1].id
            assert paged == sorted(ids)
            assert q.list_jobs(state, after_id=max(ids)) == []
            middle = sorted(ids)[2]
            assert [i.id for i in q.list_jobs(state, limit=100, after_id=middle)] == sorted(ids)[3:]
        for info in q.list_jobs(JobState.DEAD):
            assert info.last_error == f"dead {info.payload}"
            assert info.died_at is not None

    @pytest.mark.clause("Q-14", "Q-6", "Q-10")
    @QUEUES
    def test_stats_count_ready_scheduled_processing_and_dead(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S, max_attempts=3))
        q.enqueue_many(["run"] * 2)
        running = q.claim_batch("w", 2)
        assert len(running) == 2
        assert running[0].retry("later", delay_s=60)  # back to pending, scheduled
        q.enqueue_many(["fail"])
        [doomed] = q.claim_batch("w", 1)
        assert doomed.fail("x")
        q.enqueue_many(["ready-1", "ready-2", "ready-3"])
        q.enqueue("scheduled", EnqueueOpts(delay_s=60))
        stats = q.stats()
        assert isinstance(stats, QueueStats)
        assert stats == QueueStats(q.name, pending=3, scheduled=2, processing=1, dead=1)
        lapse(running[1])  # a lapsed claim still counts as processing
        assert q.stats() == QueueStats(q.name, pending=3, scheduled=2, processing=1, dead=1)

    @pytest.mark.clause("Q-14", "C-7")
    @QUEUES
    def test_queue_stats_lists_every_queue_with_live_or_dead_rows(self, store: Store) -> None:
        live, dead_only, emptied, never = unique("live"), unique("dead"), unique("gone"), unique()
        store.queue(live).enqueue_many([1, 2])
        store.queue(dead_only).enqueue("x")
        assert claim_one(store.queue(dead_only)).fail("x")
        store.queue(emptied).enqueue("x")
        assert claim_one(store.queue(emptied)).ack()
        store.queue(never)
        by_name = {s.queue: s for s in store.queue_stats()}
        assert by_name[live] == QueueStats(live, pending=2, scheduled=0, processing=0, dead=0)
        assert by_name[dead_only] == QueueStats(
            dead_only, pending=0, scheduled=0, processing=0, dead=1
        )
        assert emptied not in by_name
        assert never not in by_name
        for name in (live, dead_only):
            assert by_name[name] == store.queue(name).stats()
