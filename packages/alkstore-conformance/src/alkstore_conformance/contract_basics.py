"""Names, payloads, time and the backoff curve (C-1..C-4, B-1)."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from alkstore import (
    Capability,
    EnqueueOpts,
    InvalidArgument,
    JobState,
    QueueOpts,
    ReservedName,
    Store,
    backoff,
)
from alkstore.names import MAX_NOTIFICATION_BYTES, MAX_PAYLOAD_BYTES

from ._base import JSON_PAYLOADS, ContractBase, unique

BAD_NAMES: list[Any] = [
    "",
    "x" * 201,
    "nul\x00byte",
    "line\nbreak",
    "tab\there",
    "del\x7f",
    "lone\ud800surrogate",
    None,
    42,
    b"bytes",
    ["list"],
]

BAD_PAYLOADS: list[Any] = [
    float("nan"),
    float("inf"),
    {"set": {1, 2}},
    object(),
    b"bytes",
    {"bad": "\ud800"},
    {("tuple",): "key"},
]

# (capability, what, call) for every consumer entry point taking a name.
NameCall = Callable[[Store, Any], object]
NAME_CALLS: list[tuple[Capability, str, NameCall]] = [
    (Capability.QUEUES, "queue", lambda s, n: s.queue(n)),
    (Capability.OUTBOX, "outbox", lambda s, n: s.outbox(n)),
    (Capability.STREAMS, "stream", lambda s, n: s.stream(n)),
    (Capability.LOCKS, "lock", lambda s, n: s.lock(n, 1.0)),
    (Capability.NOTIFICATIONS, "notify", lambda s, n: s.notify(n, 1)),
    (Capability.NOTIFICATIONS, "listen", lambda s, n: s.listen(n)),
    (Capability.SCHEDULER, "schedule", lambda s, n: s.schedule(n, "@hourly", "q")),
    (Capability.SCHEDULER, "schedule-queue", lambda s, n: s.schedule("s", "@hourly", n)),
]


def _name_call_ids() -> list[str]:
    return [what for _, what, _ in NAME_CALLS]


class BasicsContract(ContractBase):
    """C-1..C-4 across every primitive, and the backoff curve (B-1)."""

    # ------------------------------------------------------------------ C-1, C-2

    @pytest.fixture(params=NAME_CALLS, ids=_name_call_ids())
    def name_call(self, request: pytest.FixtureRequest, store: Store) -> tuple[str, NameCall]:
        """Each entry point of :data:`NAME_CALLS` in turn, as ``(what, call)``;
        skipped where the engine does not declare its capability."""
        capability, what, call = request.param
        if capability not in store.capabilities:
            pytest.skip(f"engine does not declare {capability}")
        return what, call

    @pytest.mark.clause("C-1")
    def test_bad_names_are_refused_everywhere(
        self, store: Store, name_call: tuple[str, NameCall]
    ) -> None:
        _, call = name_call
        for bad in BAD_NAMES:
            with pytest.raises(InvalidArgument):
                call(store, bad)
        if Capability.SCHEDULER in store.capabilities:
            assert store.schedules() == []

    @pytest.mark.clause("C-1")
    @pytest.mark.requires(Capability.QUEUES)
    def test_names_of_200_characters_and_unicode_work(self, store: Store) -> None:
        for name in ("x" * 200, "émails-📬", "a b c", "q"):
            q = store.queue(name)
            job_id = q.enqueue({"n": name})
            info = q.get_job(job_id)
            assert info is not None
            assert info.queue == name

    @pytest.mark.clause("C-2")
    def test_reserved_names_are_refused_everywhere(
        self, store: Store, name_call: tuple[str, NameCall]
    ) -> None:
        what, call = name_call
        for reserved in (
            "__alkstore",
            "__alkstore.outbox.x",
            "__alkstore.scheduler",
            "__alkstorex",
        ):
            with pytest.raises(ReservedName):
                call(store, reserved)
        # Close to the prefix is not in it.
        call(store, "_alkstore") if what not in {"listen"} else None

    @pytest.mark.clause("C-2")
    def test_reserved_name_is_an_invalid_argument(self) -> None:
        assert issubclass(ReservedName, InvalidArgument)
        assert issubclass(ReservedName, ValueError)

    # ----------------------------------------------------------------------- C-3

    @pytest.mark.clause("C-3")
    @pytest.mark.requires(Capability.QUEUES)
    def test_payloads_round_trip_as_json(self, store: Store) -> None:
        q = store.queue(unique())
        payloads: list[Any] = list(JSON_PAYLOADS)
        ids = [q.enqueue(p) for p in payloads]
        for job_id, payload in zip(ids, payloads, strict=True):
            info = q.get_job(job_id)
            assert info is not None
            assert info.payload == json.loads(json.dumps(payload))
        claimed = q.claim_batch("w", len(payloads))
        by_id = {j.id: j.payload for j in claimed}
        for job_id, payload in zip(ids, payloads, strict=True):
            assert by_id[job_id] == json.loads(json.dumps(payload))

    @pytest.mark.clause("C-3", "C-6")
    @pytest.mark.requires(Capability.QUEUES)
    def test_unserializable_payloads_are_refused_and_write_nothing(self, store: Store) -> None:
        q = store.queue(unique())
        for bad in BAD_PAYLOADS:
            with pytest.raises(InvalidArgument):
                q.enqueue(bad)
            with pytest.raises(InvalidArgument):
                q.enqueue_many([1, bad, 3])
        stats = q.stats()
        assert (stats.pending, stats.scheduled, stats.processing, stats.dead) == (0, 0, 0, 0)

    @pytest.mark.clause("C-3")
    @pytest.mark.requires(Capability.QUEUES)
    def test_payload_size_limit_is_16_mib_encoded(self, store: Store) -> None:
        q = store.queue(unique())
        # json.dumps adds two quote characters around a string.
        at_limit = "x" * (MAX_PAYLOAD_BYTES - 2)
        job_id = q.enqueue(at_limit)
        info = q.get_job(job_id)
        assert info is not None
        assert len(info.payload) == len(at_limit)
        with pytest.raises(InvalidArgument):
            q.enqueue(at_limit + "x")
        assert q.stats().pending == 1

    @pytest.mark.clause("C-3")
    @pytest.mark.requires(Capability.NOTIFICATIONS)
    def test_notification_payload_limit_is_7900_bytes(self, store: Store) -> None:
        channel = unique("ch")
        store.notify(channel, "x" * (MAX_NOTIFICATION_BYTES - 2))
        with pytest.raises(InvalidArgument):
            store.notify(channel, "x" * (MAX_NOTIFICATION_BYTES - 1))
        with pytest.raises(InvalidArgument):
            store.notify(channel, float("nan"))

    @pytest.mark.clause("C-3")
    @pytest.mark.requires(Capability.STREAMS)
    def test_stream_payloads_are_checked_like_queue_payloads(self, store: Store) -> None:
        s = store.stream(unique("s"))
        for bad in BAD_PAYLOADS:
            with pytest.raises(InvalidArgument):
                s.publish(bad)
        assert s.read() == []
        assert s.publish({"ok": [1, 2]}) == 1
        assert [e.payload for e in s.read()] == [{"ok": [1, 2]}]

    # ----------------------------------------------------------------------- C-4

    @pytest.mark.clause("C-4")
    @pytest.mark.requires(Capability.QUEUES)
    def test_timestamps_are_aware_utc_and_fractional_durations_work(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=0.25, backoff_base_s=0.001))
        before = datetime.now(timezone.utc)
        # Long enough that a loaded machine still claims before it is ready.
        job_id = q.enqueue("x", EnqueueOpts(delay_s=1.5))
        info = q.get_job(job_id)
        assert info is not None
        for stamp in (info.created_at, info.run_at):
            assert stamp.tzinfo is not None
            assert stamp.utcoffset() == timedelta(0)
        # The delay is honoured to the millisecond, against the engine's clock.
        assert info.run_at - info.created_at == pytest.approx(
            timedelta(seconds=1.5), abs=timedelta(milliseconds=2)
        )
        assert abs(info.created_at - before) < timedelta(seconds=30)
        assert q.claim("w") is None
        job = q.claim("w", wait_s=5)
        assert job is not None
        assert job.deadline.utcoffset() == timedelta(0)
        claimed = q.get_job(job_id)
        assert claimed is not None and claimed.claimed_at is not None
        assert job.deadline - claimed.claimed_at == pytest.approx(
            timedelta(seconds=0.25), abs=timedelta(milliseconds=2)
        )

    @pytest.mark.clause("C-4")
    @pytest.mark.requires(Capability.QUEUES)
    def test_bad_durations_are_refused(self, store: Store) -> None:
        q = store.queue(unique())
        bad_values: list[Any] = [-1, float("nan"), float("inf"), "1", True]
        for bad in bad_values:
            with pytest.raises(InvalidArgument):
                q.claim("w", wait_s=bad)
            with pytest.raises(InvalidArgument):
                EnqueueOpts(delay_s=bad)
        for bad in (0, -0.5):
            with pytest.raises(InvalidArgument):
                QueueOpts(visibility_timeout_s=bad)
        naive = datetime.now()
        with pytest.raises(InvalidArgument):
            EnqueueOpts(run_at=naive)
        with pytest.raises(InvalidArgument):
            EnqueueOpts(delay_s=1, run_at=datetime.now(timezone.utc))

    @pytest.mark.clause("C-4")
    @pytest.mark.requires(Capability.QUEUES)
    def test_run_at_in_any_zone_is_the_same_instant(self, store: Store) -> None:
        q = store.queue(unique())
        when = datetime.now(timezone.utc) + timedelta(hours=1)
        east = when.astimezone(timezone(timedelta(hours=5, minutes=30)))
        a = q.get_job(q.enqueue("a", EnqueueOpts(run_at=when)))
        b = q.get_job(q.enqueue("b", EnqueueOpts(run_at=east)))
        assert a is not None and b is not None
        assert a.run_at == b.run_at == when
        assert a.state is JobState.PENDING
        assert q.stats().scheduled == 2

    # ----------------------------------------------------------------------- B-1

    @pytest.mark.clause("B-1")
    def test_backoff_is_equal_jitter_exponential(self) -> None:
        for attempt, base, ceiling in [
            (1, 5.0, 5.0),
            (2, 5.0, 10.0),
            (3, 5.0, 20.0),
            (13, 5.0, 3600.0),
        ]:
            assert backoff.delay(attempt, base, rng=lambda: 0.0) == ceiling / 2
            assert backoff.delay(attempt, base, rng=lambda: 0.5) == pytest.approx(ceiling * 0.75)
            assert backoff.delay(attempt, base, rng=lambda: 0.999999) == pytest.approx(
                ceiling, rel=1e-5
            )
        assert backoff.delay(10_000, 5.0, rng=lambda: 0.999) <= 3600.0
        assert backoff.delay(4, 0) == 0.0
        rng = random.Random(7)
        for _ in range(1000):
            d = backoff.delay(3, 2.0, rng=rng.random)
            assert 4.0 <= d <= 8.0
        for bad_attempt in (0, -1, 1.5, True):
            with pytest.raises(InvalidArgument):
                backoff.delay(bad_attempt, 1.0)  # type: ignore[arg-type]
        for bad_base in (-1.0, math.nan, math.inf):
            with pytest.raises(InvalidArgument):
                backoff.delay(1, bad_base)

    @pytest.mark.clause("B-1", "Q-10")
    @pytest.mark.requires(Capability.QUEUES)
    def test_retry_without_delay_follows_the_curve_of_the_row(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(backoff_base_s=100.0, max_attempts=5))
        job_id = q.enqueue("x")
        first = q.claim("w")
        assert first is not None and first.attempts == 1
        assert first.retry("now", delay_s=0)
        second = q.claim("w")
        assert second is not None and second.attempts == 2
        assert second.retry("boom")
        info = q.get_job(job_id)
        assert info is not None and info.state is JobState.PENDING
        # attempt 2, base 100: ceiling 200 s, delay uniform in [100, 200].
        waited = (info.run_at - datetime.now(timezone.utc)).total_seconds()
        assert 100 - 10 <= waited <= 200 + 1
        assert q.claim("w") is None
