"""Queues, blocking claims and their wakes (Q-19).

Timing and the tricks that recur: :mod:`alkstore_conformance._queue_helpers`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest

from alkstore import Capability, EnqueueOpts, Job, Queue, QueueOpts, Store

from . import _children_queue
from ._base import ContractBase, reap, signals, spawn, unique
from ._factory import StoreFactory
from ._queue_helpers import (
    LONG_S,
    QUEUES,
    SETTLE_S,
    WAKE_BOUND_S,
    Background,
    blocked,
    claim_one,
    counts,
    woken_by,
)
from .contract_transaction import roll_back

__all__ = ["QueueWaitContract"]

T = TypeVar("T")


def _claim_woken_half_a_second_after(
    q: Queue, worker: str, act: Callable[[], T]
) -> tuple[T, Job | None]:
    """Run *act*, a call after which a job turns claimable 0.5 s from a moment
    inside it, then claim with ``wait_s=20``: the claim must return no sooner
    than 0.5 s after *act* began, and within :data:`WAKE_BOUND_S` of the
    latest moment the job turned claimable (0.5 s after *act* returned).
    Returns what *act* returned and the claimed job."""
    asked = time.monotonic()
    result = act()
    acted = time.monotonic()
    job = q.claim(worker, wait_s=20)
    returned = time.monotonic()
    assert returned - asked >= 0.45
    assert returned - acted < 0.5 + WAKE_BOUND_S
    return result, job


class QueueWaitContract(ContractBase):
    """Blocking claims and their wakes (Q-19)."""

    # ----------------------------------------------------------------

    @pytest.mark.clause("Q-19", "ST-4")
    @QUEUES
    def test_blocked_claim_returns_when_another_thread_enqueues(self, store: Store) -> None:
        q = store.queue(unique())
        job, job_id = woken_by(lambda: q.claim("w", wait_s=20), lambda: q.enqueue("wake up"))
        assert job is not None and job.id == job_id

    @pytest.mark.clause("Q-19")
    @pytest.mark.requires(Capability.QUEUES, Capability.CROSS_PROCESS_WAKES)
    def test_blocked_claim_returns_when_another_store_enqueues(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        q = store.queue(unique())
        with store_factory.open() as other:
            oq = other.queue(q.name)
            jobs, ids = woken_by(
                lambda: q.claim_batch("w", 10, wait_s=20), lambda: oq.enqueue_many(["one", "two"])
            )
            assert [j.id for j in jobs] == ids
            # And the other way round.
            job, job_id = woken_by(lambda: oq.claim("w", wait_s=20), lambda: q.enqueue("three"))
            assert job is not None and job.id == job_id

    @pytest.mark.clause("Q-19", "C-5")
    @QUEUES
    def test_blocked_claim_returns_nothing_after_wait_s(self, store: Store) -> None:
        q = store.queue(unique())
        q.enqueue("not yet", EnqueueOpts(delay_s=60))
        calls: list[tuple[Callable[[], object], object]] = [
            (lambda: q.claim("w", wait_s=0.5), None),
            (lambda: q.claim_batch("w", 5, wait_s=0.5), []),
        ]
        for call, nothing in calls:
            started = time.monotonic()
            assert call() == nothing
            waited = time.monotonic() - started
            assert 0.45 <= waited < 0.5 + WAKE_BOUND_S

    @pytest.mark.clause("Q-19", "Q-10")
    @QUEUES
    def test_blocked_claim_wakes_when_a_retry_makes_work(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S, max_attempts=5))
        job_id = q.enqueue("x")
        held = claim_one(q, "first")
        # A retry without delay commits work: the blocked claim wakes.
        job, retried = woken_by(
            lambda: q.claim("second", wait_s=20), lambda: held.retry("again", delay_s=0)
        )
        assert retried
        assert job is not None and (job.id, job.attempts) == (job_id, 2)
        # A retry with a delay: the claim wakes when the delay ends, with no
        # other write to wake it. The delay runs from a moment inside the
        # retry call: not before the call began, at most its return.
        retried, again = _claim_woken_half_a_second_after(
            q, "third", lambda: job.retry("later", delay_s=0.5)
        )
        assert retried
        assert again is not None and (again.id, again.attempts) == (job_id, 3)

    @pytest.mark.clause("Q-19", "Q-6")
    @QUEUES
    def test_blocked_claim_wakes_when_a_claim_lapses(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=0.5, max_attempts=3))
        job_id = q.enqueue("x")
        # The claim's deadline is set inside the call.
        _, job = _claim_woken_half_a_second_after(q, "rescuer", lambda: claim_one(q, "dies"))
        assert job is not None and (job.id, job.attempts) == (job_id, 2)

    @pytest.mark.clause("Q-19", "Q-2")
    @QUEUES
    def test_blocked_claim_wakes_when_a_delayed_job_turns_ready(self, store: Store) -> None:
        q = store.queue(unique())
        # The delay starts inside the call.
        job_id, job = _claim_woken_half_a_second_after(
            q, "w", lambda: q.enqueue("x", EnqueueOpts(delay_s=0.5))
        )
        assert job is not None and job.id == job_id

    @pytest.mark.clause("Q-19", "T-3")
    @QUEUES
    def test_blocked_claim_is_not_ended_by_a_rolled_back_enqueue(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """A claim blocked for 1.5 s while another store enqueues and rolls back returns None after
        the full wait."""
        q = store.queue(unique())
        with store_factory.open() as writer:
            wq = writer.queue(q.name)
            bg = blocked(lambda: q.claim("w", wait_s=1.5))

            def enqueue_ghosts(tx: object) -> None:
                wq.enqueue("never", tx=tx)
                wq.enqueue_many(["never", "never"], tx=tx)

            roll_back(writer, enqueue_ghosts)
            assert bg.result() is None
            assert bg.returned_at - bg.started_at >= 1.4
        assert counts(q) == (0, 0, 0, 0)

    @pytest.mark.clause("Q-19", "Q-3")
    @QUEUES
    def test_blocked_claimers_share_a_batch_of_new_jobs(self, store: Store) -> None:
        q = store.queue(unique())
        waiters = [Background(lambda: q.claim("w", wait_s=20)) for _ in range(3)]
        time.sleep(SETTLE_S)
        assert not any(w.done for w in waiters)
        ids = q.enqueue_many(["a", "b", "c"])
        enqueued = time.monotonic()
        got = [w.result() for w in waiters]
        assert sorted(j.id for j in got if j is not None) == ids
        assert max(w.returned_at for w in waiters) - enqueued < WAKE_BOUND_S

    @pytest.mark.clause("Q-19")
    @pytest.mark.cross_process
    @pytest.mark.requires(Capability.QUEUES, Capability.CROSS_PROCESS_WAKES)
    def test_claim_blocked_in_another_process_wakes_on_enqueue(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """A child process blocks in claim(wait_s=30); an enqueue here ends its wait within the
        wake bound."""
        name = unique()
        _, report = signals()
        proc = spawn(_children_queue.claim_blocking, store_factory, name, "child", 30.0, report)
        try:
            assert report.get(timeout=120) == ("ready",)
            time.sleep(1.0)  # let the child block in its claim
            job_id = store.queue(name).enqueue("across processes")
            enqueued = time.monotonic()
            outcome = report.get(timeout=60)
            received = time.monotonic()
        finally:
            reap([proc])
        assert outcome[0] == "claimed", outcome
        _, claimed_id, waited = outcome
        assert claimed_id == job_id
        assert waited >= 0.5, "the child's claim did not block"
        assert received - enqueued < WAKE_BOUND_S
