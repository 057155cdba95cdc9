"""The pure input checks under hostile input (C-3, SC-1, E-3, B-1).

Every check here refuses with an ``alkstore.errors`` type, whatever it is
given; the engines rely on that, so the conformance suite only needs to
show that the engines call them.
"""

from __future__ import annotations

import contextlib
import json
import sys
from datetime import datetime, timedelta, timezone, tzinfo
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from alkstore import EnqueueOpts, InvalidArgument, InvalidSpec, QueueOpts, backoff, specs
from alkstore.errors import AlkstoreError
from alkstore.names import (
    MAX_INT_DIGITS,
    MAX_PAYLOAD_DEPTH,
    UNDECODABLE,
    decode_payload,
    encode_payload,
    try_decode_payload,
)
from alkstore.types import check_duration

UTC = timezone.utc
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def nested(depth: int, leaf: Any = 1, kind: str = "list") -> Any:
    value = leaf
    for _ in range(depth):
        value = [value] if kind == "list" else {"k": value}
    return value


# ------------------------------------------------------------------ C-3 encode


@pytest.mark.parametrize("kind", ["list", "dict"])
def test_payload_of_the_deepest_accepted_nesting_round_trips(kind: str) -> None:
    value = nested(MAX_PAYLOAD_DEPTH, kind=kind)
    assert json.loads(encode_payload(value)) == value


@pytest.mark.parametrize("depth", [MAX_PAYLOAD_DEPTH + 1, 990, 5_000, 100_000])
@pytest.mark.parametrize("kind", ["list", "dict"])
def test_payload_nested_deeper_than_the_limit_is_refused(depth: int, kind: str) -> None:
    with pytest.raises(InvalidArgument):
        encode_payload(nested(depth, kind=kind))


def test_depth_counts_containers_not_brackets_inside_strings() -> None:
    text_with_brackets = "[" * 1_000 + "{" * 1_000
    assert json.loads(encode_payload({"text": text_with_brackets})) == {"text": text_with_brackets}
    wide = [[i] for i in range(5_000)]  # many containers, depth 2
    assert json.loads(encode_payload(wide)) == wide


def test_depth_limit_holds_deep_inside_a_wide_payload() -> None:
    value = [list(range(10)) for _ in range(300)] + [nested(MAX_PAYLOAD_DEPTH)]
    with pytest.raises(InvalidArgument):
        encode_payload(value)


def _one_shot(value: Any) -> str:
    return json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(",", ":"))


_WIDE_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=120)
        | st.lists(inner, max_size=80).map(tuple)
        | st.dictionaries(
            st.text(max_size=8) | st.integers() | st.booleans() | st.none(), inner, max_size=90
        )
    ),
    max_leaves=2_000,
)


@FUZZ
@given(value=_WIDE_VALUES)
def test_a_big_payload_is_encoded_in_slices_to_the_same_text(value: Any) -> None:
    # Wide payloads take the sliced path; its text must be exactly the
    # one-shot encoder's, non-string keys and tuples included. The slicer is
    # called directly too, so that small examples test it as well.
    from alkstore import names

    wrapped = {"wrap": [value] * 3, "more": value}
    assert names._encode_sliced(wrapped) == _one_shot(wrapped)
    assert encode_payload(wrapped) == _one_shot(wrapped)


def test_no_encoder_call_on_a_big_payload_writes_much_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # one call of the C encoder holds the GIL throughout, so a 1 MiB
    # payload must not be one call; the bound is on each call's output (the
    # time it holds the GIL is proportional), not on a clock.
    from alkstore import names

    payload = {
        "rows": [{"i": i, "text": "t" * 110, "tags": ["a", "b"]} for i in range(8_000)],
        "index": {f"k{i}": [i, i + 1] for i in range(2_000)},
    }
    real = names._ENCODER
    sizes: list[int] = []

    class Counting:
        def encode(self, value: Any) -> str:
            text = real.encode(value)
            sizes.append(len(text))
            return text

    monkeypatch.setattr(names, "_ENCODER", Counting())
    text = encode_payload(payload)
    assert json.loads(text) == payload
    assert len(text) > 1_000_000 and len(sizes) > 30
    assert max(sizes) <= 4 * names._SLICE_CHARS


