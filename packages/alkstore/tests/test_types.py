"""Value types, errors, the backoff curve and the public surface of ``alkstore``."""

from __future__ import annotations

import math
import pickle
import random
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import alkstore
from alkstore import (
    EnqueueOpts,
    Fail,
    InvalidArgument,
    JobInfo,
    JobState,
    QueueOpts,
    QueueStats,
    ReservedName,
    Retry,
    SchemaVersionError,
    SweepResult,
    backoff,
)

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


# ------------------------------------------------------------------ QueueOpts


def test_queue_opts_defaults() -> None:
    opts = QueueOpts()
    assert (opts.visibility_timeout_s, opts.max_attempts, opts.backoff_base_s) == (300.0, 3, 5.0)
    assert opts.dead_letter_retention_s is None


def test_queue_opts_keep_durations_as_floats() -> None:
    opts = QueueOpts(visibility_timeout_s=1, backoff_base_s=0, dead_letter_retention_s=60)
    assert isinstance(opts.visibility_timeout_s, float)
    assert isinstance(opts.backoff_base_s, float)
    assert isinstance(opts.dead_letter_retention_s, float)


# ---------------------------------------------------------------- EnqueueOpts


def test_enqueue_opts_accept_good_values() -> None:
    opts = EnqueueOpts(priority=-5, delay_s=1, max_attempts=1, expires_s=0.5)
    assert (opts.priority, opts.delay_s, opts.max_attempts, opts.expires_s) == (-5, 1.0, 1, 0.5)
    assert EnqueueOpts(run_at=NOW).run_at == NOW


# ---------------------------------------------------------- bad option values


def _type_name_or_repr(value: object) -> str:
    return value.__name__ if isinstance(value, type) else repr(value)


@pytest.mark.parametrize(
    ("opts_type", "kwargs"),
    [
        (QueueOpts, {"visibility_timeout_s": 0}),
        (QueueOpts, {"visibility_timeout_s": -1}),
        (QueueOpts, {"visibility_timeout_s": math.nan}),
        (QueueOpts, {"visibility_timeout_s": math.inf}),
        (QueueOpts, {"visibility_timeout_s": "30"}),
        (QueueOpts, {"visibility_timeout_s": True}),
        (QueueOpts, {"visibility_timeout_s": 1e12}),
        (QueueOpts, {"max_attempts": 0}),
        (QueueOpts, {"max_attempts": 1.5}),
        (QueueOpts, {"max_attempts": True}),
        (QueueOpts, {"max_attempts": 2**31}),
        (QueueOpts, {"backoff_base_s": -0.5}),
        (QueueOpts, {"dead_letter_retention_s": -1}),
        (EnqueueOpts, {"delay_s": 1, "run_at": NOW}),
        (EnqueueOpts, {"run_at": datetime(2026, 1, 1)}),  # naive
        (EnqueueOpts, {"run_at": "2026-01-01T00:00:00Z"}),
        (EnqueueOpts, {"priority": 2**31}),
        (EnqueueOpts, {"priority": -(2**31) - 1}),
        (EnqueueOpts, {"priority": 1.0}),
        (EnqueueOpts, {"priority": None}),
        (EnqueueOpts, {"delay_s": -1}),
        (EnqueueOpts, {"max_attempts": 0}),
        (EnqueueOpts, {"expires_s": 0}),
        (EnqueueOpts, {"expires_s": -1}),
    ],
    ids=_type_name_or_repr,
)
def test_opts_refuse_bad_values(
    opts_type: type[QueueOpts] | type[EnqueueOpts], kwargs: dict[str, Any]
) -> None:
    with pytest.raises(InvalidArgument):
        opts_type(**kwargs)


# --------------------------------------------------------------- other types


def test_job_state_values_and_text() -> None:
    assert [s.value for s in JobState] == ["pending", "processing", "dead", "done", "waiting"]
    assert str(JobState.DEAD) == "dead"
    assert JobState("pending") is JobState.PENDING


def _info(**over: Any) -> JobInfo:
    fields: dict[str, Any] = {
        "id": 1,
        "queue": "q",
        "state": "pending",
        "payload": None,
        "attempts": 0,
        "max_attempts": 3,
        "priority": 0,
        "created_at": NOW,
        "run_at": NOW,
        "claimed_at": None,
        "expires_at": None,
        "visibility_timeout_s": 300.0,
        "backoff_base_s": 5.0,
        "dead_letter_retention_s": None,
    }
    fields.update(over)
    return JobInfo(**fields)


