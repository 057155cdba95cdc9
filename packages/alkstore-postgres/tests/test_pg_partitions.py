"""Dead letters partitioned by die time on PostgreSQL (Q-16, Q-22, RS-3;
docs/adr/0026): purge by age drops the partitions wholly before its cut that
hold only the purging queue's rows and deletes the rest row by row, with an
exact count; the sweep drops a past partition whose every row is past its
retention; the width is the schema's; version 6 upgrades keeping its dead
letters; a role without DDL rights still purges (row deletes)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from fix_partitions import partitions, past_partition
from psycopg import sql

from alkstore import JobState
from alkstore.errors import InvalidArgument
from alkstore_postgres import PostgresStore
from alkstore_postgres._sql import SCHEMA_VERSION, Statements
from alkstore_postgres._url import parse_url

Admin = psycopg.Connection[tuple[Any, ...]]
HOUR = 3600


def _now_s(admin: Admin) -> float:
    row = admin.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
    assert row is not None
    return float(row[0])


def _hour_now(admin: Admin) -> int:
    return int(_now_s(admin) // HOUR)


def _partitions(admin: Admin, schema: str, table: str = "dead") -> set[str]:
    return partitions(admin, schema, table)


def _past_partition(admin: Admin, schema: str, lo: int, hi: int) -> str:
    """A dead-letter partition for [lo, hi) (epoch seconds), gone by."""
    return past_partition(admin, schema, lo, hi, "dead")


_NEXT_ID = [10**12]


def _dead(admin: Admin, schema: str, queue: str, died_s: float, purge_s: float | None) -> int:
    """A dead row of *queue* that died at *died_s* (epoch seconds), purged at
    *purge_s* (``None``: no retention); its id."""
    _NEXT_ID[0] += 1
    job_id = _NEXT_ID[0]
    admin.execute(
        sql.SQL(
            "INSERT INTO {} (id, queue, payload, priority, run_at, created_at, attempts, "
            "max_attempts, visibility_timeout_s, backoff_base_s, dead_letter_retention_s, claims, "
            "last_error, died_at, purge_at) VALUES (%s, %s, '1', 0, to_timestamp(%s), "
            "to_timestamp(%s), 1, 1, 30, 1, %s, 1, 'old', to_timestamp(%s), to_timestamp(%s))"
        ).format(sql.Identifier(schema, "dead")),
        (
            job_id,
            queue,
            died_s - 10,
            died_s - 10,
            None if purge_s is None else purge_s - died_s,
            died_s,
            purge_s,
        ),
    )
    return job_id


def _home(admin: Admin, schema: str, job_id: int) -> str | None:
    row = admin.execute(
        sql.SQL("SELECT tableoid::regclass::text FROM {} WHERE id = %s").format(
            sql.Identifier(schema, "dead")
        ),
        (job_id,),
    ).fetchone()
    return None if row is None else str(row[0]).rsplit(".", 1)[-1].strip('"')


# -------------------------------------------------------------------


@pytest.mark.clause("Q-22")
def test_purge_by_age_drops_whole_partitions_and_counts_exactly_at_the_edge(
    store: PostgresStore, admin: Admin
) -> None:
    """Q-22: a partition wholly before the cut holding only this queue's rows is dropped
    (its rows counted); in the edge partition the row that died at the cut goes, the one
    just after stays; the count is exact."""
    edge = (_hour_now(admin) - 2) * HOUR
    before = _past_partition(admin, store.schema, edge - HOUR, edge)
    at_edge = _past_partition(admin, store.schema, edge, edge + HOUR)
    old = [_dead(admin, store.schema, "mine", edge - HOUR + s, None) for s in (0, 60, HOUR - 1)]
    at_cut = _dead(admin, store.schema, "mine", edge, None)
    after = _dead(admin, store.schema, "mine", edge + 30, None)
    assert {_home(admin, store.schema, i) for i in old} == {before}
    assert _home(admin, store.schema, at_cut) == at_edge
    q = store.queue("mine")
    # The cut, at the call, falls at or a little after `edge` (by the time this takes).
    older = _now_s(admin) - edge
    assert q.purge_dead(older_than_s=older) == 4
    names = _partitions(admin, store.schema)
    assert before not in names and at_edge in names
    assert all(q.get_job(i) is None for i in [*old, at_cut])
    info = q.get_job(after)
    assert info is not None and info.state is JobState.DEAD
    assert q.purge_dead(older_than_s=older) == 0


@pytest.mark.clause("Q-22", "C-7")
def test_purge_by_age_keeps_a_partition_holding_another_queues_rows(
    store: PostgresStore, admin: Admin
) -> None:
    """Q-22: partitions are shared by the schema's queues: one holding another queue's row
    is not dropped; this queue's rows in it are deleted and counted, the other's stay."""
    edge = (_hour_now(admin) - 3) * HOUR
    name = _past_partition(admin, store.schema, edge, edge + HOUR)
    mine = [_dead(admin, store.schema, "mine", edge + s, None) for s in (1, 2, 3)]
    theirs = _dead(admin, store.schema, "theirs", edge + 4, None)
    assert store.queue("mine").purge_dead(older_than_s=HOUR) == 3
    assert name in _partitions(admin, store.schema)
    assert all(store.queue("mine").get_job(i) is None for i in mine)
    info = store.queue("theirs").get_job(theirs)
    assert info is not None and info.state is JobState.DEAD
    # Once only its own rows are left, that queue's purge drops it.
    assert store.queue("theirs").purge_dead(older_than_s=HOUR) == 1
    assert name not in _partitions(admin, store.schema)


@pytest.mark.clause("Q-22")
def test_purge_by_age_deletes_rows_of_the_default_partition(
    store: PostgresStore, admin: Admin
) -> None:
    """Q-22: rows that died in a width without a partition sit in the default one; purge
    by age deletes those at or before the cut, counts them, and keeps the later ones."""
    base = (_hour_now(admin) - 5) * HOUR
    early = [_dead(admin, store.schema, "q", base + s, None) for s in (0, 10)]
    late = _dead(admin, store.schema, "q", base + 2 * HOUR, None)
    assert {_home(admin, store.schema, i) for i in [*early, late]} == {"dead_default"}
    q = store.queue("q")
    assert q.purge_dead(older_than_s=_now_s(admin) - base - 60) == 2
    assert [i.id for i in q.list_jobs(JobState.DEAD)] == [late]
    assert "dead_default" in _partitions(admin, store.schema)


@pytest.mark.clause("Q-22")
def test_purge_of_all_and_by_ids_stay_exact(store: PostgresStore, admin: Admin) -> None:
    """Q-22: purge by ids probes the partitions by id (none dropped); purge of all drops
    this queue's past partitions and deletes the rest, counting each row once."""
    edge = (_hour_now(admin) - 3) * HOUR
    name = _past_partition(admin, store.schema, edge, edge + HOUR)
    ids = [_dead(admin, store.schema, "q", edge + s, None) for s in (1, 2, 3)]
    q = store.queue("q")
    live = q.enqueue("now")
    job = q.claim("w")
    assert job is not None and job.fail("boom")
    assert q.purge_dead(job_ids=[ids[0], ids[0], 999]) == 1
    assert name in _partitions(admin, store.schema)
    assert q.purge_dead() == 3
    assert name not in _partitions(admin, store.schema)
    assert q.get_job(live) is None and q.stats().dead == 0


