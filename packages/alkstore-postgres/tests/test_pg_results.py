"""Kept results on PostgreSQL (RS-1, RS-3; docs/adr/0018): the results table
is partitioned by the hour a job finished in, the sweep keeps the next hours'
partitions and drops the past ones whose every result is past its time, and
a role without DDL rights still sweeps (row by row)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fix_partitions import partitions, past_partition
from psycopg import sql

from alkstore import JobState, QueueOpts
from alkstore_postgres import PostgresStore
from alkstore_postgres._ops import RESULT_HOURS_AHEAD
from alkstore_postgres._url import parse_url

Admin = psycopg.Connection[tuple[Any, ...]]


def _hour_now(admin: Admin) -> int:
    row = admin.execute("SELECT floor(extract(epoch FROM clock_timestamp()) / 3600)").fetchone()
    assert row is not None
    return int(row[0])


def _hour_name(hour: int) -> str:
    """The partition of an hour (the default width): ``results_p<from>_<to>``."""
    return f"results_p{hour * 3600}_{(hour + 1) * 3600}"


def _partitions(admin: Admin, schema: str) -> set[str]:
    return partitions(admin, schema, "results")


def _past_partition(admin: Admin, schema: str, hour: int) -> str:
    """A partition for an hour gone by (the sweep only ever makes later ones)."""
    return past_partition(admin, schema, hour * 3600, (hour + 1) * 3600, "results")


def _old_result(
    admin: Admin, schema: str, queue: str, job_id: int, hour: int, keep_s_after_hour: float
) -> None:
    """A result row that finished in *hour*, kept until *keep_s_after_hour*
    seconds after that hour's start (negative values: long gone)."""
    admin.execute(
        sql.SQL(
            "INSERT INTO {} (id, queue, payload, priority, run_at, created_at, attempts, "
            "max_attempts, visibility_timeout_s, backoff_base_s, claims, result_ttl_s, result, "
            "finished_at, keep_until) VALUES (%s, %s, '1', 0, to_timestamp(%s), to_timestamp(%s), "
            "1, 3, 30, 1, 1, 60, '\"old\"', to_timestamp(%s), to_timestamp(%s))"
        ).format(sql.Identifier(schema, "results")),
        (
            job_id,
            queue,
            hour * 3600,
            hour * 3600,
            hour * 3600 + 60,
            hour * 3600 + keep_s_after_hour,
        ),
    )


@pytest.mark.clause("RS-3")
def test_the_sweep_keeps_partitions_ahead(store: PostgresStore, admin: Admin) -> None:
    """RS-3: a sweep makes the next hours' partitions; results of this hour go to the
    default one (no partition is ever made for an hour that has begun)."""
    store.queue("q").sweep_expired()
    now = _hour_now(admin)
    names = _partitions(admin, store.schema)
    ahead = {_hour_name(h) for h in range(now + 1, now + RESULT_HOURS_AHEAD + 1)}
    assert ahead <= names
    assert "results_default" in names
    assert _hour_name(now) not in names


@pytest.mark.clause("RS-3")
def test_a_past_partition_whose_results_all_expired_is_dropped_whole(
    store: PostgresStore, admin: Admin
) -> None:
    """RS-3: the sweep drops a past hour's partition once every result in it is past its
    time, counting this queue's rows; another queue's rows in it go with it, and that
    queue's next sweep counts them (docs/adr/0026)."""
    hour = _hour_now(admin) - 3
    name = _past_partition(admin, store.schema, hour)
    _old_result(admin, store.schema, "mine", 10**12 + 1, hour, 120)
    _old_result(admin, store.schema, "mine", 10**12 + 2, hour, 300)
    _old_result(admin, store.schema, "theirs", 10**12 + 3, hour, 300)
    got = store.queue("mine").sweep_expired()
    assert got.results == 2
    assert name not in _partitions(admin, store.schema)
    assert store.queue("theirs").sweep_expired().results == 1
    assert store.queue("theirs").sweep_expired().results == 0


@pytest.mark.clause("RS-3")
def test_a_past_partition_holding_a_live_result_keeps_its_recently_expired_rows_for_its_drop(
    store: PostgresStore, admin: Admin
) -> None:
    """RS-3: a result still within its time keeps its partition; a result beside it that
    expired less than two widths ago is not deleted by row (never shown, never counted)
    but goes with the partition's drop once the last result in it is past its time, and
    is counted then (docs/adr/0026)."""
    hour = _hour_now(admin) - 1
    name = _past_partition(admin, store.schema, hour)
    row = admin.execute("SELECT extract(epoch FROM clock_timestamp())").fetchone()
    assert row is not None
    just_gone = float(row[0]) - 60 - hour * 3600
    _old_result(admin, store.schema, "q", 10**12 + 11, hour, just_gone)
    _old_result(admin, store.schema, "q", 10**12 + 12, hour, 10 * 86400)
    q = store.queue("q")
    assert q.sweep_expired().results == 0
    assert name in _partitions(admin, store.schema)
    kept = q.get_job(10**12 + 12)
    assert kept is not None and (kept.state, kept.result) == (JobState.DONE, "old")
    assert q.get_job(10**12 + 11) is None
    assert [i.id for i in q.list_jobs(JobState.DONE)] == [10**12 + 12]
    admin.execute(
        sql.SQL(
            "UPDATE {} SET keep_until = clock_timestamp() - interval '1 s' WHERE id = %s"
        ).format(sql.Identifier(store.schema, "results")),
        (10**12 + 12,),
    )
    assert q.sweep_expired().results == 2
    assert name not in _partitions(admin, store.schema)
    assert q.get_job(10**12 + 12) is None


