"""Schedule specs (SC-1): the forms that parse, the fire times, the refusals."""

from __future__ import annotations

import itertools
import pickle
from datetime import datetime, timedelta, timezone
from itertools import pairwise
from typing import Any

import pytest

from alkstore import InvalidArgument, InvalidSpec, specs

UTC = timezone.utc


def at(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def fires(spec: str, start: datetime, n: int, tz: str = "UTC") -> list[datetime]:
    """The first *n* fire times after *start*, each from the previous one."""
    parsed = specs.parse(spec)
    out: list[datetime] = []
    when = start
    for _ in range(n):
        when = parsed.first_fire(when, tz)
        out.append(when)
    return out


def has_zone(name: str) -> bool:
    try:
        specs.check_timezone(name)
    except InvalidArgument:
        return False
    return True


needs_tzdata = pytest.mark.skipif(not has_zone("Europe/Paris"), reason="no IANA zone data")


# --------------------------------------------------------------------- forms


def test_five_field_cron_fires_on_the_minute() -> None:
    assert fires("*/15 * * * *", at(2026, 1, 1, 12, 0, 30), 3) == [
        at(2026, 1, 1, 12, 15),
        at(2026, 1, 1, 12, 30),
        at(2026, 1, 1, 12, 45),
    ]
    parsed = specs.parse("*/15 * * * *")
    assert (parsed.cron, parsed.seconds_first, parsed.interval_s) == ("*/15 * * * *", False, None)


def test_six_field_cron_has_seconds_first() -> None:
    parsed = specs.parse("30 */5 * * * *")
    assert parsed.seconds_first
    assert fires("30 */5 * * * *", at(2026, 1, 1, 12, 0, 0), 2) == [
        at(2026, 1, 1, 12, 0, 30),
        at(2026, 1, 1, 12, 5, 30),
    ]


@pytest.mark.parametrize(
    ("nickname", "after", "expected"),
    [
        ("@hourly", at(2026, 1, 1, 12, 30), at(2026, 1, 1, 13, 0)),
        ("@daily", at(2026, 1, 1, 12, 30), at(2026, 1, 2)),
        ("@midnight", at(2026, 1, 1, 12, 30), at(2026, 1, 2)),
        ("@weekly", at(2026, 1, 1, 12, 30), at(2026, 1, 4)),  # a Sunday
        ("@monthly", at(2026, 1, 15), at(2026, 2, 1)),
        ("@yearly", at(2026, 3, 1), at(2027, 1, 1)),
        ("@annually", at(2026, 3, 1), at(2027, 1, 1)),
    ],
)
def test_nicknames(nickname: str, after: datetime, expected: datetime) -> None:
    assert specs.parse(nickname).first_fire(after) == expected


@pytest.mark.parametrize(
    ("spec", "seconds"),
    [
        ("@every 300s", 300),
        ("@every 5m", 300),
        ("@every 1h30m", 5400),
        ("@every 2d", 172800),
        ("@every 1d2h3m4s", 93784),
        ("@every 1h1s", 3601),
        ("@every   10m", 600),
    ],
)
def test_every_combines_units(spec: str, seconds: int) -> None:
    parsed = specs.parse(spec)
    assert parsed.interval_s == seconds
    assert parsed.cron is None
    start = at(2026, 1, 1, 0, 0, 7)
    assert parsed.first_fire(start) == start + timedelta(seconds=seconds)


def test_every_keeps_its_phase_and_skips_missed_fires() -> None:
    parsed = specs.parse("@every 10m")
    fired = at(2026, 1, 1, 12, 0)
    # SC-4: an hour late, the next fire is the next one on the original grid.
    assert parsed.next_fire(fired, at(2026, 1, 1, 13, 3)) == at(2026, 1, 1, 13, 10)
    assert parsed.latest_fire(fired, at(2026, 1, 1, 13, 3)) == at(2026, 1, 1, 13, 0)
    assert parsed.next_fire(fired, fired) == at(2026, 1, 1, 12, 10)


def test_cron_missed_fires_collapse_to_the_latest() -> None:
    parsed = specs.parse("0 * * * *")
    due = at(2026, 1, 1, 10, 0)
    now = at(2026, 1, 1, 13, 20)
    assert parsed.latest_fire(due, now) == at(2026, 1, 1, 13, 0)
    assert parsed.next_fire(due, now) == at(2026, 1, 1, 14, 0)


def test_month_and_weekday_names() -> None:
    assert specs.parse("0 9 * JAN MON").first_fire(at(2026, 1, 1)) == at(2026, 1, 5, 9)
    assert specs.parse("0 9 1 jun-aug *").first_fire(at(2026, 1, 1)) == at(2026, 6, 1, 9)


def test_day_of_month_or_day_of_week() -> None:
    # Standard cron: when both are restricted, either one fires.
    # 2026-01-01 is a Thursday: the next Friday comes before the 13th.
    assert specs.parse("0 0 13 * FRI").first_fire(at(2026, 1, 1)) == at(2026, 1, 2)
    assert fires("0 0 13 * FRI", at(2026, 1, 10), 2) == [at(2026, 1, 13), at(2026, 1, 16)]


# ------------------------------------------------------------------ refusals

BAD_SPECS: list[Any] = [
    "",
    "   ",
    "* * * *",
    "* * * * * * *",
    "61 * * * *",
    "* 24 * * *",
    "* * 32 * *",
    "* * * 13 *",
    "* * * * 8",
    "0 0 30 2 *",  # February 30th never comes
    "H * * * *",  # hashed fields depend on more than the spec
    "R * * * *",
    "@often",
    "@every",
    "@every 0s",
    "@every 10",
    "@every 10x",
    "@every 30m1h",  # units in order d h m s
    "@every 1h1h",
    "@every -5m",
    "@every 400d",
    "every 5m",
    "* * * * ; rm -rf /",
    None,
    42,
    ["* * * * *"],
]


@pytest.mark.parametrize("spec", BAD_SPECS, ids=repr)
def test_bad_specs_raise_invalid_spec_naming_the_spec(spec: Any) -> None:
    with pytest.raises(InvalidSpec) as caught:
        specs.parse(spec)
    assert caught.value.spec == spec
    assert isinstance(caught.value, InvalidArgument)
    assert isinstance(caught.value, ValueError)


def test_invalid_spec_pickles_with_its_attributes() -> None:
    err = InvalidSpec("@often", "unknown nickname")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is InvalidSpec
    assert (back.spec, back.reason) == ("@often", "unknown nickname")


# ------------------------------------------------------------------ time zones


@pytest.mark.parametrize("tz", ["", "Mars/Olympus", "UTC+1", None, 1])
def test_bad_time_zones_are_refused(tz: Any) -> None:
    with pytest.raises(InvalidArgument):
        specs.check_timezone(tz)


def test_cron_defaults_to_utc() -> None:
    assert specs.parse("0 9 * * *").first_fire(at(2026, 1, 15)) == at(2026, 1, 15, 9)


@needs_tzdata
def test_cron_fires_in_the_schedules_zone() -> None:
    daily = specs.parse("0 9 * * *")
    # Paris is UTC+1 in winter, UTC+2 in summer.
    assert daily.first_fire(at(2026, 1, 15), "Europe/Paris") == at(2026, 1, 15, 8)
    assert daily.first_fire(at(2026, 7, 15), "Europe/Paris") == at(2026, 7, 15, 7)
    result = daily.first_fire(at(2026, 7, 15), "America/New_York")
    assert result == at(2026, 7, 15, 13)
    assert result.tzinfo is not None and result.utcoffset() == timedelta(0)


@needs_tzdata
def test_dst_spring_forward_fires_once_and_in_order() -> None:
    # 2026-03-29: Paris skips from 02:00 to 03:00; 02:30 does not exist that day.
    times = fires("30 2 * * *", at(2026, 3, 26), 5, "Europe/Paris")
    assert times == sorted(set(times))
    days = [t.astimezone(specs.check_timezone("Europe/Paris")).date() for t in times]
    assert len(set(days)) == 5, "one fire per local day"
    gaps = [b - a for a, b in pairwise(times)]
    assert all(timedelta(hours=22) <= g <= timedelta(hours=26) for g in gaps), gaps


@needs_tzdata
def test_dst_fall_back_fires_once_per_local_day() -> None:
    # 2026-10-25: Paris repeats 02:00-03:00; 02:30 happens twice.
    times = fires("30 2 * * *", at(2026, 10, 23), 4, "Europe/Paris")
    days = [t.astimezone(specs.check_timezone("Europe/Paris")).date() for t in times]
    assert len(set(days)) == 4, f"two fires on one local day: {times}"
    assert at(2026, 10, 25, 0, 30) in times  # the first 02:30, in summer time


@needs_tzdata
def test_dst_fall_back_keeps_wildcard_hours_by_elapsed_time() -> None:
    # Every 30 minutes of real time, through the repeated hour.
    times = fires("*/30 * * * *", at(2026, 10, 25, 0, 10), 5, "Europe/Paris")
    assert [(b - a).total_seconds() for a, b in itertools.pairwise(times)] == [1800.0] * 4


@needs_tzdata
def test_every_ignores_time_zones() -> None:
    # A fixed interval in absolute time: DST never stretches or shrinks it.
    parsed = specs.parse("@every 1h")
    start = at(2026, 10, 25, 0, 30)
    assert parsed.first_fire(start, "Europe/Paris") == start + timedelta(hours=1)
