"""Schedule specs: parsing, validation and fire times (SC-1).

One implementation for every engine, so that all of them fire at the same
times. Accepted forms:

- 5-field cron ``m h dom mon dow``; 6-field cron with *seconds first*
  ``s m h dom mon dow``. Month and weekday names work (``JAN``, ``MON``); when
  both day-of-month and day-of-week are restricted a day matching either one
  fires (standard cron).
- nicknames ``@hourly @daily @midnight @weekly @monthly @yearly @annually``.
- ``@every <n><unit>...`` with units ``d h m s`` in that order, each at most
  once: ``@every 300s``, ``@every 1h30m``.

Cron fire times are computed in the schedule's IANA zone (default UTC);
``@every`` fire times are a fixed interval apart in absolute time, anchored at
the schedule's first fire time. Anything else raises
:class:`~alkstore.errors.InvalidSpec`.

>>> from datetime import datetime, timezone
>>> t = datetime(2026, 1, 1, 12, 0, 30, tzinfo=timezone.utc)
>>> parse("*/15 * * * *").first_fire(t)
datetime.datetime(2026, 1, 1, 12, 15, tzinfo=datetime.timezone.utc)
>>> parse("@every 1h30m").interval_s
5400.0
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from .errors import InvalidArgument, InvalidSpec

__all__ = ["NICKNAMES", "ScheduleSpec", "check_timezone", "parse", "parse_duration"]

NICKNAMES: dict[str, str] = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}

_UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_DURATION = r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?"
_EVERY = re.compile(r"@every\s+" + _DURATION)
# croniter extensions that make fire times depend on something other than the
# spec (hashed "H" and random "R" fields) are refused: every engine and every
# process must compute the same times.
_NONDETERMINISTIC = re.compile(r"(^|[,/-])[HR](\(|$|[,/-])")
_CRON_CHARS = re.compile(r"[0-9A-Za-z*/,?#-]+")
# Numbers in a field longer than this are mistakes (no cron field goes past 59).
_MAX_FIELD_DIGITS = 4
# Month and weekday names, for the range check.
_MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_MONTHS = {month: number for number, month in enumerate(_MONTH_NAMES, 1)}
_WEEKDAYS = {
    day: number for number, day in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))
}
# An @every count beyond this many digits exceeds the 366-day bound anyway.
_MAX_EVERY_DIGITS = 9
_UTC = timezone.utc


def check_timezone(tz: object) -> ZoneInfo:
    """The zone named *tz* (an IANA name such as ``"Europe/Paris"``).

    Raises :class:`InvalidArgument` for anything else.
    """
    if not isinstance(tz, str) or not tz:
        raise InvalidArgument(f"tz must be an IANA zone name, got {tz!r}")
    return _zone(tz)


@lru_cache(maxsize=256)
def _zone(tz: str) -> ZoneInfo:
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        # OSError: a name that is a directory of the zone database
        # ("America"), or too long for a file name.
        raise InvalidArgument(f"unknown time zone {tz!r}") from exc


@dataclass(frozen=True)
class ScheduleSpec:
    """A parsed spec. Exactly one of ``cron`` and ``interval_s`` is set."""

    text: str
    cron: str | None = None
    seconds_first: bool = False
    interval_s: float | None = None

    def first_fire(self, now: datetime, tz: str = "UTC") -> datetime:
        """The first fire time strictly after *now*, for a new schedule."""
        if self.interval_s is not None:
            return _utc(now) + timedelta(seconds=self.interval_s)
        return self._cron_next(now, tz)

    def next_fire(self, fired: datetime, now: datetime, tz: str = "UTC") -> datetime:
        """The fire time that follows a fire due at *fired*: the first one
        strictly after *now* (SC-4: missed times are not replayed).

        ``@every`` keeps its phase: the result is ``fired + k * interval`` for
        the smallest ``k >= 1`` that lands after *now*.
        """
        if self.interval_s is not None:
            step = self.interval_s
            behind = (_utc(now) - _utc(fired)).total_seconds()
            k = max(1, math.floor(behind / step) + 1)
            return _utc(fired) + timedelta(seconds=k * step)
        return self._cron_next(max(_utc(fired), _utc(now)), tz)

    def latest_fire(self, fired: datetime, now: datetime, tz: str = "UTC") -> datetime:
        """The most recent fire time at or before *now*, given that *fired*
        (``<= now``) was due: the fire that a late tick stands for (SC-4)."""
        if self.interval_s is not None:
            behind = (_utc(now) - _utc(fired)).total_seconds()
            k = max(0, math.floor(behind / self.interval_s))
            return _utc(fired) + timedelta(seconds=k * self.interval_s)
        start = _utc(now).astimezone(check_timezone(tz)) + timedelta(microseconds=1)
        prev = croniter(self._cron(), start, second_at_beginning=self.seconds_first)
        return max(_utc(prev.get_prev(datetime)), _utc(fired))

    def _cron(self) -> str:
        assert self.cron is not None
        return self.cron

    def _cron_next(self, after: datetime, tz: str) -> datetime:
        start = _utc(after).astimezone(check_timezone(tz))
        it = croniter(self._cron(), start, second_at_beginning=self.seconds_first)
        while True:
            candidate: datetime = it.get_next(datetime)
            # When clocks go back, a wall time in the repeated hour happens
            # twice (the second time with fold=1). Like cron, a spec with a
            # fixed hour fires once, at the first; an hour wildcard keeps
            # firing by elapsed time.
            if candidate.fold == 0 or self._hour_is_wildcard():
                return _utc(candidate)

    def _hour_is_wildcard(self) -> bool:
        hour = self._cron().split()[2 if self.seconds_first else 1]
        return hour.startswith("*")


def _utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        raise InvalidArgument(f"expected a timezone-aware datetime, got {value!r}")
    return value.astimezone(_UTC)


def parse(spec: object) -> ScheduleSpec:
    """Parse and validate *spec*; raise :class:`InvalidSpec` when it is not
    one of the accepted forms or never fires (``0 0 30 2 *``)."""
    if not isinstance(spec, str):
        raise InvalidSpec(spec, "a spec is a str")
    return _parse(spec)


@lru_cache(maxsize=512)
def _parse(spec: str) -> ScheduleSpec:
    text = spec.strip()
    if not text:
        raise InvalidSpec(spec, "empty")
    if text.startswith("@every"):
        return _parse_every(spec, text)
    if text.startswith("@"):
        if text not in NICKNAMES:
            raise InvalidSpec(spec, f"unknown nickname; use one of {', '.join(NICKNAMES)}")
        return _checked(ScheduleSpec(text=spec, cron=NICKNAMES[text]), spec)
    fields = text.split()
    if len(fields) not in (5, 6):
        raise InvalidSpec(spec, f"cron has 5 or 6 fields (seconds first), got {len(fields)}")
    seconds_first = len(fields) == 6
    # Month and weekday are the last two fields in both forms.
    names_of: list[dict[str, int] | None] = [None] * (len(fields) - 2) + [_MONTHS, _WEEKDAYS]
    for index, field in enumerate(fields):
        if not _CRON_CHARS.fullmatch(field) or _NONDETERMINISTIC.search(field.upper()):
            raise InvalidSpec(spec, f"bad cron field {field!r}")
        if any(len(number) > _MAX_FIELD_DIGITS for number in re.findall(r"\d+", field)):
            raise InvalidSpec(spec, f"bad cron field {field!r}")
        _check_ranges(spec, field, names_of[index])
    expr = " ".join(fields)
    try:
        valid = croniter.is_valid(expr, second_at_beginning=seconds_first)
    except Exception:  # croniter's parser raises more than its own errors
        valid = False
    if not valid:
        raise InvalidSpec(spec, "not a valid cron expression")
    return _checked(ScheduleSpec(text=spec, cron=expr, seconds_first=seconds_first), spec)


def _check_ranges(spec: str, field: str, names: dict[str, int] | None) -> None:
    """SC-1: a range runs upwards (``10-30``); a reversed one (``30-10``) is
    refused rather than read as a wrap-around, which would fire on the
    complement of what most readers expect."""
    for element in field.split(","):
        low, dash, high = element.partition("/")[0].partition("-")
        if not dash:
            continue
        bounds = [_field_number(part, names) for part in (low, high)]
        if bounds[0] is not None and bounds[1] is not None and bounds[0] > bounds[1]:
            raise InvalidSpec(spec, f"reversed range {element!r}: write the low end first")


def _field_number(text: str, names: dict[str, int] | None) -> int | None:
    if text.isdigit():
        return int(text)
    if names is not None:
        return names.get(text.upper())
    return None


def _parse_every(spec: str, text: str) -> ScheduleSpec:
    match = _EVERY.fullmatch(text)
    if match is None or not any(match.groups()):
        raise InvalidSpec(spec, "use '@every <n><unit>...' with units d, h, m, s in that order")
    if any(count is not None and len(count) > _MAX_EVERY_DIGITS for count in match.groups()):
        raise InvalidSpec(spec, "the interval must be at most 366 days")
    total = sum(
        int(count) * _UNIT_SECONDS[unit]
        for count, unit in zip(match.groups(), "dhms", strict=True)
        if count is not None
    )
    if total <= 0:
        raise InvalidSpec(spec, "the interval must be positive")
    if total > 366 * 86400:
        raise InvalidSpec(spec, "the interval must be at most 366 days")
    return ScheduleSpec(text=spec, interval_s=float(total))


def parse_duration(text: object) -> float:
    """A duration spelled as ``@every`` spells its interval, in seconds:
    ``30s``, ``1h30m``, ``7d`` (units ``d h m s`` in that order, each at most
    once; ``0s`` is zero). Anything else is an ``InvalidArgument``.

    >>> parse_duration("1h30m"), parse_duration("7d")
    (5400.0, 604800.0)
    """
    match = re.fullmatch(_DURATION, text.strip()) if isinstance(text, str) else None
    if match is None or not any(match.groups()):
        raise InvalidArgument(
            f"not a duration: {text!r} (use <n><unit>... with units d, h, m, s in that order, "
            "like 30s, 1h30m or 7d)"
        )
    if any(count is not None and len(count) > _MAX_EVERY_DIGITS for count in match.groups()):
        raise InvalidArgument(f"duration too long: {text!r}")
    return float(
        sum(
            int(count) * _UNIT_SECONDS[unit]
            for count, unit in zip(match.groups(), "dhms", strict=True)
            if count is not None
        )
    )


def _checked(parsed: ScheduleSpec, spec: str) -> ScheduleSpec:
    # A valid-looking expression may still never match (February 30th):
    # croniter gives up after searching a span of years.
    try:
        parsed.first_fire(datetime(2000, 1, 1, tzinfo=_UTC))
    except Exception as exc:  # croniter raises several unrelated types here
        raise InvalidSpec(spec, "it never fires") from exc
    return parsed
