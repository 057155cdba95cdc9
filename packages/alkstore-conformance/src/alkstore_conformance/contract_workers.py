"""The workers' registry (O-5).

A running ``Worker`` keeps one row of its own in the store, refreshed every
``register_every_s`` (10 s by default; the tests use a fraction of a second)
with its per-minute counts of finished jobs by outcome, kept in memory
between refreshes. A clean stop deletes the row and flushes the last counts;
a worker killed hard leaves its row to go stale, and any refresh deletes
rows silent for an hour and counts older than seven days (the tests pass
shorter limits to ``report_worker`` to see it). The registry adds no write
per job: the tests count the settle transactions and the refreshes.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from multiprocessing.queues import Queue as MPQueue
from typing import Any

import pytest

from alkstore import (
    Capability,
    EnqueueOpts,
    Fail,
    InvalidArgument,
    Job,
    QueueOpts,
    Retry,
    Store,
    Worker,
    __version__,
)
from alkstore.types import WorkerCount, WorkerInfo

from . import _children_workers
from ._base import (
    ContractBase,
    eventually,
    kill_hard,
    killed_at_exit,
    kills_a_process,
    requires,
    spawn,
    unique,
)
from ._doubles import SettleStore
from ._factory import StoreFactory
from ._queue_helpers import Background

__all__ = ["WorkersContract"]

#: The refresh interval of the workers under test.
EVERY_S = 0.2


def _noop(job: Job) -> None:
    pass


def _row(store: Store, worker_id: str) -> WorkerInfo | None:
    return next((w for w in store.workers() if w.id == worker_id), None)


def _wait_row(store: Store, worker_id: str) -> WorkerInfo:
    """The worker's row, once it is there."""
    row = eventually(lambda: _row(store, worker_id))
    assert row is not None
    return row


def _seen_after(store: Store, worker_id: str, after: datetime) -> WorkerInfo | None:
    """The worker's row once its last_seen moved past *after*, else ``None``."""
    row = _row(store, worker_id)
    if row is None or row.last_seen is None or row.last_seen <= after:
        return None
    return row


def _totals(store: Store, worker_id: str) -> dict[tuple[str, str], int]:
    """The worker's stored counts, summed over minutes, by (queue, outcome)."""
    out: dict[tuple[str, str], int] = {}
    since = datetime.now(timezone.utc) - timedelta(hours=1)
    for c in store.worker_counts(since=since):
        if c.worker_id == worker_id:
            out[(c.queue, c.outcome)] = out.get((c.queue, c.outcome), 0) + c.n
    return out


@contextmanager
def _running(worker: Worker) -> Iterator[Background[None]]:
    """``worker.run(stop)`` in a thread; stopped, joined and checked at the end."""
    stop = threading.Event()
    run = Background(lambda: worker.run(stop), name="registered-worker")
    try:
        yield run
    finally:
        stop.set()
        returned = run.finished_within(30)
    assert returned, "Worker.run did not return after stop"
    run.result(0)


def _info(worker_id: str, queues: Sequence[str] = ("q",)) -> WorkerInfo:
    return WorkerInfo(
        worker_id, "host-a", 4242, tuple(queues), 3, datetime.now(timezone.utc), "9.9.9"
    )


