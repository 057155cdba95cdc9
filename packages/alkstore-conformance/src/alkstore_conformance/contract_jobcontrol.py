"""Job control: unique keys, bounded queues, groups, rate limits (Q-23..Q-25,
R-1, R-2).

Each primitive answers a different question, and the tests are grouped the
same way: a unique key decides whether a job is written at all (Q-23), a
bound decides whether the queue takes more (Q-24), a group decides how many
of its jobs run at once (Q-25), and a rate limit decides how fast anything
is taken (R-1, R-2).

Races are run for real: threads on two stores of one database, and child
processes where the rule says "across processes". Timing rules use short
real intervals with generous bounds, and only ever bound a time from below
when the rule is that something waits (a limiter, a full queue): a loaded
machine makes those tests slower, never wrong.
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from alkstore import (
    AlkstoreError,
    Capability,
    Enqueued,
    EnqueueOpts,
    InvalidArgument,
    Job,
    JobState,
    Queue,
    QueueFull,
    QueueOpts,
    ReservedName,
    Store,
    Worker,
)

from . import _children_jobcontrol
from ._base import ContractBase, StoppableCall, eventually, race, signals, spawn, unique
from ._factory import StoreFactory
from ._queue_helpers import (
    LONG_S,
    Background,
    blocked,
    claim_one,
    counts,
    info_of,
    lapse,
    run_threads,
)

__all__ = ["JobControlContract"]

UNIQUE = pytest.mark.requires(Capability.QUEUES, Capability.UNIQUE_KEYS)
BOUNDED = pytest.mark.requires(Capability.QUEUES, Capability.BOUNDED_QUEUES)
GROUPS = pytest.mark.requires(Capability.QUEUES, Capability.GROUPS)
RATES = pytest.mark.requires(Capability.RATE_LIMITS)

#: How soon a call waiting for room or for a unit must return once it may:
#: it polls (a full queue gets no wake, Q-24), so this allows for its backoff.
POLL_BOUND_S = 3.0
#: Names that break C-1's rules, for unique keys and group names.
BAD_NAMES: list[Any] = ["", "a\x00b", "line\nbreak", "x" * 201, 5, None, b"key"]


class _Rollback(Exception):
    """Raised inside a transaction to roll it back."""


def _g(group: str, priority: int = 0, **kwargs: Any) -> EnqueueOpts:
    return EnqueueOpts(group=group, priority=priority, **kwargs)


def _grouped(store: Store, group_limit: int = 1, name: str | None = None) -> Queue:
    """A handle of a fresh queue (or of *name*) with long claims whose jobs
    of one group hold at most *group_limit* claims at once (Q-25)."""
    opts = QueueOpts(visibility_timeout_s=LONG_S, group_limit=group_limit)
    return store.queue(unique() if name is None else name, opts)


def _drain_ids(q: Queue) -> list[int]:
    """Claim and ack everything claimable now, one at a time; the ids in order."""
    ids = []
    for _ in range(1000):
        job = q.claim("drain")
        if job is None:
            break
        ids.append(job.id)
        assert job.ack()
    return ids


class JobControlContract(ContractBase):
    """Unique keys (Q-23), bounded queues (Q-24), groups (Q-25), rate limits (R-1, R-2)."""

    # ================================================================ Q-23

    @pytest.mark.clause("Q-23", "Q-14")
    @UNIQUE
    def test_enqueue_unique_while_a_live_job_holds_the_key_writes_nothing_and_returns_its_id(
        self, store: Store
    ) -> None:
        """Scheduled, ready or processing, the holder keeps its key: a second enqueue with that
        key writes nothing, changes nothing of the holder and returns its id."""
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
        later = q.enqueue_unique("later", {"v": 1}, EnqueueOpts(priority=3, delay_s=LONG_S))
        assert isinstance(later, Enqueued)
        assert later.created
        before = info_of(q, later.id)
        assert before.unique_key == "later"
        again = q.enqueue_unique("later", {"v": 2}, EnqueueOpts(priority=9))
        assert (again.id, again.created) == (later.id, False)
        assert info_of(q, later.id) == before, "the holder changed"
        assert counts(q) == (0, 1, 0, 0)

        ready = q.enqueue_unique("ready", "first")
        assert q.enqueue_unique("ready", "second") == Enqueued(ready.id, False)
        job = claim_one(q)
        assert job.id == ready.id
        held = info_of(q, ready.id)
        assert q.enqueue_unique("ready", "third") == Enqueued(ready.id, False)
        assert info_of(q, ready.id) == held
        assert (held.state, held.payload, held.attempts) == (JobState.PROCESSING, "first", 1)
        assert counts(q) == (0, 1, 1, 0)

        plain = q.enqueue("plain")
        assert info_of(q, plain).unique_key is None
        assert job.ack()

    @pytest.mark.clause("Q-23", "Q-9", "Q-11", "Q-13")
    @UNIQUE
    def test_enqueue_unique_key_is_freed_when_its_job_is_acked_cancelled_or_dead(
        self, store: Store
    ) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
        for end in ("ack", "cancel", "fail"):
            key = f"key-{end}"
            first = q.enqueue_unique(key, end)
            job = claim_one(q)
            assert job.id == first.id
            if end == "ack":
                assert job.ack()
            elif end == "cancel":
                assert q.cancel(first.id)
            else:
                assert job.fail("dead")
            second = q.enqueue_unique(key, end)
            assert second.created, f"the key was still held after {end}"
            assert second.id != first.id
            assert info_of(q, second.id).unique_key == key
            assert claim_one(q).ack()
        dead = q.list_jobs(JobState.DEAD)
        assert [(d.unique_key, d.last_error) for d in dead] == [("key-fail", "dead")]

    @pytest.mark.clause("Q-23", "Q-12", "Q-15")
    @UNIQUE
    def test_enqueue_unique_over_a_job_that_can_never_run_again_dead_letters_it_first(
        self, store: Store
    ) -> None:
        """A holder past its expiry, or a lapsed claim on its last attempt, gives the key up: the
        enqueue moves it to dead and inserts. A lapsed claim with attempts left keeps it."""
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S, max_attempts=1))
        spent = q.enqueue_unique("spent", "old")
        last = claim_one(q)
        assert last.id == spent.id
        retried = store.queue(q.name, QueueOpts(visibility_timeout_s=LONG_S, max_attempts=2))
        kept = retried.enqueue_unique("kept", "old")
        retryable = claim_one(retried)
        assert retryable.id == kept.id
        expiring = q.enqueue_unique("expiring", "old", EnqueueOpts(expires_s=0.2))
        lapse(last, retryable)
        time.sleep(0.2)

        fresh = q.enqueue_unique("expiring", "new")
        assert fresh.created and fresh.id != expiring.id
        gone = info_of(q, expiring.id)
        assert (gone.state, gone.last_error) == (JobState.DEAD, "expired")

        fresh = q.enqueue_unique("spent", "new")
        assert fresh.created and fresh.id != spent.id
        gone = info_of(q, spent.id)
        assert (gone.state, gone.last_error) == (JobState.DEAD, "max attempts exceeded")
        assert last.ack() is False

        # Lapsed with an attempt left: it can run again, so it keeps its key.
        assert q.enqueue_unique("kept", "new") == Enqueued(kept.id, False)
        assert info_of(q, kept.id).state is JobState.PROCESSING

    @pytest.mark.clause("Q-23", "T-1")
    @UNIQUE
    def test_enqueue_unique_waits_for_an_uncommitted_holder_then_decides(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """Another transaction's uncommitted job holds the key: a second enqueue waits; the
        holder's commit makes it ``created=False`` with the holder's id, a rollback lets it
        create the job."""
        name = unique()
        q = store.queue(name)
        with store_factory.open() as other:
            oq = other.queue(name)
            for outcome in ("commit", "rollback"):
                key = f"key-{outcome}"
                racer: Background[Enqueued] | None = None
                held: Enqueued | None = None
                try:
                    with store.transaction() as tx:
                        held = q.enqueue_unique(key, "holder", tx=tx)
                        assert held.created
                        racer = blocked(lambda k=key: oq.enqueue_unique(k, "racer"))  # type: ignore[misc]
                        if outcome == "rollback":
                            raise _Rollback
                except _Rollback:
                    pass
                assert racer is not None and held is not None
                got = racer.result(60)
                if outcome == "commit":
                    assert (got.id, got.created) == (held.id, False)
                    assert info_of(q, held.id).payload == "holder"
                else:
                    assert got.created
                    assert info_of(q, got.id).payload == "racer"
                assert counts(q)[0] == (1 if outcome == "commit" else 2)

    @pytest.mark.clause("Q-23", "T-1")
    @UNIQUE
    def test_enqueue_unique_in_a_transaction_holds_the_key_only_if_it_commits(
        self, store: Store
    ) -> None:
        q = store.queue(unique())
        with contextlib.suppress(_Rollback), store.transaction() as tx:
            first = q.enqueue_unique("k", "a", tx=tx)
            assert first.created
            assert q.enqueue_unique("k", "b", tx=tx) == Enqueued(first.id, False)
            raise _Rollback
        assert counts(q) == (0, 0, 0, 0)
        made = q.enqueue_unique("k", "c")
        assert made.created
        assert info_of(q, made.id).payload == "c"

    @pytest.mark.clause("Q-23", "C-6")
    @UNIQUE
    def test_enqueue_many_unique_decides_held_and_repeated_keys_in_one_step(
        self, store: Store
    ) -> None:
        q = store.queue(unique())
        held = q.enqueue_unique("held", "h")
        got = q.enqueue_many_unique([("a", 1), ("held", 2), ("b", 3), ("a", 4)])
        assert [g.created for g in got] == [True, False, True, False]
        assert got[1].id == held.id
        assert got[3].id == got[0].id, "a key repeated in one call must map to one job"
        assert len({got[0].id, got[2].id, held.id}) == 3
        assert info_of(q, got[0].id).payload == 1, "the first item with a key wins"
        assert info_of(q, held.id).payload == "h"
        assert counts(q) == (3, 0, 0, 0)

        # Every key held: nothing written, each holder's id back.
        again = q.enqueue_many_unique([("b", 5), ("a", 6)])
        assert again == [Enqueued(got[2].id, False), Enqueued(got[0].id, False)]
        assert q.enqueue_many_unique([]) == []
        # One bad item refuses the whole call.
        with pytest.raises(InvalidArgument):
            q.enqueue_many_unique([("c", 7), ("", 8)])
        with pytest.raises(InvalidArgument):
            q.enqueue_many_unique([("d", 9), "not a pair"])  # type: ignore[list-item]
        with pytest.raises(InvalidArgument):
            q.enqueue_many_unique([("e", 10), ("f", float("nan"))])
        assert counts(q) == (3, 0, 0, 0)
        assert q.enqueue_unique("c", 0).created

    @pytest.mark.clause("Q-23", "C-1", "C-6")
    @UNIQUE
    def test_enqueue_unique_refuses_keys_that_break_the_name_rules_and_writes_nothing(
        self, store: Store
    ) -> None:
        q = store.queue(unique())
        for bad in BAD_NAMES:
            with pytest.raises(InvalidArgument):
                q.enqueue_unique(bad, "x")
            with pytest.raises(InvalidArgument):
                q.enqueue_many_unique([("fine", "x"), (bad, "y")])
        assert counts(q) == (0, 0, 0, 0)
        for good in ("k" * 200, "clé-✓", "with space", "__alkstore-like"):
            made = q.enqueue_unique(good, good)
            assert made.created
            assert info_of(q, made.id).unique_key == good

    @pytest.mark.clause("Q-23", "C-7")
    @UNIQUE
    def test_enqueue_unique_keys_of_another_queue_are_independent(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        a, b = store.queue(unique()), store.queue(unique())
        in_a = a.enqueue_unique("k", "a")
        in_b = b.enqueue_unique("k", "b")
        assert in_a.created and in_b.created and in_a.id != in_b.id
        with store_factory.open() as twin:
            # Another store object on the same database is the same store.
            assert twin.queue(a.name).enqueue_unique("k", "twin") == Enqueued(in_a.id, False)
        assert b.get_job(in_a.id) is None

    @pytest.mark.clause("Q-23", "Q-3")
    @pytest.mark.cross_process
    @pytest.mark.sync_only("spawns processes, which open the sync face")
    @UNIQUE
    def test_processes_racing_for_one_key_create_one_job(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """Eight processes enqueue one key at the same moment: one creates the job, seven get
        ``created=False`` with its id."""
        name, procs_n = unique(), 8
        go, results = signals()
        child = _children_jobcontrol.enqueue_unique_at_signal
        procs = [spawn(child, store_factory, name, "k", n, go, results) for n in range(procs_n)]
        outcomes = race(procs, go, results)
        assert [o for o in outcomes if o[0] != "ok"] == []
        created = [o for o in outcomes if o[3]]
        assert len(created) == 1, f"{len(created)} processes created a job for one key"
        assert {o[2] for o in outcomes} == {created[0][2]}
        q = store.queue(name)
        assert counts(q) == (1, 0, 0, 0)
        assert info_of(q, created[0][2]).payload == {"tag": created[0][1]}

    # ================================================================ Q-24

    @pytest.mark.clause("Q-24", "C-6")
    @BOUNDED
    def test_enqueue_on_a_full_queue_raises_queue_full_and_writes_nothing(
        self, store: Store
    ) -> None:
        q = store.queue(unique(), QueueOpts(max_depth=3))
        ids = [q.enqueue(i) for i in range(3)]
        for call in (
            lambda: q.enqueue("one too many"),
            lambda: q.enqueue_many(["x"]),
        ):
            with pytest.raises(QueueFull) as caught:
                call()
            assert (caught.value.queue, caught.value.max_depth) == (q.name, 3)
            assert isinstance(caught.value, AlkstoreError)
            assert not isinstance(caught.value, InvalidArgument)
        if Capability.UNIQUE_KEYS in store.capabilities:
            with pytest.raises(QueueFull):
                q.enqueue_unique("new key", "x")
        assert counts(q) == (3, 0, 0, 0)
        assert sorted(j.id for j in q.list_jobs(JobState.PENDING)) == ids
        # The bound is the handle's: a handle without one enqueues past it.
        unbounded = store.queue(q.name)
        unbounded.enqueue("past the bound")
        assert counts(q) == (4, 0, 0, 0)
        with pytest.raises(QueueFull):
            q.enqueue("still full")

    @pytest.mark.clause("Q-24", "C-6")
    @BOUNDED
    def test_enqueue_many_on_a_bounded_queue_is_all_or_nothing(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(max_depth=5))
        q.enqueue_many(["a", "b", "c"])
        with pytest.raises(QueueFull):
            q.enqueue_many(["d", "e", "f"])
        assert counts(q) == (3, 0, 0, 0)
        assert len(q.enqueue_many(["d", "e"])) == 2
        assert counts(q) == (5, 0, 0, 0)
        with pytest.raises(QueueFull):
            q.enqueue_many(["g"])
        assert q.enqueue_many([]) == []

    @pytest.mark.clause("Q-24", "Q-25")
    @BOUNDED
    def test_bounded_queue_counts_scheduled_processing_and_waiting_jobs_but_not_dead_ones(
        self, store: Store
    ) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S, max_depth=3))
        q.enqueue("ready")
        q.enqueue("scheduled", EnqueueOpts(delay_s=LONG_S))
        job = claim_one(q)
        q.enqueue("third")
        with pytest.raises(QueueFull):
            q.enqueue("full: one ready, one scheduled, one processing")
        assert job.fail("dead")
        q.enqueue("room: the dead job does not count")
        with pytest.raises(QueueFull):
            q.enqueue("full again")
        [waiting] = [i for i in q.list_jobs(JobState.PENDING) if i.payload == "third"]
        assert q.cancel(waiting.id)
        q.enqueue("room: the cancelled job is gone")
        assert counts(q) == (2, 1, 0, 1)
        if Capability.GROUPS in store.capabilities:
            # A job waiting for its group's slot is unfinished too.
            grouped = store.queue(unique(), QueueOpts(max_depth=2, group_limit=1))
            grouped.enqueue("holds the slot", _g("g"))
            grouped.enqueue("waits for the slot", _g("g"))
            with pytest.raises(QueueFull):
                grouped.enqueue("full", _g("g"))

    @pytest.mark.clause("Q-24", "Q-12", "Q-15")
    @BOUNDED
    def test_bounded_queue_does_not_count_jobs_that_can_never_run_again(self, store: Store) -> None:
        name = unique()
        q = store.queue(name, QueueOpts(visibility_timeout_s=LONG_S, max_depth=2))
        q.enqueue("expiring", EnqueueOpts(expires_s=0.2))
        q.enqueue("stays")
        with pytest.raises(QueueFull):
            q.enqueue("full")
        time.sleep(0.35)
        q.enqueue("room: the expired job cannot run again")
        with pytest.raises(QueueFull):
            q.enqueue("full again")

        spent = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S, max_depth=1))
        once = store.queue(spent.name, QueueOpts(visibility_timeout_s=LONG_S, max_attempts=1))
        once.enqueue("last attempt")
        lapse(claim_one(spent))
        spent.enqueue("room: the lapsed last attempt cannot run again")

        again = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S, max_depth=1))
        twice = store.queue(again.name, QueueOpts(visibility_timeout_s=LONG_S, max_attempts=2))
        twice.enqueue("attempt left")
        lapse(claim_one(again))
        with pytest.raises(QueueFull):
            again.enqueue("the lapsed claim can run again: it counts")

    @pytest.mark.clause("Q-24", "T-1", "C-6")
    @BOUNDED
    def test_queue_full_leaves_the_callers_transaction_usable(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(max_depth=1))
        side = store.queue(unique())
        with store.transaction() as tx:
            kept = q.enqueue("a", tx=tx)
            with pytest.raises(QueueFull):
                q.enqueue("b", tx=tx)
            with pytest.raises(QueueFull):
                q.enqueue_many(["c", "d"], tx=tx)
            side_id = side.enqueue("after QueueFull", tx=tx)
        assert [i.id for i in q.list_jobs(JobState.PENDING)] == [kept]
        assert [i.id for i in side.list_jobs(JobState.PENDING)] == [side_id]

    @pytest.mark.clause("Q-24")
    @BOUNDED
    def test_enqueue_with_wait_s_waits_for_room_freed_by_an_ack(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        name = unique()
        q = store.queue(name, QueueOpts(visibility_timeout_s=LONG_S, max_depth=1))
        q.enqueue("first")
        job = claim_one(q)
        with store_factory.open() as other:
            oq = other.queue(name, QueueOpts(max_depth=1))
            waiting = blocked(lambda: oq.enqueue("second", wait_s=30))
            acked_at = time.monotonic()
            assert job.ack()
            new_id = waiting.result(30)
            assert waiting.returned_at - acked_at < POLL_BOUND_S
        assert info_of(q, new_id).payload == "second"
        assert counts(q) == (1, 0, 0, 0)

    @pytest.mark.clause("Q-24", "C-6")
    @BOUNDED
    def test_enqueue_with_wait_s_raises_queue_full_when_no_room_comes(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(max_depth=1))
        q.enqueue("first")
        started = time.monotonic()
        with pytest.raises(QueueFull):
            q.enqueue("second", wait_s=0.4)
        assert time.monotonic() - started >= 0.35
        assert counts(q) == (1, 0, 0, 0)

    @pytest.mark.clause("Q-24", "T-1")
    @BOUNDED
    def test_enqueue_with_wait_s_and_tx_is_an_invalid_argument(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(max_depth=5))
        with store.transaction() as tx:
            with pytest.raises(InvalidArgument):
                q.enqueue("x", tx=tx, wait_s=1)
            q.enqueue("y", tx=tx, wait_s=0)
        bad_waits: list[Any] = [-1, float("nan"), "1", True]
        for bad in bad_waits:
            with pytest.raises(InvalidArgument):
                q.enqueue("z", wait_s=bad)
        assert [i.payload for i in q.list_jobs(JobState.PENDING)] == ["y"]

    @pytest.mark.clause("Q-24", "Q-10", "Q-21", "Q-20")
    @BOUNDED
    def test_retries_redrives_and_outbox_puts_are_never_refused(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S, max_depth=2))
        q.enqueue_many(["a", "b"])
        again, doomed = q.claim_batch("w", 2)
        assert again.retry("once more", delay_s=0)
        assert doomed.fail("dead")
        q.enqueue("c")  # full again
        if Capability.DEAD_LETTER_ADMIN in store.capabilities:
            assert q.redrive() == 1
            assert counts(q)[0] == 3
        if Capability.OUTBOX in store.capabilities:
            outbox = store.outbox(unique("o"))
            assert outbox.queue.opts.max_depth is None
            ids = [outbox.put({"n": i}) for i in range(5)]
            assert len(set(ids)) == 5

    @pytest.mark.clause("Q-24", "SC-3")
    @pytest.mark.fresh_database
    @BOUNDED
    @pytest.mark.requires(Capability.SCHEDULER)
    def test_schedule_fires_onto_a_full_queue_are_never_refused(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(max_depth=1))
        q.enqueue("full")
        store.schedule(unique("s"), "@every 1s", q.name, {"from": "schedule"})
        eventually(lambda: store.tick_schedules() >= 1)
        assert counts(q)[0] + counts(q)[1] == 2
        with pytest.raises(QueueFull):
            q.enqueue("still full")

    @pytest.mark.clause("Q-24", "Q-3", "ST-4")
    @BOUNDED
    def test_bounded_enqueues_from_threads_and_stores_never_exceed_max_depth(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """Eight threads on two stores enqueue singles and pairs at once into a queue bounded at
        25: what they were told landed is exactly what the queue holds, never more than 25."""
        name, bound = unique(), 25
        landed: list[int] = []
        lock = threading.Lock()
        with store_factory.open() as other:
            handles = [s.queue(name, QueueOpts(max_depth=bound)) for s in (store, other)]

            def writer(n: int) -> Callable[[], None]:
                q = handles[n % 2]

                def run() -> None:
                    for i in range(8):
                        try:
                            if (n + i) % 2:
                                got = len(q.enqueue_many([{"w": n, "i": i}, {"w": n, "i": -i}]))
                            else:
                                q.enqueue({"w": n, "i": i})
                                got = 1
                        except QueueFull:
                            continue
                        with lock:
                            landed.append(got)

                return run

            run_threads([writer(n) for n in range(8)])
        live = counts(store.queue(name))[0]
        assert live <= bound, f"{live} jobs in a queue bounded at {bound}"
        assert sum(landed) == live
        top = store.queue(name, QueueOpts(max_depth=bound))
        while True:
            try:
                top.enqueue("top up")
            except QueueFull:
                break
        assert counts(top)[0] == bound

    @pytest.mark.clause("Q-24", "Q-23")
    @BOUNDED
    @pytest.mark.requires(Capability.UNIQUE_KEYS)
    def test_enqueue_unique_of_a_held_key_on_a_full_queue_returns_the_holder(
        self, store: Store
    ) -> None:
        q = store.queue(unique(), QueueOpts(max_depth=1))
        held = q.enqueue_unique("k", "held")
        assert q.enqueue_unique("k", "again") == Enqueued(held.id, False)
        with pytest.raises(QueueFull):
            q.enqueue_unique("other", "x")
        assert q.enqueue_many_unique([("k", 1)]) == [Enqueued(held.id, False)]
        assert counts(q) == (1, 0, 0, 0)

    # ================================================================ Q-25

    @pytest.mark.clause("Q-25", "Q-2")
    @GROUPS
    def test_claims_of_a_group_limited_to_one_run_serially_in_claim_order(
        self, store: Store
    ) -> None:
        q = _grouped(store)
        q.enqueue("p1", _g("A", 1))
        q.enqueue("p5", _g("A", 5))  # comes before p1, which held the slot
        q.enqueue("p3", _g("A", 3))
        order = []
        for step in range(4):
            job = q.claim("w")
            assert job is not None
            order.append(job.payload)
            assert q.claim("w") is None, f"two claims of one group at once ({order})"
            assert q.claim_batch("w", 10) == []
            if step == 0:
                q.enqueue("p9", _g("A", 9))  # waits; first in line when the slot frees
            assert job.ack()
        assert order == ["p5", "p9", "p3", "p1"]
        assert q.claim("w") is None

    @pytest.mark.clause("Q-25", "Q-2")
    @GROUPS
    def test_claim_batch_never_hands_out_more_than_the_group_limit(self, store: Store) -> None:
        q = _grouped(store, 2)
        for i in range(5):
            q.enqueue(f"a{i}", _g("A", priority=10 - i))
        q.enqueue("b0", _g("B"))
        q.enqueue_many(["u0", "u1"])
        first = q.claim_batch("w", 10)
        assert sorted(j.payload for j in first) == ["a0", "a1", "b0", "u0", "u1"]
        assert q.claim_batch("w", 10) == []
        [a0] = [j for j in first if j.payload == "a0"]
        assert a0.ack()
        [next_a] = q.claim_batch("w", 10)
        assert next_a.payload == "a2"
        assert q.claim_batch("w", 10) == []

    @pytest.mark.clause("Q-25", "Q-3", "ST-4")
    @GROUPS
    def test_concurrent_claimers_on_separate_stores_never_exceed_the_group_limit(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """Six threads on two stores claim in batches, hold each claim a little and ack, until
        four groups of twelve (plus ungrouped jobs) are drained; at no moment does a group hold
        more than two claims."""
        name, limit = unique(), 2
        groups = ["g0", "g1", "g2", "g3"]
        q = _grouped(store, limit, name)
        for g in groups:
            q.enqueue_many([{"g": g, "i": i} for i in range(12)], _g(g))
        q.enqueue_many([{"g": None, "i": i} for i in range(8)])
        held: Counter[str] = Counter()
        most: Counter[str] = Counter()
        done: list[int] = []
        lock = threading.Lock()
        with store_factory.open() as other:
            opts = QueueOpts(visibility_timeout_s=LONG_S)
            handles = [s.queue(name, opts) for s in (store, other)]

            def claimer(n: int) -> Callable[[], None]:
                hq = handles[n % 2]

                def run() -> None:
                    empty = 0
                    for _ in range(500):
                        if empty >= 5:
                            return
                        jobs = hq.claim_batch(f"w{n}", 1 + n % 3)
                        if not jobs:
                            empty += 1
                            time.sleep(0.02)
                            continue
                        empty = 0
                        with lock:
                            for j in jobs:
                                if j.payload["g"] is not None:
                                    held[j.payload["g"]] += 1
                                    most[j.payload["g"]] = max(
                                        most[j.payload["g"]], held[j.payload["g"]]
                                    )
                        time.sleep(0.01)
                        for j in jobs:
                            with lock:
                                if j.payload["g"] is not None:
                                    held[j.payload["g"]] -= 1
                            assert j.ack(), "an ack of a fresh claim was refused"
                            with lock:
                                done.append(j.id)

                return run

            run_threads([claimer(n) for n in range(6)])
        assert max(most.values()) <= limit, f"a group held more than {limit} claims: {most}"
        assert len(done) == len(set(done)) == 4 * 12 + 8
        assert counts(q) == (0, 0, 0, 0)

    @pytest.mark.clause("Q-25", "C-7")
    @GROUPS
    def test_a_group_at_its_limit_blocks_neither_other_groups_nor_ungrouped_jobs(
        self, store: Store
    ) -> None:
        q = _grouped(store)
        q.enqueue_many([f"a{i}" for i in range(30)], _g("A", priority=5))
        q.enqueue("b", _g("B"))
        q.enqueue_many(["u0", "u1"], EnqueueOpts(priority=-1))
        got = [j.payload for j in q.claim_batch("w", 10)]
        assert got == ["a0", "b", "u0", "u1"]
        assert q.claim("w") is None
        # The same group name in another queue is another group.
        other = _grouped(store)
        other.enqueue("elsewhere", _g("A"))
        assert claim_one(other).payload == "elsewhere"

    @pytest.mark.clause("Q-25", "Q-10")
    @GROUPS
    def test_a_job_waiting_on_backoff_holds_no_slot_of_its_group(self, store: Store) -> None:
        q = _grouped(store)
        q.enqueue("high", _g("A", 9))
        q.enqueue("low", _g("A", 0))
        high = claim_one(q)
        assert high.payload == "high"
        assert q.claim("w") is None
        assert high.retry("later", delay_s=LONG_S)
        low = q.claim("w")
        assert low is not None and low.payload == "low", "a job waiting on backoff kept the slot"
        assert q.claim("w") is None
        assert low.ack()
        assert q.claim("w") is None  # "high" is still waiting on its backoff
        assert counts(q) == (0, 1, 0, 0)

    @pytest.mark.clause("Q-25", "Q-2")
    @GROUPS
    def test_a_delayed_job_holds_no_slot_of_its_group(self, store: Store) -> None:
        q = _grouped(store)
        q.enqueue("later, but first in priority", _g("A", 5, delay_s=LONG_S))
        q.enqueue("ready now", _g("A", 0))
        job = q.claim("w")
        assert job is not None and job.payload == "ready now", "a delayed job held the slot"
        assert job.ack()
        assert q.claim("w") is None

    @pytest.mark.clause("Q-25", "Q-1", "Q-14")
    @GROUPS
    def test_each_job_follows_its_own_group_limit_stamp(self, store: Store) -> None:
        name = unique()
        two = _grouped(store, 2, name)
        none = store.queue(name, QueueOpts(visibility_timeout_s=LONG_S))
        one = _grouped(store, 1, name)
        limited = [two.enqueue(f"g{i}", _g("G")) for i in range(3)]
        free = [none.enqueue(f"f{i}", _g("F")) for i in range(3)]
        info = info_of(one, limited[0])
        assert (info.group, info.group_limit) == ("G", 2)
        info = info_of(one, free[0])
        assert (info.group, info.group_limit) == ("F", None)
        # Claimed through handles with other limits: the stamps decide.
        got = none.claim_batch("w", 10) + one.claim_batch("w", 10)
        assert sorted(j.payload for j in got) == ["f0", "f1", "f2", "g0", "g1"]
        # The handle's group_limit applies only to grouped jobs.
        plain = [one.enqueue(i) for i in range(3)]
        assert sorted(j.id for j in one.claim_batch("w", 10)) == plain

    @pytest.mark.clause("Q-25", "Q-9", "Q-11", "Q-12", "Q-13", "Q-6")
    @GROUPS
    def test_a_groups_slot_frees_when_its_claim_ends(self, store: Store) -> None:
        def pair(max_attempts: int = 3) -> tuple[Queue, Job, int]:
            q = store.queue(
                unique(),
                QueueOpts(visibility_timeout_s=LONG_S, group_limit=1, max_attempts=max_attempts),
            )
            first = q.enqueue("first", _g("A"))
            second = q.enqueue("second", _g("A"))
            job = claim_one(q)
            assert job.id == first
            assert q.claim("w") is None
            return q, job, second

        ends: dict[str, Callable[[Queue, Job], object]] = {
            "ack": lambda q, j: j.ack(),
            "fail": lambda q, j: j.fail("dead"),
            "cancel": lambda q, j: q.cancel(j.id),
        }
        for end, how in ends.items():
            q, job, second = pair()
            assert how(q, job)
            nxt = q.claim("w")
            assert nxt is not None and nxt.id == second, f"the slot stayed taken after {end}"
            assert q.claim("w") is None

        # A lapsed last attempt: the claim dead-letters it and hands out the next.
        q, job, second = pair(max_attempts=1)
        lapse(job)
        nxt = q.claim("w")
        assert nxt is not None and nxt.id == second
        assert info_of(q, job.id).last_error == "max attempts exceeded"

        # A lapsed claim with attempts left, or a released one, is no claim:
        # one job of the group (either) is handed out, and only one.
        for how_ended in ("lapse", "release"):
            q, job, second = pair()
            if how_ended == "lapse":
                lapse(job)
            else:
                assert job.release()
            nxt = q.claim("w")
            assert nxt is not None and nxt.id in (job.id, second)
            assert q.claim("w") is None

        # A redriven job of the group waits for the slot like any other.
        if Capability.DEAD_LETTER_ADMIN in store.capabilities:
            q, job, second = pair()
            assert job.fail("dead")
            holder = claim_one(q)
            assert holder.id == second
            assert q.redrive() == 1
            assert q.claim("w") is None
            assert holder.ack()
            assert claim_one(q).id == job.id

    @pytest.mark.clause("Q-25", "Q-15")
    @GROUPS
    def test_an_expired_job_holds_no_slot_of_its_group(self, store: Store) -> None:
        q = _grouped(store)
        q.enqueue("expires", _g("A", 5, expires_s=0.2))
        q.enqueue("stays", _g("A"))
        time.sleep(0.35)
        job = q.claim("w")
        assert job is not None and job.payload == "stays", "an expired job held the slot"
        assert q.claim("w") is None

    @pytest.mark.clause("Q-25", "C-1")
    @GROUPS
    def test_group_names_follow_the_name_rules(self, store: Store) -> None:
        for bad in [b for b in BAD_NAMES if b is not None]:  # None: no group
            with pytest.raises(InvalidArgument):
                EnqueueOpts(group=bad)
        for bad_limit in (0, -1, True, 1.5, "2"):
            with pytest.raises(InvalidArgument):
                QueueOpts(group_limit=bad_limit)  # type: ignore[arg-type]
        q = store.queue(unique(), QueueOpts(group_limit=1))
        job_id = q.enqueue("x", _g("g" * 200))
        assert info_of(q, job_id).group == "g" * 200

    # ================================================================= R-1

    @pytest.mark.clause("R-1", "C-5")
    @RATES
    def test_acquire_grants_the_burst_at_once_then_one_unit_per_interval(
        self, store: Store
    ) -> None:
        """Two units a second, burst three: three at once, then nothing until half a second has
        passed, then one."""
        limiter = store.rate_limit(unique("r"), 2, 1.0, burst=3)
        assert (limiter.rate, limiter.per_s, limiter.burst) == (2, 1.0, 3)
        started = time.monotonic()
        assert [limiter.acquire() for _ in range(3)] == [True, True, True]
        refused = limiter.acquire()
        if time.monotonic() - started < 0.45:  # else the machine was too slow to tell
            assert refused is False, "a fourth unit came before its interval"
        time.sleep(0.6)
        assert limiter.acquire() is True
        refused = limiter.acquire()
        # Five units in all: the fifth comes no sooner than 1 s after the first.
        if time.monotonic() - started < 0.95:
            assert refused is False, "a unit came before its interval"
        # n units at once cost n intervals (a limiter no clock moves in a test).
        wide = store.rate_limit(unique("r"), 1, LONG_S, burst=4)
        assert wide.acquire(3) is True
        assert wide.acquire(2) is False
        assert wide.acquire(1) is True

    @pytest.mark.clause("R-1", "E-3")
    @RATES
    def test_rate_limit_refuses_bad_arguments(self, store: Store) -> None:
        name = unique("r")
        bad_limits: list[tuple[Any, Any, Any, Any]] = [
            (name, 0, 1.0, 1),
            (name, -1, 1.0, 1),
            (name, float("nan"), 1.0, 1),
            (name, float("inf"), 1.0, 1),
            (name, True, 1.0, 1),
            (name, "5", 1.0, 1),
            (name, 5, 0, 1),
            (name, 5, -1.0, 1),
            (name, 5, float("nan"), 1),
            (name, 5, True, 1),
            (name, 5, 1.0, 0),
            (name, 5, 1.0, -1),
            (name, 5, 1.0, 1.5),
            (name, 5, 1.0, True),
            ("", 5, 1.0, 1),
            ("a\x00b", 5, 1.0, 1),
            ("x" * 201, 5, 1.0, 1),
            (7, 5, 1.0, 1),
        ]
        for args in bad_limits:
            with pytest.raises(InvalidArgument):
                store.rate_limit(*args)
        with pytest.raises(ReservedName):
            store.rate_limit("__alkstore.limiter", 5, 1.0)
        limiter = store.rate_limit(name, 5, 1.0, burst=2)
        for n in (0, -1, True, 1.5, "1", 3):
            with pytest.raises(InvalidArgument):
                limiter.acquire(n)  # type: ignore[arg-type]
        for wait in (-1, float("nan"), "1"):
            with pytest.raises(InvalidArgument):
                limiter.acquire(1, wait)  # type: ignore[arg-type]
        # Refused calls took nothing: the whole burst is still there.
        assert limiter.acquire(2) is True

    @pytest.mark.clause("R-1", "C-5")
    @RATES
    def test_acquire_with_wait_s_waits_for_the_next_unit(self, store: Store) -> None:
        limiter = store.rate_limit(unique("r"), 4, 1.0)  # a unit every 0.25 s, burst 1
        asked = time.monotonic()  # the first unit is taken inside the call, not before it
        assert limiter.acquire()
        assert limiter.acquire(wait_s=5) is True
        assert time.monotonic() - asked >= 0.2, "the unit came before its interval"
        # Too short a wait for the next unit: False, and nothing taken. A unit
        # every 2 s, so a slow machine cannot earn one between the calls.
        slow = store.rate_limit(unique("r"), 1, 2.0)
        asked = time.monotonic()
        assert slow.acquire()
        assert slow.acquire(wait_s=0.02) is False
        assert slow.acquire(wait_s=5) is True
        # One interval after the first unit, not two: the refused call took none.
        assert time.monotonic() - asked < 3.5

    @pytest.mark.clause("R-1", "Q-19")
    @RATES
    @pytest.mark.requires(Capability.QUEUES)
    def test_claims_with_a_rate_limit_take_one_unit_per_job_returned(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
        q.enqueue_many(list(range(10)))
        scarce = store.rate_limit(unique("r"), 1, LONG_S, burst=3)
        assert len(q.claim_batch("w", 10, rate_limit=scarce)) == 3
        assert q.claim("w", rate_limit=scarce) is None
        assert q.claim_batch("w", 10, rate_limit=scarce) == []
        assert counts(q) == (7, 0, 3, 0)
        assert store.claim_any([q.name], "w", 5, rate_limit=scarce) == []

        # Fewer jobs than units: only the jobs returned are paid for.
        few = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
        few.enqueue_many(["a", "b"])
        plenty = store.rate_limit(unique("r"), 1, LONG_S, burst=5)
        empty = store.queue(unique())
        assert empty.claim("w", rate_limit=plenty) is None
        assert len(few.claim_batch("w", 10, rate_limit=plenty)) == 2
        assert plenty.acquire(3) is True
        assert plenty.acquire() is False

        # claim_any: the units run out across its queues, in their order.
        a, b = store.queue(unique()), store.queue(unique())
        a.enqueue("a0")
        b.enqueue_many(["b0", "b1", "b2"])
        two = store.rate_limit(unique("r"), 1, LONG_S, burst=2)
        got = store.claim_any([a.name, b.name], "w", 5, rate_limit=two)
        assert [j.payload for j in got] == ["a0", "b0"]

        # A blocking claim waits for the next unit.
        slow = store.rate_limit(unique("r"), 2, 1.0)  # a unit every 0.5 s
        asked = time.monotonic()  # the first unit is taken inside the call, not before it
        assert q.claim("w", rate_limit=slow) is not None
        job = q.claim("w", wait_s=10, rate_limit=slow)
        assert job is not None
        assert time.monotonic() - asked >= 0.45, "a claim took a unit before its interval"

    @pytest.mark.clause("R-1", "W-1")
    @RATES
    @pytest.mark.requires(Capability.QUEUES)
    def test_worker_with_a_rate_limit_paces_its_claims(self, store: Store) -> None:
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
        q.enqueue_many(list(range(5)))
        limiter = store.rate_limit(unique("r"), 5, 1.0)  # a unit every 0.2 s, burst 1
        started: list[float] = []
        lock = threading.Lock()

        def handler(job: Job) -> None:
            # The claim's own time, from the engine's clock that the limiter
            # reads too: a handler's start can lag its claim on a busy machine.
            info = q.get_job(job.id)
            assert info is not None and info.claimed_at is not None
            with lock:
                started.append(info.claimed_at.timestamp())

        worker = Worker(store, q, handler, concurrency=4, claim_wait_s=0.2, rate_limit=limiter)
        with StoppableCall(lambda stop: worker.run(stop=stop)) as bg:
            eventually(lambda: bg.healthy() and len(started) == 5)
        eventually(lambda: counts(q) == (0, 0, 0, 0))
        # Five units at one every 0.2 s span at least 0.8 s.
        started.sort()
        assert started[-1] - started[0] >= 0.79, f"claims were not paced: {started}"

    @pytest.mark.clause("R-1", "C-7")
    @RATES
    def test_rate_limits_of_one_name_are_shared_on_a_database_and_separate_across_databases(
        self, store: Store, store_factory: StoreFactory, other_database: StoreFactory
    ) -> None:
        name = unique("r")
        mine = store.rate_limit(name, 1, LONG_S, burst=2)
        assert mine.acquire(2)
        with store_factory.open() as twin:
            assert twin.rate_limit(name, 1, LONG_S, burst=2).acquire() is False
        assert store.rate_limit(name + "-other", 1, LONG_S, burst=2).acquire(2) is True
        assert store.rate_limit(name.upper(), 1, LONG_S, burst=2).acquire(2) is True
        with other_database.open() as other:
            theirs = other.rate_limit(name, 1, LONG_S, burst=2)
            assert theirs.acquire(2) is True
            assert theirs.acquire() is False
            if Capability.QUEUES in store.capabilities:
                # A limiter belongs to its database: claims elsewhere refuse it.
                with pytest.raises(InvalidArgument):
                    store.queue(unique()).claim("w", rate_limit=theirs)
        assert mine.acquire() is False

    # ================================================================= R-2

    @pytest.mark.clause("R-2", "R-1")
    @pytest.mark.cross_process
    @pytest.mark.sync_only("spawns processes, which open the sync face")
    @RATES
    def test_processes_acquiring_at_once_get_what_the_rate_allows(
        self, store_factory: StoreFactory
    ) -> None:
        """Sixteen processes call ``acquire()`` on one limiter for 2.5 s, as fast as refusals
        allow: together they get no more than the rate and the burst allow, and no fewer than
        nine tenths of the rate less one second's worth.

        The floor counts only the time the database was answering: when no call returns for
        longer than the burst covers (a commit stall of a loaded machine), the units of that
        stall beyond the burst are lost to every limiter, so they are taken off the floor."""
        name, rate, per_s, burst, duration = unique("r"), 40.0, 1.0, 5, 2.5
        procs_n = 16
        go, results = signals()
        start_at = multiprocessing.get_context("spawn").Value("d", 0.0)
        procs = [
            spawn(
                _children_jobcontrol.acquire_until,
                store_factory,
                name,
                rate,
                per_s,
                burst,
                go,
                start_at,
                duration,
                results,
            )
            for _ in range(procs_n)
        ]

        def set_start() -> None:
            start_at.value = time.time() + 0.5

        outcomes = race(procs, go, results, ready_timeout_s=180, before_go=set_start)
        assert [o for o in outcomes if o[0] != "ok"] == []
        granted = sum(o[1] for o in outcomes)
        refused = sum(o[2] for o in outcomes)
        began, ended = min(o[3] for o in outcomes), max(o[4] for o in outcomes)
        span = ended - began
        most = rate * span / per_s + burst
        burst_s = burst * per_s / rate
        answers = [began, *sorted(t for o in outcomes for t in o[5]), ended]
        stalled = sum(max(0.0, b - a - burst_s) for a, b in itertools.pairwise(answers))
        least = 0.9 * rate * (duration - stalled) / per_s - rate
        assert granted <= most, f"{granted} units granted in {span:.2f} s; at most {most:.0f}"
        assert granted >= least, (
            f"only {granted} units granted ({refused} refused, {stalled:.2f} s without an"
            f" answer); at least {least:.0f}"
        )
        assert refused > 0, "the processes never asked faster than the rate"
