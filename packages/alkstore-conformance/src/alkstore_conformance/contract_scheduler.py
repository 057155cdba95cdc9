"""The scheduler (SC-1..SC-6).

Fire times are checked two ways: against the contract package's parser
(:func:`alkstore.specs.parse`), which every engine must use so that all of them
fire at the same times, and against times computed here from the calendar,
independently of any cron library (day-of-month OR day-of-week, time zones,
UTC by default).

Timing tests use ``@every 1s`` and six-field ``* * * * * *`` schedules, so a
fire is never more than a second away. Where this process's clock is compared
with an engine timestamp, :data:`CLOCK_SLACK` absorbs the difference
(PostgreSQL stamps with the server's clock, C-4).
"""

from __future__ import annotations

import itertools
import queue as queue_mod
import threading
import time
from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from alkstore import (
    Capability,
    EnqueueOpts,
    InvalidArgument,
    InvalidSpec,
    JobState,
    Queue,
    QueueOpts,
    ReservedName,
    Schedule,
    Store,
)
from alkstore.specs import parse

from . import _children_scheduler
from ._base import (
    STOP_WITHIN_S,
    ContractBase,
    StoppableCall,
    eventually,
    reap,
    signals,
    spawn,
    unique,
)
from ._factory import StoreFactory

UTC = timezone.utc
ONE_S = timedelta(seconds=1)
#: How far this process's clock and the engine's may disagree in a comparison.
CLOCK_SLACK = timedelta(seconds=0.25)
#: ``run_schedules`` honours ``stop`` within about a quarter of a second; this
#: is the generous bound for a loaded machine.
#: Slack on top of the lock TTL and the fire interval for a standby to take
#: over from a killed leader and fire (SC-5).
TAKEOVER_SLACK_S = 4.0
#: A gap between two consecutive ticks (over all tickers) shorter than this
#: leaves no ``@every 1s`` fire unticked, so none may be coalesced (SC-3/SC-4).
DENSE_GAP_S = 0.9
#: The reserved prefix of outbox backing queues (Q-20).
OUTBOX_PREFIX = "__alkstore.outbox."
#: The scheduler's leader lock (SC-5).
SCHEDULER_LOCK = "__alkstore.scheduler"

ACCEPTED_SPECS = [
    "* * * * *",
    "*/5 * * * *",
    "15,45 8-18/2 * * *",
    "0 9 * * 1-5",
    "0 0 29 2 *",
    "0 0 13 * FRI",
    "0 12 * JAN MON",
    "0 0 1 jul *",
    "* * * * * *",
    "30 */2 * * * *",
    "0 0 12 * * SUN",
    "@hourly",
    "@daily",
    "@midnight",
    "@weekly",
    "@monthly",
    "@yearly",
    "@annually",
    "@every 1s",
    "@every 300s",
    "@every 45m",
    "@every 1h30m",
    "@every 2d",
    "@every 1d2h3m4s",
]

BAD_SPECS: list[Any] = [
    "* * * * * * *",
    "* * * *",
    "@every",
    "@every 0s",
    "@every 5x",
    "@every 5",
    "@every -1s",
    "@fortnightly",
    "61 * * * *",
    "* 24 * * *",
    "* * * 13 *",
    "60 * * * * *",
    "* * 30 2 *",
    "0 0 31 4 *",
    "H * * * *",
    "R * * * *",
    "every 5s",
    "",
    "   ",
    None,
    5,
    1.5,
    b"* * * * *",
    ["*", "*", "*", "*", "*"],
]

# Names and their numeric equivalents: the same fire times.
NAMED_SPECS = [
    ("0 12 * JAN MON", "0 12 * 1 1"),
    ("0 0 1 jul *", "0 0 1 7 *"),
    ("0 0 * * mon-fri", "0 0 * * 1-5"),
    ("0 6 * FEB-APR SAT,SUN", "0 6 * 2-4 6,0"),
    ("0 0 12 * * SUN", "0 0 12 * * 0"),
]


# ------------------------------------------------------------------- helpers


def _now() -> datetime:
    return datetime.now(UTC)


def _secs(delta: timedelta) -> float:
    return delta / timedelta(seconds=1)


def _sleep_until(when: datetime) -> None:
    """Sleep until this process's clock reaches *when*."""
    remaining = _secs(when - _now())
    if remaining > 0:
        time.sleep(remaining)


def _count(q: Queue) -> int:
    """Every job of *q*, in any state."""
    s = q.stats()
    return s.pending + s.scheduled + s.processing + s.dead


