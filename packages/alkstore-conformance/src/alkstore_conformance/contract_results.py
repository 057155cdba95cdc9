"""Kept results (RS-1..RS-3).

A job stamped with ``result_ttl_s`` keeps its result when acked; nothing else
changes for a job without the stamp (ack deletes, as ADR-010 says). The tests
check the three faces of a finished job — ``get_job`` (``done``),
``list_jobs(JobState.DONE)`` and ``q.result`` — and that every refusal
(a result for a job without the stamp, a result that does not encode, bad
stamps) leaves the claim exactly as it was. The cross-process tests wake a
``q.result`` blocked in another process, and kill a worker process after its
acks committed to show that nothing it kept is lost.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import threading
import time
from multiprocessing.queues import Queue as MPQueue
from typing import Any

import pytest

from alkstore import (
    Capability,
    EnqueueOpts,
    InvalidArgument,
    Job,
    JobResult,
    JobState,
    QueueOpts,
    Store,
    Worker,
)

from . import _children_results
from ._base import (
    ContractBase,
    eventually,
    kill_hard,
    killed_at_exit,
    kills_a_process,
    reap,
    requires,
    signals,
    spawn,
    unique,
)
from ._factory import StoreFactory
from ._queue_helpers import LONG_S, WAKE_BOUND_S, claim_one, counts, info_of

__all__ = ["ResultsContract"]


#: A result's time in the tests that watch it run out.
SHORT_TTL_S = 0.4


class _Rollback(Exception):
    """Raised inside a transaction to roll it back."""


def _kept(store: Store, ttl_s: float = LONG_S, **opts: Any) -> Any:
    """A fresh queue whose handle stamps every job with *ttl_s*."""
    return store.queue(unique(), QueueOpts(result_ttl_s=ttl_s, **opts))


def _still_claimed(q: Any, job: Job) -> None:
    """The job is processing under *job*'s claim: a refused ack changed nothing."""
    info = info_of(q, job.id)
    assert info.state is JobState.PROCESSING
    assert (info.result, info.finished_at) == (None, None)
    assert q.result(job.id) is None


