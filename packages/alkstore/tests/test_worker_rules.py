"""The worker's per-claim bookkeeping: what a refused heartbeat means (W-2, W-6)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from alkstore.worker._rules import Running, StopSignal, first_beat_in


def _running() -> Running:
    return Running(object(), 1.0, StopSignal())


def test_a_refused_heartbeat_before_the_flush_loses_the_claim() -> None:
    """W-2: refused while the handler runs, or while its outcome waits for a
    flush: the claim is gone, nothing acks it, heartbeats stop."""
    entry = _running()
    assert entry.beat_refused() is True
    assert entry.lost and not entry.beating


def test_a_refused_heartbeat_during_the_flush_only_stops_the_heartbeats() -> None:
    """W-6: once the outcome is in the flush in flight, the refusal can be that
    flush's own commit; the flush reports whether the outcome landed."""
    entry = _running()
    entry.flushing = True
    assert entry.beat_refused() is False
    assert not entry.lost and not entry.should_stop()
    assert not entry.beating


class _Claimed:
    """A claimed job's handle as the worker sees it: only the deadline."""

    def __init__(self, left_s: float) -> None:
        self.deadline = datetime.now(timezone.utc) + timedelta(seconds=left_s)


def test_the_first_heartbeat_keeps_to_the_claims_own_deadline() -> None:
    """W-2: a fresh claim is beaten one interval after its start; one whose
    clock ran while it reached the worker, while two intervals are left."""
    assert first_beat_in(_Claimed(3.5), 1.0) == 1.0
    assert 0.4 <= first_beat_in(_Claimed(2.5), 1.0) <= 0.5
    assert first_beat_in(_Claimed(1.0), 1.0) == 0.0  # late already: at once
    assert first_beat_in(object(), 1.0) == 1.0  # no deadline: one interval
    entry = Running(_Claimed(1.5), 1.0, StopSignal())
    assert entry.next_beat - entry.started <= 0.0 + 1e-3