def _by_name(store: Store) -> dict[str, Schedule]:
    return {s.name: s for s in store.schedules()}


def _whole_seconds(delta: timedelta) -> bool:
    seconds = _secs(delta)
    return abs(seconds - round(seconds)) < 1e-3


def _is_fire_time(spec: str, when: datetime, tz: str = "UTC") -> bool:
    """*when* is one of the cron *spec*'s fire times."""
    return parse(spec).first_fire(when - timedelta(microseconds=1), tz) == when


def _first_day_at(
    after: datetime, zone: str, hour: int, minute: int, day_ok: Callable[[date], bool]
) -> datetime:
    """Computed from the calendar, no cron library: the first time after
    *after* that is *hour*:*minute* in *zone* on a day that *day_ok* accepts."""
    tz = ZoneInfo(zone)
    day = after.astimezone(tz).date() - timedelta(days=1)
    while True:
        if day_ok(day):
            local = datetime(day.year, day.month, day.day, hour, minute, tzinfo=tz)
            if local > after:
                return local.astimezone(UTC)
        day += timedelta(days=1)


def _any_day(day: date) -> bool:
    return True


def _next_top_of_hour(after: datetime) -> datetime:
    return after.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)


def _next_midnight(day_ok: Callable[[date], bool]) -> Callable[[datetime], datetime]:
    def first(after: datetime) -> datetime:
        return _first_day_at(after, "UTC", 0, 0, day_ok)

    return first


def _check_first_fire(sched: Schedule, before: datetime, after: datetime) -> None:
    """*sched*, just registered between *before* and *after*, has the first fire
    time after its registration as its next fire time (SC-1)."""
    parsed = parse(sched.spec)
    lo, hi = before - CLOCK_SLACK, after + CLOCK_SLACK
    if parsed.interval_s is not None:
        # @every is anchored at registration: first fire = now + interval.
        step = timedelta(seconds=parsed.interval_s)
        assert lo + step <= sched.next_fire_at <= hi + step, (sched, before, after)
        return
    assert parsed.first_fire(lo, sched.tz) <= sched.next_fire_at, (sched, before)
    assert sched.next_fire_at <= parsed.first_fire(hi, sched.tz), (sched, after)
    assert _is_fire_time(sched.spec, sched.next_fire_at, sched.tz), sched


def _sweep_every_queue(store: Store) -> None:
    """The maintenance handler of the recipe (SC-6): sweep every queue that has
    rows, outbox backing queues through their outbox."""
    for stats in store.queue_stats():
        name = stats.queue
        if name.startswith(OUTBOX_PREFIX):
            store.outbox(name[len(OUTBOX_PREFIX) :]).queue.sweep_expired()
        elif not name.startswith("__alkstore"):
            store.queue(name).sweep_expired()


def _maintenance_worker(store: Store, queue_name: str, stop: threading.Event) -> None:
    """A plain claim/ack loop on the maintenance queue (SC-6)."""
    mq = store.queue(queue_name)
    while not stop.is_set():
        job = mq.claim("maintenance-worker", wait_s=0.2)
        if job is None:
            continue
        _sweep_every_queue(store)
        job.ack()


def _runner(
    store: Store, owner: str | None = None, lock_ttl_s: float = 30.0
) -> Callable[[threading.Event], object]:
    def target(stop: threading.Event) -> None:
        store.run_schedules(stop, owner=owner, lock_ttl_s=lock_ttl_s)

    return target


def _fires_since(first: datetime, sched: Schedule) -> int:
    """How many one-second fire times run from *first* to ``sched.last_fire_at``."""
    assert sched.last_fire_at is not None, sched
    elapsed = _secs(sched.last_fire_at - first)
    assert abs(elapsed - round(elapsed)) < 1e-3, ("phase lost", first, sched)
    return round(elapsed) + 1


def _max_gap(starts: list[float], since: float) -> float:
    """The longest stretch without a tick starting, from *since* on."""
    times = sorted([since, *(t for t in starts if t >= since)])
    return max((b - a for a, b in itertools.pairwise(times)), default=0.0)