@requires(Capability.QUEUES, Capability.RESULTS)
class ResultsContract(ContractBase):
    """Kept results: the stamp, the ack that keeps, waiting, expiry."""

    # ---------------------------------------------------------------- RS-1

    @pytest.mark.clause("RS-1", "Q-1", "Q-14")
    def test_ack_keeps_the_result_of_a_stamped_job_as_done(self, store: Store) -> None:
        """RS-1: the ack of a job stamped by its queue handle keeps the result; get_job shows
        the job done with the result, finished_at and the stamps, and nothing of it is left
        in the queue's counts."""
        q = _kept(store)
        job_id = q.enqueue({"n": 21}, EnqueueOpts(priority=3))
        pending = info_of(q, job_id)
        assert pending.result_ttl_s == LONG_S
        assert (pending.result, pending.finished_at) == (None, None)
        job = claim_one(q)
        assert job.ack(result={"answer": 42, "list": [1, "two", None]})
        done = info_of(q, job_id)
        assert done.state is JobState.DONE
        assert done.result == {"answer": 42, "list": [1, "two", None]}
        assert done.payload == {"n": 21}
        assert (done.priority, done.attempts, done.result_ttl_s) == (3, 1, LONG_S)
        assert done.finished_at is not None and done.finished_at.tzinfo is not None
        assert done.claimed_at is not None and done.finished_at >= done.claimed_at
        assert (done.last_error, done.died_at) == (None, None)
        assert counts(q) == (0, 0, 0, 0)
        assert [i.id for i in q.list_jobs(JobState.DONE)] == [job_id]
        assert q.list_jobs(JobState.PENDING) == [] and q.list_jobs(JobState.PROCESSING) == []

    @pytest.mark.clause("RS-1", "Q-1")
    def test_enqueue_opts_stamp_wins_and_other_handles_do_not_interfere(self, store: Store) -> None:
        """RS-1 stamped as Q-1 says: EnqueueOpts.result_ttl_s overrides the handle's; a handle
        without the stamp on the same queue enqueues jobs that keep nothing."""
        name = unique()
        plain = store.queue(name)
        stamped = store.queue(name, QueueOpts(result_ttl_s=60))
        a = plain.enqueue("a", EnqueueOpts(result_ttl_s=LONG_S))
        b = stamped.enqueue("b")
        c = plain.enqueue("c")
        assert [info_of(plain, i).result_ttl_s for i in (a, b, c)] == [LONG_S, 60.0, None]
        jobs = {j.id: j for j in plain.claim_batch("w", 3)}
        assert jobs[a].ack(result="kept a")
        assert jobs[b].ack(result="kept b")
        assert jobs[c].ack()
        assert info_of(plain, a).result == "kept a"
        assert info_of(plain, b).result == "kept b"
        assert plain.get_job(c) is None
        assert plain.result(c) is None

    @pytest.mark.clause("RS-1")
    def test_an_ack_without_a_result_keeps_none(self, store: Store) -> None:
        """RS-1: ack() of a stamped job keeps the result None: the job is done, not gone."""
        q = _kept(store)
        job_id = q.enqueue("x")
        assert claim_one(q).ack()
        done = info_of(q, job_id)
        assert (done.state, done.result) == (JobState.DONE, None)
        got = q.result(job_id)
        assert got is not None and (got.state, got.value) == (JobState.DONE, None)

    @pytest.mark.clause("RS-1", "Q-9")
    def test_without_the_stamp_ack_deletes_as_before(self, store: Store) -> None:
        """RS-1's default: no stamp, nothing kept; get_job, result and list_jobs(DONE) know
        nothing of the acked job."""
        q = store.queue(unique())
        job_id = q.enqueue("x")
        assert info_of(q, job_id).result_ttl_s is None
        assert claim_one(q).ack()
        assert q.get_job(job_id) is None
        assert q.result(job_id) is None
        assert q.list_jobs(JobState.DONE) == []

    @pytest.mark.clause("RS-1", "C-6")
    def test_a_result_for_a_job_without_the_stamp_is_refused_and_nothing_is_acked(
        self, store: Store
    ) -> None:
        """RS-1: ack(result=...) that is not None on an unstamped job raises InvalidArgument;
        the claim is untouched and a plain ack still lands."""
        q = store.queue(unique())
        q.enqueue("x")
        job = claim_one(q)
        values: tuple[Any, ...] = ({"a": 1}, 0, "", False, [])
        for value in values:
            with pytest.raises(InvalidArgument):
                job.ack(result=value)
            _still_claimed(q, job)
        assert job.ack(result=None)
        assert q.get_job(job.id) is None

    @pytest.mark.clause("RS-1", "C-3", "C-6")
    def test_a_result_that_does_not_encode_is_refused_and_nothing_is_acked(
        self, store: Store
    ) -> None:
        """RS-1 with C-3's rules: NaN, an object, a cycle or bytes raise InvalidArgument;
        the job stays claimed, and then keeps a good result."""
        q = _kept(store)
        q.enqueue("x")
        job = claim_one(q)
        cyclic: list[Any] = []
        cyclic.append(cyclic)
        for bad in (math.nan, object(), cyclic, b"bytes", {1j: 2}):
            with pytest.raises(InvalidArgument):
                job.ack(result=bad)
            _still_claimed(q, job)
        assert job.ack(result=[1.5])
        assert info_of(q, job.id).result == [1.5]

    @pytest.mark.clause("RS-1")
    def test_bad_result_ttl_values_are_refused(self, store: Store) -> None:
        """RS-1: result_ttl_s is seconds > 0 or None; anything else is InvalidArgument, and an
        enqueue that never got opts writes nothing."""
        bads: tuple[Any, ...] = (0, -1, math.nan, math.inf, "60", True, 1e300)
        for bad in bads:
            with pytest.raises(InvalidArgument):
                QueueOpts(result_ttl_s=bad)
            with pytest.raises(InvalidArgument):
                EnqueueOpts(result_ttl_s=bad)
        assert QueueOpts(result_ttl_s=0.5).result_ttl_s == 0.5
        assert EnqueueOpts(result_ttl_s=2).result_ttl_s == 2.0
        assert QueueOpts().result_ttl_s is None and EnqueueOpts().result_ttl_s is None

    @pytest.mark.clause("RS-1", "T-1", "T-4")
    def test_the_result_is_written_in_the_acks_transaction(self, store: Store) -> None:
        """RS-1: ack(tx=..., result=...) rolled back keeps no result and leaves the claim
        valid; committed, the job is done with its result."""
        q = _kept(store)
        q.enqueue("x")
        job = claim_one(q)
        with contextlib.suppress(_Rollback), store.transaction() as tx:
            assert job.ack(tx=tx, result="first")
            raise _Rollback
        assert info_of(q, job.id).state is JobState.PROCESSING
        assert q.result(job.id) is None
        with store.transaction() as tx:
            assert job.ack(tx=tx, result="second")
        assert info_of(q, job.id).result == "second"

    @pytest.mark.clause("RS-1", "Q-9")
    def test_ack_batch_and_ack_each_keep_one_result_per_job(self, store: Store) -> None:
        """RS-1 for the batch acks: results= gives one result per job; stamped jobs keep
        theirs, an unstamped one given None is deleted as before."""
        name = unique()
        stamped = store.queue(name, QueueOpts(result_ttl_s=LONG_S))
        plain = store.queue(name)
        a, b = stamped.enqueue_many(["a", "b"])
        c = plain.enqueue("c")
        jobs = sorted(stamped.claim_batch("w", 3), key=lambda j: j.id)
        assert [j.id for j in jobs] == [a, b, c]
        assert stamped.ack_batch(jobs[:2], results=[{"r": "a"}, None]) == 2
        assert store.ack_each(jobs[2:], results=[None]) == [True]
        assert info_of(stamped, a).result == {"r": "a"}
        assert (info_of(stamped, b).state, info_of(stamped, b).result) == (JobState.DONE, None)
        assert stamped.get_job(c) is None

        other = _kept(store)
        d, e = other.enqueue_many(["d", "e"])
        pair = sorted(other.claim_batch("w", 2), key=lambda j: j.id)
        assert store.ack_each(pair, results=["kept d", 5]) == [True, True]
        assert [r.value for r in (other.result(d), other.result(e)) if r] == ["kept d", 5]

    @pytest.mark.clause("RS-1", "C-6")
    def test_a_refused_result_in_a_batch_acks_none_of_it(self, store: Store) -> None:
        """RS-1, all or nothing: one result for an unstamped job, one that does not encode,
        or a count that does not match refuses the whole ack_batch or ack_each."""
        name = unique()
        stamped = store.queue(name, QueueOpts(result_ttl_s=LONG_S))
        plain = store.queue(name)
        stamped.enqueue("a")
        plain.enqueue("b")
        jobs = sorted(stamped.claim_batch("w", 2), key=lambda j: j.id)
        for call in (
            lambda: stamped.ack_batch(jobs, results=["ok", "refused: b keeps nothing"]),
            lambda: store.ack_each(jobs, results=["ok", "refused"]),
            lambda: store.ack_each(jobs, results=[math.nan, None]),
            lambda: stamped.ack_batch(jobs, results=["too few"]),
            lambda: store.ack_each(jobs, results=["a", None, "too many"]),
        ):
            with pytest.raises(InvalidArgument):
                call()
            for job in jobs:
                _still_claimed(stamped, job)
        assert stamped.ack_batch(jobs, results=["ok", None]) == 2
        assert info_of(stamped, jobs[0].id).result == "ok"

    @pytest.mark.clause("RS-1", "Q-7")
    def test_a_refused_ack_keeps_nothing(self, store: Store) -> None:
        """RS-1 with Q-7: an ack of a lapsed or cancelled claim returns False and keeps no
        result."""
        q = _kept(store, visibility_timeout_s=0.2)
        lapsing = q.enqueue("lapses")
        cancelled = q.enqueue("cancelled")
        jobs = {j.id: j for j in q.claim_batch("w", 2)}
        assert q.cancel(cancelled)
        time.sleep(0.4)
        assert not jobs[lapsing].ack(result="late")
        assert not jobs[cancelled].ack(result="gone")
        assert q.result(lapsing) is None and q.result(cancelled) is None
        assert q.list_jobs(JobState.DONE) == []

    @pytest.mark.clause("RS-1", "Q-21")
    def test_a_redriven_job_keeps_its_stamp(self, store: Store) -> None:
        """RS-1 with Q-21: the stamp survives death and redrive; the redriven job's ack keeps
        its result."""
        q = _kept(store)
        job_id = q.enqueue("x")
        assert claim_one(q).fail("broken")
        assert info_of(q, job_id).result_ttl_s == LONG_S
        assert q.redrive([job_id]) == 1
        assert claim_one(q).ack(result="second time")
        assert info_of(q, job_id).result == "second time"

    @pytest.mark.clause("RS-1", "C-7")
    def test_kept_results_are_scoped_to_their_queue(self, store: Store) -> None:
        """RS-1 with C-7: another queue's handle sees no done job and no result of it, and a
        done job cannot be cancelled."""
        q = _kept(store)
        other = store.queue(unique())
        job_id = q.enqueue("x")
        assert claim_one(q).ack(result="mine")
        assert other.get_job(job_id) is None
        assert other.result(job_id) is None
        assert other.list_jobs(JobState.DONE) == []
        assert not q.cancel(job_id)
        assert info_of(q, job_id).state is JobState.DONE

    @pytest.mark.clause("RS-1")
    def test_a_result_is_kept_until_its_time_is_up(self, store: Store) -> None:
        """RS-1: until finished_at + result_ttl_s the job is done; after it, get_job,
        result and list_jobs(DONE) show nothing, sweep or no sweep."""
        q = _kept(store, SHORT_TTL_S)
        job_id = q.enqueue("x")
        assert claim_one(q).ack(result="brief")
        done = info_of(q, job_id)
        assert done.finished_at is not None
        assert done.state is JobState.DONE
        time.sleep(SHORT_TTL_S + 0.3)
        assert q.get_job(job_id) is None
        assert q.result(job_id) is None
        assert q.list_jobs(JobState.DONE) == []

    @pytest.mark.clause("RS-1", "SC-3")
    @pytest.mark.requires(Capability.SCHEDULER)
    def test_a_schedules_opts_stamp_the_jobs_it_fires(self, store: Store) -> None:
        """RS-1: EnqueueOpts(result_ttl_s=...) of a schedule is stored with it and stamped
        on every job it fires, which then keeps its result."""
        queue, name = unique(), unique("s")
        store.schedule(name, "@every 1s", queue, "tick", EnqueueOpts(result_ttl_s=LONG_S))
        try:
            (stored,) = [s for s in store.schedules() if s.name == name]
            assert stored.opts is not None and stored.opts.result_ttl_s == LONG_S
            eventually(store.tick_schedules, interval_s=0.1)
            job = claim_one(store.queue(queue))
            assert info_of(store.queue(queue), job.id).result_ttl_s == LONG_S
            assert job.ack(result="fired")
            got = store.queue(queue).result(job.id)
            assert got is not None and got.value == "fired"
        finally:
            store.unschedule(name)

    @pytest.mark.clause("RS-1", "W-1")
    def test_the_worker_acks_a_stamped_job_with_its_handlers_return_value(
        self, store: Store
    ) -> None:
        """RS-1: the Worker keeps a stamped job's return value as its result, ignores the
        return value of a job without the stamp (acked and gone), and retries a job whose
        return value does not encode, as it would an exception (W-1)."""
        name = unique()
        stamped = store.queue(name, QueueOpts(result_ttl_s=LONG_S, max_attempts=1))
        plain = store.queue(name, QueueOpts(max_attempts=1))
        kept = stamped.enqueue_many([1, 2, 3])
        ignored = plain.enqueue(4)
        unencodable = stamped.enqueue("nan")

        def handler(job: Job) -> Any:
            if job.payload == "nan":
                return math.nan
            return {"doubled": 2 * job.payload}

        assert Worker(store, name, handler, concurrency=2).run_until_empty() == 5
        assert [info_of(stamped, i).result for i in kept] == [
            {"doubled": 2},
            {"doubled": 4},
            {"doubled": 6},
        ]
        assert stamped.get_job(ignored) is None
        dead = info_of(stamped, unencodable)
        assert dead.state is JobState.DEAD
        assert dead.last_error is not None and dead.last_error.startswith("InvalidArgument")

    @pytest.mark.clause("RS-1", "W-8")
    def test_the_worker_keeps_a_coroutine_handlers_result(self, store: Store) -> None:
        """RS-1 with W-8: what an async handler returns is awaited and kept."""
        q = _kept(store)
        job_id = q.enqueue(5)

        async def handler(job: Job) -> list[int]:
            return [job.payload, job.payload]

        assert Worker(store, q.name, handler).run_until_empty() == 1
        assert info_of(q, job_id).result == [5, 5]

    # ---------------------------------------------------------------- RS-2

    @pytest.mark.clause("RS-2")
    def test_result_is_none_until_the_job_finishes_and_for_unknown_ids(self, store: Store) -> None:
        """RS-2: None while pending, scheduled and processing, and for an unknown id; done
        with the value after the ack; finished_at is the ack's time."""
        q = _kept(store)
        job_id = q.enqueue("x")
        later = q.enqueue("later", EnqueueOpts(delay_s=LONG_S))
        assert q.result(job_id) is None
        assert q.result(later) is None
        job = claim_one(q)
        assert q.result(job_id) is None
        assert q.result(10**15) is None
        assert job.ack(result={"ok": True})
        got = q.result(job_id)
        assert isinstance(got, JobResult)
        assert (got.id, got.state, got.value, got.last_error) == (
            job_id,
            JobState.DONE,
            {"ok": True},
            None,
        )
        assert got.finished_at == info_of(q, job_id).finished_at

    @pytest.mark.clause("RS-2", "Q-11")
    def test_a_dead_job_reports_dead_with_its_error(self, store: Store) -> None:
        """RS-2: a job that died reports state dead, no value, its last_error and its time
        of death; with or without the stamp."""
        for q in (_kept(store), store.queue(unique())):
            job_id = q.enqueue("x")
            assert claim_one(q).fail("no luck")
            got = q.result(job_id)
            assert got is not None
            assert (got.state, got.value, got.last_error) == (JobState.DEAD, None, "no luck")
            assert got.finished_at == info_of(q, job_id).died_at

    @pytest.mark.clause("RS-2", "T-2")
    def test_result_reads_in_the_callers_transaction(self, store: Store) -> None:
        """RS-2: result(tx=...) reads in the caller's transaction: it sees that
        transaction's own ack."""
        q = _kept(store)
        job_id = q.enqueue("x")
        job = claim_one(q)
        with contextlib.suppress(_Rollback), store.transaction() as tx:
            assert job.ack(tx=tx, result="inside")
            got = q.result(job_id, tx=tx)
            assert got is not None and got.value == "inside"
            raise _Rollback
        assert q.result(job_id) is None

    @pytest.mark.clause("RS-2")
    def test_result_arguments_are_checked(self, store: Store) -> None:
        """RS-2: a bad id or wait_s is InvalidArgument; wait_s with tx too (waiting would hold
        the transaction)."""
        q = _kept(store)
        bad_ids: tuple[Any, ...] = ("1", 1.0, True, None, 2**63)
        for bad_id in bad_ids:
            with pytest.raises(InvalidArgument):
                q.result(bad_id)
        bad_waits: tuple[Any, ...] = (-1, math.nan, "1", None)
        for bad_wait in bad_waits:
            with pytest.raises(InvalidArgument):
                q.result(1, wait_s=bad_wait)
        with store.transaction() as tx, pytest.raises(InvalidArgument):
            q.result(1, wait_s=1, tx=tx)

    @pytest.mark.clause("RS-2", "Q-19")
    def test_a_blocked_result_wakes_on_the_finishing_commit(self, store: Store) -> None:
        """RS-2: result(wait_s=30) in another thread returns as soon as the ack commits,
        within the wake bound; a wait on a job that does not finish ends with None."""
        q = _kept(store)
        job_id = q.enqueue("x")
        job = claim_one(q)
        got: list[JobResult | None] = []
        waiter = threading.Thread(target=lambda: got.append(q.result(job_id, wait_s=30)))
        waiter.start()
        time.sleep(0.5)  # let it block
        assert not got, "result() returned before the job finished"
        assert job.ack(result="woken")
        acked = time.monotonic()
        waiter.join(60)
        assert time.monotonic() - acked < WAKE_BOUND_S
        assert got and got[0] is not None and got[0].value == "woken"

        unfinished = q.enqueue("never claimed")
        assert q.result(unfinished, wait_s=0.3) is None

    @pytest.mark.clause("RS-2", "Q-11")
    def test_a_blocked_result_sees_a_job_die(self, store: Store) -> None:
        """RS-2: a wait ends with state dead when the job dies instead of finishing, by
        fail or by a retry with no attempts left."""
        q = _kept(store, max_attempts=1)
        for how in ("fail", "retry"):
            job_id = q.enqueue(how)
            job = claim_one(q)
            got: list[JobResult | None] = []

            def wait(i: int = job_id, into: list[JobResult | None] = got) -> None:
                into.append(q.result(i, wait_s=30))

            waiter = threading.Thread(target=wait)
            waiter.start()
            time.sleep(0.3)
            assert job.fail("gave up") if how == "fail" else job.retry("gave up")
            waiter.join(60)
            assert got and got[0] is not None
            assert (got[0].state, got[0].last_error) == (JobState.DEAD, "gave up")

    @pytest.mark.clause("RS-2", "Q-19")
    @pytest.mark.cross_process
    @pytest.mark.requires(Capability.CROSS_PROCESS_WAKES)
    def test_a_result_blocked_in_another_process_wakes_on_the_ack(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """RS-2 across processes: a child blocks in result(wait_s=30); the ack here ends its
        wait within the wake bound, with the value."""
        q = _kept(store)
        job_id = q.enqueue("x")
        job = claim_one(q)
        _, report = signals()
        proc = spawn(_children_results.wait_for_result, store_factory, q.name, job_id, 30.0, report)
        try:
            assert report.get(timeout=120) == ("ready",)
            time.sleep(1.0)  # let the child block in its wait
            assert job.ack(result={"from": "parent"})
            acked = time.monotonic()
            outcome = report.get(timeout=60)
            received = time.monotonic()
        finally:
            reap([proc])
        assert outcome[0] == "result", outcome
        _, state, value, waited = outcome
        assert (state, value) == ("done", {"from": "parent"})
        assert waited >= 0.5, "the child's result() did not block"
        assert received - acked < WAKE_BOUND_S

    # ---------------------------------------------------------------- RS-3

    @pytest.mark.clause("RS-3", "Q-17")
    def test_sweep_removes_results_past_their_time_and_no_others(self, store: Store) -> None:
        """RS-3: sweep_expired counts the results it removes in SweepResult.results; results
        still within their time are never removed or counted, and another queue's sweep
        does not count this queue's."""
        brief = _kept(store, SHORT_TTL_S)
        lasting = store.queue(brief.name, QueueOpts(result_ttl_s=LONG_S))
        other = _kept(store, SHORT_TTL_S)
        short_ids = brief.enqueue_many([1, 2])
        long_id = lasting.enqueue(3)
        other.enqueue(4)
        assert brief.ack_batch(brief.claim_batch("w", 3), results=["a", "b", "c"]) == 3
        assert other.ack_batch(other.claim_batch("w", 1), results=["d"]) == 1
        first = brief.sweep_expired()
        assert first.results == 0, "a sweep removed results within their time"
        time.sleep(SHORT_TTL_S + 0.3)
        removed = brief.sweep_expired().results + brief.sweep_expired().results
        assert 0 <= removed <= len(short_ids)
        assert all(brief.get_job(i) is None for i in short_ids)
        kept = info_of(lasting, long_id)
        assert (kept.state, kept.result) == (JobState.DONE, "c")
        assert [i.id for i in brief.list_jobs(JobState.DONE)] == [long_id]
        assert (first.expired, first.purged, first.exhausted) == (0, 0, 0)

    @pytest.mark.clause("RS-3", "C-8")
    def test_kept_results_stay_out_of_the_claim_path(self, store: Store) -> None:
        """RS-3 with C-8: done jobs are not claimed, counted or listed as live; a claim on a
        queue holding many kept results takes the one pending job."""
        q = _kept(store)
        ids = q.enqueue_many(list(range(200)))
        jobs = q.claim_batch("w", 200)
        assert q.ack_batch(jobs, results=list(range(200))) == 200
        assert q.claim("w") is None
        assert counts(q) == (0, 0, 0, 0)
        fresh = q.enqueue("fresh")
        got = claim_one(q)
        assert got.id == fresh and got.id not in ids
        assert len(q.list_jobs(JobState.DONE, limit=1000)) == 200

    # --------------------------------------------------------- crash case

    @pytest.mark.clause("RS-1", "W-6")
    @kills_a_process
    def test_a_worker_killed_after_its_acks_committed_loses_no_result(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """RS-1: the result is written in the ack's transaction, so a worker process
        SIGKILLed once its acks committed (the results are visible here) loses none of them,
        and none of its jobs runs again."""
        q = _kept(store, visibility_timeout_s=2.0)
        ids = q.enqueue_many([1, 2, 3])
        results: MPQueue[Any] = multiprocessing.get_context("spawn").Queue()
        proc = spawn(_children_results.double_in_worker, store_factory, q.name, results)
        with killed_at_exit(proc):
            assert results.get(timeout=120) == ("ready",)
            for job_id in ids:
                got = q.result(job_id, wait_s=60)
                assert got is not None, f"job {job_id} never finished in the child"
            kill_hard(proc)
        with store_factory.open() as after:
            fresh = after.queue(q.name)
            values = [fresh.result(i) for i in ids]
            assert [v.value if v else None for v in values] == [
                {"doubled": 2},
                {"doubled": 4},
                {"doubled": 6},
            ]
            time.sleep(2.5)  # past the visibility timeout: nothing lapses back
            assert fresh.claim("rescuer") is None
            assert all(info_of(fresh, i).state is JobState.DONE for i in ids)
            assert eventually(lambda: fresh.stats().processing == 0)