@FUZZ
@given(
    value=_WIDE_VALUES,
    layout=st.sampled_from([{"separators": (",", ":")}, {}, {"indent": 1}]),
    cuts=st.lists(st.tuples(st.integers(0, 10**7), st.sampled_from(["cut", "del", "ins"]))),
)
def test_a_big_text_is_decoded_in_pieces_to_the_same_value(
    value: Any, layout: dict[str, Any], cuts: list[tuple[int, str]]
) -> None:
    # texts over 64 KiB are parsed in pieces; the value must be exactly
    # json.loads's, and a damaged text undecodable exactly when json.loads
    # refuses it (C-3).
    text = json.dumps({"pad": "p" * 70_000, "value": [value] * 2}, ensure_ascii=False, **layout)
    variants = [text]
    for at, how in cuts:
        at %= len(text)
        mangled = {"cut": text[:at], "del": text[:at] + text[at + 1 :]}.get(how)
        variants.append(mangled if mangled is not None else text[:at] + ",]}" + text[at:])
    for variant in variants:
        try:
            expected: Any = json.loads(variant)
        except ValueError:
            expected = UNDECODABLE
        assert try_decode_payload(variant) == expected


def test_no_scanner_call_on_a_big_text_reads_much_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from alkstore import names

    value = {
        "rows": [{"i": i, "text": "t" * 110, "tags": ["a", "b"]} for i in range(8_000)],
        "index": {f"k{i}": [i, {"x": "y,]}"}] for i in range(2_000)},
        "long": "s" * 200_000,
    }
    text = json.dumps(value)
    real = names._SCAN
    calls: list[tuple[int, bool]] = []

    def counting(s: str, idx: int) -> tuple[Any, int]:
        calls.append((len(s), s[idx] in "[{"))
        return real(s, idx)

    monkeypatch.setattr(names, "_SCAN", counting)
    assert try_decode_payload(text) == value
    containers = [size for size, container in calls if container]
    assert len(containers) > 30
    # A container is only ever parsed from a piece; the whole text goes to
    # the scanner for a scalar at most (a string is quick, however long).
    assert max(containers) <= names._PIECE_CHARS + 2


def test_cyclic_payloads_are_refused() -> None:
    as_list: list[Any] = []
    as_list.append(as_list)
    as_dict: dict[str, Any] = {}
    as_dict["self"] = as_dict
    for value in (as_list, as_dict, {"a": [as_dict]}):
        with pytest.raises(InvalidArgument):
            encode_payload(value)


def test_integers_longer_than_the_limit_are_refused() -> None:
    assert encode_payload(10 ** (MAX_INT_DIGITS - 1)) == "1" + "0" * (MAX_INT_DIGITS - 1)
    for value in (10**MAX_INT_DIGITS, -(10**MAX_INT_DIGITS), {"n": [10**5_000]}):
        with pytest.raises(InvalidArgument):
            encode_payload(value)


@pytest.mark.skipif(not hasattr(sys, "set_int_max_str_digits"), reason="Python >= 3.11")
def test_integer_limit_holds_when_the_interpreter_lifts_its_own() -> None:
    before = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        with pytest.raises(InvalidArgument):
            encode_payload({"n": 10**5_000})
        # Digits inside a string are text, not an integer.
        assert encode_payload(["9" * 6_000]) == json.dumps(["9" * 6_000])
    finally:
        sys.set_int_max_str_digits(before)


class _ExplodingDict(dict):  # type: ignore[type-arg]
    def items(self) -> Any:
        raise KeyError("boom")


def test_errors_raised_while_a_payload_is_walked_are_invalid_argument() -> None:
    with pytest.raises(InvalidArgument):
        encode_payload(_ExplodingDict(a=1))


# ------------------------------------------------------------------ C-3 decode


@pytest.mark.parametrize(
    "text",
    [
        "[" * 5_000 + "]" * 5_000,
        "1" * 5_000,
        "{not json",
        "",
        None,
        12,
    ],
)
def test_undecodable_text_is_told_apart_and_listed_as_none(text: Any) -> None:
    assert try_decode_payload(text) is UNDECODABLE
    assert decode_payload(text) is None


def test_decodable_text_decodes_both_ways() -> None:
    for value in (None, 0, "x", [1, {"a": None}], nested(300)):
        text = json.dumps(value)
        assert try_decode_payload(text) == value
        assert decode_payload(text) == value


