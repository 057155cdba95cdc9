"""Hostile and careless input (C-3, E-3, SC-1), and timed rules checked
where their candidate start times differ.

- C-3: what a write accepts, every read decodes: nesting is bounded, cycles
  and over-long integers are refused, on every write path.
- E-3: whatever the arguments, a contract call works or raises an
  ``AlkstoreError``; a refused call writes nothing.
- Timed rules: a rule such as "retention counts from the death" is only
  proven when the death and the enqueue are far enough apart that counting
  from the wrong one gives another answer. Each test here waits long enough
  to separate the two candidates, and checks engine timestamps, not the
  test's clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest

import alkstore
from alkstore import (
    AlkstoreError,
    Capability,
    EnqueueOpts,
    InvalidArgument,
    InvalidSpec,
    Job,
    JobState,
    QueueOpts,
    Store,
    Worker,
)

from ._base import ContractBase, unique
from ._factory import StoreFactory

__all__ = ["HardeningContract"]

UTC = timezone.utc
LONG_S = 300.0
#: Tolerance for durations computed between two engine timestamps.
STAMP_TOLERANCE = timedelta(milliseconds=5)

#: Depth of the deepest accepted payload, and a payload one level deeper.
DEPTH = 256


def nested(depth: int, leaf: Any = "leaf") -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def _cyclic() -> Any:
    value: list[Any] = []
    value.append(value)
    return value


#: Payloads every write refuses (C-3), beyond the unserializable ones that
#: BasicsContract tries.
REFUSED_PAYLOADS: list[tuple[str, Callable[[], Any]]] = [
    ("depth-257", lambda: nested(DEPTH + 1)),
    ("depth-990", lambda: nested(990)),
    ("depth-5000", lambda: nested(5000)),
    ("object-depth-257", lambda: _objects(DEPTH + 1)),
    ("cyclic", _cyclic),
    ("int-4301-digits", lambda: 10**4300),
    ("nested-long-int", lambda: {"n": [-(10**5000)]}),
]


def _objects(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"k": value}
    return value


#: Values of every kind, for arguments of every kind (E-3). Some are valid
#: for some arguments; the rule is only that nothing but an AlkstoreError
#: leaves the call.
GARBAGE: list[Any] = [
    None,
    True,
    -1,
    0,
    2**64,
    10**400,
    -1e308,
    float("nan"),
    float("inf"),
    Decimal("1.5"),
    "",
    "x" * 20_000,
    "nul\x00",
    "\ud800",
    "line\nbreak",
    b"\xff\xfe",
    object(),
    [],
    {"a": 1},
    (1, 2),
    {1, 2},
    datetime.max.replace(tzinfo=UTC),
    datetime(2026, 1, 1),
    JobState.DEAD,
    print,
]


def _garbage_id(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 24 else text[:21] + "..."


class _Snapshot:
    """What a store holds, as far as the contract shows it: compared before
    and after a refused call (E-3: a failed call writes nothing)."""

    def __init__(self, store: Store, queues: list[str], streams: list[str]) -> None:
        self.store = store
        self.queues = queues
        self.streams = streams

    def take(self) -> Any:
        store = self.store
        caps = store.capabilities
        return (
            sorted(
                (s.queue, s.pending, s.scheduled, s.processing, s.dead) for s in store.queue_stats()
            ),
            [
                [(i.id, i.state, i.attempts, i.run_at) for i in store.queue(q).list_jobs(state)]
                for q in self.queues
                for state in JobState
            ],
            [[e.offset for e in store.stream(s).read()] for s in self.streams]
            if Capability.STREAMS in caps
            else None,
            sorted((s.name, s.spec, s.next_fire_at) for s in store.schedules())
            if Capability.SCHEDULER in caps
            else None,
        )


class HardeningContract(ContractBase):
    """C-3, E-3 and SC-1 under hostile input; timed rules where their
    candidate start times differ."""

    # ================================================================== C-3

    @pytest.mark.clause("C-3")
    @pytest.mark.requires(Capability.QUEUES)
    def test_payload_nested_256_deep_round_trips_through_queues(self, store: Store) -> None:
        q = store.queue(unique())
        value = nested(DEPTH)
        job_id = q.enqueue(value)
        q.enqueue_many([value, value])
        info = q.get_job(job_id)
        assert info is not None and info.payload == value
        assert all(i.payload == value for i in q.list_jobs(JobState.PENDING))
        jobs = q.claim_batch("w", 3)
        assert [j.payload for j in jobs] == [value] * 3
        assert jobs[0].fail("kept for the listing")
        assert [i.payload for i in q.list_jobs(JobState.DEAD)] == [value]

    @pytest.mark.clause("C-3")
    @pytest.mark.requires(Capability.STREAMS, Capability.OUTBOX)
    def test_payload_nested_256_deep_round_trips_through_streams_and_outboxes(
        self, store: Store
    ) -> None:
        value = nested(DEPTH)
        s = store.stream(unique("s"))
        s.publish(value)
        assert [e.payload for e in s.read()] == [value]
        box = store.outbox(unique("box"))
        box.put(value)
        job = box.queue.claim("w")
        assert job is not None and job.payload == value

    @pytest.mark.clause("C-3", "N-2")
    @pytest.mark.requires(Capability.NOTIFICATIONS)
    def test_payload_nested_256_deep_reaches_listeners(self, store: Store) -> None:
        channel = unique("ch")
        value = nested(DEPTH, leaf=1)
        with store.listen(channel) as listener:
            store.notify(channel, value)
            note = listener.get(5.0)
        assert note is not None and note.payload == value

    @pytest.mark.clause("C-3", "SC-2")
    @pytest.mark.requires(Capability.SCHEDULER)
    def test_payload_nested_256_deep_round_trips_through_schedules(self, store: Store) -> None:
        value = nested(DEPTH)
        store.schedule(unique("sched"), "@hourly", unique(), value)
        assert [s.payload for s in store.schedules()] == [value]

    @pytest.mark.clause("C-3", "C-6")
    @pytest.mark.parametrize(
        ("what", "make"), REFUSED_PAYLOADS, ids=[w for w, _ in REFUSED_PAYLOADS]
    )
    def test_deep_cyclic_or_long_int_payloads_are_refused_by_every_write(
        self, store: Store, what: str, make: Callable[[], Any]
    ) -> None:
        caps = store.capabilities
        q = store.queue(unique())
        stream = unique("s")
        channel = unique("ch")
        writes: list[tuple[Capability, Callable[[Any], object]]] = [
            (Capability.QUEUES, lambda p: q.enqueue(p)),
            (Capability.QUEUES, lambda p: q.enqueue_many([1, p, 3])),
            (Capability.STREAMS, lambda p: store.stream(stream).publish(p)),
            (Capability.NOTIFICATIONS, lambda p: store.notify(channel, p)),
            (Capability.SCHEDULER, lambda p: store.schedule(unique("sched"), "@hourly", q.name, p)),
            (Capability.OUTBOX, lambda p: store.outbox(unique("box")).put(p)),
        ]
        listener = store.listen(channel) if Capability.NOTIFICATIONS in caps else None
        try:
            for capability, write in writes:
                if capability not in caps:
                    continue
                with pytest.raises(InvalidArgument):
                    write(make())
            # Inside a transaction the refusal leaves the transaction usable.
            with store.transaction() as tx:
                with pytest.raises(InvalidArgument):
                    q.enqueue(make(), tx=tx)
                q.enqueue("after", tx=tx)
            assert [(s.queue, s.pending) for s in store.queue_stats()] == [(q.name, 1)]
            if Capability.STREAMS in caps:
                assert store.stream(stream).read() == []
            if Capability.SCHEDULER in caps:
                assert store.schedules() == []
            if listener is not None:
                assert listener.get(0.3) is None
        finally:
            if listener is not None:
                listener.close()

    @pytest.mark.clause("C-3")
    @pytest.mark.requires(Capability.NOTIFICATIONS)
    def test_a_refused_notification_does_not_disturb_the_listener(self, store: Store) -> None:
        channel = unique("ch")
        with store.listen(channel) as listener:
            for _, make in REFUSED_PAYLOADS:
                with pytest.raises(InvalidArgument):
                    store.notify(channel, make())
            store.notify(channel, "still delivered")
            note = listener.get(5.0)
        assert note is not None and note.payload == "still delivered"

    # ================================================================== E-3

    def _expect_alkstore_errors(
        self,
        store: Store,
        calls: list[tuple[str, Callable[[Any], object]]],
        values: list[Any] | None = None,
        snapshot: _Snapshot | None = None,
    ) -> None:
        """Run every call with every value; collect what leaves as anything
        but an AlkstoreError, and refusals that changed the store."""
        escaped: list[str] = []
        for what, call in calls:
            for value in GARBAGE if values is None else values:
                before = snapshot.take() if snapshot is not None else None
                try:
                    call(value)
                except AlkstoreError:
                    if snapshot is not None and snapshot.take() != before:
                        escaped.append(f"{what}({_garbage_id(value)}): refused but wrote")
                except (KeyboardInterrupt, SystemExit, MemoryError):
                    raise
                except BaseException as exc:
                    escaped.append(f"{what}({_garbage_id(value)}): {type(exc).__name__}: {exc}")
        assert escaped == [], "raw errors left contract calls:\n" + "\n".join(escaped[:40])

    @pytest.mark.clause("E-3", "C-6")
    @pytest.mark.requires(Capability.QUEUES)
    def test_queue_calls_with_hostile_arguments_raise_only_alkstore_errors(
        self, store: Store
    ) -> None:
        name = unique()
        q = store.queue(name, QueueOpts(visibility_timeout_s=LONG_S))
        q.enqueue("existing")
        snapshot = _Snapshot(store, [name], [])
        calls: list[tuple[str, Callable[[Any], object]]] = [
            ("store.queue", lambda v: store.queue(v)),
            ("store.queue(opts)", lambda v: store.queue(name, v)),
            ("enqueue(opts)", lambda v: q.enqueue(1, v)),
            ("enqueue(tx)", lambda v: q.enqueue(1, tx=v) if v is not None else None),
            ("enqueue_many", lambda v: q.enqueue_many(v) if v not in ([], ()) else None),
            ("enqueue_many(opts)", lambda v: q.enqueue_many([1], v) if v is not None else None),
            ("claim(worker)", lambda v: q.claim(v)),
            ("claim(wait_s)", lambda v: q.claim("w", wait_s=v) if v not in (None,) else None),
            ("claim_batch(n)", lambda v: q.claim_batch("w", v)),
            ("ack_batch([v])", lambda v: q.ack_batch([v])),
            ("cancel", lambda v: q.cancel(v)),
            ("get_job", lambda v: q.get_job(v)),
            ("list_jobs(state)", lambda v: q.list_jobs(v)),
            ("list_jobs(limit)", lambda v: q.list_jobs(JobState.PENDING, limit=v)),
            ("list_jobs(after_id)", lambda v: q.list_jobs(JobState.PENDING, after_id=v)),
        ]
        self._expect_alkstore_errors(store, calls, snapshot=snapshot)

    @pytest.mark.clause("E-3", "Q-9")
    @pytest.mark.requires(Capability.QUEUES)
    def test_ack_batch_of_anything_but_a_sequence_of_handles_is_an_invalid_argument(
        self, store: Store
    ) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
        q.enqueue("x")
        calls: list[tuple[str, Callable[[Any], object]]] = [("ack_batch", lambda v: q.ack_batch(v))]
        self._expect_alkstore_errors(store, calls)
        assert q.stats().pending == 1

    @pytest.mark.clause("E-3", "C-6", "Q-7")
    @pytest.mark.requires(Capability.QUEUES)
    def test_job_handle_calls_with_hostile_arguments_raise_only_alkstore_errors(
        self, store: Store
    ) -> None:
        name = unique()
        q = store.queue(name, QueueOpts(visibility_timeout_s=LONG_S, max_attempts=10_000))
        q.enqueue("job")
        snapshot = _Snapshot(store, [name], [])
        ops: list[tuple[str, Callable[[Job, Any], object]]] = [
            ("retry(error)", lambda job, v: job.retry(v, 0)),
            ("retry(delay_s)", lambda job, v: job.retry("e", v)),
            ("retry(tx)", lambda job, v: job.retry("e", 0, tx=v) if v is not None else None),
            ("fail(error)", lambda job, v: job.fail(v)),
            ("fail(tx)", lambda job, v: job.fail("e", tx=v) if v is not None else None),
            ("ack(tx)", lambda job, v: job.ack(tx=v) if v is not None else None),
            ("heartbeat", lambda job, v: job.heartbeat(v)),
        ]
        escaped: list[str] = []
        for what, op in ops:
            for value in GARBAGE:
                # A fresh claim for every call, made before the snapshot.
                if q.stats().pending == 0:
                    q.enqueue("job")
                job = q.claim("w")
                assert job is not None
                before = snapshot.take()
                try:
                    op(job, value)
                except AlkstoreError:
                    if snapshot.take() != before:
                        escaped.append(f"{what}({_garbage_id(value)}): refused but wrote")
                except (KeyboardInterrupt, SystemExit, MemoryError):
                    raise
                except BaseException as exc:
                    escaped.append(f"{what}({_garbage_id(value)}): {type(exc).__name__}: {exc}")
                # Give the job back for the next call, whatever the op did.
                job.retry("next", 0)
        assert escaped == [], "raw errors left contract calls:\n" + "\n".join(escaped[:40])

    @pytest.mark.clause("E-3", "C-6", "Q-11")
    @pytest.mark.requires(Capability.QUEUES)
    def test_error_text_that_no_database_stores_is_refused_or_stored_cleaned(
        self, store: Store
    ) -> None:
        """``job.fail("\\ud800")``: a lone surrogate (or a NUL) cannot be stored
        as UTF-8 text. The op either refuses with InvalidArgument and changes
        nothing, or works and records the text with those characters replaced;
        never a raw UnicodeEncodeError."""
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S, max_attempts=100))
        settles: list[Callable[[Job, str], bool]] = [
            lambda job, e: job.fail(e),
            lambda job, e: job.retry(e, 0),
            lambda job, e: job.retry(e),
        ]
        for settle in settles:
            for bad in ("lone \ud800 surrogate", "nul\x00byte"):
                job_id = q.enqueue("x")
                job = q.claim("w")
                assert job is not None and job.id == job_id
                try:
                    assert settle(job, bad)
                except InvalidArgument:
                    info = q.get_job(job_id)
                    assert info is not None and info.state is JobState.PROCESSING
                    assert info.attempts == job.attempts and info.last_error is None
                    assert job.fail("cleaned up")
                    continue
                info = q.get_job(job_id)
                assert info is not None
                if info.state is JobState.DEAD:
                    assert info.last_error is not None
                    info.last_error.encode("utf-8")  # what is stored is text
                else:
                    assert q.cancel(job_id)

    @pytest.mark.clause("E-3", "C-6")
    @pytest.mark.requires(Capability.STREAMS)
    def test_stream_calls_with_hostile_arguments_raise_only_alkstore_errors(
        self, store: Store
    ) -> None:
        name = unique("s")
        s = store.stream(name)
        s.publish("existing")
        snapshot = _Snapshot(store, [], [name])
        calls: list[tuple[str, Callable[[Any], object]]] = [
            ("store.stream", lambda v: store.stream(v)),
            ("publish(key)", lambda v: s.publish(1, key=v) if v is not None else None),
            ("publish(tx)", lambda v: s.publish(1, tx=v) if v is not None else None),
            ("read(after)", lambda v: s.read(v)),
            ("read(limit)", lambda v: s.read(0, v)),
            ("commit(consumer)", lambda v: s.commit(v, 1)),
            ("commit(offset)", lambda v: s.commit("c", v)),
            ("offset", lambda v: s.offset(v)),
            ("wait(after)", lambda v: s.wait(v, 0.0)),
            ("wait(timeout_s)", lambda v: s.wait(10, v)),
            ("trim", lambda v: s.trim(v) if not isinstance(v, int) or v <= 0 else None),
        ]
        self._expect_alkstore_errors(store, calls, snapshot=snapshot)

    @pytest.mark.clause("E-3")
    @pytest.mark.requires(Capability.LOCKS)
    def test_lock_calls_with_hostile_arguments_raise_only_alkstore_errors(
        self, store: Store
    ) -> None:
        name = unique("l")
        held = store.lock(name, LONG_S)
        assert held is not None
        calls: list[tuple[str, Callable[[Any], object]]] = [
            ("store.lock(name)", lambda v: store.lock(v, 1.0)),
            ("store.lock(ttl_s)", lambda v: store.lock(unique("l"), v)),
            ("store.lock(owner)", lambda v: store.lock(unique("l"), 1.0, v)),
            ("renew", lambda v: held.renew(v)),
        ]
        self._expect_alkstore_errors(store, calls)
        assert store.lock(name, 1.0, owner="other") is None

    @pytest.mark.clause("E-3")
    @pytest.mark.requires(Capability.NOTIFICATIONS)
    def test_notify_and_listen_with_hostile_arguments_raise_only_alkstore_errors(
        self, store: Store
    ) -> None:
        channel = unique("ch")
        with store.listen(channel) as listener:
            calls: list[tuple[str, Callable[[Any], object]]] = [
                ("notify(channel)", lambda v: store.notify(v, 1)),
                ("notify(payload)", lambda v: store.notify(channel, v)),
                ("notify(tx)", lambda v: store.notify(channel, 1, tx=v) if v is not None else None),
                ("listen", lambda v: store.listen(v).close()),
                ("listen(2)", lambda v: store.listen(channel, v).close()),
                ("get(timeout_s)", lambda v: listener.get(v) if v is not None else None),
            ]
            self._expect_alkstore_errors(store, calls)

    @pytest.mark.clause("E-3", "SC-1", "C-6")
    @pytest.mark.requires(Capability.SCHEDULER)
    def test_schedule_calls_with_hostile_arguments_raise_only_alkstore_errors(
        self, store: Store
    ) -> None:
        queue = unique()
        store.schedule("existing", "@hourly", queue)
        snapshot = _Snapshot(store, [queue], [])
        calls: list[tuple[str, Callable[[Any], object]]] = [
            ("schedule(name)", lambda v: store.schedule(v, "@hourly", queue)),
            ("schedule(spec)", lambda v: store.schedule("s", v, queue)),
            ("schedule(queue)", lambda v: store.schedule("s", "@hourly", v)),
            ("schedule(payload)", lambda v: store.schedule("s", "@hourly", queue, v)),
            ("schedule(opts)", lambda v: store.schedule("s", "@hourly", queue, None, v)),
            ("schedule(tz)", lambda v: store.schedule("s", "@hourly", queue, tz=v)),
            ("unschedule", lambda v: store.unschedule(v) if v != "existing" else None),
        ]
        # A call that works writes a schedule "s"; drop it before the next.
        guarded = [(w, _then(c, lambda: store.unschedule("s"))) for w, c in calls]
        self._expect_alkstore_errors(store, guarded, snapshot=snapshot)
        assert [s.name for s in store.schedules()] == ["existing"]

    @pytest.mark.clause("E-3", "T-2")
    def test_transaction_calls_with_hostile_arguments_raise_only_alkstore_errors(
        self, store: Store
    ) -> None:
        def in_tx(run: Callable[[Any], object]) -> Callable[[Any], object]:
            def call(value: Any) -> object:
                with store.transaction() as tx:
                    return run((tx, value))

            return call

        calls: list[tuple[str, Callable[[Any], object]]] = [
            ("tx.execute(sql)", in_tx(lambda tv: tv[0].execute(tv[1]))),
            ("tx.execute(params)", in_tx(lambda tv: tv[0].execute("SELECT 1", tv[1]))),
        ]
        self._expect_alkstore_errors(store, calls)
        # The store still works afterwards.
        with store.transaction() as tx:
            tx.execute("SELECT 1")

    @pytest.mark.clause("E-3")
    @pytest.mark.requires(Capability.QUEUES)
    def test_worker_with_hostile_arguments_raises_only_alkstore_errors(self, store: Store) -> None:
        name = unique()

        def construct(v: Any) -> object:
            # A worker that was built must be usable: its queue has a name.
            return Worker(store, v, lambda job: None).queue.name

        def run_with_stop(v: Any) -> object:
            if v is None:
                return None
            worker = Worker(store, name, lambda job: None, concurrency=1)
            return _bounded(lambda: worker.run(stop=v))

        calls: list[tuple[str, Callable[[Any], object]]] = [
            ("Worker(queue)", construct),
            ("Worker(concurrency)", lambda v: Worker(store, name, print, concurrency=v)),
            ("Worker(worker_id)", lambda v: Worker(store, name, print, worker_id=v)),
            ("Worker(handler)", lambda v: Worker(store, name, v) if not callable(v) else None),
            ("Worker.run(stop)", run_with_stop),
        ]
        self._expect_alkstore_errors(store, calls)

    @pytest.mark.clause("E-3", "Q-20")
    @pytest.mark.requires(Capability.OUTBOX)
    def test_outbox_with_hostile_arguments_raises_only_alkstore_errors(self, store: Store) -> None:
        box = store.outbox(unique("box"))
        calls: list[tuple[str, Callable[[Any], object]]] = [
            ("store.outbox", lambda v: store.outbox(v)),
            ("put(tx)", lambda v: box.put(1, tx=v) if v is not None else None),
            (
                "run(stop)",
                lambda v: _bounded(lambda: box.run(print, stop=v)) if v is not None else None,
            ),
        ]
        self._expect_alkstore_errors(store, calls)

    @pytest.mark.clause("E-3")
    def test_open_with_hostile_urls_and_options_raises_only_alkstore_errors(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        url = store_factory.url
        scheme, _, rest = url.partition("://")
        host, slash, path = rest.partition("/")
        joiner = "&" if "?" in url else "?"
        urls: list[Any] = [
            url + "\x00",
            f"{scheme}://{host}[/{path}",
            f"{scheme}://[{host}/{path}",
            f"{scheme}://{host}{slash}{path}\ud800",
            f"{url}{joiner}no_such_option=1",
            f"{url}{joiner}%zz=%zz",
            f"{scheme}:",
            5,
            b"bytes",
        ]

        def try_open(u: Any) -> object:
            alkstore.open(u, **store_factory.opts).close()
            return None

        def try_option(v: Any) -> object:
            store_factory.open(no_such_option=v).close()
            return None

        self._expect_alkstore_errors(store, [("open(url)", try_open)], values=urls)
        self._expect_alkstore_errors(store, [("open(no_such_option)", try_option)])

    # ================================================================= SC-1

    @pytest.mark.clause("SC-1", "C-6")
    @pytest.mark.requires(Capability.SCHEDULER)
    @pytest.mark.parametrize(
        "spec", ["30-10 * * * *", "0 23-1 * * *", "0 0 * * FRI-MON", "0 0 * DEC-JAN *"]
    )
    def test_schedule_with_a_reversed_range_is_refused_and_writes_nothing(
        self, store: Store, spec: str
    ) -> None:
        with pytest.raises(InvalidSpec) as info:
            store.schedule(unique("sched"), spec, unique())
        assert info.value.spec == spec
        assert store.schedules() == []

    @pytest.mark.clause("SC-1")
    @pytest.mark.requires(Capability.SCHEDULER)
    def test_schedule_with_an_upward_range_fires_only_inside_it(self, store: Store) -> None:
        store.schedule(unique("sched"), "10-30 * * * *", unique())
        (schedule,) = store.schedules()
        assert 10 <= schedule.next_fire_at.minute <= 30

    @pytest.mark.clause("SC-1", "C-6")
    @pytest.mark.requires(Capability.SCHEDULER)
    def test_schedule_with_an_oversized_interval_or_a_zone_directory_is_refused(
        self, store: Store
    ) -> None:
        for spec in ("@every " + "9" * 5000 + "s", "@every 99999999999999999999s", "@every 400d"):
            with pytest.raises(InvalidSpec):
                store.schedule(unique("sched"), spec, unique())
        for tz in ("America", "Europe", "a" * 300, "UTC\x00"):
            with pytest.raises(InvalidArgument):
                store.schedule(unique("sched"), "@hourly", unique(), tz=tz)
        assert store.schedules() == []

    # ======================================================= timed rules

    @pytest.mark.clause("Q-16", "Q-14")
    @pytest.mark.requires(Capability.QUEUES)
    def test_retention_counts_from_the_death_not_the_enqueue(self, store: Store) -> None:
        retention = 1.0
        q = store.queue(unique(), QueueOpts(dead_letter_retention_s=retention, max_attempts=1))
        job_id = q.enqueue("x")
        time.sleep(retention + 0.2)  # created_at + retention has passed
        job = q.claim("w")
        assert job is not None and job.fail("dies now")
        assert q.sweep_expired().purged == 0, "retention was counted from the enqueue"
        info = q.get_job(job_id)
        assert info is not None and info.state is JobState.DEAD and info.died_at is not None
        assert info.died_at - info.created_at >= timedelta(seconds=retention)
        time.sleep(retention + 0.2)
        assert q.sweep_expired().purged == 1
        assert q.get_job(job_id) is None

    @pytest.mark.clause("Q-4", "Q-6", "Q-7")
    @pytest.mark.requires(Capability.QUEUES)
    def test_claim_deadline_counts_from_the_claim_not_the_enqueue(self, store: Store) -> None:
        timeout = 1.0
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=timeout))
        job_id = q.enqueue("x")
        time.sleep(timeout + 0.2)  # created_at + timeout has passed
        job = q.claim("w")
        assert job is not None
        info = q.get_job(job_id)
        assert info is not None and info.claimed_at is not None and info.deadline is not None
        assert abs(info.deadline - info.claimed_at - timedelta(seconds=timeout)) <= STAMP_TOLERANCE
        assert q.claim("w2") is None, "the claim lapsed at enqueue + timeout"
        assert job.ack(), "the claim was counted from the enqueue"

    @pytest.mark.clause("Q-10", "Q-14")
    @pytest.mark.requires(Capability.QUEUES)
    def test_retry_delay_counts_from_the_retry_not_the_enqueue_or_claim(self, store: Store) -> None:
        delay = 1.0
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
        job_id = q.enqueue("x")
        job = q.claim("w")
        assert job is not None
        time.sleep(delay + 0.2)  # created_at + delay and claimed_at + delay have passed
        assert job.retry("later", delay)
        assert q.claim("w") is None, "the retry delay was counted from an earlier time"
        info = q.get_job(job_id)
        assert info is not None and info.claimed_at is not None
        assert info.run_at - info.claimed_at >= timedelta(seconds=2 * delay) - STAMP_TOLERANCE * 40

    @pytest.mark.clause("Q-15", "Q-14")
    @pytest.mark.requires(Capability.QUEUES)
    def test_expiry_counts_from_the_enqueue_not_the_run_at(self, store: Store) -> None:
        q = store.queue(unique())
        job_id = q.enqueue("x", EnqueueOpts(delay_s=1.0, expires_s=0.5))
        info = q.get_job(job_id)
        assert info is not None and info.expires_at is not None
        assert abs(info.expires_at - info.created_at - timedelta(seconds=0.5)) <= STAMP_TOLERANCE
        time.sleep(1.2)  # run_at has passed, run_at + expires_s has not
        assert q.claim("w") is None, "expiry was counted from run_at"
        assert q.sweep_expired().expired == 1

    @pytest.mark.clause("Q-12", "Q-8")
    @pytest.mark.requires(Capability.QUEUES)
    def test_exhaustion_waits_for_the_heartbeated_deadline_not_claim_plus_timeout(
        self, store: Store
    ) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=0.5, max_attempts=1))
        job_id = q.enqueue("x")
        job = q.claim("w")
        assert job is not None and job.heartbeat(LONG_S)
        time.sleep(0.7)  # claimed_at + visibility timeout has passed
        assert q.sweep_expired().exhausted == 0
        assert q.claim("w2") is None
        info = q.get_job(job_id)
        assert info is not None and info.state is JobState.PROCESSING
        assert job.ack()

    @pytest.mark.clause("Q-6", "Q-8")
    @pytest.mark.requires(Capability.QUEUES)
    def test_reclaim_waits_for_the_heartbeated_deadline(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=1.0))
        q.enqueue("x")
        job = q.claim("w")
        assert job is not None
        claimed = time.monotonic()  # at or after the claim's own start
        time.sleep(0.3)
        assert job.heartbeat(4.0)  # deadline: now + 4.0, past claimed_at + 1.0
        time.sleep(max(0.0, claimed + 1.3 - time.monotonic()))
        assert q.claim("w2") is None, "the reclaim used claimed_at + visibility timeout"
        assert job.ack()


def _then(call: Callable[[Any], object], after: Callable[[], object]) -> Callable[[Any], object]:
    def both(value: Any) -> object:
        try:
            return call(value)
        finally:
            after()

    return both


#: How long a ``run(stop=...)`` given a bad ``stop`` may take to refuse it.
_RUN_BOUND_S = 5.0


def _bounded(call: Callable[[], object]) -> object:
    """Run a loop that should refuse its arguments at once; fail (rather
    than hang) when it starts running instead, and re-raise what it raised."""
    outcome: list[BaseException] = []
    done = threading.Event()

    def target() -> None:
        try:
            call()
        except BaseException as exc:
            outcome.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    if not done.wait(_RUN_BOUND_S):
        raise AssertionError("the loop ran with an invalid stop argument instead of refusing it")
    if outcome:
        raise outcome[0]
    return None
