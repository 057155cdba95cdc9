"""The kit's helpers that both engines share: the job-row mapping, the boolean
engine options (EN-3) and the checks of ``tx.execute`` arguments (T-2)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from alkstore.engine import (
    JobRow,
    check_bool_option,
    check_sql_args,
    job_row,
    parse_bool_option,
)
from alkstore.errors import InvalidArgument


def _utc(us: int) -> datetime:
    return datetime.fromtimestamp(us / 1_000_000, timezone.utc)


def test_job_row_maps_a_row_in_field_order() -> None:
    row = (
        "7", "q", "dead", '{"a": 1}', "3", 1_000_000, 2_000_000, 3_000_000, None, "w1",
        "2", "5", "30", "1.5", None, None, "boom", 4_000_000, "k", "g", "2", "tp",
    )  # fmt: skip
    got = job_row(row, _utc)
    assert got == JobRow(
        id=7,
        queue="q",
        state="dead",
        payload='{"a": 1}',
        priority=3,
        run_at=_utc(1_000_000),
        created_at=_utc(2_000_000),
        claimed_at=_utc(3_000_000),
        deadline=None,
        worker_id="w1",
        attempts=2,
        max_attempts=5,
        visibility_timeout_s=30.0,
        backoff_base_s=1.5,
        dead_letter_retention_s=None,
        expires_at=None,
        last_error="boom",
        died_at=_utc(4_000_000),
        unique_key="k",
        group="g",
        group_limit=2,
        trace_context="tp",
    )


def test_job_row_keeps_optional_fields_none() -> None:
    row = (1, "q", "pending", "1", 0, 5, 5, None, None, None, 0, 3, 30.0, 1.0, 60.0, None,
           None, None, None, None, None, None)  # fmt: skip
    got = job_row(row, _utc)
    assert (got.claimed_at, got.died_at, got.group_limit, got.dead_letter_retention_s) == (
        None,
        None,
        None,
        60.0,
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [("true", True), ("TRUE", True), ("1", True), ("false", False), ("False", False), ("0", False)],
)
def test_parse_bool_option_reads_the_four_spellings(text: str, expected: bool) -> None:
    assert parse_bool_option("migrate", text) is expected


@pytest.mark.parametrize("text", ["", "yes", "no", "2", " true", "on"])
def test_parse_bool_option_refuses_anything_else(text: str) -> None:
    with pytest.raises(InvalidArgument):
        parse_bool_option("migrate", text)


@pytest.mark.parametrize("value", [True, False])
def test_check_bool_option_takes_a_bool(value: bool) -> None:
    assert check_bool_option("pooler", value) is value


@pytest.mark.parametrize("value", [1, 0, "true", None, 1.0])
def test_check_bool_option_refuses_what_is_not_a_bool(value: object) -> None:
    with pytest.raises(InvalidArgument):
        check_bool_option("pooler", value)


@pytest.mark.parametrize("params", [(), [], (1, "a"), {"a": 1}, {}])
def test_check_sql_args_takes_a_sequence_or_a_dict(params: Any) -> None:
    check_sql_args("SELECT 1", params)


@pytest.mark.parametrize(
    ("sql", "params"),
    [(b"SELECT 1", ()), (None, ()), ("SELECT ?", "a"), ("SELECT ?", b"a"), ("SELECT ?", 1),
     ("SELECT ?", {1, 2})],
)  # fmt: skip
def test_check_sql_args_refuses_other_types(sql: object, params: object) -> None:
    with pytest.raises(InvalidArgument):
        check_sql_args(sql, params)