def test_undecodable_marker_is_a_picklable_singleton() -> None:
    import pickle

    assert pickle.loads(pickle.dumps(UNDECODABLE)) is UNDECODABLE
    assert repr(UNDECODABLE) == "UNDECODABLE"


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=40,
)
anything = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text()
    | st.binary()
    | st.complex_numbers()
    | st.sets(st.integers(), max_size=3)
    | st.datetimes()
    | st.just(object()),
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children, children)
        | st.dictionaries(
            st.one_of(st.text(max_size=4), st.integers(), st.none(), st.tuples(st.integers())),
            children,
            max_size=4,
        )
    ),
    max_leaves=30,
)


@FUZZ
@given(json_values)
def test_every_json_value_round_trips(value: Any) -> None:
    assert try_decode_payload(encode_payload(value)) == json.loads(json.dumps(value))


@FUZZ
@given(anything)
def test_encoding_anything_raises_only_invalid_argument(value: Any) -> None:
    try:
        text = encode_payload(value)
    except InvalidArgument:
        return
    # What a writer accepts, every reader decodes (C-3).
    assert try_decode_payload(text) is not UNDECODABLE


@FUZZ
@given(st.text(max_size=200) | st.binary(max_size=50))
def test_decoding_any_text_never_raises(text: Any) -> None:
    try_decode_payload(text)
    decode_payload(text)


# ------------------------------------------------------------------- SC-1 specs


@pytest.mark.parametrize(
    "spec",
    [
        "30-10 * * * *",
        "0 23-1 * * *",
        "0 0 20-10 * *",
        "0 0 * 12-1 *",
        "0 0 * MAR-JAN *",
        "0 0 * * FRI-MON",
        "0 0 * * 5-1",
        "0 0 * * 7-0",
        "59-0 * * * * *",
        "0 30-10/5 * * * *",
        "1,30-10 * * * *",
    ],
)
def test_reversed_ranges_are_refused(spec: str) -> None:
    with pytest.raises(InvalidSpec) as info:
        specs.parse(spec)
    assert info.value.spec == spec


@pytest.mark.parametrize(
    "spec",
    ["10-30 * * * *", "5-5 * * * *", "0 0 * * 0-7", "0 0 * JAN-MAR *", "0 0 * * MON-FRI"],
)
def test_ranges_written_upwards_still_work(spec: str) -> None:
    specs.parse(spec)


def test_a_reversed_range_never_fires_on_the_complement() -> None:
    """The reported bug: ``30-10`` fired on minutes 0-10 and 30-59."""
    with pytest.raises(InvalidSpec):
        specs.parse("30-10 * * * *")
    fire = specs.parse("10-30 * * * *").first_fire(datetime(2026, 1, 1, 0, 31, tzinfo=UTC))
    assert fire == datetime(2026, 1, 1, 1, 10, tzinfo=UTC)


@pytest.mark.parametrize(
    "spec",
    [
        "@every " + "9" * 5_000 + "s",
        "@every 99999999999999999999s",
        "@every 9999999999d",
        "@every 367d",
        "99999 * * * *",
        "0 " + "1" * 5_000 + " * * *",
    ],
)
def test_huge_numbers_in_specs_are_invalid_specs(spec: str) -> None:
    with pytest.raises(InvalidSpec):
        specs.parse(spec)


@pytest.mark.parametrize(
    "tz", ["America", "Europe", "a" * 300, "UTC\x00", "/etc/passwd", "../UTC", "", 5, None]
)
def test_bad_time_zones_are_invalid_arguments(tz: Any) -> None:
    with pytest.raises(InvalidArgument):
        specs.check_timezone(tz)


cron_field = st.one_of(
    st.just("*"),
    st.integers(0, 70).map(str),
    st.tuples(st.integers(0, 70), st.integers(0, 70)).map(lambda p: f"{p[0]}-{p[1]}"),
    st.tuples(st.sampled_from(["*", "0-59", "5"]), st.integers(0, 80)).map(
        lambda p: f"{p[0]}/{p[1]}"
    ),
    st.sampled_from(["JAN", "mon-fri", "L", "1#2", "15W", "?", "H", "R", "MAR-JAN", "-", ",", ""]),
    st.text(alphabet="0123456789*/-,#LW?", min_size=1, max_size=6),
)
cron_spec = st.lists(cron_field, min_size=4, max_size=7).map(" ".join)
any_spec = st.one_of(
    cron_spec,
    st.text(max_size=40),
    st.builds(lambda t: "@every " + t, st.text(alphabet="0123456789dhms ", max_size=12)),
    st.sampled_from(sorted(specs.NICKNAMES)),
)
zones = st.sampled_from(["UTC", "Europe/Paris", "America/New_York", "Asia/Kolkata", "Pacific/Apia"])
instants = st.datetimes(
    min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
)


