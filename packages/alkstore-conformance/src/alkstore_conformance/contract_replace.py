"""Replace and debounce of unique keys (Q-29, over Q-23).

``enqueue_unique(..., on_conflict="replace")`` overwrites the payload and
opts of the key's *pending* holder; ``debounce_s=d`` makes a pending holder
run ``d`` seconds after the latest enqueue of its key, no later than
``max_wait_s`` after the first (the holder's ``created_at``). A processing
holder is kept, as Q-23 keeps it. Every answer is ``created=False`` with the
holder's id.

There is no clock to move: times are checked as bounds on the stamps that
``get_job`` reads, against the engine's own ``created_at`` of the holder and
the time the test measured around its calls (so the checks hold whatever
the engine's clock is, and a loaded machine only widens the upper bounds).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from alkstore import (
    Capability,
    Enqueued,
    EnqueueOpts,
    InvalidArgument,
    JobInfo,
    JobState,
    Queue,
    QueueFull,
    QueueOpts,
    Store,
)

from ._base import ContractBase, requires, unique
from ._factory import StoreFactory
from ._queue_helpers import (
    LONG_S,
    STAMP_TOLERANCE,
    claim_one,
    counts,
    info_of,
    run_threads,
    seconds,
    woken_by,
)

__all__ = ["ReplaceContract"]

#: How many times the one-job test enqueues its debounced key (the engines'
#: own tests do it 10,000 times and count the rows of their tables).
MANY_ENQUEUES = 1_000


class _Rollback(Exception):
    """Raised inside a transaction to roll it back."""


def _long(store: Store, name: str | None = None, **opts: Any) -> Queue:
    """A handle of a fresh queue (or of *name*) whose claims do not lapse."""
    return store.queue(
        unique() if name is None else name, QueueOpts(visibility_timeout_s=LONG_S, **opts)
    )


def _after_created(info: JobInfo) -> float:
    """Seconds from the job's creation to its ``run_at``."""
    return seconds(info.run_at - info.created_at)


def _tol() -> float:
    return seconds(STAMP_TOLERANCE)