@pytest.mark.clause("RS-3")
def test_results_held_long_past_their_time_by_a_longer_kept_one_are_deleted_by_row(
    store: PostgresStore, admin: Admin
) -> None:
    """RS-3: a result past its time by more than two widths, in a partition that a much
    longer kept result holds, is deleted by row and counted; the long one stays."""
    hour = _hour_now(admin) - 4
    name = _past_partition(admin, store.schema, hour)
    _old_result(admin, store.schema, "q", 10**12 + 13, hour, 60)
    _old_result(admin, store.schema, "q", 10**12 + 14, hour, 10 * 86400)
    q = store.queue("q")
    assert q.sweep_expired().results == 1
    assert q.sweep_expired().results == 0
    assert name in _partitions(admin, store.schema)
    kept = q.get_job(10**12 + 14)
    assert kept is not None and kept.result == "old"
    count = admin.execute(
        sql.SQL("SELECT count(*) FROM {} WHERE id = %s").format(sql.Identifier(store.schema, name)),
        (10**12 + 13,),
    ).fetchone()
    assert count == (0,)


@pytest.mark.clause("RS-3")
def test_results_of_past_hours_in_the_default_partition_are_deleted(
    store: PostgresStore, admin: Admin
) -> None:
    """RS-3: a result that landed in the default partition (no partition for its hour)
    is deleted by row once past its time, and counted."""
    hour = _hour_now(admin) - 5
    _old_result(admin, store.schema, "q", 10**12 + 21, hour, 30)
    row = admin.execute(
        sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(store.schema, "results_default"))
    ).fetchone()
    assert row == (1,)
    assert store.queue("q").sweep_expired().results == 1
    assert store.queue("q").sweep_expired().results == 0


@pytest.mark.clause("RS-1", "RS-3")
def test_a_kept_result_lands_in_its_hours_storage_and_is_read_back(
    store: PostgresStore, admin: Admin
) -> None:
    """RS-1: an ack keeps the result in the results table only (the jobs table loses the
    row); until its hour's partition exists it is in the default one."""
    q = store.queue("q", QueueOpts(result_ttl_s=600))
    job_id = q.enqueue({"n": 1})
    job = q.claim("w")
    assert job is not None and job.ack(result={"ok": 1})
    jobs = admin.execute(
        sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(store.schema, "jobs"))
    ).fetchone()
    assert jobs == (0,)
    row = admin.execute(
        sql.SQL("SELECT tableoid::regclass::text, result::text FROM {} WHERE id = %s").format(
            sql.Identifier(store.schema, "results")
        ),
        (job_id,),
    ).fetchone()
    assert (
        row is not None and row[0].endswith("results_default") and json.loads(row[1]) == {"ok": 1}
    )


@pytest.fixture
def dml_role(admin: Admin) -> Iterator[str]:
    name = f"alk_dml_{uuid.uuid4().hex[:8]}"
    admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
    yield name
    admin.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(sql.Identifier(name)))
    admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


@pytest.mark.clause("RS-3", "EN-2")
def test_a_dml_only_role_sweeps_results_without_ddl(
    pg_url: str, store: PostgresStore, admin: Admin, dml_role: str
) -> None:
    """RS-3 with EN-2: a role that may not run DDL sweeps: the partition upkeep is
    skipped (nothing created or dropped, nothing owned), expired rows are deleted."""
    ident = sql.Identifier(store.schema)
    who = sql.Identifier(dml_role)
    admin.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(ident, who))
    admin.execute(
        sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {} TO {}").format(
            ident, who
        )
    )
    hour = _hour_now(admin) - 4
    name = _past_partition(admin, store.schema, hour)
    _old_result(admin, store.schema, "q", 10**12 + 31, hour, 10)
    before = _partitions(admin, store.schema)
    params = psycopg.conninfo.conninfo_to_dict(parse_url(pg_url).conninfo)
    params["user"] = dml_role
    params.pop("password", None)
    with PostgresStore(psycopg.conninfo.make_conninfo("", **params), schema=store.schema) as app:
        q = app.queue("q", QueueOpts(result_ttl_s=0.2))
        job_id = q.enqueue(1)
        job = q.claim("w")
        assert job is not None and job.ack(result="by the app")
        assert q.result(job_id) is not None
        assert q.sweep_expired().results == 1  # the old row, deleted by row
        time.sleep(0.4)
        assert q.result(job_id) is None
    assert _partitions(admin, store.schema) == before
    assert name in before
    owned = admin.execute(
        "SELECT count(*) FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner "
        "WHERE r.rolname = %s",
        (dml_role,),
    ).fetchone()
    assert owned == (0,)