@settings(max_examples=400, deadline=None)
@given(any_spec, zones, instants)
def test_any_spec_parses_or_is_an_invalid_spec_and_fire_times_never_raise(
    spec: str, tz: str, now: datetime
) -> None:
    try:
        parsed = specs.parse(spec)
    except InvalidSpec:
        return
    first = parsed.first_fire(now, tz)
    assert first > now
    after = parsed.next_fire(first, first + timedelta(seconds=1), tz)
    assert after > first
    assert parsed.latest_fire(first, first + timedelta(hours=1), tz) >= first


# ------------------------------------------------------------- E-3 value types


class _BadOffset(tzinfo):
    def utcoffset(self, dt: datetime | None) -> timedelta:
        return timedelta(days=2)

    def dst(self, dt: datetime | None) -> timedelta:
        return timedelta(0)

    def tzname(self, dt: datetime | None) -> str:
        return "bad"


@pytest.mark.parametrize(
    "run_at",
    [
        datetime.max.replace(tzinfo=timezone(timedelta(hours=-5))),
        datetime.max.replace(tzinfo=UTC),
        datetime(9999, 12, 31, 23, 0, tzinfo=UTC),
        datetime.min.replace(tzinfo=timezone(timedelta(hours=5))),
        datetime.min.replace(tzinfo=UTC),
        datetime(2026, 1, 1, tzinfo=_BadOffset()),
    ],
)
def test_run_at_at_the_ends_of_time_is_an_invalid_argument(run_at: datetime) -> None:
    with pytest.raises(InvalidArgument):
        EnqueueOpts(run_at=run_at)


def test_run_at_within_the_range_works() -> None:
    EnqueueOpts(run_at=datetime(9999, 12, 29, tzinfo=UTC))
    EnqueueOpts(run_at=datetime(1, 1, 3, tzinfo=UTC))


@pytest.mark.parametrize("value", [10**400, -(10**400), 2**1024])
def test_durations_beyond_any_float_are_invalid_arguments(value: int) -> None:
    with pytest.raises(InvalidArgument):
        check_duration("delay_s", value)
    with pytest.raises(InvalidArgument):
        EnqueueOpts(delay_s=value)
    with pytest.raises(InvalidArgument):
        QueueOpts(visibility_timeout_s=value)


@pytest.mark.parametrize("field", ["priority", "max_attempts"])
def test_huge_integers_in_opts_are_invalid_arguments(field: str) -> None:
    with pytest.raises(InvalidArgument):
        EnqueueOpts(**{field: 10**400})  # type: ignore[arg-type]


any_value = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=5),
    st.datetimes(timezones=st.one_of(st.none(), st.timezones())),
    st.just(object()),
    st.lists(st.integers(), max_size=2),
)


@FUZZ
@given(
    st.dictionaries(
        st.sampled_from(["priority", "delay_s", "run_at", "max_attempts", "expires_s", "group"]),
        any_value,
    )
)
def test_enqueue_opts_from_anything_raise_only_invalid_argument(kwargs: dict[str, Any]) -> None:
    with contextlib.suppress(InvalidArgument):
        EnqueueOpts(**kwargs)


@FUZZ
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "visibility_timeout_s",
                "max_attempts",
                "backoff_base_s",
                "dead_letter_retention_s",
                "max_depth",
                "group_limit",
            ]
        ),
        any_value,
    )
)
def test_queue_opts_from_anything_raise_only_invalid_argument(kwargs: dict[str, Any]) -> None:
    with contextlib.suppress(InvalidArgument):
        QueueOpts(**kwargs)


# ------------------------------------------------------------------- B-1 curve


@FUZZ
@given(any_value, any_value)
def test_backoff_raises_only_invalid_argument(attempt: Any, base: Any) -> None:
    try:
        value = backoff.delay(attempt, base)
    except InvalidArgument:
        return
    assert 0 <= value <= backoff.MAX_DELAY_S


@pytest.mark.parametrize("draw", [1.0, -0.1, float("nan"), "0.5", None])
def test_backoff_refuses_an_rng_outside_its_range(draw: Any) -> None:
    with pytest.raises(InvalidArgument):
        backoff.delay(1, 5.0, rng=lambda: draw)


def test_every_refusal_here_is_an_alkstore_error() -> None:
    assert issubclass(InvalidSpec, AlkstoreError)
    assert issubclass(InvalidArgument, AlkstoreError)
