"""The outbox (Q-20).

An outbox is a queue on the reserved name ``__alkstore.outbox.<name>`` with
the fixed opts 60 s / 5 / 5 s; ``put`` joins the caller's transaction and
``run`` delivers, acks on return and retries by the backoff curve on an
exception. The curve with a 5 s base makes the second try wait 2.5-5 s and the
third 5-10 s, so the retry test waits for one real retry and checks the
window of the next one without waiting it out.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from alkstore import (
    Capability,
    InvalidArgument,
    JobInfo,
    JobState,
    QueueOpts,
    ReservedName,
    Store,
)

from ._base import STOP_WITHIN_S, ContractBase, StoppableCall, eventually, unique

#: The reserved prefix of outbox backing queues (Q-20).
OUTBOX_PREFIX = "__alkstore.outbox."
#: The fixed opts of every outbox's backing queue (Q-20).
OUTBOX_OPTS = QueueOpts(visibility_timeout_s=60, max_attempts=5, backoff_base_s=5)
#: ``run`` honours ``stop`` within about half a second; this is the generous
#: bound for a loaded machine.
#: Slack on the retry windows for the time between a claim and its retry.
WINDOW_SLACK_S = 1.0


class _Boom(Exception):
    """Raised inside a transaction to roll it back, or by a failing delivery."""


class _Delivery:
    """A ``deliver`` callable that records every call and fails the first
    ``failures[key]`` calls of each payload ``{"k": key}``."""

    def __init__(self, failures: dict[str, int] | None = None) -> None:
        self.calls: list[tuple[Any, float]] = []
        self._failures = dict(failures or {})
        self._lock = threading.Lock()
        self.probe: Callable[[], object] | None = None
        self.probed: list[object] = []

    def __call__(self, payload: Any) -> None:
        with self._lock:
            self.calls.append((payload, time.monotonic()))
            if self.probe is not None:
                self.probed.append(self.probe())
            key = payload.get("k") if isinstance(payload, dict) else None
            if key is not None and self._failures.get(key, 0) > 0:
                self._failures[key] -= 1
                raise _Boom(f"delivery of {key} failed")

    def payloads(self) -> list[Any]:
        with self._lock:
            return [p for p, _ in self.calls]

    def times_of(self, key: str) -> list[float]:
        with self._lock:
            return [t for p, t in self.calls if isinstance(p, dict) and p.get("k") == key]


def _running(store: Store, name: str, deliver: _Delivery, **kwargs: Any) -> StoppableCall:
    """``outbox.run(deliver, stop=...)`` in a daemon thread; leaving the block
    stops and joins it. ``halt()`` returns how long ``run`` took to return
    after ``stop`` was set; ``healthy()`` fails the test if ``run`` raised."""
    outbox = store.outbox(name)
    return StoppableCall(lambda stop: outbox.run(deliver, stop=stop, **kwargs))


def _secs(delta: timedelta) -> float:
    return delta / timedelta(seconds=1)


def _check_retry_window(info: JobInfo | None, attempts: int, slack_s: float) -> None:
    """A delivery that raised on try *attempts* left the job pending, to run
    again after ``backoff.delay(attempts, 5)``: within ``[t/2, t]`` of its
    retry, ``t = 5 * 2 ** (attempts - 1)`` (B-1, Q-10). The window is measured
    from the claim (engine time), which precedes the retry by at most
    *slack_s*."""
    assert info is not None
    assert info.state is JobState.PENDING
    assert info.attempts == attempts
    assert info.last_error is None and info.died_at is None
    assert info.claimed_at is not None
    top = 5.0 * 2 ** (attempts - 1)
    waits = _secs(info.run_at - info.claimed_at)
    assert top / 2 - 0.002 <= waits <= top + slack_s, (attempts, waits)


class OutboxContract(ContractBase):
    """The outbox (Q-20)."""

    @pytest.mark.clause("Q-20", "Q-1")
    @pytest.mark.requires(Capability.OUTBOX)
    def test_outbox_is_a_reserved_queue_with_fixed_stamps(self, store: Store) -> None:
        name = unique("ob")
        outbox = store.outbox(name)
        assert outbox.name == name
        assert outbox.queue.name == OUTBOX_PREFIX + name
        assert outbox.queue.opts == OUTBOX_OPTS
        job_id = outbox.put({"to": "a@example.com"})
        # Another handle on the same outbox sees the same row.
        info = store.outbox(name).queue.get_job(job_id)
        assert info is not None
        assert info.queue == OUTBOX_PREFIX + name
        assert info.state is JobState.PENDING
        assert info.payload == {"to": "a@example.com"}
        assert info.attempts == 0
        assert info.visibility_timeout_s == 60
        assert info.max_attempts == 5
        assert info.backoff_base_s == 5
        assert info.dead_letter_retention_s is None
        assert info.expires_at is None

    @pytest.mark.clause("Q-20", "C-2")
    @pytest.mark.requires(Capability.OUTBOX, Capability.QUEUES)
    def test_outbox_backing_queue_name_is_refused_to_consumers(self, store: Store) -> None:
        outbox = store.outbox("x")
        for reserved in ("__alkstore.outbox.x", OUTBOX_PREFIX + unique("ob"), "__alkstore.outbox."):
            with pytest.raises(ReservedName):
                store.queue(reserved)
        with pytest.raises(ReservedName):
            store.outbox("__alkstore.x")
        # A plain queue called "x" is not the outbox "x".
        plain = store.queue("x")
        plain_id = plain.enqueue("plain")
        outbox_id = outbox.put("outbox")
        assert outbox.queue.get_job(plain_id) is None or plain_id == outbox_id
        assert [j.payload for j in outbox.queue.list_jobs(JobState.PENDING)] == ["outbox"]
        assert [j.payload for j in plain.list_jobs(JobState.PENDING)] == ["plain"]

    @pytest.mark.clause("Q-20", "C-1", "C-3")
    @pytest.mark.requires(Capability.OUTBOX)
    def test_outbox_bad_names_and_payloads_raise_invalid_argument(self, store: Store) -> None:
        bad_names: list[Any] = ["", "x" * 201, "nul\x00byte", "line\nbreak", None, 42, b"x"]
        for bad in bad_names:
            with pytest.raises(InvalidArgument):
                store.outbox(bad)
        # The longest consumer name works, though its backing queue is longer.
        long_name = "o" * 200
        long_box = store.outbox(long_name)
        assert long_box.queue.name == OUTBOX_PREFIX + long_name
        job_id = long_box.put([1, 2])
        info = long_box.queue.get_job(job_id)
        assert info is not None and info.payload == [1, 2]
        outbox = store.outbox(unique("ob"))
        for payload in (float("nan"), {"set": {1}}, object()):
            with pytest.raises(InvalidArgument):
                outbox.put(payload)
        stats = outbox.queue.stats()
        assert (stats.pending, stats.scheduled, stats.processing, stats.dead) == (0, 0, 0, 0)

    @pytest.mark.clause("Q-20", "T-1")
    @pytest.mark.requires(Capability.OUTBOX)
    def test_outbox_put_in_transaction_delivers_on_commit_never_on_rollback(
        self, store: Store
    ) -> None:
        name = unique("ob")
        outbox = store.outbox(name)
        with contextlib.suppress(_Boom), store.transaction() as tx:
            outbox.put({"k": "rolled-back"}, tx=tx)
            raise _Boom
        with store.transaction() as tx:
            committed = outbox.put({"k": "committed"}, tx=tx)
        assert outbox.queue.stats().pending == 1
        deliver = _Delivery()
        with _running(store, name, deliver) as running:
            eventually(lambda: running.healthy() and deliver.payloads())
            eventually(lambda: outbox.queue.get_job(committed) is None)
            time.sleep(0.3)  # time to deliver anything else, were there any
        assert deliver.payloads() == [{"k": "committed"}]

    @pytest.mark.clause("Q-20", "Q-9")
    @pytest.mark.requires(Capability.OUTBOX)
    def test_outbox_run_delivers_each_payload_in_order_and_acks(self, store: Store) -> None:
        name = unique("ob")
        outbox = store.outbox(name)
        payloads: list[Any] = [{"n": 1}, None, "text", [1, [2]], {"n": 5}]
        ids = [outbox.put(p) for p in payloads]
        deliver = _Delivery()

        def processing() -> list[tuple[int, int, float, str | None]]:
            return [
                (j.id, j.attempts, j.visibility_timeout_s, j.worker_id)
                for j in outbox.queue.list_jobs(JobState.PROCESSING)
            ]

        deliver.probe = processing
        with _running(store, name, deliver, worker_id="outbox-worker") as running:
            eventually(lambda: running.healthy() and len(deliver.payloads()) == len(payloads))
            eventually(lambda: outbox.queue.stats().processing == 0)
        assert deliver.payloads() == payloads
        # Each was delivered under its own claim: one job processing, first try.
        for job_id, seen in zip(ids, deliver.probed, strict=True):
            assert isinstance(seen, list) and len(seen) == 1
            assert seen[0][:3] == (job_id, 1, 60)
            assert seen[0][3] in (None, "outbox-worker")
        # Acked: the rows are gone, not dead.
        assert all(outbox.queue.get_job(i) is None for i in ids)
        stats = outbox.queue.stats()
        assert (stats.pending, stats.scheduled, stats.processing, stats.dead) == (0, 0, 0, 0)

    @pytest.mark.clause("Q-20", "Q-10", "B-1")
    @pytest.mark.requires(Capability.OUTBOX)
    def test_outbox_run_retries_failed_deliveries_by_the_curve(self, store: Store) -> None:
        """``a`` fails once, ``b`` twice. Both go back to pending for 2.5-5 s
        after the first failure; ``a`` is then delivered and acked, ``b`` fails
        again and waits 5-10 s. The third try of ``b`` is not waited for: that
        it runs is the same mechanism as ``a``'s second."""
        name = unique("ob")
        outbox = store.outbox(name)
        a = outbox.put({"k": "a"})
        b = outbox.put({"k": "b"})
        deliver = _Delivery({"a": 1, "b": 2})

        def pending_after(job_id: int, attempts: int) -> JobInfo | None:
            info = outbox.queue.get_job(job_id)
            if info is None or info.state is not JobState.PENDING:
                return None
            return info if info.attempts == attempts else None

        with _running(store, name, deliver) as running:
            first_a = eventually(lambda: running.healthy() and pending_after(a, 1))
            first_b = eventually(lambda: running.healthy() and pending_after(b, 1))
            assert isinstance(first_a, JobInfo) and isinstance(first_b, JobInfo)
            _check_retry_window(first_a, 1, WINDOW_SLACK_S)
            _check_retry_window(first_b, 1, WINDOW_SLACK_S)
            # a's second try succeeds and is acked; b's fails again.
            eventually(lambda: running.healthy() and outbox.queue.get_job(a) is None)
            second_b = eventually(lambda: running.healthy() and pending_after(b, 2))
            assert isinstance(second_b, JobInfo)
            _check_retry_window(second_b, 2, WINDOW_SLACK_S)
        tries_a, tries_b = deliver.times_of("a"), deliver.times_of("b")
        assert len(tries_a) == 2 and len(tries_b) == 2
        # Not retried at once: the first curve step holds each for >= 2.5 s.
        assert tries_a[1] - tries_a[0] >= 2.5 - 0.05
        assert tries_b[1] - tries_b[0] >= 2.5 - 0.05
        assert outbox.queue.stats().dead == 0

    @pytest.mark.clause("Q-20")
    @pytest.mark.requires(Capability.OUTBOX)
    def test_outbox_run_returns_promptly_when_stopped(self, store: Store) -> None:
        name = unique("ob")
        deliver = _Delivery()
        with _running(store, name, deliver) as running:
            time.sleep(0.7)  # idle, waiting for work
            elapsed = running.halt()
        assert elapsed < STOP_WITHIN_S, f"outbox.run took {elapsed:.2f} s to stop"
        # Work put after the stop stays put.
        outbox = store.outbox(name)
        job_id = outbox.put({"late": True})
        time.sleep(0.3)
        info = outbox.queue.get_job(job_id)
        assert info is not None and info.state is JobState.PENDING and info.attempts == 0
        assert deliver.payloads() == []

    @pytest.mark.clause("Q-20", "C-7")
    @pytest.mark.requires(Capability.OUTBOX)
    def test_outboxes_do_not_see_each_others_payloads(self, store: Store) -> None:
        first, second = unique("ob-a"), unique("ob-b")
        a, b = store.outbox(first), store.outbox(second)
        a_ids = [a.put({"box": "a", "n": n}) for n in range(3)]
        b_ids = [b.put({"box": "b", "n": n}) for n in range(2)]
        assert all(b.queue.get_job(i) is None for i in a_ids)
        assert all(a.queue.get_job(i) is None for i in b_ids)
        deliver = _Delivery()
        with _running(store, first, deliver) as running:
            eventually(lambda: running.healthy() and len(deliver.payloads()) == 3)
            eventually(lambda: a.queue.stats().processing == 0)
            time.sleep(0.3)  # time to take b's, were it to
        assert deliver.payloads() == [{"box": "a", "n": n} for n in range(3)]
        assert b.queue.stats().pending == 2
        assert [j.payload for j in b.queue.list_jobs(JobState.PENDING)] == [
            {"box": "b", "n": n} for n in range(2)
        ]