@pytest.mark.clause("Q-22", "EN-2")
def test_a_dml_only_role_purges_by_age_with_row_deletes(
    pg_url: str, store: PostgresStore, admin: Admin, dml_role: str
) -> None:
    """Q-22 with EN-2: a role that may not drop tables purges by age exactly: the
    partition stays, its rows are deleted one by one."""
    _grant(admin, store.schema, dml_role)
    edge = (_hour_now(admin) - 3) * HOUR
    name = _past_partition(admin, store.schema, edge, edge + HOUR)
    ids = [_dead(admin, store.schema, "q", edge + s, None) for s in (1, 2)]
    with _as_role(pg_url, store.schema, dml_role) as app:
        q = app.queue("q")
        assert q.purge_dead(older_than_s=HOUR) == 2
        assert all(q.get_job(i) is None for i in ids)
    assert name in _partitions(admin, store.schema)


# -------------------------------------------------------------------


@pytest.mark.clause("Q-16")
def test_the_sweep_drops_a_past_partition_whose_rows_are_all_past_retention(
    store: PostgresStore, admin: Admin
) -> None:
    """Q-16: a past partition whose every row is past its purge time is dropped whole by
    the sweep; this queue's rows are counted in `purged`, another queue's by its own next
    sweep."""
    edge = (_hour_now(admin) - 3) * HOUR
    name = _past_partition(admin, store.schema, edge, edge + HOUR)
    for s in (1, 2):
        _dead(admin, store.schema, "mine", edge + s, edge + s + 60)
    _dead(admin, store.schema, "theirs", edge + 3, edge + 63)
    assert store.queue("mine").sweep_expired().purged == 2
    assert name not in _partitions(admin, store.schema)
    assert store.queue("theirs").sweep_expired().purged == 1
    assert store.queue("theirs").sweep_expired().purged == 0