def test_job_info_checks_its_state() -> None:
    assert _info().state is JobState.PENDING
    assert _info(state="dead", died_at=NOW, last_error="x").state is JobState.DEAD
    with pytest.raises(InvalidArgument):
        _info(state="finished")
    with pytest.raises(InvalidArgument):
        _info(state="dead")  # died_at is set exactly for dead jobs
    with pytest.raises(InvalidArgument):
        _info(died_at=NOW)
    with pytest.raises(InvalidArgument):
        _info(attempts=-1)


def test_counts_cannot_be_negative() -> None:
    assert QueueStats("q", 1, 2, 3, 4).live == 6
    with pytest.raises(InvalidArgument):
        QueueStats("q", -1, 0, 0, 0)
    with pytest.raises(InvalidArgument):
        SweepResult(expired=-1)


# -------------------------------------------------------------------- errors


def test_errors_pickle_with_their_attributes() -> None:
    reserved = pickle.loads(pickle.dumps(ReservedName("__alkstore.x")))
    assert (type(reserved), reserved.name) == (ReservedName, "__alkstore.x")
    schema = pickle.loads(pickle.dumps(SchemaVersionError(9, 2)))
    assert (schema.found, schema.supported) == (9, 2)


# ------------------------------------------------------------------- backoff


def test_backoff_stays_within_the_equal_jitter_band() -> None:
    rng = random.Random(7)
    for attempt in range(1, 30):
        ceiling = min(5.0 * 2 ** (attempt - 1), backoff.MAX_DELAY_S)
        for _ in range(20):
            value = backoff.delay(attempt, 5.0, rng.random)
            assert ceiling / 2 <= value <= ceiling
    assert backoff.delay(1, 5.0, lambda: 0.0) == 2.5
    assert backoff.delay(10**6, 5.0, lambda: 0.0) == backoff.MAX_DELAY_S / 2
    assert backoff.delay(3, 0) == 0.0


@pytest.mark.parametrize(("attempt", "base"), [(0, 5.0), (True, 5.0), (1, -1.0), (1, math.nan)])
def test_backoff_refuses_bad_input(attempt: Any, base: Any) -> None:
    with pytest.raises(InvalidArgument):
        backoff.delay(attempt, base)


# ---------------------------------------------------------- worker signals


def test_retry_and_fail_carry_their_arguments() -> None:
    assert (Retry().delay_s, Retry(30).delay_s, Retry(delay_s=1.5).delay_s) == (None, 30.0, 1.5)
    assert Retry(0, "upstream busy").reason == "upstream busy"
    assert Fail("no such user").reason == "no such user"
    assert str(Fail("no such user")) == "no such user"
    bad_delays: list[Any] = [-1, math.inf, "soon", timedelta(seconds=1)]
    for bad in bad_delays:
        with pytest.raises(InvalidArgument):
            Retry(bad)


def test_retry_and_fail_pickle() -> None:
    retry = pickle.loads(pickle.dumps(Retry(2.5, "later")))
    assert (retry.delay_s, retry.reason) == (2.5, "later")
    fail = pickle.loads(pickle.dumps(Fail("bad")))
    assert fail.reason == "bad"


def test_public_surface() -> None:
    for name in ("Worker", "Retry", "Fail", "open", "Store", "Job", "Queue", "InvalidSpec"):
        assert name in alkstore.__all__
        assert hasattr(alkstore, name)
    assert sorted(alkstore.__all__) == sorted(set(alkstore.__all__))


def test_names_refuse_exactly_the_control_and_surrogate_characters() -> None:
    """C-1: a name holding a character of category Cc or Cs is refused, any
    other is taken, whichever path (printable ASCII or not) checks it."""
    import unicodedata

    from alkstore.names import validate_name

    points = [*range(0x300), *range(0xD7F0, 0xE010), 0x2028, 0xFEFF, 0x1F4EC, 0x10FFFF]
    for point in points:
        name = f"q{chr(point)}x"
        if unicodedata.category(chr(point)) in ("Cc", "Cs"):
            with pytest.raises(InvalidArgument):
                validate_name(name, "queue")
        else:
            assert validate_name(name, "queue") == name
