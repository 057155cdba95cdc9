"""Progress checkpoints (Q-28).

``job.progress(value)`` stores a JSON value on the job while its claim is
valid, fenced exactly as a heartbeat is (Q-7, Q-8) and leaving the deadline
where it was. The value stays on the job through retries, reclaims, death and
redrive, so the next attempt reads it as ``job.checkpoint`` and can resume;
``JobInfo.progress`` shows it to operators. The crash test SIGKILLs a worker
process in the middle of a job and shows that its last checkpoint is what the
retry reads.
"""

from __future__ import annotations

import math
import multiprocessing
from multiprocessing.queues import Queue as MPQueue
from typing import Any

import pytest

from alkstore import (
    AsyncStore,
    AsyncWorker,
    Capability,
    InvalidArgument,
    Job,
    JobState,
    QueueOpts,
    Store,
    Worker,
)

from . import _children_progress
from ._base import ContractBase, kill_hard, killed_at_exit, kills_a_process, requires, spawn, unique
from ._factory import StoreFactory
from ._queue_helpers import LONG_S, claim_one, info_of, lapse
from .contract_async import ASYNC_ONLY, run_async

__all__ = ["ProgressContract"]

#: The largest checkpoint, encoded (Q-28).
LIMIT = 64 * 1024


class _Rollback(Exception):
    """Raised inside a transaction to roll it back."""