@pytest.mark.clause("Q-16")
@pytest.mark.parametrize("keeper", ["no retention", "retention still running"])
def test_the_sweep_keeps_a_partition_holding_a_row_not_yet_due(
    store: PostgresStore, admin: Admin, keeper: str
) -> None:
    """Q-16: a row without a retention, or one still within it, keeps its partition; the
    due rows beside it are deleted by row and counted, the keeper stays dead."""
    edge = (_hour_now(admin) - 3) * HOUR
    name = _past_partition(admin, store.schema, edge, edge + HOUR)
    due = _dead(admin, store.schema, "q", edge + 1, edge + 61)
    purge_s = None if keeper == "no retention" else _now_s(admin) + 3600
    kept = _dead(admin, store.schema, "q", edge + 2, purge_s)
    q = store.queue("q")
    assert q.sweep_expired().purged == 1
    assert name in _partitions(admin, store.schema)
    assert q.get_job(due) is None
    info = q.get_job(kept)
    assert info is not None and info.state is JobState.DEAD


@pytest.mark.clause("Q-16", "RS-3")
def test_the_sweep_makes_partitions_ahead_for_dead_letters_and_results(
    store: PostgresStore, admin: Admin
) -> None:
    """Q-16, RS-3: a sweep makes the next widths' partitions of both tables, none for the
    width that has begun but the one a fresh schema starts with."""
    store.queue("q").sweep_expired()
    hour = _hour_now(admin)
    for table in ("dead", "results"):
        names = _partitions(admin, store.schema, table)
        ahead = {f"{table}_p{h * HOUR}_{(h + 1) * HOUR}" for h in range(hour + 1, hour + 7)}
        assert ahead <= names, names
        assert f"{table}_default" in names
        # The current width's: made by the schema's creation for dead letters (an
        # empty table), never for results (its rows may be in the default partition).
        current = f"{table}_p{hour * HOUR}_{(hour + 1) * HOUR}"
        assert (current in names) == (table == "dead"), names


# ------------------------------------------------------------------- width


@pytest.mark.clause("RS-3", "Q-16")
def test_a_narrow_width_is_the_schemas_and_shapes_its_partitions(
    pg_url: str, schema: str, admin: Admin
) -> None:
    """The partition width is set when the schema is created (meta), makes the sweep's
    partitions that wide (15 minutes of them ahead), and a store opened later with
    another width is refused, writing nothing."""
    with PostgresStore(pg_url, schema=schema, partition_width_s=60) as store:
        while True:
            minute = int(_now_s(admin)) // 60
            store.queue("q").sweep_expired()
            if int(_now_s(admin)) // 60 == minute:  # else a new minute began: again
                break
        row = admin.execute(Statements(schema).get_width, {}).fetchone()
        assert row == ("60",)
        names = _partitions(admin, schema)
        start = (minute + 1) * 60
        assert f"dead_p{start}_{start + 60}" in names
        assert f"dead_p{start + 14 * 60}_{start + 15 * 60}" in names
        assert f"dead_p{start + 15 * 60}_{start + 16 * 60}" not in names
    with PostgresStore(pg_url, schema=schema, partition_width_s=60) as again:
        assert again.queue("q").stats().dead == 0
    with pytest.raises(InvalidArgument, match="partition_width_s"):
        PostgresStore(pg_url, schema=schema, partition_width_s=3600)
    with pytest.raises(InvalidArgument, match="partition_width_s"):
        PostgresStore(pg_url, schema=schema + "x", partition_width_s=59)
    with pytest.raises(InvalidArgument, match="partition_width_s"):
        PostgresStore(pg_url + f"?schema={schema}&partition_width_s=120")


