"""Queues, enqueueing: the stamps a job gets (Q-1) and enqueues that fail whole (C-6).

Timing and the tricks that recur: :mod:`alkstore_conformance._queue_helpers`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta

import pytest

from alkstore import EnqueueOpts, InvalidArgument, JobState, Queue, QueueOpts, Store

from ._base import ContractBase, unique
from ._factory import StoreFactory
from ._queue_helpers import LONG_S, QUEUES, STAMP_TOLERANCE, claim_one, counts, info_of, seconds

__all__ = ["QueueEnqueueContract"]


class QueueEnqueueContract(ContractBase):
    """Enqueueing: the stamps a job gets (Q-1) and enqueues that fail whole (C-6)."""

    # -----------------------------------------------------------------

    @pytest.mark.clause("Q-1", "Q-14")
    @QUEUES
    def test_enqueue_stamps_each_job_with_its_handle_opts(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """Two handles with different opts on one queue name stamp their own opts; later handles,
        here or in another store, change no stamp already written."""
        name = unique()
        a = store.queue(
            name,
            QueueOpts(
                visibility_timeout_s=11,
                max_attempts=2,
                backoff_base_s=1.5,
                dead_letter_retention_s=100,
            ),
        )
        b = store.queue(name, QueueOpts(visibility_timeout_s=22, max_attempts=4, backoff_base_s=0))
        ja = a.enqueue("a")
        jb = b.enqueue("b")
        jc = b.enqueue("c", EnqueueOpts(max_attempts=9))
        [jd] = a.enqueue_many(["d"], EnqueueOpts(max_attempts=1))
        expected = {
            ja: (11.0, 2, 1.5, 100.0),
            jb: (22.0, 4, 0.0, None),
            jc: (22.0, 9, 0.0, None),
            jd: (11.0, 1, 1.5, 100.0),
        }

        def stamps(q: Queue, job_id: int) -> tuple[float, int, float, float | None]:
            i = info_of(q, job_id)
            return (
                i.visibility_timeout_s,
                i.max_attempts,
                i.backoff_base_s,
                i.dead_letter_retention_s,
            )

        # Later handles with other opts, in this store and another, change
        # nothing of what is already stamped: the job owns its stamps.
        c = store.queue(name, QueueOpts(visibility_timeout_s=33, max_attempts=7))
        with store_factory.open() as other:
            d = other.queue(name)
            for handle in (a, b, c, d):
                for job_id, stamp in expected.items():
                    assert stamps(handle, job_id) == stamp
        je = c.enqueue("e")
        assert stamps(a, je) == (33.0, 7, 5.0, None)

    @pytest.mark.clause("Q-1", "Q-4", "Q-8", "Q-12")
    @QUEUES
    def test_claim_and_heartbeat_read_the_row_stamps_not_the_handle_opts(
        self, store: Store
    ) -> None:
        """A job stamped 0.2 s / 1 attempt, claimed through a 300 s / 5 attempts handle, lapses
        after 0.2 s and dead-letters after one attempt; and the other way round."""
        name = unique()
        short = store.queue(name, QueueOpts(visibility_timeout_s=0.2, max_attempts=1))
        long = store.queue(name, QueueOpts(visibility_timeout_s=LONG_S, max_attempts=5))
        short_id = short.enqueue("short")
        # Claimed through the other handle: deadline and budget are the row's.
        job = claim_one(long)
        assert job.id == short_id
        assert job.max_attempts == 1
        info = info_of(long, short_id)
        assert info.deadline is not None and info.claimed_at is not None
        assert abs(info.deadline - info.claimed_at - timedelta(seconds=0.2)) <= STAMP_TOLERANCE
        time.sleep(0.35)
        assert not job.ack()
        # The row's budget (1) is spent, whatever the handle says (5).
        assert long.claim("w") is None
        dead = info_of(long, short_id)
        assert dead.state is JobState.DEAD
        assert dead.last_error == "max attempts exceeded"

        long_id = long.enqueue("long")
        job = claim_one(short)
        assert job.id == long_id and job.max_attempts == 5
        info = info_of(short, long_id)
        assert info.deadline is not None and info.claimed_at is not None
        assert abs(info.deadline - info.claimed_at - timedelta(seconds=LONG_S)) <= STAMP_TOLERANCE
        # A heartbeat without extend_s uses the row's timeout too: from a far
        # deadline it comes back down to about now + 300 s, not now + 0.2 s.
        assert job.heartbeat(3600)
        far = job.deadline
        assert job.heartbeat()
        assert abs(seconds(far - job.deadline) - (3600 - LONG_S)) < 5
        assert job.ack()

    # ----------------------------------------------------------------- C-6

    @pytest.mark.clause("C-6", "C-3")
    @QUEUES
    def test_failing_enqueue_many_writes_nothing(self, store: Store) -> None:
        q = store.queue(unique())
        q.enqueue("before")
        with pytest.raises(InvalidArgument):
            q.enqueue_many(["a", "b", float("nan"), "d"])
        with pytest.raises(InvalidArgument):
            q.enqueue_many(["a", {"b": {1, 2}}])
        with pytest.raises(InvalidArgument):
            q.enqueue_many(["a", "b", {"lone": "\ud800"}])
        assert counts(q) == (1, 0, 0, 0)
        # Inside the caller's transaction: the failed batch leaves no row and
        # the transaction goes on.
        with store.transaction() as tx:
            q.enqueue("in tx", tx=tx)
            with pytest.raises(InvalidArgument):
                q.enqueue_many(["x", float("inf")], tx=tx)
            q.enqueue_many(["after 1", "after 2"], tx=tx)
        payloads = [i.payload for i in q.list_jobs(JobState.PENDING)]
        assert payloads == ["before", "in tx", "after 1", "after 2"]

    @pytest.mark.clause("C-6", "Q-7")
    @QUEUES
    def test_refused_handle_input_changes_nothing(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
        job_id = q.enqueue("x")
        job = claim_one(q)
        before = info_of(q, job_id)
        bad_calls: list[Callable[[], object]] = [
            lambda: job.retry(42),  # type: ignore[arg-type]
            lambda: job.retry("x", delay_s=-1),
            lambda: job.retry("x", delay_s=float("nan")),
            lambda: job.fail(None),  # type: ignore[arg-type]
            lambda: job.heartbeat(-1),
        ]
        for call in bad_calls:
            with pytest.raises(InvalidArgument):
                call()
        assert info_of(q, job_id) == before
        assert job.ack()