@requires(Capability.QUEUES, Capability.PROGRESS)
class ProgressContract(ContractBase):
    """Checkpoints: stored, fenced, kept across attempts, bounded."""

    # ------------------------------------------------------------ storing

    @pytest.mark.clause("Q-28", "Q-14")
    def test_a_checkpoint_is_stored_and_shown(self, store: Store) -> None:
        """Q-28: a fresh job has no checkpoint; progress() stores one, the handle and
        JobInfo.progress (get_job and list_jobs) show it, and a later one replaces it."""
        q = store.queue(unique())
        job_id = q.enqueue("work")
        assert info_of(q, job_id).progress is None
        job = claim_one(q)
        assert [job.checkpoint] == [None]  # (no narrowing: progress() changes it)
        assert job.progress({"page": 3, "cursor": "abc"}) is True
        assert job.checkpoint == {"page": 3, "cursor": "abc"}
        assert info_of(q, job_id).progress == {"page": 3, "cursor": "abc"}
        assert job.progress([1, 2.5, None, "x"])
        assert job.checkpoint == [1, 2.5, None, "x"]
        assert [i.progress for i in q.list_jobs(JobState.PROCESSING)] == [[1, 2.5, None, "x"]]
        assert job.progress(7) and info_of(q, job_id).progress == 7

    @pytest.mark.clause("Q-28")
    def test_none_clears_the_checkpoint(self, store: Store) -> None:
        """Q-28: progress(None) clears it (stored values are C-3's, so None reads back as
        no checkpoint)."""
        q = store.queue(unique(), QueueOpts(max_attempts=3))
        q.enqueue("work")
        job = claim_one(q)
        assert job.progress({"done": 1})
        assert job.progress(None) and job.checkpoint is None
        assert info_of(q, job.id).progress is None
        assert job.retry("again", delay_s=0)
        assert claim_one(q).checkpoint is None

    @pytest.mark.clause("Q-28", "Q-8")
    def test_progress_leaves_the_deadline_where_it_was(self, store: Store) -> None:
        """Q-28: a checkpoint is no heartbeat: the claim's deadline does not move."""
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
        q.enqueue("work")
        job = claim_one(q)
        before = info_of(q, job.id).deadline
        assert job.progress({"step": 1})
        assert info_of(q, job.id).deadline == before
        assert job.deadline == before

    # ----------------------------------------------------------- fencing

    @pytest.mark.clause("Q-28", "Q-7")
    def test_progress_is_refused_once_the_claim_ended(self, store: Store) -> None:
        """Q-28: after an ack, a retry, a fail, a cancel or a lapse, progress() returns
        False and writes nothing: the dead row and the retried row keep the checkpoint
        they had."""
        q = store.queue(unique(), QueueOpts(max_attempts=5))
        ids = q.enqueue_many(["acked", "retried", "failed", "cancelled", "lapsed"])
        jobs = {j.payload: j for j in q.claim_batch("w", 5)}
        assert len(jobs) == 5
        for job in jobs.values():
            assert job.progress({"by": job.payload})
        assert jobs["acked"].ack()
        assert jobs["retried"].retry("later", delay_s=LONG_S)
        assert jobs["failed"].fail("broken")
        assert q.cancel(jobs["cancelled"].id)
        lapse(jobs["lapsed"])
        for job in jobs.values():
            assert job.progress({"late": True}) is False, job.payload
        assert q.get_job(ids[0]) is None
        assert info_of(q, ids[1]).progress == {"by": "retried"}
        assert info_of(q, ids[2]).progress == {"by": "failed"}
        assert info_of(q, ids[4]).progress == {"by": "lapsed"}
        assert jobs["lapsed"].checkpoint == {"by": "lapsed"}

    @pytest.mark.clause("Q-28", "Q-4", "Q-7")
    def test_an_older_claim_cannot_overwrite_the_reclaims_checkpoint(self, store: Store) -> None:
        """Q-28: once a lapsed job is claimed again, the old handle's progress is refused
        and the new claim's checkpoint stands."""
        q = store.queue(unique(), QueueOpts(max_attempts=3))
        q.enqueue("work")
        old = claim_one(q, "old")
        assert old.progress({"step": 1})
        lapse(old)
        new = claim_one(q, "new")
        assert new.id == old.id and new.checkpoint == {"step": 1}
        assert new.progress({"step": 2})
        assert old.progress({"step": 99}) is False
        assert info_of(q, new.id).progress == {"step": 2}
        assert new.ack()

    # ------------------------------------------- kept across attempts

    @pytest.mark.clause("Q-28", "Q-10")
    def test_a_retry_reads_the_checkpoint(self, store: Store) -> None:
        """Q-28: the attempt after a retry reads the last checkpoint as job.checkpoint."""
        q = store.queue(unique(), QueueOpts(max_attempts=3))
        q.enqueue({"pages": 10})
        first = claim_one(q)
        assert first.progress({"page": 4})
        assert first.retry("interrupted", delay_s=0)
        second = claim_one(q)
        assert second.id == first.id and second.attempts == 2
        assert second.checkpoint == {"page": 4}
        assert info_of(q, second.id).progress == {"page": 4}

    @pytest.mark.clause("Q-28", "Q-6")
    def test_a_reclaim_after_a_lapse_reads_the_checkpoint(self, store: Store) -> None:
        """Q-28: a claim that lapsed (its worker gone) leaves its checkpoint to the
        reclaim; claim_batch hands it out too."""
        q = store.queue(unique(), QueueOpts(max_attempts=3))
        q.enqueue_many(["a", "b"])
        a, b = q.claim_batch("gone", 2)
        assert a.progress({"of": "a"}) and b.progress({"of": "b"})
        lapse(a, b)
        again = {j.payload: j.checkpoint for j in q.claim_batch("rescuer", 2)}
        assert again == {"a": {"of": "a"}, "b": {"of": "b"}}

    @pytest.mark.clause("Q-28", "Q-11", "Q-21")
    def test_the_dead_row_keeps_the_checkpoint_and_a_redrive_brings_it_back(
        self, store: Store
    ) -> None:
        """Q-28: a job that dies keeps its checkpoint on the dead row (get_job,
        list_jobs(DEAD)), also at an exhausted reclaim; a redrive brings it back to the
        next attempt."""
        q = store.queue(unique(), QueueOpts(max_attempts=1))
        failed, exhausted = q.enqueue_many(["failed", "exhausted"])
        jobs = {j.payload: j for j in q.claim_batch("w", 2)}
        assert jobs["failed"].progress({"step": 5}) and jobs["failed"].fail("boom")
        assert jobs["exhausted"].progress({"step": 6})
        lapse(jobs["exhausted"])
        q.sweep_expired()
        assert info_of(q, failed).progress == {"step": 5}
        assert info_of(q, exhausted).state is JobState.DEAD
        assert info_of(q, exhausted).progress == {"step": 6}
        dead = {i.id: i.progress for i in q.list_jobs(JobState.DEAD)}
        assert dead == {failed: {"step": 5}, exhausted: {"step": 6}}
        assert q.redrive([failed]) == 1
        back = claim_one(q)
        assert back.id == failed and back.checkpoint == {"step": 5}

    # ------------------------------------------------------------ bounds

    @pytest.mark.clause("Q-28", "C-3", "C-6")
    def test_a_bad_or_too_big_checkpoint_is_refused_and_writes_nothing(self, store: Store) -> None:
        """Q-28: a value over 64 KiB encoded, or one C-3 refuses (not JSON, NaN, cyclic),
        raises InvalidArgument; the stored checkpoint, the handle's and the claim stay as
        they were. Exactly 64 KiB is accepted."""
        q = store.queue(unique())
        q.enqueue("work")
        job = claim_one(q)
        assert job.progress({"ok": 1})
        cyclic: list[Any] = []
        cyclic.append(cyclic)
        too_big = "x" * (LIMIT - 1)  # two quotes more: one byte over
        for bad in (too_big, {"k": object()}, math.nan, cyclic, b"bytes"):
            with pytest.raises(InvalidArgument):
                job.progress(bad)
            assert info_of(q, job.id).progress == {"ok": 1}
            assert job.checkpoint == {"ok": 1}
        exact = "x" * (LIMIT - 2)
        assert job.progress(exact) and info_of(q, job.id).progress == exact
        assert job.ack()

    # ------------------------------------------------------ transactions

    @pytest.mark.clause("Q-28", "T-1")
    def test_progress_joins_the_callers_transaction(self, store: Store) -> None:
        """Q-28: with tx=, the checkpoint lands with the caller's transaction: a rollback
        erases it, a commit makes it visible."""
        q = store.queue(unique())
        q.enqueue("work")
        job = claim_one(q)
        assert job.progress({"step": 1})

        def progress_then_roll_back() -> None:
            with store.transaction() as tx:
                assert job.progress({"step": 2}, tx=tx)
                raise _Rollback

        with pytest.raises(_Rollback):
            progress_then_roll_back()
        assert info_of(q, job.id).progress == {"step": 1}
        with store.transaction() as tx:
            assert job.progress({"step": 3}, tx=tx)
        assert info_of(q, job.id).progress == {"step": 3}
        assert job.ack()

    # ------------------------------------------------------------ worker

    @pytest.mark.clause("Q-28", "W-1")
    def test_a_handler_resumes_from_its_checkpoint(self, store: Store) -> None:
        """Q-28: a Worker's handler stores checkpoints through its job; after it raised,
        the retry's handler reads the last one and resumes from there."""
        q = store.queue(unique(), QueueOpts(max_attempts=3, backoff_base_s=0))
        q.enqueue({"items": 6})
        seen: list[Any] = []

        def handler(job: Job) -> None:
            seen.append(job.checkpoint)
            start = 0 if job.checkpoint is None else int(job.checkpoint["next"])
            for item in range(start, int(job.payload["items"])):
                if item == 4 and job.attempts == 1:
                    raise RuntimeError("interrupted")
                assert job.progress({"next": item + 1})

        assert Worker(store, q, handler).run_until_empty() == 2
        assert seen == [None, {"next": 4}]
        assert q.stats().dead == 0 and q.claim("w") is None

    @pytest.mark.clause("Q-28", "A-5")
    @pytest.mark.requires(Capability.ASYNC)
    @ASYNC_ONLY
    def test_an_async_handler_resumes_from_its_checkpoint(
        self, store_factory: StoreFactory
    ) -> None:
        """Q-28: an AsyncWorker's handler awaits job.progress; the retry's handler reads
        the last checkpoint; progress of an AsyncJob in an async transaction lands with
        it."""

        async def body(astore: AsyncStore) -> None:
            q = astore.queue(unique(), QueueOpts(max_attempts=3, backoff_base_s=0))
            job_id = await q.enqueue({"items": 5})
            seen: list[Any] = []

            async def handler(job: Any) -> None:
                seen.append(job.checkpoint)
                start = 0 if job.checkpoint is None else int(job.checkpoint["next"])
                for item in range(start, 5):
                    if item == 2 and job.attempts == 1:
                        raise RuntimeError("interrupted")
                    assert await job.progress({"next": item + 1})

            assert await AsyncWorker(astore, q, handler).run_until_empty() == 2
            assert seen == [None, {"next": 2}]
            assert await q.get_job(job_id) is None
            other = await q.enqueue("tx")
            job = await q.claim("w")
            assert job is not None and job.id == other
            async with astore.transaction() as tx:
                assert await job.progress({"in": "tx"}, tx=tx)
            info = await q.get_job(other)
            assert info is not None and info.progress == {"in": "tx"}
            assert await job.ack()

        run_async(store_factory, body)

    # --------------------------------------------------------- crash case

    @pytest.mark.clause("Q-28", "W-6")
    @kills_a_process
    def test_a_checkpoint_survives_a_sigkill_of_the_worker_holding_the_claim(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """Q-28: a worker process SIGKILLed in the middle of a job (its claim alive, kept by
        heartbeats) loses no checkpoint that landed: once the claim lapses, the retry in
        this process reads the last one."""
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=2.0, max_attempts=3))
        job_id = q.enqueue("long job")
        report: MPQueue[Any] = multiprocessing.get_context("spawn").Queue()
        proc = spawn(
            _children_progress.checkpoint_and_hang_in_worker, store_factory, q.name, 3, report
        )
        with killed_at_exit(proc):
            for step in (1, 2, 3):
                got = report.get(timeout=120)
                assert got == ("progressed", job_id, 1, step, True), got
            kill_hard(proc)
        with store_factory.open() as after:
            fresh = after.queue(q.name)
            retry = fresh.claim("rescuer", wait_s=60)
            assert retry is not None and retry.id == job_id
            assert retry.attempts == 2
            assert retry.checkpoint == {"step": 3, "of": 3}
            assert retry.ack()