# ---------------------------------------------------------------- upgrade


@pytest.mark.clause("ST-1", "Q-22", "Q-21")
def test_version_6_dead_letters_survive_the_upgrade(
    pg_url: str, admin: Admin, schema: str, old_schema: Callable[..., None]
) -> None:
    """ST-1: a version-6 schema with dead letters upgrades to 7: its dead table becomes a
    partitioned one, its rows kept (readable, redrivable, purgeable, counted), the table
    settings applied; a grant on the old dead table carries to the new one."""
    old_schema(6)
    st = Statements(schema)
    ident = sql.Identifier(schema)
    ids = []
    for n in range(3):
        _NEXT_ID[0] += 1
        ids.append(_NEXT_ID[0])
        admin.execute(
            sql.SQL(
                "INSERT INTO {}.dead (id, queue, payload, priority, run_at, created_at, "
                "attempts, max_attempts, visibility_timeout_s, backoff_base_s, claims, "
                "last_error, died_at) VALUES (%s, 'q', %s, 0, now(), now(), 1, 1, 30, 1, 1, "
                "'old', now() - %s * interval '1 day')"
            ).format(ident),
            (ids[-1], f'"{n}"', 3 - n),
        )
    admin.execute(sql.SQL("GRANT SELECT ON {}.dead TO PUBLIC").format(ident))
    with PostgresStore(pg_url, schema=schema) as store:
        assert store.executor.schema_migration == (6, SCHEMA_VERSION)  # type: ignore[attr-defined]
        q = store.queue("q")
        assert q.stats().dead == 3
        assert [i.id for i in q.list_jobs(JobState.DEAD)] == ids
        info = q.get_job(ids[0])
        assert info is not None and info.state is JobState.DEAD and info.last_error == "old"
        assert q.redrive([ids[2]]) == 1
        assert q.purge_dead(older_than_s=2.5 * 86_400) == 1
        assert q.purge_dead(job_ids=[ids[1]]) == 1
        q.sweep_expired()
        job = q.claim("w")
        assert job is not None and job.payload == "old"
        again = q.claim("w")
        assert again is not None and again.id == ids[2]
        assert again.fail("again")
        assert q.stats().dead == 1
    kind = admin.execute(
        "SELECT c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = 'dead'",
        (schema,),
    ).fetchone()
    assert kind == ("p",)
    assert admin.execute(st.get_width, {}).fetchone() == ("3600",)
    opts = admin.execute(
        "SELECT c.relname, c.reloptions FROM pg_class c JOIN pg_namespace n "
        "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname IN ('jobs', 'locks')",
        (schema,),
    ).fetchall()
    settings = {name: set(o or []) for name, o in opts}
    assert "fillfactor=85" in settings["jobs"] and "fillfactor=50" in settings["locks"]
    granted = admin.execute(
        "SELECT has_table_privilege('public', %s, 'SELECT')",
        (f'"{schema}".dead',),
    ).fetchone()
    assert granted == (True,)


# ---------------------------------------------------------------- helpers


def _grant(admin: Admin, schema: str, role: str) -> None:
    ident, who = sql.Identifier(schema), sql.Identifier(role)
    admin.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(ident, who))
    admin.execute(
        sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {} TO {}").format(
            ident, who
        )
    )


class _as_role:
    def __init__(self, pg_url: str, schema: str, role: str) -> None:
        params = psycopg.conninfo.conninfo_to_dict(parse_url(pg_url).conninfo)
        params["user"] = role
        params.pop("password", None)
        self.store = PostgresStore(psycopg.conninfo.make_conninfo("", **params), schema=schema)

    def __enter__(self) -> PostgresStore:
        return self.store

    def __exit__(self, *exc: object) -> None:
        self.store.close()


@pytest.fixture
def dml_role(admin: Admin) -> Iterator[str]:
    name = f"alk_dml_{uuid.uuid4().hex[:8]}"
    admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
    yield name
    admin.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(sql.Identifier(name)))
    admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))