@requires(Capability.QUEUES, Capability.UNIQUE_KEYS, Capability.REPLACE_DEBOUNCE)
class ReplaceContract(ContractBase):
    """Replace and debounce (Q-29)."""

    # ============================================================== replace

    @pytest.mark.clause("Q-29", "Q-1", "Q-14")
    def test_replace_overwrites_a_pending_holders_payload_and_opts_keeping_its_id(
        self, store: Store
    ) -> None:
        """The pending holder takes the new payload, priority, time, budget, expiry and the
        new handle's stamps; its id, key, creation time and attempts stay."""
        q = _long(store, max_attempts=3, backoff_base_s=5)
        first = q.enqueue_unique(
            "k", {"v": 1}, EnqueueOpts(priority=1, delay_s=LONG_S, expires_s=LONG_S * 10)
        )
        assert first.created
        before = info_of(q, first.id)
        assert counts(q) == (0, 1, 0, 0)

        other = store.queue(
            q.name,
            QueueOpts(
                visibility_timeout_s=60,
                max_attempts=4,
                backoff_base_s=1,
                dead_letter_retention_s=100,
            ),
        )
        got = other.enqueue_unique(
            "k", {"v": 2}, EnqueueOpts(priority=7, max_attempts=5), on_conflict="replace"
        )
        assert got == Enqueued(first.id, False)
        after = info_of(q, first.id)
        assert after.payload == {"v": 2}
        assert after.priority == 7
        assert after.max_attempts == 5
        assert (after.visibility_timeout_s, after.backoff_base_s) == (60, 1)
        assert after.dead_letter_retention_s == 100
        assert after.expires_at is None, "the replacing opts set no expiry"
        assert after.run_at < before.run_at, "the replacing opts make it ready now"
        assert seconds(after.run_at - before.created_at) < LONG_S / 2
        assert (after.id, after.unique_key, after.created_at) == (
            before.id,
            "k",
            before.created_at,
        )
        assert (after.state, after.attempts) == (JobState.PENDING, 0)
        assert counts(q) == (1, 0, 0, 0)

        # Replaced again with a delay: scheduled again, still one job.
        again = q.enqueue_unique("k", "three", EnqueueOpts(delay_s=LONG_S), on_conflict="replace")
        assert again == Enqueued(first.id, False)
        third = info_of(q, first.id)
        assert third.payload == "three"
        assert (third.priority, third.max_attempts) == (0, 3)
        assert third.visibility_timeout_s == LONG_S
        assert third.dead_letter_retention_s is None
        assert seconds(third.run_at - after.run_at) >= LONG_S - _tol()
        assert counts(q) == (0, 1, 0, 0)
        job_ids = [j.id for j in q.list_jobs(JobState.PENDING)]
        assert job_ids == [first.id]

        # "skip" (the default) still leaves it alone.
        assert q.enqueue_unique("k", "four", on_conflict="skip") == Enqueued(first.id, False)
        assert info_of(q, first.id) == third

    @pytest.mark.clause("Q-29", "Q-23")
    def test_replace_of_a_free_key_creates_the_job(self, store: Store) -> None:
        q = _long(store)
        made = q.enqueue_unique("free", {"n": 1}, EnqueueOpts(priority=2), on_conflict="replace")
        assert made.created
        info = info_of(q, made.id)
        assert (info.payload, info.priority, info.unique_key) == ({"n": 1}, 2, "free")
        debounced = q.enqueue_unique("free-d", 1, debounce_s=LONG_S)
        assert debounced.created
        assert abs(_after_created(info_of(q, debounced.id)) - LONG_S) <= _tol()

    @pytest.mark.clause("Q-29", "Q-23", "Q-7")
    def test_a_processing_holder_is_kept_by_replace_and_by_debounce(self, store: Store) -> None:
        q = _long(store)
        first = q.enqueue_unique("k", "running")
        job = claim_one(q)
        assert job.id == first.id
        held = info_of(q, first.id)
        for kwargs in (
            {"on_conflict": "replace"},
            {"debounce_s": LONG_S},
            {"on_conflict": "replace", "debounce_s": 0.0, "max_wait_s": 1.0},
        ):
            got = q.enqueue_unique("k", "new", EnqueueOpts(priority=9), **kwargs)
            assert got == Enqueued(first.id, False), kwargs
            assert info_of(q, first.id) == held, f"{kwargs} changed a processing holder"
        assert counts(q) == (0, 0, 1, 0)
        assert job.ack(), "the claim must still be valid"
        assert q.enqueue_unique("k", "next", on_conflict="replace").created

    @pytest.mark.clause("Q-29", "Q-23", "Q-15")
    def test_replace_over_an_expired_holder_dead_letters_it_and_creates(self, store: Store) -> None:
        q = _long(store)
        old = q.enqueue_unique("k", "old", EnqueueOpts(expires_s=0.2))
        time.sleep(0.3)
        new = q.enqueue_unique("k", "new", on_conflict="replace", debounce_s=LONG_S)
        assert new.created and new.id != old.id
        gone = info_of(q, old.id)
        assert (gone.state, gone.last_error, gone.payload) == (JobState.DEAD, "expired", "old")
        assert info_of(q, new.id).payload == "new"

    @pytest.mark.clause("Q-29", "Q-5", "Q-10")
    def test_a_replaced_retried_job_keeps_an_attempt_to_run(self, store: Store) -> None:
        """A pending holder that already used attempts keeps them; when the new
        ``max_attempts`` is not above them, it is raised to one more, so the job can run."""
        q = _long(store, max_attempts=3)
        first = q.enqueue_unique("k", "v1")
        job = claim_one(q)
        assert job.retry("again", delay_s=LONG_S)
        assert info_of(q, first.id).attempts == 1
        got = q.enqueue_unique("k", "v2", EnqueueOpts(max_attempts=1), on_conflict="replace")
        assert got == Enqueued(first.id, False)
        info = info_of(q, first.id)
        assert (info.payload, info.attempts, info.max_attempts) == ("v2", 1, 2)
        again = claim_one(q)
        assert (again.id, again.payload, again.attempts) == (first.id, "v2", 2)
        assert again.ack()

    @pytest.mark.clause("Q-29", "Q-25")
    @pytest.mark.requires(Capability.GROUPS)
    def test_replace_keeps_the_holders_group(self, store: Store) -> None:
        """The group is part of the job's identity, like its key: a replace keeps it, and the
        group's limit still holds."""
        q = _long(store, group_limit=1)
        running = q.enqueue("busy", EnqueueOpts(group="g"))
        held = q.enqueue_unique("k", "v1", EnqueueOpts(group="g"))
        first = claim_one(q)
        assert first.id == running
        got = q.enqueue_unique(
            "k", "v2", EnqueueOpts(group="other", priority=5), on_conflict="replace"
        )
        assert got == Enqueued(held.id, False)
        info = info_of(q, held.id)
        assert (info.payload, info.priority, info.group) == ("v2", 5, "g")
        assert q.claim("w") is None, "the group is at its limit"
        assert first.ack()
        nxt = claim_one(q)
        assert (nxt.id, nxt.payload) == (held.id, "v2")

    @pytest.mark.clause("Q-29", "Q-24")
    @pytest.mark.requires(Capability.BOUNDED_QUEUES)
    def test_a_full_bounded_queue_still_takes_a_replace_of_its_holder(self, store: Store) -> None:
        """A replace or debounce of a waiting job adds no job, so ``max_depth`` never refuses
        it; a new key on the full queue still does."""
        q = _long(store, max_depth=1)
        held = q.enqueue_unique("k", "v1", EnqueueOpts(delay_s=LONG_S))
        for kwargs in ({"on_conflict": "replace"}, {"debounce_s": LONG_S}):
            assert q.enqueue_unique("k", "v2", **kwargs) == Enqueued(held.id, False)
        assert info_of(q, held.id).payload == "v2"
        with pytest.raises(QueueFull):
            q.enqueue_unique("other", "x", on_conflict="replace", debounce_s=1.0)
        assert counts(q) == (0, 1, 0, 0)

    # ============================================================= debounce

    @pytest.mark.clause("Q-29")
    def test_debounce_moves_run_at_to_the_latest_enqueue_plus_debounce(self, store: Store) -> None:
        """Each debounced enqueue sets the holder's ``run_at`` to its own time plus
        ``debounce_s``: later with every enqueue, never before ``created_at + d``; the payload
        stays unless the call also replaces."""
        q = _long(store)
        d = LONG_S
        started = time.monotonic()
        first = q.enqueue_unique("k", 1, debounce_s=d)
        assert first.created
        info = info_of(q, first.id)
        assert abs(_after_created(info) - d) <= _tol(), "a new job runs debounce_s after now"
        assert counts(q) == (0, 1, 0, 0)

        time.sleep(0.3)
        got = q.enqueue_unique("k", 2, debounce_s=d)
        elapsed = time.monotonic() - started
        assert got == Enqueued(first.id, False)
        second = info_of(q, first.id)
        assert second.payload == 1, "debounce alone keeps the payload"
        assert second.created_at == info.created_at
        moved = _after_created(second) - d
        assert 0.3 - _tol() <= moved <= elapsed + _tol(), moved

        time.sleep(0.1)
        got = q.enqueue_unique("k", 3, debounce_s=d, on_conflict="replace")
        assert got == Enqueued(first.id, False)
        third = info_of(q, first.id)
        assert third.payload == 3, "with replace the payload is the latest"
        assert seconds(third.run_at - second.run_at) >= 0.1 - _tol()
        assert counts(q) == (0, 1, 0, 0)

    @pytest.mark.clause("Q-29")
    def test_debounce_is_capped_at_the_first_enqueue_plus_max_wait(self, store: Store) -> None:
        q = _long(store)
        d, cap = LONG_S, LONG_S + 0.5
        first = q.enqueue_unique("k", "a", debounce_s=d, max_wait_s=cap)
        info = info_of(q, first.id)
        assert abs(_after_created(info) - d) <= _tol()
        time.sleep(0.7)
        for payload in ("b", "c"):
            got = q.enqueue_unique("k", payload, debounce_s=d, max_wait_s=cap)
            assert got == Enqueued(first.id, False)
            capped = info_of(q, first.id)
            assert capped.created_at == info.created_at
            assert abs(_after_created(capped) - cap) <= _tol(), _after_created(capped)

        # A cap already past makes the holder ready now; later enqueues keep it so.
        late = q.enqueue_unique("late", 1, EnqueueOpts(delay_s=LONG_S))
        time.sleep(0.3)
        got = q.enqueue_unique("late", 2, debounce_s=0.1, max_wait_s=0.2)
        assert got == Enqueued(late.id, False)
        ready = info_of(q, late.id)
        assert abs(_after_created(ready) - 0.2) <= _tol()
        assert counts(q) == (1, 1, 0, 0)

    @pytest.mark.clause("Q-29", "Q-19")
    def test_a_holder_made_ready_earlier_wakes_a_blocked_claim(self, store: Store) -> None:
        """A replace whose opts make a scheduled holder ready now, or a debounce shorter than
        its wait, wakes a claim blocked on the queue as an enqueue would."""
        q = _long(store)
        for key, kwargs in (
            ("replaced", {"on_conflict": "replace"}),
            ("debounced", {"debounce_s": 0.0}),
        ):
            held = q.enqueue_unique(key, "old", EnqueueOpts(delay_s=LONG_S))
            job, got = woken_by(
                lambda: q.claim("w", wait_s=60),
                lambda k=key, kw=kwargs: q.enqueue_unique(k, "new", **kw),  # type: ignore[misc]
            )
            assert got == Enqueued(held.id, False)
            assert job is not None and job.id == held.id
            assert job.payload == ("new" if key == "replaced" else "old")
            assert job.ack()

    @pytest.mark.clause("Q-29", "C-6")
    def test_a_key_debounced_many_times_writes_one_job(self, store: Store) -> None:
        q = _long(store)
        results = [
            q.enqueue_unique("hot", i, debounce_s=LONG_S, on_conflict="replace")
            for i in range(MANY_ENQUEUES)
        ]
        assert results[0].created
        assert {r.id for r in results} == {results[0].id}
        assert sum(r.created for r in results) == 1
        assert counts(q) == (0, 1, 0, 0)
        assert q.list_jobs(JobState.DEAD) == []
        info = info_of(q, results[0].id)
        assert info.payload == MANY_ENQUEUES - 1
        assert (info.attempts, info.unique_key) == (0, "hot")

    # ======================================================== enqueue_many

    @pytest.mark.clause("Q-29", "Q-23", "C-6")
    def test_enqueue_many_unique_replaces_and_debounces_item_by_item(self, store: Store) -> None:
        q = _long(store)
        held = q.enqueue_unique("held", "h", EnqueueOpts(delay_s=LONG_S))
        running = q.enqueue_unique("running", "r", EnqueueOpts(priority=9))
        assert claim_one(q).id == running.id
        got = q.enqueue_many_unique(
            [("a", 1), ("held", 2), ("a", 3), ("running", 4)], on_conflict="replace"
        )
        assert [g.created for g in got] == [True, False, False, False]
        assert got[1].id == held.id and got[2].id == got[0].id and got[3].id == running.id
        assert info_of(q, got[0].id).payload == 3, "a repeated key ends with its last item"
        assert info_of(q, held.id).payload == 2
        assert info_of(q, held.id).run_at < info_of(q, got[0].id).created_at + timedelta(
            seconds=LONG_S / 2
        )
        assert info_of(q, running.id).payload == "r"

        deb = q.enqueue_many_unique([("x", 1), ("y", 2)], debounce_s=LONG_S, max_wait_s=LONG_S)
        assert all(d.created for d in deb)
        for d in deb:
            assert abs(_after_created(info_of(q, d.id)) - LONG_S) <= _tol()
        assert counts(q) == (2, 2, 1, 0)

    # ====================================================== transactions

    @pytest.mark.clause("Q-29", "T-1")
    def test_a_rolled_back_replace_leaves_the_holder_unchanged(self, store: Store) -> None:
        q = _long(store)
        first = q.enqueue_unique("k", "old", EnqueueOpts(priority=1, delay_s=LONG_S))
        before = info_of(q, first.id)
        for kwargs in ({"on_conflict": "replace"}, {"debounce_s": 1.0, "on_conflict": "replace"}):
            with contextlib.suppress(_Rollback), store.transaction() as tx:
                got = q.enqueue_unique("k", "new", EnqueueOpts(priority=5), tx=tx, **kwargs)
                assert got == Enqueued(first.id, False)
                raise _Rollback
            assert info_of(q, first.id) == before, f"a rolled-back {kwargs} left a trace"
        with store.transaction() as tx:
            got = q.enqueue_unique("k", "new", EnqueueOpts(priority=5), tx=tx, debounce_s=1.0)
        assert got == Enqueued(first.id, False)
        after = info_of(q, first.id)
        assert (after.payload, after.priority) == ("old", 1)
        assert after.run_at < before.run_at

    # ======================================================== concurrency

    @pytest.mark.clause("Q-29", "Q-3", "Q-23")
    def test_threads_debouncing_one_key_end_with_one_job(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """Threads on two store objects enqueue one debounced key at once (some replacing):
        every call answers with one id, exactly one of them created it."""
        name = unique()
        per_thread, threads_n = 40, 4
        seen: list[Enqueued] = []
        lock = threading.Lock()
        with store_factory.open() as twin:
            handles = [_long(store, name), _long(twin, name)]

            def worker(n: int) -> None:
                q = handles[n % 2]
                for i in range(per_thread):
                    got = q.enqueue_unique(
                        "k",
                        {"t": n, "i": i},
                        debounce_s=LONG_S,
                        on_conflict="replace" if i % 2 else "skip",
                    )
                    with lock:
                        seen.append(got)

            run_threads(
                [lambda n=n: worker(n) for n in range(threads_n)]  # type: ignore[misc]
            )
        assert len(seen) == per_thread * threads_n
        assert len({s.id for s in seen}) == 1, "one key, one job"
        assert sum(s.created for s in seen) == 1
        q = store.queue(name)
        assert counts(q) == (0, 1, 0, 0)
        assert q.list_jobs(JobState.DEAD) == []

    # ========================================================== bad input

    @pytest.mark.clause("Q-29", "C-6", "E-3")
    def test_bad_replace_or_debounce_arguments_raise_and_write_nothing(self, store: Store) -> None:
        q = _long(store)
        held = q.enqueue_unique("held", "h", EnqueueOpts(delay_s=LONG_S))
        before = info_of(q, held.id)
        at = datetime.now(timezone.utc) + timedelta(seconds=LONG_S)
        bad: list[tuple[dict[str, Any], EnqueueOpts | None]] = [
            ({"on_conflict": "update"}, None),
            ({"on_conflict": "REPLACE"}, None),
            ({"on_conflict": None}, None),
            ({"on_conflict": 1}, None),
            ({"debounce_s": -1.0}, None),
            ({"debounce_s": math.nan}, None),
            ({"debounce_s": math.inf}, None),
            ({"debounce_s": "5"}, None),
            ({"debounce_s": True}, None),
            ({"max_wait_s": 5.0}, None),
            ({"debounce_s": 5.0, "max_wait_s": 4.0}, None),
            ({"debounce_s": 5.0, "max_wait_s": math.nan}, None),
            ({"debounce_s": 5.0, "max_wait_s": -1.0}, None),
            ({"debounce_s": 5.0}, EnqueueOpts(delay_s=1.0)),
            ({"debounce_s": 5.0}, EnqueueOpts(run_at=at)),
        ]
        for kwargs, opts in bad:
            for key in ("held", "new"):
                with pytest.raises(InvalidArgument):
                    q.enqueue_unique(key, "x", opts, **kwargs)
            with pytest.raises(InvalidArgument):
                q.enqueue_many_unique([("held", "x"), ("new", "y")], opts, **kwargs)
            # Inside a transaction: refused before any statement, the transaction usable.
            with store.transaction() as tx:
                with pytest.raises(InvalidArgument):
                    q.enqueue_unique("held", "x", opts, tx=tx, **kwargs)
                assert q.enqueue_unique("held", "tx", tx=tx) == Enqueued(held.id, False)
        assert info_of(q, held.id) == before
        assert counts(q) == (0, 1, 0, 0)
        # Bad payloads and keys are refused as Q-23 and C-3 say.
        for key, payload in (("", 1), ("held", math.nan), ("held", object())):
            with pytest.raises(InvalidArgument):
                q.enqueue_unique(key, payload, on_conflict="replace", debounce_s=1.0)
        assert info_of(q, held.id) == before

    @pytest.mark.clause("Q-29")
    def test_every_good_combination_is_accepted(self, store: Store) -> None:
        """Zero and fractional debounces, a cap equal to the debounce, opts with everything
        but a time: all accepted, on a free key and on a held one."""
        q = _long(store)
        combos: list[dict[str, Any]] = [
            {"on_conflict": "skip"},
            {"on_conflict": "replace"},
            {"debounce_s": 0},
            {"debounce_s": 0.25, "max_wait_s": 0.25},
            {"debounce_s": 1, "max_wait_s": 2, "on_conflict": "replace"},
        ]
        for n, kwargs in zip(itertools.count(), combos):
            key = f"k{n}"
            opts = EnqueueOpts(priority=1, max_attempts=2, expires_s=LONG_S)
            assert q.enqueue_unique(key, 1, opts, **kwargs).created
            assert not q.enqueue_unique(key, 2, opts, **kwargs).created
