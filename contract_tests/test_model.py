"""A model-based test of the queue (SPEC §5), on both engines.

A hypothesis state machine drives one queue with enqueue, claim, claim_batch,
ack, ack_batch, retry, fail, heartbeat, cancel, sweep (and redrive, once an
engine has it) while real time moves (short timeouts, retry delays, expiry),
and keeps a small model of what SPEC §5 says must happen. After every step it
compares ``get_job`` of every job it ever made and ``stats()`` with the model.

Time is the engine's real clock. Every time-stamped step records a window
``[before, after]`` of the monotonic clock around the call, so each deadline,
ready time and expiry is known to lie in a window. Before a step whose result
depends on time, :meth:`QueueMachine.settle` sleeps until no window is within
:data:`MARGIN_S` of now: then every boundary is clearly past or clearly
ahead, and the model's answer is exact. A step must take less than the
margin (milliseconds, normally).
"""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, reject, settings
from hypothesis import strategies as st
from hypothesis.errors import FlakyStrategyDefinition
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from alkstore import Job, JobState, QueueOpts, Store

from .engines import Engine, engine

__all__ = ["engine"]

#: No boundary is decided within this distance of it.
MARGIN_S = 0.08
VT_S = 0.3
MAX_ATTEMPTS = 2
LONG_S = 300.0
#: Room for the model's windows to be kept: a step slower than this makes
#: the test report it rather than guess.
SLOW_STEP_S = MARGIN_S * 0.9

_names = itertools.count()


@dataclass
class Window:
    """A time (monotonic seconds) known to lie in ``[lo, hi]``."""

    lo: float
    hi: float

    def shifted(self, seconds: float) -> Window:
        return Window(self.lo + seconds, self.hi + seconds)

    def passed(self, now: float) -> bool:
        return self.hi + MARGIN_S < now

    def ambiguous(self, now: float) -> bool:
        return self.lo - MARGIN_S <= now <= self.hi + MARGIN_S


NEVER = Window(float("inf"), float("inf"))


@dataclass
class Row:
    """The model of one job."""

    id: int
    priority: int
    state: str  # "pending" | "processing" | "dead" | "gone"
    ready: Window  # pending: when claimable; processing: the deadline
    expires: Window = field(default_factory=lambda: NEVER)
    attempts: int = 0
    claims: int = 0  # claim number: never repeats
    group: int = 0  # rows stamped by one statement share a ready time
    last_error: str | None = None

    @property
    def live(self) -> bool:
        return self.state in ("pending", "processing")


@dataclass
class Handle:
    job: Job
    claims: int


