"""The engine seam, operation by operation (as River's ``riverdrivertest``).

The rest of the suite checks the public rules through the kit; when one
breaks, the engine author still has to find which statement is wrong. These
tests call each :class:`~alkstore.engine.seam.Executor` operation directly,
on the executor of a store the factory opens (``store.executor``), and check
its rows, so a failure names the operation. An engine that is not built on
the kit (its store has no ``executor``) skips them, and says so.

They speak the sync seam, so they run once, under the suite's sync face; the
async seam of the in-repo engines is the sync one run in threads
(:mod:`alkstore.engine.threaded`) or generated from the same source.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from alkstore import (
    Capability,
    InvalidArgument,
    JobState,
    LockInfo,
    QueueFull,
    QueueStats,
    Store,
    StoreClosed,
    SweepResult,
)
from alkstore.engine import (
    ClaimRow,
    Executor,
    Fence,
    Fire,
    Inserted,
    JobRow,
    NewJob,
    RateSpec,
    ScheduleRow,
    WakeBoard,
)

from ._base import ContractBase, eventually, mark_each_test, unique
from ._factory import StoreFactory

__all__ = ["SeamContract"]

SEAM = pytest.mark.sync_only("calls the sync Executor directly")
QUEUES = pytest.mark.requires(Capability.QUEUES)
STREAMS = pytest.mark.requires(Capability.STREAMS)
LOCKS = pytest.mark.requires(Capability.LOCKS)
RATES = pytest.mark.requires(Capability.RATE_LIMITS)
NOTES = pytest.mark.requires(Capability.NOTIFICATIONS)
SCHEDULES = pytest.mark.requires(Capability.SCHEDULER)
#: A visibility timeout no test outlives.
LONG_S = 300.0
#: Slack for comparing an engine timestamp with the test's clock (C-4).
CLOCK_SLACK = timedelta(seconds=5)


def new_job(payload: str = '"x"', **fields: Any) -> NewJob:
    """A :class:`NewJob` as the kit would pass it: encoded JSON payload,
    ready now, three attempts, a long visibility timeout."""
    base: dict[str, Any] = {
        "payload": payload,
        "priority": 0,
        "delay_s": 0.0,
        "run_at": None,
        "max_attempts": 3,
        "visibility_timeout_s": LONG_S,
        "backoff_base_s": 1.0,
        "dead_letter_retention_s": None,
        "expires_s": None,
    }
    base.update(fields)
    return NewJob(**base)


def fence(row: ClaimRow) -> Fence:
    return Fence(row.id, row.claim, row.group)


def near_now(stamp: datetime) -> bool:
    assert stamp.tzinfo is not None, f"{stamp!r} is naive"
    return abs(stamp - datetime.now(timezone.utc)) <= CLOCK_SLACK


class _Sink:
    """A :class:`~alkstore.engine.seam.NoteSink` that keeps what it gets."""

    def __init__(self, *channels: str) -> None:
        self._channels = frozenset(channels)
        self.got: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    @property
    def channels(self) -> frozenset[str]:
        return self._channels

    def deliver(self, channel: str, payload: str) -> None:
        with self._lock:
            self.got.append((channel, payload))


@mark_each_test(SEAM)
class SeamContract(ContractBase):
    """Every :class:`~alkstore.engine.seam.Executor` operation, directly."""

    @pytest.fixture
    def ex(self, store: Store) -> Executor[Any]:
        """The executor under the test's store."""
        executor: Executor[Any] | None = getattr(store, "executor", None)
        if executor is None:
            pytest.skip("the store has no executor: the engine is not built on the kit's seam")
        return executor

    def _claim(
        self, ex: Executor[Any], queue: str, n: int = 1, worker: str = "w"
    ) -> list[ClaimRow]:
        return ex.claim([queue], worker, n, None, False)

    def _one_claimed(self, ex: Executor[Any]) -> tuple[str, ClaimRow]:
        """A fresh queue holding one job, claimed: the queue's name and the claim."""
        q = unique()
        ex.insert_jobs(None, q, [new_job()], None)
        (row,) = self._claim(ex, q)
        return q, row

    # ------------------------------------------------------------ the store

    @pytest.mark.clause("C-7")
    def test_seam_store_properties(
        self, ex: Executor[Any], store: Store, store_factory: StoreFactory
    ) -> None:
        assert not ex.closed
        assert ex.url == store.url
        assert Capability.QUEUES in ex.capabilities or ex.capabilities == store.capabilities
        assert isinstance(ex.wakes, WakeBoard)
        fallback = ex.fallback_s()
        assert fallback is None or fallback > 0
        other = store_factory.open()
        try:
            other_ex: Executor[Any] = other.executor  # type: ignore[attr-defined]
            assert other_ex.store_id == ex.store_id, "two stores on one database"
        finally:
            other.close()
        ex.start_wakes()
        ex.start_wakes()  # idempotent

    @pytest.mark.clause("T-1")
    @QUEUES
    def test_seam_transaction_commits_or_rolls_back_what_joins_it(self, ex: Executor[Any]) -> None:
        q = unique()
        with ex.transaction() as tx:
            kept = ex.insert_jobs(ex.resolve_tx(tx), q, [new_job()], None)
        gone: list[Inserted] = []

        def rolled_back() -> None:
            with ex.transaction() as tx:
                gone.extend(ex.insert_jobs(ex.resolve_tx(tx), q, [new_job()], None))
                raise KeyError("roll back")

        with pytest.raises(KeyError):
            rolled_back()
        assert ex.get_job(q, kept[0].id) is not None
        assert ex.get_job(q, gone[0].id) is None

    @pytest.mark.clause("T-1", "T-2", "ST-3")
    def test_seam_resolve_tx_takes_a_transaction_and_refuses_the_rest(
        self, ex: Executor[Any], store_factory: StoreFactory
    ) -> None:
        with ex.transaction() as tx:
            resolved = ex.resolve_tx(tx)
            assert resolved is not None
        for wrong in (object(), "tx", 42):
            with pytest.raises(InvalidArgument):
                ex.resolve_tx(wrong)
        other = store_factory.open()
        other_ex: Executor[Any] = other.executor  # type: ignore[attr-defined]
        other.close()
        with pytest.raises(StoreClosed):
            other_ex.resolve_tx(object())  # closed first, whatever is passed

    # --------------------------------------------------------------- queues

    @pytest.mark.clause("Q-1", "Q-23", "Q-24")
    @QUEUES
    def test_seam_insert_jobs(self, ex: Executor[Any]) -> None:
        q = unique()
        rows = ex.insert_jobs(None, q, [new_job('"a"'), new_job('"b"')], None)
        assert all(isinstance(r, Inserted) and r.created for r in rows)
        assert rows[0].id < rows[1].id
        first = ex.insert_jobs(None, q, [new_job('"u"', unique_key="k")], None)
        again = ex.insert_jobs(None, q, [new_job('"v"', unique_key="k")], None)
        assert first[0].created and not again[0].created and again[0].id == first[0].id
        with pytest.raises(QueueFull):
            ex.insert_jobs(None, q, [new_job()], 3)
        assert ex.queue_stats(q)[0].pending == 3, "a refused insert writes nothing"

    @pytest.mark.clause("Q-2", "Q-4")
    @QUEUES
    def test_seam_claim(self, ex: Executor[Any]) -> None:
        q = unique()
        low, high = ex.insert_jobs(None, q, [new_job('"low"')], None) + ex.insert_jobs(
            None, q, [new_job('"high"', priority=5)], None
        )
        rows = self._claim(ex, q, n=5, worker="w1")
        assert sorted(r.id for r in rows) == [low.id, high.id]
        by_id = {r.id: r for r in rows}
        row = by_id[high.id]
        assert (row.queue, row.payload, row.priority, row.attempts) == (q, '"high"', 5, 1)
        assert row.claim >= 1 and row.max_attempts == 3
        assert row.visibility_timeout_s == LONG_S and row.backoff_base_s == 1.0
        assert near_now(row.claimed_at) and row.ready_at <= row.claimed_at
        assert abs(row.deadline - row.claimed_at - timedelta(seconds=LONG_S)) < timedelta(seconds=1)
        assert self._claim(ex, q) == [], "claimed rows are not claimed again"
        info = ex.get_job(q, high.id)
        assert info is not None and (info.state, info.worker_id) == ("processing", "w1")

    @pytest.mark.clause("Q-2", "Q-19")
    @QUEUES
    def test_seam_next_ready(self, ex: Executor[Any]) -> None:
        q = unique()
        assert ex.next_ready([q]) is None
        ex.insert_jobs(None, q, [new_job(delay_s=30.0)], None)
        later = ex.next_ready([q])
        assert later is not None and 20.0 < later <= 30.5
        ex.insert_jobs(None, q, [new_job()], None)
        now = ex.next_ready([q])
        assert now is not None and now <= 0.5

    @pytest.mark.clause("Q-7", "Q-9")
    @QUEUES
    def test_seam_ack(self, ex: Executor[Any]) -> None:
        q = unique()
        ex.insert_jobs(None, q, [new_job(), new_job()], None)
        a, b = self._claim(ex, q, n=2)
        stale = Fence(b.id, b.claim + 1, b.group)
        assert ex.ack(None, [fence(a), stale]) == [True, False]
        assert ex.get_job(q, a.id) is None
        assert ex.get_job(q, b.id) is not None
        assert ex.ack(None, [fence(a)]) == [False], "an ack lands once"

    @pytest.mark.clause("Q-10")
    @QUEUES
    def test_seam_retry(self, ex: Executor[Any]) -> None:
        q = unique()
        ex.insert_jobs(None, q, [new_job()], None)
        ex.insert_jobs(None, q, [new_job(max_attempts=1)], None)
        again, last = sorted(self._claim(ex, q, n=2), key=lambda r: r.id)
        assert ex.retry(None, fence(again), 60.0, "later")
        info = ex.get_job(q, again.id)
        assert info is not None and (info.state, info.attempts) == ("pending", 1)
        assert info.run_at - again.claimed_at >= timedelta(seconds=59)
        assert ex.retry(None, fence(last), 0.0, "spent")
        info = ex.get_job(q, last.id)
        assert info is not None and (info.state, info.last_error) == ("dead", "spent")
        assert not ex.retry(None, fence(again), 0.0, "again"), "a settled claim is refused"

    @pytest.mark.clause("Q-11")
    @QUEUES
    def test_seam_fail(self, ex: Executor[Any]) -> None:
        q, row = self._one_claimed(ex)
        assert ex.fail(None, fence(row), "refused")
        info = ex.get_job(q, row.id)
        assert info is not None and (info.state, info.last_error) == ("dead", "refused")
        assert info.died_at is not None and near_now(info.died_at)
        assert not ex.fail(None, fence(row), "twice")

    @pytest.mark.clause("Q-26")
    @QUEUES
    def test_seam_release(self, ex: Executor[Any]) -> None:
        q, row = self._one_claimed(ex)
        assert ex.release(fence(row))
        info = ex.get_job(q, row.id)
        assert info is not None and (info.state, info.attempts) == ("pending", 0)
        (again,) = self._claim(ex, q)
        assert again.id == row.id and again.claim > row.claim and again.attempts == 1
        assert not ex.release(fence(row)), "the old claim is gone"

    @pytest.mark.clause("Q-8")
    @QUEUES
    def test_seam_heartbeat(self, ex: Executor[Any]) -> None:
        _, row = self._one_claimed(ex)
        deadline = ex.heartbeat(fence(row), 1000.0)
        assert deadline is not None and deadline > row.deadline
        shorter = ex.heartbeat(fence(row), 50.0)
        assert shorter is not None and shorter < deadline, "from now, even when shorter"
        assert ex.ack(None, [fence(row)]) == [True]
        assert ex.heartbeat(fence(row), 10.0) is None

    @pytest.mark.clause("Q-28")
    @pytest.mark.requires(Capability.QUEUES, Capability.PROGRESS)
    def test_seam_progress(self, ex: Executor[Any]) -> None:
        q, row = self._one_claimed(ex)
        assert row.progress is None
        assert ex.progress(None, fence(row), '{"step":1}')
        info = ex.get_job(q, row.id)
        assert info is not None and info.progress == '{"step":1}'
        assert info.deadline == row.deadline, "a checkpoint moves no deadline"
        assert ex.retry(None, fence(row), 0.0, "again")
        (again,) = self._claim(ex, q)
        assert again.id == row.id and again.progress == '{"step":1}', "from the claim itself"
        assert not ex.progress(None, fence(row), '{"step":9}'), "the old claim is gone"
        assert ex.progress(None, fence(again), None)
        info = ex.get_job(q, row.id)
        assert info is not None and info.progress is None
        assert ex.progress(None, fence(again), '"last"')
        assert ex.fail(None, fence(again), "dead")
        info = ex.get_job(q, row.id)
        assert info is not None and (info.state, info.progress) == ("dead", '"last"')
        assert not ex.progress(None, fence(again), '"late"')

    @pytest.mark.clause("Q-13")
    @QUEUES
    def test_seam_cancel(self, ex: Executor[Any]) -> None:
        q = unique()
        pending, processing = ex.insert_jobs(None, q, [new_job(), new_job()], None)
        self._claim(ex, q)
        assert ex.cancel(None, q, pending.id)
        assert ex.cancel(None, q, processing.id)
        assert not ex.cancel(None, q, pending.id)
        assert not ex.cancel(None, unique(), processing.id), "another queue's id"
        assert ex.queue_stats(q)[0] == QueueStats(q, 0, 0, 0, 0)

    @pytest.mark.clause("Q-27")
    @pytest.mark.requires(Capability.QUEUES, Capability.PAUSE)
    def test_seam_set_paused_and_is_paused(self, ex: Executor[Any]) -> None:
        q, other = unique(), unique()
        ex.insert_jobs(None, q, [new_job()], None)
        ex.insert_jobs(None, other, [new_job()], None)
        assert ex.set_paused(None, q, True) is True
        assert ex.set_paused(None, q, True) is False
        assert ex.is_paused(q) is True and ex.is_paused(other) is False
        assert ex.claim([q], "w", 5, None, False) == []
        assert ex.claim([q], "w", 5, None, True) == []
        assert ex.next_ready([q]) is None
        assert [r.queue for r in ex.claim([q, other], "w", 5, None, False)] == [other]
        assert ex.queue_stats(q)[0].paused is True
        assert ex.set_paused(None, q, False) is True
        assert ex.set_paused(None, q, False) is False
        ready = ex.next_ready([q])
        assert ready is not None and ready <= 0
        assert len(self._claim(ex, q)) == 1

    @pytest.mark.clause("O-6")
    @pytest.mark.requires(Capability.QUEUES, Capability.RUN_NOW)
    def test_seam_run_now(self, ex: Executor[Any]) -> None:
        q = unique()
        (later,) = ex.insert_jobs(None, q, [new_job(delay_s=3600.0)], None)
        (claimed,) = ex.insert_jobs(None, q, [new_job()], None)
        assert [r.id for r in self._claim(ex, q)] == [claimed.id]
        assert self._claim(ex, q) == []
        assert not ex.run_now(None, q, claimed.id), "a processing job"
        assert not ex.run_now(None, unique(), later.id), "another queue's id"
        assert ex.run_now(None, q, later.id)
        row = ex.get_job(q, later.id)
        assert row is not None and row.run_at <= datetime.now(timezone.utc) + CLOCK_SLACK
        assert [r.id for r in self._claim(ex, q)] == [later.id]

    @pytest.mark.clause("Q-14")
    @QUEUES
    def test_seam_get_job(self, ex: Executor[Any]) -> None:
        q = unique()
        (ins,) = ex.insert_jobs(
            None,
            q,
            [new_job('{"k": 1}', priority=2, dead_letter_retention_s=60.0, expires_s=600.0)],
            None,
        )
        row = ex.get_job(q, ins.id)
        assert isinstance(row, JobRow)
        assert (row.id, row.queue, row.state, row.payload) == (ins.id, q, "pending", '{"k": 1}')
        assert (row.priority, row.attempts, row.max_attempts) == (2, 0, 3)
        assert (row.visibility_timeout_s, row.backoff_base_s) == (LONG_S, 1.0)
        assert row.dead_letter_retention_s == 60.0
        assert row.expires_at is not None and row.expires_at > row.created_at
        assert near_now(row.created_at) and row.run_at >= row.created_at - timedelta(seconds=1)
        assert (row.claimed_at, row.deadline, row.worker_id) == (None, None, None)
        assert ex.get_job(q, ins.id + 1_000_000) is None
        assert ex.get_job(unique(), ins.id) is None

    @pytest.mark.clause("Q-14")
    @QUEUES
    def test_seam_list_jobs(self, ex: Executor[Any]) -> None:
        q = unique()
        ids = [r.id for r in ex.insert_jobs(None, q, [new_job() for _ in range(5)], None)]
        (claimed,) = self._claim(ex, q)
        pending = [i for i in ids if i != claimed.id]
        assert [r.id for r in ex.list_jobs(q, JobState.PENDING, 100, 0)] == pending
        assert [r.id for r in ex.list_jobs(q, JobState.PENDING, 2, pending[0])] == pending[1:3]
        assert [r.id for r in ex.list_jobs(q, JobState.PROCESSING, 100, 0)] == [claimed.id]
        assert ex.list_jobs(q, JobState.DEAD, 100, 0) == []

    @pytest.mark.clause("Q-14")
    @QUEUES
    def test_seam_queue_stats(self, ex: Executor[Any]) -> None:
        q, empty = unique(), unique()
        ex.insert_jobs(None, q, [new_job(), new_job()], None)
        ex.insert_jobs(None, q, [new_job(delay_s=60.0)], None)
        (row,) = self._claim(ex, q)
        assert ex.fail(None, fence(row), "x")
        ex.insert_jobs(None, q, [new_job()], None)
        self._claim(ex, q)
        (stats,) = ex.queue_stats(q)
        assert (stats.queue, stats.pending, stats.scheduled) == (q, 1, 1)
        assert (stats.processing, stats.dead) == (1, 1)
        assert ex.queue_stats(empty) == [QueueStats(empty, 0, 0, 0, 0)]
        assert q in {s.queue for s in ex.queue_stats(None)}
        assert empty not in {s.queue for s in ex.queue_stats(None)}

    @pytest.mark.clause("Q-15", "Q-16")
    @QUEUES
    def test_seam_sweep(self, ex: Executor[Any]) -> None:
        q = unique()
        ex.insert_jobs(None, q, [new_job(expires_s=0.05)], None)
        ex.insert_jobs(None, q, [new_job()], None)
        time.sleep(0.2)
        result = ex.sweep(q)
        assert isinstance(result, SweepResult) and result.expired == 1
        dead = ex.list_jobs(q, JobState.DEAD, 10, 0)
        assert [d.last_error for d in dead] == ["expired"]
        assert ex.sweep(q) == SweepResult(), "a second sweep finds nothing"

    @pytest.mark.clause("Q-21")
    @QUEUES
    def test_seam_redrive(self, ex: Executor[Any]) -> None:
        q = unique()
        ex.insert_jobs(None, q, [new_job(), new_job()], None)
        a, b = sorted(self._claim(ex, q, n=2), key=lambda r: r.id)
        assert ex.fail(None, fence(a), "x") and ex.fail(None, fence(b), "y")
        assert ex.redrive(None, q, []) == 0
        assert ex.redrive(None, q, [a.id]) == 1
        info = ex.get_job(q, a.id)
        assert info is not None and (info.state, info.attempts, info.last_error) == (
            "pending",
            0,
            None,
        )
        assert ex.redrive(None, q, None) == 1
        assert ex.queue_stats(q)[0].dead == 0

    @pytest.mark.clause("Q-22")
    @QUEUES
    def test_seam_purge_dead(self, ex: Executor[Any]) -> None:
        q = unique()
        ex.insert_jobs(None, q, [new_job(), new_job(), new_job()], None)
        rows = sorted(self._claim(ex, q, n=3), key=lambda r: r.id)
        for row in rows:
            assert ex.fail(None, fence(row), "x")
        assert ex.purge_dead(None, q, [rows[0].id], None) == 1
        assert ex.purge_dead(None, q, None, 3600.0) == 0, "none died an hour ago"
        assert ex.purge_dead(None, q, None, None) == 2
        assert ex.get_job(q, rows[1].id) is None

    # -------------------------------------------------------------- streams

    @pytest.mark.clause("S-1", "S-2")
    @STREAMS
    def test_seam_publish_and_read_events(self, ex: Executor[Any]) -> None:
        s = unique("s")
        first = ex.publish(None, s, "k", '"one"')
        second = ex.publish(None, s, None, '"two"')
        assert second > first
        events = ex.read_events(s, 0, 10)
        assert [(e.offset, e.key, e.payload) for e in events] == [
            (first, "k", '"one"'),
            (second, None, '"two"'),
        ]
        assert near_now(events[0].created_at)
        assert [e.offset for e in ex.read_events(s, first, 10)] == [second]
        assert len(ex.read_events(s, 0, 1)) == 1
        assert ex.has_event_after(s, first) and not ex.has_event_after(s, second)

    @pytest.mark.clause("S-3")
    @STREAMS
    def test_seam_offsets(self, ex: Executor[Any]) -> None:
        s = unique("s")
        offset = ex.publish(None, s, None, '"e"')
        assert ex.get_offset(s, "c") == 0
        assert ex.commit_offset(s, "c", offset)
        assert ex.get_offset(s, "c") == offset
        assert ex.get_offset(s, "other") == 0

    @pytest.mark.clause("S-1", "O-4")
    @STREAMS
    def test_seam_trim_and_stream_stats(self, ex: Executor[Any]) -> None:
        s = unique("s")
        offsets = [ex.publish(None, s, None, f'"{i}"') for i in range(4)]
        ex.commit_offset(s, "c", offsets[1])
        assert ex.trim(s, offsets[2]) == 2
        assert [e.offset for e in ex.read_events(s, 0, 10)] == offsets[2:]
        (stats,) = [st for st in ex.stream_stats() if st.stream == s]
        assert (stats.last_offset, stats.events) == (offsets[-1], 2)
        assert [(c.consumer, c.offset) for c in stats.consumers] == [("c", offsets[1])]

    # ---------------------------------------------------------------- locks

    @pytest.mark.clause("L-1", "L-3", "L-4")
    @LOCKS
    def test_seam_locks(self, ex: Executor[Any]) -> None:
        name = unique("lock")
        got = ex.acquire_lock(name, "a", 60.0)
        assert got is not None
        token, expires = got
        assert near_now(expires - timedelta(seconds=60))
        assert ex.acquire_lock(name, "b", 60.0) is None, "held by another owner"
        renewed = ex.renew_lock(name, "a", token, 120.0)
        assert renewed is not None and renewed > expires
        assert ex.renew_lock(name, "b", token, 120.0) is None
        held = [h for h in ex.held_locks() if h.name == name]
        assert held == [LockInfo(name, "a", token, renewed)]
        assert not ex.release_lock(name, "a", token + 1), "a stale token"
        assert ex.release_lock(name, "a", token)
        again = ex.acquire_lock(name, "b", 60.0)
        assert again is not None and again[0] > token, "tokens only grow"

    @pytest.mark.clause("O-5")
    @pytest.mark.requires(Capability.WORKERS)
    @pytest.mark.fresh_database  # its refreshes delete every worker silent for 0.2 s
    def test_seam_report_worker_list_workers_worker_counts(self, ex: Executor[Any]) -> None:
        from alkstore.types import WorkerCount, WorkerInfo

        wid, other = unique("worker"), unique("worker")
        start = datetime.now(timezone.utc)
        minute = start.replace(second=0, microsecond=0)
        info = WorkerInfo(wid, "h", 1, ("a", "b"), 2, start, "v1")
        counts = [WorkerCount(minute, wid, "a", "acked", 3)]
        ex.report_worker(info, counts, False, 3600.0, 604800.0)
        ex.report_worker(info, counts, False, 3600.0, 604800.0)
        (row,) = [w for w in ex.list_workers(3600.0) if w.id == wid]
        assert (row.host, row.pid, row.queues, row.concurrency, row.version) == (
            "h",
            1,
            ("a", "b"),
            2,
            "v1",
        )
        assert row.started_at == start and row.last_seen is not None and near_now(row.last_seen)
        mine = [c for c in ex.worker_counts(minute) if c.worker_id == wid]
        assert mine == [WorkerCount(minute, wid, "a", "acked", 6)], "counts of one key add up"
        old = WorkerCount(minute - timedelta(hours=1), wid, "a", "dead", 1)
        ex.report_worker(info, [old], True, 3600.0, 60.0)
        assert [w for w in ex.list_workers(3600.0) if w.id == wid] == [], "gone: row deleted"
        mine = [c for c in ex.worker_counts(minute - timedelta(hours=2)) if c.worker_id == wid]
        assert [c.n for c in mine] == [6], "a count past keep_counts_s is not stored"
        time.sleep(0.3)
        ex.report_worker(
            WorkerInfo(other, "h", 2, ("a",), 1, start, "v1"), [], False, 0.2, 604800.0
        )
        ex.report_worker(info, [], False, 3600.0, 604800.0)
        time.sleep(0.3)
        ex.report_worker(info, [], False, 0.2, 604800.0)
        assert [w.id for w in ex.list_workers(3600.0) if w.id in (wid, other)] == [wid]
        assert [w.id for w in ex.list_workers(0.1) if w.id in (wid, other)] == [wid]

    @pytest.mark.clause("R-1")
    @RATES
    def test_seam_acquire_rate(self, ex: Executor[Any]) -> None:
        rate = RateSpec(unique("rate"), 30.0, 2)
        assert ex.acquire_rate(rate, 2) == 0.0
        wait = ex.acquire_rate(rate, 1)
        assert 0.0 < wait <= 30.5, "the burst is spent: the next unit is a gap away"
        assert ex.acquire_rate(rate, 1) > 0.0, "a refused request takes nothing"

    # -------------------------------------------------------- notifications

    @pytest.mark.clause("N-1", "N-2")
    @NOTES
    def test_seam_notify_subscribe_unsubscribe(self, ex: Executor[Any]) -> None:
        channel = unique("ch")
        sink = _Sink(channel)
        ex.subscribe(sink)
        try:
            ex.notify(None, channel, "one")
            with ex.transaction() as tx:
                ex.notify(ex.resolve_tx(tx), channel, "two")

            def rolled_back() -> None:
                with ex.transaction() as tx:
                    ex.notify(ex.resolve_tx(tx), channel, "rolled back")
                    raise KeyError("roll back")

            with pytest.raises(KeyError):
                rolled_back()
            ex.notify(None, unique("ch"), "elsewhere")
            eventually(lambda: len(sink.got) >= 2)
        finally:
            ex.unsubscribe(sink)
        time.sleep(0.2)
        assert sink.got == [(channel, "one"), (channel, "two")], "in commit order, once"

    # ------------------------------------------------------------ schedules

    @pytest.mark.clause("C-4")
    def test_seam_clock(self, ex: Executor[Any]) -> None:
        first = ex.clock()
        assert near_now(first)
        assert ex.clock() >= first

    @pytest.mark.clause("SC-2", "SC-4")
    @SCHEDULES
    def test_seam_schedules_upsert_list_delete(self, ex: Executor[Any]) -> None:
        name = unique("sched")
        at = ex.clock() + timedelta(hours=1)
        row = ScheduleRow(name, "every 1h", unique(), '"tick"', None, "UTC", at)
        stored = ex.upsert_schedule(row)
        assert (stored.name, stored.spec, stored.next_fire_at) == (name, "every 1h", at)
        kept = ex.upsert_schedule(
            ScheduleRow(name, "every 1h", row.queue, '"new"', None, "UTC", at + timedelta(hours=5))
        )
        assert kept.next_fire_at == at, "same spec and zone: the stored next fire stays"
        assert kept.payload == '"new"'
        assert [s.name for s in ex.list_schedules() if s.name == name] == [name]
        until = ex.seconds_to_next_fire()
        assert until is not None and until <= 3600.5
        assert ex.delete_schedule(name)
        assert not ex.delete_schedule(name)
        assert name not in {s.name for s in ex.list_schedules()}

    @pytest.mark.clause("SC-3")
    @SCHEDULES
    def test_seam_due_and_fire_schedule(self, ex: Executor[Any]) -> None:
        name, q = unique("sched"), unique()
        due_at = ex.clock() - timedelta(seconds=1)
        ex.upsert_schedule(ScheduleRow(name, "every 1h", q, '"tick"', None, "UTC", due_at))
        now, due = ex.due_schedules()
        assert near_now(now)
        (row,) = [r for r in due if r.name == name]
        next_at = due_at + timedelta(hours=1)
        assert ex.fire_schedule(Fire(name, row.next_fire_at, due_at, next_at, q, new_job('"tick"')))
        assert not ex.fire_schedule(Fire(name, row.next_fire_at, due_at, next_at, q, new_job())), (
            "the compare-and-set fires once"
        )
        assert ex.queue_stats(q)[0].pending == 1
        (after,) = [s for s in ex.list_schedules() if s.name == name]
        assert after.next_fire_at == next_at and after.last_fire_at == due_at
        assert name not in {r.name for r in ex.due_schedules()[1]}