class SchedulerContract(ContractBase):
    """The scheduler (SC-1..SC-6)."""

    # ---------------------------------------------------------------- SC-1

    @pytest.mark.clause("SC-1")
    @pytest.mark.requires(Capability.SCHEDULER)
    def test_schedule_every_accepted_form_stores_its_first_fire(self, store: Store) -> None:
        queue = unique()
        registered: dict[str, Schedule] = {}
        for n, spec in enumerate(ACCEPTED_SPECS):
            before = _now()
            sched = store.schedule(f"s{n}", spec, queue)
            after = _now()
            assert sched.name == f"s{n}"
            assert sched.spec == spec
            assert sched.queue == queue
            assert sched.payload is None
            assert sched.tz == "UTC"
            assert sched.last_fire_at is None
            assert sched.next_fire_at.utcoffset() == timedelta(0)
            _check_first_fire(sched, before, after)
            registered[sched.name] = sched
        assert _by_name(store) == registered

    @pytest.mark.clause("SC-1")
    @pytest.mark.requires(Capability.SCHEDULER)
    def test_schedule_nicknames_fire_at_their_standard_times(self, store: Store) -> None:
        """Computed from the calendar: top of the hour, midnight, Sunday
        midnight, the 1st of the month, January 1st (all UTC)."""
        expect: dict[str, Callable[[datetime], datetime]] = {
            "@hourly": _next_top_of_hour,
            "@daily": _next_midnight(_any_day),
            "@midnight": _next_midnight(_any_day),
            "@weekly": _next_midnight(lambda d: d.weekday() == 6),
            "@monthly": _next_midnight(lambda d: d.day == 1),
            "@yearly": _next_midnight(lambda d: (d.month, d.day) == (1, 1)),
            "@annually": _next_midnight(lambda d: (d.month, d.day) == (1, 1)),
        }
        for spec, first in expect.items():
            before = _now()
            sched = store.schedule(unique("s"), spec, unique())
            after = _now()
            assert sched.next_fire_at in {first(before - CLOCK_SLACK), first(after + CLOCK_SLACK)}
            assert sched.next_fire_at > before - CLOCK_SLACK

    @pytest.mark.clause("SC-1", "C-6")
    @pytest.mark.requires(Capability.SCHEDULER)
    def test_schedule_bad_spec_raises_invalid_spec_and_writes_nothing(self, store: Store) -> None:
        for bad in BAD_SPECS:
            with pytest.raises(InvalidSpec) as info:
                store.schedule("fresh", bad, "q")
            assert info.value.spec == bad
            assert isinstance(info.value, InvalidArgument)
        assert store.schedules() == []
        # Nor does a refused re-registration touch the schedule it names.
        kept = store.schedule("kept", "@every 1h", "q", {"v": 1})
        for bad in BAD_SPECS:
            with pytest.raises(InvalidSpec):
                store.schedule("kept", bad, "other", {"v": 2})
        assert store.schedules() == [kept]

    @pytest.mark.clause("SC-1", "C-6")
    @pytest.mark.requires(Capability.SCHEDULER)
    def test_schedule_bad_timezone_or_arguments_raise_invalid_argument(self, store: Store) -> None:
        kept = store.schedule("kept", "0 9 * * *", "q", tz="Europe/Paris")
        bad_zones: list[Any] = ["Mars/Olympus_Mons", "", "UTC+1", "../../etc/passwd", None, 0]
        for name in ("fresh", "kept"):
            for zone in bad_zones:
                with pytest.raises(InvalidArgument):
                    store.schedule(name, "0 9 * * *", "q", tz=zone)
            with pytest.raises(InvalidArgument):
                store.schedule(name, "@hourly", "q", payload=float("nan"))
            with pytest.raises(InvalidArgument):
                store.schedule(name, "@hourly", "q", payload={"set": {1}})
            with pytest.raises(InvalidArgument):
                # A recurring job has no single start time.
                store.schedule(name, "@hourly", "q", opts=EnqueueOpts(run_at=_now()))
            with pytest.raises(InvalidArgument):
                store.schedule(name, "@hourly", "q", opts=QueueOpts())  # type: ignore[arg-type]
        assert store.schedules() == [kept]

    @pytest.mark.clause("SC-1")
    @pytest.mark.requires(Capability.SCHEDULER)
    def test_schedule_month_and_weekday_names_fire_like_numbers(self, store: Store) -> None:
        ref = datetime(2026, 3, 15, 12, 30, tzinfo=UTC)
        for named, numeric in NAMED_SPECS:
            assert parse(named).first_fire(ref) == parse(numeric).first_fire(ref)
            before = _now()
            sched = store.schedule(unique("named"), named, "q")
            after = _now()
            # The named spec's first fire is the numeric spec's.
            as_numeric = Schedule(
                sched.name, numeric, "q", None, None, "UTC", sched.next_fire_at, None
            )
            _check_first_fire(as_numeric, before, after)

    @pytest.mark.clause("SC-1")
    @pytest.mark.requires(Capability.SCHEDULER)
    def test_schedule_dom_and_dow_both_restricted_fires_on_either(self, store: Store) -> None:
        """Standard cron: ``0 0 13 * FRI`` fires on every 13th and every Friday,
        not only on Friday the 13th."""
        # The parser over April 2026 (Fridays 3, 10, 17, 24; the 13th a Monday).
        spec = parse("0 0 13 * FRI")
        t = datetime(2026, 4, 1, tzinfo=UTC)
        days = []
        while True:
            t = spec.first_fire(t)
            if t.month != 4:
                break
            days.append(t.day)
        assert days == [3, 10, 13, 17, 24]
        # Through the store, against the calendar.
        cases: dict[str, Callable[[date], bool]] = {
            "0 0 13 * FRI": lambda d: d.day == 13 or d.weekday() == 4,
            "0 0 13 * *": lambda d: d.day == 13,
            "0 0 * * FRI": lambda d: d.weekday() == 4,
            "0 0 1,15 * MON": lambda d: d.day in (1, 15) or d.weekday() == 0,
        }
        for text, day_ok in cases.items():
            before = _now()
            sched = store.schedule(unique("s"), text, "q")
            after = _now()
            expected = {
                _first_day_at(before - CLOCK_SLACK, "UTC", 0, 0, day_ok),
                _first_day_at(after + CLOCK_SLACK, "UTC", 0, 0, day_ok),
            }
            assert sched.next_fire_at in expected, (text, sched)

    @pytest.mark.clause("SC-1")
    @pytest.mark.requires(Capability.SCHEDULER)
    def test_schedule_with_tz_fires_at_local_time(self, store: Store) -> None:
        for zone in ("America/New_York", "Asia/Kolkata", "Australia/Lord_Howe"):
            before = _now()
            sched = store.schedule(unique("s"), "0 9 * * *", "q", tz=zone)
            after = _now()
            assert sched.tz == zone
            expected = {
                _first_day_at(before - CLOCK_SLACK, zone, 9, 0, _any_day),
                _first_day_at(after + CLOCK_SLACK, zone, 9, 0, _any_day),
            }
            assert sched.next_fire_at in expected, (zone, sched)
            local = sched.next_fire_at.astimezone(ZoneInfo(zone))
            assert (local.hour, local.minute) == (9, 0)
            if zone == "America/New_York":  # 14:00 UTC in winter, 13:00 in summer
                assert sched.next_fire_at.astimezone(UTC).hour in (13, 14)
        # Across a DST change the local time holds and the UTC time moves.
        daily = parse("0 9 * * *")
        ny = "America/New_York"
        assert daily.first_fire(datetime(2026, 1, 10, tzinfo=UTC), ny).hour == 14
        assert daily.first_fire(datetime(2026, 7, 10, tzinfo=UTC), ny).hour == 13
        before_change = datetime(2026, 3, 7, 14, 0, tzinfo=UTC)  # 09:00 EST
        after_change = daily.next_fire(before_change, before_change, ny)
        assert after_change == datetime(2026, 3, 8, 13, 0, tzinfo=UTC)  # 09:00 EDT

    @pytest.mark.clause("SC-1")
    @pytest.mark.requires(Capability.SCHEDULER)
    def test_schedule_without_tz_fires_in_utc(self, store: Store) -> None:
        before = _now()
        sched = store.schedule(unique("s"), "0 9 * * *", "q")
        after = _now()
        assert sched.tz == "UTC"
        expected = {
            _first_day_at(before - CLOCK_SLACK, "UTC", 9, 0, _any_day),
            _first_day_at(after + CLOCK_SLACK, "UTC", 9, 0, _any_day),
        }
        assert sched.next_fire_at in expected
        utc = sched.next_fire_at.astimezone(UTC)
        assert (utc.hour, utc.minute, utc.second) == (9, 0, 0)

    # ---------------------------------------------------------------- SC-2

    @pytest.mark.clause("SC-2")
    @pytest.mark.requires(Capability.SCHEDULER, Capability.QUEUES)
    def test_schedule_reregistered_unchanged_keeps_next_fire_even_when_due(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """Re-registering at every restart neither pushes an ``@every`` schedule
        back nor drops a fire that came due while nothing ticked."""
        q = store.queue(unique())
        first = store.schedule("every", "@every 1s", q.name, {"p": 1})
        time.sleep(0.4)
        again = store.schedule("every", "@every 1s", q.name, {"p": 1})
        assert again == first
        # Due now, unticked; a restarted application registers it again.
        _sleep_until(first.next_fire_at + CLOCK_SLACK)
        with store_factory.open() as restarted:
            assert restarted.schedule("every", "@every 1s", q.name, {"p": 1}) == first
            assert restarted.tick_schedules() == 1
        assert _count(q) == 1
        fired = _by_name(store)["every"]
        # The fire that came due (a later one only if this machine stalled).
        assert fired.last_fire_at is not None
        assert fired.last_fire_at >= first.next_fire_at
        assert _whole_seconds(fired.last_fire_at - first.next_fire_at)
        assert fired.next_fire_at == fired.last_fire_at + ONE_S

    @pytest.mark.clause("SC-2", "SC-1")
    @pytest.mark.requires(Capability.SCHEDULER)
    def test_schedule_with_changed_spec_or_tz_recomputes_next_fire(self, store: Store) -> None:
        yearly = store.schedule("s", "@yearly", "q")
        before = _now()
        every = store.schedule("s", "@every 1s", "q")
        after = _now()
        assert every.next_fire_at != yearly.next_fire_at
        _check_first_fire(every, before, after)
        utc = store.schedule("s", "30 9 * * *", "q")
        kolkata = store.schedule("s", "30 9 * * *", "q", tz="Asia/Kolkata")
        assert utc.next_fire_at.astimezone(UTC).hour == 9
        assert kolkata.next_fire_at.astimezone(UTC).time().isoformat() == "04:00:00"
        assert kolkata.tz == "Asia/Kolkata"
        assert _by_name(store) == {"s": kolkata}

    @pytest.mark.clause("SC-2", "SC-3")
    @pytest.mark.requires(Capability.SCHEDULER, Capability.QUEUES)
    def test_schedule_with_changed_payload_queue_opts_keeps_next_fire_and_uses_them(
        self, store: Store
    ) -> None:
        """Later fires enqueue the new payload on the new queue with the new
        opts; the job carries ``QueueOpts()`` stamps and the schedule's opts."""
        old_q, new_q = store.queue(unique("old")), store.queue(unique("new"))
        first = store.schedule("s", "@every 1s", old_q.name, {"v": "old"})
        opts = EnqueueOpts(priority=7, delay_s=30, max_attempts=9, expires_s=3600)
        changed = store.schedule("s", "@every 1s", new_q.name, {"v": "new"}, opts=opts)
        assert changed.next_fire_at == first.next_fire_at
        assert (changed.queue, changed.payload, changed.opts) == (new_q.name, {"v": "new"}, opts)
        _sleep_until(first.next_fire_at + CLOCK_SLACK)
        assert store.tick_schedules() == 1
        assert _count(old_q) == 0
        (info,) = new_q.list_jobs(JobState.PENDING)
        defaults = QueueOpts()
        assert info.payload == {"v": "new"}
        assert info.priority == 7
        assert info.max_attempts == 9
        assert info.attempts == 0
        assert info.visibility_timeout_s == defaults.visibility_timeout_s
        assert info.backoff_base_s == defaults.backoff_base_s
        assert info.dead_letter_retention_s is None
        assert abs(_secs(info.run_at - info.created_at) - 30) < 0.01
        assert info.expires_at is not None
        assert abs(_secs(info.expires_at - info.created_at) - 3600) < 0.01
        assert new_q.stats().scheduled == 1  # delay_s holds it back

    @pytest.mark.clause("SC-2", "C-2")
    @pytest.mark.requires(Capability.SCHEDULER, Capability.QUEUES)
    def test_unschedule_removes_once_and_stops_fires(self, store: Store) -> None:
        q = store.queue(unique())
        yearly = store.schedule("yearly", "@yearly", q.name)
        hourly = store.schedule("slow", "@every 1h", q.name, [1, 2])
        gone = store.schedule("gone", "* * * * * *", q.name)
        assert _by_name(store) == {"yearly": yearly, "slow": hourly, "gone": gone}
        assert store.unschedule("gone") is True
        assert store.unschedule("gone") is False
        assert store.unschedule("never-registered") is False
        assert _by_name(store) == {"yearly": yearly, "slow": hourly}
        with pytest.raises(InvalidArgument):
            store.unschedule("")
        with pytest.raises(ReservedName):
            store.unschedule("__alkstore.x")
        _sleep_until(gone.next_fire_at + CLOCK_SLACK)
        assert store.tick_schedules() == 0
        assert _count(q) == 0

    # ---------------------------------------------------------------- SC-3

    def _start_fire_race(self, store: Store, n_every: int = 2) -> dict[str, tuple[Queue, Schedule]]:
        """``@every 1s`` schedules and one ``* * * * * *``, each on its queue."""
        specs = ["@every 1s"] * n_every + ["* * * * * *"]
        race: dict[str, tuple[Queue, Schedule]] = {}
        for n, spec in enumerate(specs):
            q = store.queue(unique(f"race{n}"))
            sched = store.schedule(unique(f"race{n}"), spec, q.name, {"n": n})
            race[sched.name] = (q, sched)
            time.sleep(0.13)  # spread the phases
        return race

    def _check_fired_once_each(
        self,
        store: Store,
        race: dict[str, tuple[Queue, Schedule]],
        fired_total: int,
        dense: bool,
    ) -> None:
        """Every fire time from each schedule's first to its ``last_fire_at``
        enqueued exactly one job (all of them when the tickers left no gap
        long enough to coalesce one), and the tickers' return values add up to
        the jobs enqueued."""
        now = _by_name(store)
        total = 0
        for name, (q, registered) in race.items():
            sched = now[name]
            fires = _fires_since(registered.next_fire_at, sched)
            jobs = q.list_jobs(JobState.PENDING, limit=1000)
            assert jobs, f"{name} never fired"
            assert all(j.payload == registered.payload for j in jobs)
            assert len(jobs) == _count(q)
            if dense:
                assert len(jobs) == fires, (name, len(jobs), fires)
            else:  # a stalled machine may coalesce fires (SC-4), never double one
                assert len(jobs) <= fires, (name, len(jobs), fires)
            assert sched.last_fire_at is not None
            assert sched.next_fire_at == sched.last_fire_at + ONE_S
            total += len(jobs)
        assert fired_total == total

    @pytest.mark.clause("SC-3")
    @pytest.mark.requires(Capability.SCHEDULER, Capability.QUEUES)
    def test_tick_from_many_threads_enqueues_each_fire_exactly_once(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        stores = [store, store_factory.open(), store_factory.open()]
        results: list[tuple[int, list[float]]] = []
        errors: list[BaseException] = []
        race = self._start_fire_race(store)
        since = time.time()

        def ticker(s: Store) -> None:
            try:
                results.append(_children_scheduler.tick_for(s, 2.6))
            except BaseException as exc:  # reported below
                errors.append(exc)

        try:
            threads = [threading.Thread(target=ticker, args=(s,)) for s in stores for _ in (0, 1)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            assert errors == []
            assert len(results) == len(threads)
            # The closing tick counts as a tick too: on a slow machine the
            # joins can leave a gap before it long enough to coalesce a fire.
            last_tick = time.time()
            fired = sum(f for f, _ in results) + store.tick_schedules()
            gap = _max_gap([last_tick, *(t for _, starts in results for t in starts)], since)
            self._check_fired_once_each(store, race, fired, dense=gap < DENSE_GAP_S)
        finally:
            for s in stores[1:]:
                s.close()

    @pytest.mark.clause("SC-3")
    @pytest.mark.cross_process
    @pytest.mark.requires(Capability.SCHEDULER, Capability.QUEUES)
    def test_tick_from_many_processes_enqueues_each_fire_exactly_once(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        procs_n, seconds = 3, 2.6
        go, results = signals()
        procs = [
            spawn(_children_scheduler.tick_schedules_for, store_factory, seconds, go, results)
            for _ in range(procs_n)
        ]
        try:
            for _ in range(procs_n):
                msg = results.get(timeout=60)
                assert msg[0] == "ready", msg
            race = self._start_fire_race(store)
            since = time.time()
            go.set()
            fired, starts = _children_scheduler.tick_for(store, seconds)
            for _ in range(procs_n):
                msg = results.get(timeout=60)
                assert msg[0] == "ok", msg
                fired += msg[1]
                starts.extend(msg[2])
        finally:
            reap(procs, go)
        starts.append(time.time())  # the closing tick, after the joins
        fired += store.tick_schedules()
        dense = _max_gap(starts, since) < DENSE_GAP_S
        self._check_fired_once_each(store, race, fired, dense=dense)

    # ---------------------------------------------------------------- SC-4

    @pytest.mark.clause("SC-4")
    @pytest.mark.requires(Capability.SCHEDULER, Capability.QUEUES)
    def test_tick_after_downtime_fires_once_and_continues_on_phase(self, store: Store) -> None:
        """Nothing ticks for about 3.5 s; the first tick then fires each
        schedule once, for its most recent missed time, and the next fire time
        is the next one in the future, on the schedule's phase."""
        # Register just after a whole second, so that both schedules are in
        # the middle of their period at each tick below.
        _sleep_until(_now().replace(microsecond=0) + ONE_S + timedelta(seconds=0.02))
        qa, qb = store.queue(unique("every")), store.queue(unique("cron"))
        a = store.schedule("every", "@every 1s", qa.name, "a")
        b = store.schedule("cron", "* * * * * *", qb.name, "b")
        assert b.next_fire_at.microsecond == 0
        registered = {"every": a, "cron": b}
        # Down for ~3.5 s: each schedule's first three fire times pass. Tick
        # half-way into a second, between fire times of both.
        passed = max(a.next_fire_at, b.next_fire_at) + 2 * ONE_S
        tick_at = passed.replace(microsecond=500_000)
        if tick_at < passed:
            tick_at += ONE_S
        _sleep_until(tick_at)
        assert _count(qa) == _count(qb) == 0
        before = _now()
        assert store.tick_schedules() == 2
        after = _now()
        assert _count(qa) == _count(qb) == 1
        ticked = _by_name(store)
        for name, first in registered.items():
            sched = ticked[name]
            assert sched.last_fire_at is not None
            # The most recent missed time...
            assert first.next_fire_at + 2 * ONE_S <= sched.last_fire_at
            assert sched.last_fire_at <= after + CLOCK_SLACK
            assert sched.last_fire_at > before - ONE_S - CLOCK_SLACK
            # ... then the next future time, on the phase (whole seconds away).
            assert sched.next_fire_at == sched.last_fire_at + ONE_S
            assert sched.next_fire_at > before - CLOCK_SLACK
            assert _whole_seconds(sched.next_fire_at - first.next_fire_at)
        # No burst: an immediate second tick fires nothing new, unless (on a
        # stalled machine) a next fire time came due meanwhile.
        soonest = min(s.next_fire_at for s in ticked.values())
        again = store.tick_schedules()
        ended = _now()
        assert again <= sum(ended + CLOCK_SLACK >= s.next_fire_at for s in ticked.values())
        if ended < soonest - CLOCK_SLACK:
            assert again == 0
        assert _count(qa) + _count(qb) == 2 + again

    # ---------------------------------------------------------------- SC-5

    @pytest.mark.clause("SC-5", "C-2")
    @pytest.mark.requires(Capability.SCHEDULER, Capability.QUEUES, Capability.LOCKS)
    def test_run_schedules_fires_due_schedules_and_returns_when_stopped(self, store: Store) -> None:
        q = store.queue(unique())
        store.schedule("tick", "@every 1s", q.name)
        with StoppableCall(_runner(store, owner="leader", lock_ttl_s=1.0)) as bg:
            eventually(lambda: bg.healthy() and _count(q) >= 2, timeout_s=8)
            # The leader lock is the engine's: no consumer may take it.
            with pytest.raises(ReservedName):
                store.lock(SCHEDULER_LOCK, 5.0)
            elapsed = bg.halt()
        assert elapsed < STOP_WITHIN_S, f"run_schedules took {elapsed:.2f} s to stop"
        # Stopped means stopped: nothing fires in the background any more.
        stopped_at = _count(q)
        time.sleep(1.3)
        assert _count(q) == stopped_at

    @pytest.mark.clause("SC-5", "SC-3")
    @pytest.mark.requires(Capability.SCHEDULER, Capability.QUEUES)
    def test_run_schedules_twice_fires_each_time_once(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """Two runners on two stores: one leads, the other stands by; every
        fire still enqueues one job."""
        q = store.queue(unique())
        first = store.schedule("tick", "@every 1s", q.name)
        with store_factory.open() as other:
            a = StoppableCall(_runner(store, owner="runner-a", lock_ttl_s=1.0))
            b = StoppableCall(_runner(other, owner="runner-b", lock_ttl_s=1.0))
            with a, b:
                eventually(lambda: a.healthy() and b.healthy() and _count(q) >= 3, timeout_s=10)
                elapsed = [a.halt(), b.halt()]
        assert max(elapsed) < STOP_WITHIN_S, elapsed
        sched = _by_name(store)["tick"]
        jobs = _count(q)
        # No fire enqueued twice (a stalled leader may coalesce one: SC-4).
        assert 3 <= jobs <= _fires_since(first.next_fire_at, sched)

    @pytest.mark.clause("SC-5")
    @pytest.mark.requires(Capability.SCHEDULER, Capability.QUEUES)
    def test_run_schedules_wakes_early_when_schedules_change(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """A leader asleep until a far fire (and a renewal 20 s away) fires a
        schedule added meanwhile, by its own store or by another, on time."""
        store.schedule("far", "@yearly", unique())
        q1, q2 = store.queue(unique("own")), store.queue(unique("other"))
        with StoppableCall(_runner(store, owner="sleeper", lock_ttl_s=60.0)) as bg:
            time.sleep(0.5)  # the leader has ticked and gone to sleep
            store.schedule("own", "@every 1s", q1.name)
            eventually(lambda: bg.healthy() and _count(q1) >= 1, timeout_s=4.0)
            assert store.unschedule("own")
            # Past the removed schedule's next fire time: asleep again until
            # the far fire, whatever woke it last.
            time.sleep(1.2)
            with store_factory.open() as other:
                other.schedule("other", "@every 1s", q2.name)
            eventually(lambda: bg.healthy() and _count(q2) >= 1, timeout_s=4.0)

    @pytest.mark.clause("SC-5")
    @pytest.mark.cross_process
    @pytest.mark.requires(Capability.SCHEDULER, Capability.QUEUES)
    def test_run_schedules_standby_takes_over_from_a_killed_leader(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        ttl = 1.0
        q = store.queue(unique())
        store.schedule("tick", "@every 1s", q.name)
        ready, results = signals()
        proc = spawn(
            _children_scheduler.run_schedules_until_killed,
            store_factory,
            "leader-process",
            ttl,
            ready,
            results,
        )
        try:
            assert ready.wait(60), "the leader process did not start"
            eventually(lambda: _count(q) >= 1, timeout_s=15)  # the child leads
            with StoppableCall(_runner(store, owner="standby", lock_ttl_s=ttl)) as bg:
                time.sleep(0.5)
                try:
                    msg = results.get_nowait()
                except queue_mod.Empty:
                    pass
                else:
                    pytest.fail(f"the leader process reported {msg}")
                proc.kill()
                proc.join(30)
                killed_at = time.monotonic()
                seen = _count(q)
                eventually(lambda: bg.healthy() and _count(q) > seen, timeout_s=30)
                took = time.monotonic() - killed_at
                assert took < ttl + 1.0 + TAKEOVER_SLACK_S, f"takeover took {took:.2f} s"
                # ... and keeps firing as the new leader.
                eventually(lambda: bg.healthy() and _count(q) > seen + 1, timeout_s=5)
        finally:
            if proc.is_alive():
                proc.kill()
            proc.join(30)

    # ---------------------------------------------------------------- SC-6

    @pytest.mark.clause("SC-6", "Q-15", "Q-16", "Q-18")
    @pytest.mark.requires(Capability.SCHEDULER, Capability.QUEUES)
    def test_maintenance_schedule_and_worker_keep_queues_clean(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """The recipe: an ``@every`` schedule on a maintenance queue, a worker
        whose handler calls ``sweep_expired()`` for every queue, and
        ``run_schedules``. Until the schedule exists nothing sweeps, although
        the scheduler and the worker already run."""
        work = store.queue(unique("work"))
        kept = store.queue(unique("kept"), QueueOpts(dead_letter_retention_s=0.3))
        maint = unique("maintenance")
        stranded = work.enqueue({"n": 2}, EnqueueOpts(expires_s=1.0))
        claimed = work.claim("crashed-worker")
        assert claimed is not None and claimed.id == stranded  # then its worker dies
        expiring = work.enqueue({"n": 1}, EnqueueOpts(expires_s=0.3))
        failing = kept.enqueue({"n": 3})
        job = kept.claim("w")
        assert job is not None and job.fail("boom")

        with store_factory.open() as scheduler_store:
            runner = StoppableCall(_runner(scheduler_store, owner="maint", lock_ttl_s=2.0))
            worker = StoppableCall(lambda stop: _maintenance_worker(store, maint, stop))
            with runner, worker:
                time.sleep(1.4)  # past every expiry and the retention
                info = work.get_job(expiring)
                assert info is not None and info.state is JobState.PENDING
                info = work.get_job(stranded)
                assert info is not None and info.state is JobState.PROCESSING
                info = kept.get_job(failing)
                assert info is not None and info.state is JobState.DEAD
                assert runner.healthy() and worker.healthy()

                store.schedule("maintenance", "@every 1s", maint)

                def clean() -> bool:
                    assert runner.healthy() and worker.healthy()
                    done = [work.get_job(expiring), work.get_job(stranded)]
                    return kept.get_job(failing) is None and all(
                        i is not None and i.state is JobState.DEAD for i in done
                    )

                eventually(clean, timeout_s=10)
        for job_id in (expiring, stranded):
            info = work.get_job(job_id)
            assert info is not None
            assert info.last_error == "expired"
            assert info.died_at is not None
        assert store.queue(maint).stats().dead == 0