class QueueMachine(RuleBasedStateMachine):
    """Subclassed per test with ``STORE`` set."""

    STORE: Store

    def __init__(self) -> None:
        super().__init__()
        self.q = self.STORE.queue(
            f"model-{next(_names)}",
            QueueOpts(visibility_timeout_s=VT_S, max_attempts=MAX_ATTEMPTS, backoff_base_s=0),
        )
        self.rows: dict[int, Row] = {}
        self.handles: list[Handle] = []
        self.groups = itertools.count(1)
        self.can_redrive = callable(getattr(self.q, "redrive", None))

    # ------------------------------------------------------------- the clock

    def settle(self) -> float:
        """Sleep until no boundary is ambiguous; return the monotonic now."""
        while True:
            now = time.monotonic()
            waits = [
                w.hi + MARGIN_S - now + 0.005
                for r in self.rows.values()
                if r.live
                for w in (r.ready, r.expires)
                if w.ambiguous(now)
            ]
            if not waits:
                return now
            time.sleep(max(waits))

    def stamp(self, call: Any) -> tuple[Any, Window]:
        before = time.monotonic()
        result = call()
        after = time.monotonic()
        if after - before >= SLOW_STEP_S:
            # The machine stalled for longer than the model's margins: this
            # run cannot decide its boundaries, so it is inconclusive, not
            # failed (hypothesis tries another).
            reject()
        return result, Window(before, after)

    # --------------------------------------------------------------- model

    def claimable(self, row: Row, now: float) -> bool:
        if not row.live or row.attempts >= MAX_ATTEMPTS or row.expires.passed(now):
            return False
        # Pending: ready time passed; processing: the claim lapsed.
        return row.ready.passed(now)

    def exhaust(self, now: float) -> int:
        """Q-12: lapsed claims without budget go dead."""
        moved = 0
        for row in self.rows.values():
            if row.state == "processing" and row.ready.passed(now) and row.attempts >= MAX_ATTEMPTS:
                row.state, row.last_error = "dead", "max attempts exceeded"
                moved += 1
        return moved

    def valid(self, handle: Handle, now: float) -> bool:
        row = self.rows[handle.job.id]
        return (
            row.state == "processing" and row.claims == handle.claims and not row.ready.passed(now)
        )

    def precedes(self, a: Row, b: Row) -> bool:
        """*a* certainly comes before *b* in claim order (Q-2)."""
        if a.priority != b.priority:
            return a.priority > b.priority
        if a.group == b.group and a.ready.lo == b.ready.lo:
            return a.id < b.id
        return a.ready.hi < b.ready.lo

    # ---------------------------------------------------------------- rules

    @rule(
        priorities=st.lists(st.integers(0, 2), min_size=1, max_size=3),
        expires=st.sampled_from([None, None, 0.4, LONG_S]),
    )
    def enqueue(self, priorities: list[int], expires: float | None) -> None:
        """One enqueue per priority, or one enqueue_many when they agree."""
        from alkstore import EnqueueOpts

        if len(priorities) > 1 and len(set(priorities)) == 1:
            opts = EnqueueOpts(priority=priorities[0], expires_s=expires)
            payloads = [{"p": p} for p in priorities]
            new, window = self.stamp(lambda: self.q.enqueue_many(payloads, opts))
            self.add_rows(new, priorities, window, expires)
            return
        for priority in priorities:
            opts = EnqueueOpts(priority=priority, expires_s=expires)
            job_id, window = self.stamp(lambda p=priority, o=opts: self.q.enqueue({"p": p}, o))
            self.add_rows([job_id], [priority], window, expires)

    def add_rows(
        self, ids: list[int], priorities: list[int], window: Window, expires: float | None
    ) -> None:
        group = next(self.groups)
        for job_id, priority in zip(ids, priorities, strict=True):
            assert job_id not in self.rows, "an id was handed out twice"
            self.rows[job_id] = Row(
                id=job_id,
                priority=priority,
                state="pending",
                ready=window,
                expires=NEVER if expires is None else window.shifted(expires),
                group=group,
            )

    @rule(n=st.sampled_from([1, 1, 2, 4]))
    def claim(self, n: int) -> None:
        now = self.settle()
        candidates = [r for r in self.rows.values() if self.claimable(r, now)]
        if n == 1:
            got, window = self.stamp(lambda: self.q.claim("w"))
            jobs = [] if got is None else [got]
        else:
            jobs, window = self.stamp(lambda: self.q.claim_batch("w", n))
        self.exhaust(now)
        assert len(jobs) == min(n, len(candidates)), (
            f"claimed {len(jobs)} of {len(candidates)} claimable with n={n}"
        )
        picked = {j.id for j in jobs}
        assert picked <= {r.id for r in candidates}, "a claim handed out an unclaimable job"
        for loser in (r for r in candidates if r.id not in picked):
            for winner in (self.rows[i] for i in picked):
                assert not self.precedes(loser, winner), (
                    f"job {loser.id} comes before {winner.id} in claim order (Q-2)"
                )
        for job in jobs:
            row = self.rows[job.id]
            row.state, row.attempts, row.claims = "processing", row.attempts + 1, row.claims + 1
            row.ready = window.shifted(VT_S)
            assert job.attempts == row.attempts, "a claim counts one attempt (Q-5)"
            assert job.payload == {"p": row.priority}
            self.handles.append(Handle(job, row.claims))

    @precondition(lambda self: bool(self.handles))
    @rule(data=st.data(), op=st.sampled_from(["ack", "retry", "retry", "fail", "heartbeat"]))
    def handle_op(self, data: st.DataObject, op: str) -> None:
        handle = data.draw(st.sampled_from(self.handles), label="handle")
        now = self.settle()
        valid = self.valid(handle, now)
        row = self.rows[handle.job.id]
        job = handle.job
        if op == "ack":
            ok, _ = self.stamp(job.ack)
            if valid:
                row.state = "gone"
        elif op == "fail":
            ok, _ = self.stamp(lambda: job.fail("failed"))
            if valid:
                row.state, row.last_error = "dead", "failed"
        elif op == "retry":
            delay = data.draw(st.sampled_from([None, 0.0, 0.2, 0.2, LONG_S]), label="delay")
            ok, window = self.stamp(lambda: job.retry("retried", delay))
            if valid:
                if row.attempts >= MAX_ATTEMPTS:
                    row.state, row.last_error = "dead", "retried"
                else:
                    row.state, row.ready = "pending", window.shifted(delay or 0.0)
                    row.group = next(self.groups)
        else:
            extend = data.draw(st.sampled_from([None, 0.01, 0.5, LONG_S]), label="extend")
            ok, window = self.stamp(lambda: job.heartbeat(extend))
            if valid:
                row.ready = window.shifted(VT_S if extend is None else extend)
        assert ok is valid, f"{op} returned {ok}, the model says {valid} (Q-7)"

    @precondition(lambda self: bool(self.handles))
    @rule(data=st.data())
    def ack_batch(self, data: st.DataObject) -> None:
        chosen = data.draw(st.lists(st.sampled_from(self.handles), max_size=4, unique_by=id))
        now = self.settle()
        expected = 0
        for handle in chosen:
            if self.valid(handle, now):
                self.rows[handle.job.id].state = "gone"
                expected += 1
        landed, _ = self.stamp(lambda: self.q.ack_batch([h.job for h in chosen]))
        assert landed == expected, f"ack_batch landed {landed}, the model says {expected}"

    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        known = sorted(self.rows)
        job_id = data.draw(st.sampled_from([*known, 10**9]) if known else st.just(10**9))
        row = self.rows.get(job_id)
        expected = row is not None and row.live
        ok, _ = self.stamp(lambda: self.q.cancel(job_id))
        if expected:
            assert row is not None
            row.state = "gone"
        assert ok is expected, f"cancel({job_id}) returned {ok}, the model says {expected}"

    @rule()
    def sweep(self) -> None:
        now = self.settle()
        expired = 0
        for row in self.rows.values():
            if row.live and row.expires.passed(now):
                row.state, row.last_error = "dead", "expired"
                expired += 1
        exhausted = self.exhaust(now)
        result, _ = self.stamp(self.q.sweep_expired)
        assert (result.expired, result.exhausted, result.purged) == (expired, exhausted, 0)

    @precondition(lambda self: self.can_redrive)
    @rule()
    def redrive(self) -> None:
        dead = [r for r in self.rows.values() if r.state == "dead"]
        moved, window = self.stamp(lambda: self.q.redrive())
        group = next(self.groups)
        for row in dead:
            row.state, row.attempts, row.last_error = "pending", 0, None
            row.ready, row.expires, row.group = window, NEVER, group
        assert moved == len(dead)

    @rule(seconds=st.sampled_from([0.1, 0.35]))
    def advance(self, seconds: float) -> None:
        time.sleep(seconds)

    # ------------------------------------------------------------ invariants

    @invariant()
    def jobs_and_stats_match_the_model(self) -> None:
        now = self.settle()
        for row in self.rows.values():
            info = self.q.get_job(row.id)
            if row.state == "gone":
                assert info is None, f"job {row.id} should be gone, is {info and info.state}"
                continue
            assert info is not None, f"job {row.id} vanished; the model has it {row.state}"
            assert info.state is JobState(row.state), (
                f"job {row.id} is {info.state}, the model says {row.state}"
            )
            assert info.attempts == row.attempts
            if row.state == "dead":
                assert info.last_error == row.last_error
        live = [r for r in self.rows.values() if r.live]
        expected = (
            sum(1 for r in live if r.state == "pending" and r.ready.passed(now)),
            sum(1 for r in live if r.state == "pending" and not r.ready.passed(now)),
            sum(1 for r in live if r.state == "processing"),
            sum(1 for r in self.rows.values() if r.state == "dead"),
        )
        stats = self.q.stats()
        assert (stats.pending, stats.scheduled, stats.processing, stats.dead) == expected


#: Whole runs made before a run cut short by the machine's stalls is reported.
INCONCLUSIVE_RUNS = 3

MODEL = settings(
    max_examples=int(os.environ.get("ALKSTORE_MODEL_EXAMPLES", "15")),
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
    ],
    database=None,
)


def test_queue_follows_the_model_of_spec_5(engine: Engine) -> None:
    with engine.factory.open() as store:

        class Machine(QueueMachine):
            STORE = store

        for run in range(INCONCLUSIVE_RUNS):
            try:
                run_state_machine_as_test(Machine, settings=MODEL)
                return
            except FlakyStrategyDefinition:
                # A step slower than the margins rejects its example; when
                # hypothesis later replays that prefix and the step is fast,
                # the example goes on, and hypothesis reports the difference
                # as inconsistent generation. That run decided nothing (a
                # model violation raises AssertionError, not this): run again.
                if run == INCONCLUSIVE_RUNS - 1:
                    raise


def test_model_window_arithmetic() -> None:
    w = Window(10.0, 10.01)
    assert w.shifted(1).lo == 11.0
    assert w.passed(10.2) and not w.passed(10.05)
    assert w.ambiguous(10.05) and not w.ambiguous(9.8)
    assert not NEVER.passed(1e18)