class _ReportingStore(SettleStore):
    """A :class:`SettleStore` that also records each registry refresh."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.reports: list[tuple[bool, int]] = []

    def report_worker(
        self, info: WorkerInfo, counts: Sequence[WorkerCount] = (), **kw: Any
    ) -> None:
        self.inner.report_worker(info, counts, **kw)
        with self._lock:
            self.reports.append((bool(kw.get("gone", False)), sum(c.n for c in counts)))


@requires(Capability.QUEUES, Capability.WORKERS)
class WorkersContract(ContractBase):
    """The workers' registry: registration, refresh, stop, staleness, cost."""

    @pytest.mark.clause("O-5")
    def test_a_running_worker_is_registered_and_seen_by_another_store(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """O-5: while run() runs, another store handle on the database lists the worker
        with its id, host, pid, queues, concurrency, start, library version and last_seen."""
        names = [unique(), unique()]
        wid = unique("worker")
        worker = Worker(store, names, _noop, concurrency=3, worker_id=wid, register_every_s=EVERY_S)
        before = datetime.now(timezone.utc)
        with store_factory.open() as other, _running(worker):
            row = _wait_row(other, wid)
            assert row.queues == tuple(names)
            assert (row.concurrency, row.version) == (3, __version__)
            assert row.pid > 0 and row.host
            assert row.started_at.tzinfo is not None and row.last_seen is not None
            assert row.started_at >= before - timedelta(seconds=5)
            assert row.last_seen >= row.started_at - timedelta(seconds=5)

    @pytest.mark.clause("O-5", "O-1")
    def test_a_refresh_moves_last_seen_and_flushes_counts_by_outcome(self, store: Store) -> None:
        """O-5: each refresh moves last_seen on and adds the jobs finished since the last
        one to the worker's count of their minute, by queue and O-1 outcome."""
        q = store.queue(unique(), QueueOpts(max_attempts=1, backoff_base_s=0))
        q.enqueue_many(["ok", "ok", "ok", "fail", "dead"])
        r = store.queue(unique(), QueueOpts(max_attempts=3, backoff_base_s=0))
        r.enqueue("retry", EnqueueOpts(delay_s=0))
        wid = unique("worker")

        def handler(job: Job) -> None:
            if job.payload == "fail":
                raise Fail("no")
            if job.payload == "dead":
                raise RuntimeError("boom")
            if job.payload == "retry" and job.attempts == 1:
                raise Retry(delay_s=3600)

        worker = Worker(store, [q, r], handler, worker_id=wid, register_every_s=EVERY_S)
        with _running(worker):
            first = _wait_row(store, wid)
            assert first.last_seen is not None
            seen = first.last_seen
            want = {
                (q.name, "acked"): 3,
                (q.name, "failed"): 1,
                (q.name, "dead"): 1,
                (r.name, "retried"): 1,
            }
            eventually(lambda: _totals(store, wid) == want)
            later = eventually(lambda: _seen_after(store, wid, seen))
            assert later is not None
            assert later.started_at == first.started_at
        counts = [c for c in store.worker_counts() if c.worker_id == wid]
        assert all(c.minute.second == 0 and c.minute.microsecond == 0 for c in counts)
        assert all(c.minute.tzinfo is not None and c.n > 0 for c in counts)

    @pytest.mark.clause("O-5")
    def test_a_clean_stop_removes_the_row_and_flushes_the_last_counts(self, store: Store) -> None:
        """O-5: a stop deletes the worker's row; the counts of jobs finished after its last
        refresh are flushed with that deletion and survive it."""
        q = store.queue(unique())
        q.enqueue_many(list(range(4)))
        wid = unique("worker")
        # One refresh at the start, the next a minute away: only the stop flushes.
        worker = Worker(store, q, _noop, worker_id=wid, register_every_s=60)
        with _running(worker):
            _wait_row(store, wid)
            eventually(lambda: q.stats().pending == 0 and q.stats().processing == 0)
        assert _row(store, wid) is None
        assert _totals(store, wid) == {(q.name, "acked"): 4}

    @pytest.mark.clause("O-5")
    def test_counts_read_from_the_minute_of_since(self, store: Store) -> None:
        """O-5: worker_counts(since) returns the counts of since's minute and later, by
        minute; counts of one key reported twice are added up."""
        wid = unique("worker")
        now = datetime.now(timezone.utc).replace(second=30, microsecond=0)
        old = now - timedelta(minutes=10)
        store.report_worker(
            _info(wid),
            [WorkerCount(old, wid, "q", "acked", 2), WorkerCount(now, wid, "q", "acked", 1)],
        )
        store.report_worker(_info(wid), [WorkerCount(now, wid, "q", "acked", 4)])
        mine = [c for c in store.worker_counts(since=now) if c.worker_id == wid]
        assert [(c.minute, c.n) for c in mine] == [(now.replace(second=0), 5)]
        every = [c for c in store.worker_counts(since=old) if c.worker_id == wid]
        assert [c.n for c in every] == [2, 5]
        assert [c.n for c in store.worker_counts() if c.worker_id == wid] == [2, 5]

    @pytest.mark.clause("O-5")
    @pytest.mark.fresh_database
    def test_a_refresh_deletes_silent_workers_and_old_counts(self, store: Store) -> None:
        """O-5: the refresh itself deletes the rows of workers silent longer than the limit
        (an hour) and counts older than theirs (seven days); the refreshing worker's own row
        stays, and so do recent counts."""
        silent, fresh = unique("silent"), unique("fresh")
        now = datetime.now(timezone.utc)
        store.report_worker(
            _info(silent),
            [
                WorkerCount(now - timedelta(minutes=5), silent, "q", "acked", 7),
                WorkerCount(now, silent, "q", "acked", 1),
            ],
        )
        time.sleep(0.6)
        # Limits shorter than an hour and a week, so that the test need not wait.
        store.report_worker(_info(fresh), forget_after_s=0.5, keep_counts_s=120)
        assert _row(store, silent) is None
        assert _row(store, fresh) is not None
        left = [c.n for c in store.worker_counts(since=now - timedelta(hours=1))]
        assert left == [1]
        # A worker's own refresh never deletes its own row, whatever the limit.
        time.sleep(0.6)
        store.report_worker(_info(fresh), forget_after_s=0.5)
        assert _row(store, fresh) is not None

    @pytest.mark.clause("O-5")
    @pytest.mark.fresh_database  # its refresh deletes every worker silent for 0.4 s
    @kills_a_process
    def test_a_worker_killed_hard_leaves_a_row_that_goes_stale(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """O-5: a SIGKILLed worker removes nothing: its row stays with the last_seen of its
        last refresh, the store goes on working, and a later refresh of another worker
        deletes it once it has been silent long enough."""
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=2))
        ids = q.enqueue_many([1, 2])
        wid = unique("worker")
        report: MPQueue[Any] = multiprocessing.get_context("spawn").Queue()
        proc = spawn(
            _children_workers.registered_worker, store_factory, q.name, wid, EVERY_S, report
        )
        with killed_at_exit(proc):
            handled = {report.get(timeout=120), report.get(timeout=60)}
            assert handled == {("handled", i) for i in ids}, handled
            eventually(lambda: _totals(store, wid).get((q.name, "acked")) == 2, timeout_s=30)
            kill_hard(proc)
        row = _row(store, wid)
        assert row is not None and row.last_seen is not None
        time.sleep(4 * EVERY_S)
        again = _row(store, wid)
        assert again is not None and again.last_seen == row.last_seen
        assert _totals(store, wid) == {(q.name, "acked"): 2}
        store.report_worker(_info(unique("other")), forget_after_s=2 * EVERY_S)
        assert _row(store, wid) is None
        assert _totals(store, wid) == {(q.name, "acked"): 2}

    @pytest.mark.clause("O-5", "W-6")
    def test_the_registry_adds_no_write_per_job(self, store: Store) -> None:
        """O-5: every write of a registered worker is a settle that carries job outcomes
        (as without the registry) or one of its refreshes, whose number depends on time
        alone: two for a short run (register, stop) however many jobs ran."""
        q = store.queue(unique())
        ids = q.enqueue_many(list(range(60)))
        wid = unique("worker")
        watched = _ReportingStore(store)
        worker = Worker(watched.as_store(), q.name, _noop, worker_id=wid, register_every_s=3600)
        with _running(worker):
            eventually(lambda: sorted(watched.settled_ids()) == sorted(ids))
        assert all(s.job_ids for s in watched.settles)
        assert [gone for gone, _ in watched.reports] == [False, True]
        assert sum(n for _, n in watched.reports) == 60
        assert _totals(store, wid) == {(q.name, "acked"): 60}

    @pytest.mark.clause("O-5")
    def test_only_run_registers_and_none_opts_out(self, store: Store) -> None:
        """O-5: run_until_empty (a drain, not a running worker) and a worker made with
        register_every_s=None write no registry row."""
        q = store.queue(unique())
        q.enqueue_many([1, 2])
        watched = _ReportingStore(store)
        assert Worker(watched.as_store(), q.name, _noop).run_until_empty() == 2
        wid = unique("worker")
        worker = Worker(watched.as_store(), q.name, _noop, worker_id=wid, register_every_s=None)
        q.enqueue(3)
        with _running(worker):
            eventually(lambda: q.stats().pending == 0 and q.stats().processing == 0)
        assert watched.reports == []
        assert _row(store, wid) is None

    @pytest.mark.clause("O-5", "C-2")
    def test_bad_reports_and_options_are_refused_writing_nothing(self, store: Store) -> None:
        """O-5: a report that is not a WorkerInfo, a count of another worker or with an
        unknown outcome, and bad limits raise InvalidArgument and write nothing; so do a
        bad register_every_s and a naive since."""
        wid = unique("worker")
        now = datetime.now(timezone.utc)
        bad: list[tuple[Any, Any, dict[str, Any]]] = [
            ("not info", [], {}),
            (_info(wid), [WorkerCount(now, "someone-else", "q", "acked", 1)], {}),
            (_info(wid), [WorkerCount(now, wid, "q", "vanished", 1)], {}),
            (_info(wid), [WorkerCount(now, wid, "q", "acked", 0)], {}),
            (_info(wid), [WorkerCount(now.replace(tzinfo=None), wid, "q", "acked", 1)], {}),
            (_info(wid), [], {"forget_after_s": 0}),
            (_info(wid), [], {"keep_counts_s": -1}),
            (_info(wid), [], {"gone": "yes"}),
            (_info(wid, queues=()), [], {}),
            (WorkerInfo(wid, "h", 1, ("q",), 0, now, "v"), [], {}),
        ]
        for info, counts, kw in bad:
            with pytest.raises(InvalidArgument):
                store.report_worker(info, counts, **kw)
        assert _row(store, wid) is None and _totals(store, wid) == {}
        with pytest.raises(InvalidArgument):
            store.worker_counts(since=datetime.now())
        for every in (0, -1, float("nan"), "10"):
            with pytest.raises(InvalidArgument):
                Worker(store, unique(), _noop, register_every_s=every)  # type: ignore[arg-type]
