"""PostgreSQL specifics under hostile input and tight privileges: E-2 (every
transient SQLSTATE, lock timeouts), EN-2 (least privilege, any schema
name), EN-3 (every URL form)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from psycopg import sql

import alkstore
from alkstore import (
    EngineError,
    InvalidArgument,
    QueueOpts,
    SchemaVersionError,
    TransientError,
)
from alkstore_postgres import PostgresStore
from alkstore_postgres._errors import TRANSIENT_STATES, translate_errors
from alkstore_postgres._url import parse_url
from alkstore_postgres.testing import drop_schema

Admin = psycopg.Connection[tuple[Any, ...]]

# ----------------------------------------------------------- E-2 mapping

CONNECTION_STATES = ["08000", "08003", "08006", "08001", "08004", "08P01"]


@pytest.mark.parametrize("state", sorted(TRANSIENT_STATES) + CONNECTION_STATES)
def test_every_transient_sqlstate_is_a_transient_error(state: str) -> None:
    exc = psycopg.errors.lookup(state)("from the server")
    with pytest.raises(TransientError) as info, translate_errors():
        raise exc
    assert info.value.__cause__ is exc


@pytest.mark.parametrize(
    "state",
    ["23505", "42601", "42501", "42P01", "22003", "57014", "XX000", "40003", "3D000", "28P01"],
)
def test_other_sqlstates_are_engine_errors(state: str) -> None:
    with pytest.raises(EngineError) as info, translate_errors():
        raise psycopg.errors.lookup(state)("from the server")
    assert type(info.value) is EngineError


@pytest.mark.parametrize(
    ("message", "transient"),
    [
        ("server closed the connection unexpectedly", True),
        ("the connection is closed", True),
        ("connection failed: Connection refused", True),
        ("connection is bad: No such file or directory", True),
        ("connection failed: FATAL:  the database system is starting up", True),
        ("connection failed: FATAL:  sorry, too many clients already", True),
        ("connection failed: FATAL:  password authentication failed for user x", False),
        ('connection failed: FATAL:  role "x" does not exist', False),
        ('connection is bad: invalid integer value "abc" for connection option "port"', False),
        ('connection is bad: invalid sslmode value: "bogus"', False),
        ("connection failed: server does not support SSL, but SSL was required", False),
        ("fe_sendauth: no password supplied", False),
    ],
)
def test_libpq_errors_without_sqlstate_by_message(message: str, transient: bool) -> None:
    with pytest.raises(EngineError) as info, translate_errors():
        raise psycopg.OperationalError(message)
    assert isinstance(info.value, TransientError) is transient


def test_values_psycopg_cannot_send_are_invalid_arguments(pg_url: str, admin: Admin) -> None:
    for value in ("nul\x00byte", "lone\ud800surrogate"):
        with pytest.raises(InvalidArgument), translate_errors():
            admin.execute("SELECT %s::text", (value,))


def test_a_host_name_that_does_not_encode_is_an_invalid_argument() -> None:
    with pytest.raises(InvalidArgument):
        PostgresStore("postgresql://127.0.0.1:1,\x80/db?connect_timeout=2")


# ------------------------------------------------------- E-2 lock timeout


@contextmanager
def _bounded(seconds: float) -> Iterator[None]:
    started = time.monotonic()
    yield
    elapsed = time.monotonic() - started
    assert elapsed < seconds, f"the call took {elapsed:.1f} s"


def test_a_publish_behind_another_transactions_lock_times_out_as_transient(
    pg_url: str, schema: str
) -> None:
    with alkstore.open(pg_url, schema=schema, lock_timeout_s=0.5) as store:
        stream = store.stream("locked")
        stream.publish("first")
        with store.transaction() as tx:
            stream.publish("holds the counter row", tx=tx)
            failed: list[BaseException] = []

            def publish() -> None:
                try:
                    stream.publish("waits")
                except BaseException as exc:
                    failed.append(exc)

            worker = threading.Thread(target=publish)
            with _bounded(5.0):
                worker.start()
                worker.join(30)
            assert failed and isinstance(failed[0], TransientError)


def test_an_ack_behind_an_idle_transaction_holding_the_row_times_out(
    pg_url: str, schema: str, admin: Admin
) -> None:
    """LESSONS: a pass-through connection idle in a transaction that holds a
    job's row lock made an ack wait forever."""
    with alkstore.open(pg_url, schema=schema, lock_timeout_s=0.5) as store:
        q = store.queue("locked", QueueOpts(visibility_timeout_s=300))
        q.enqueue("x")
        job = q.claim("w")
        assert job is not None
        with psycopg.connect(pg_url) as holder:
            holder.execute(
                sql.SQL("SELECT 1 FROM {}.jobs WHERE id = %s FOR UPDATE").format(
                    sql.Identifier(schema)
                ),
                (job.id,),
            )
            with _bounded(5.0), pytest.raises(TransientError):
                job.ack()
            holder.rollback()
        assert job.ack()


def test_lock_timeout_s_is_refused_when_invalid(pg_url: str, schema: str) -> None:
    for bad in (-1, float("nan"), "x", True):
        with pytest.raises(InvalidArgument):
            alkstore.open(pg_url, schema=schema, lock_timeout_s=bad)


# ------------------------------------------------------------ EN-2 schema


@pytest.mark.clause("EN-2")
@pytest.mark.parametrize(
    "name",
    [
        'with "quotes"',
        "Mixed Case",
        "spaces and ; semicolons --",
        "é" * 31,  # 62 bytes
        "x" * 63,
        "line\nbreak",
        "$1",
    ],
)
def test_any_schema_name_of_up_to_63_bytes_works(pg_url: str, name: str) -> None:
    _schema_round_trip(pg_url, _unique(name))


@pytest.mark.parametrize("name", ["percent%", "100%s", "%(queue)s"])
def test_schema_names_with_a_percent_sign_work(pg_url: str, name: str) -> None:
    _schema_round_trip(pg_url, _unique(name))


def _unique(name: str) -> str:
    """*name* with a random tail, trimmed to stay within 63 bytes."""
    suffix = uuid.uuid4().hex[:4]
    while len((name + suffix).encode()) > 63:
        name = name[:-1]
    return name + suffix


def _schema_round_trip(pg_url: str, name: str) -> None:
    try:
        with PostgresStore(pg_url, schema=name) as store:
            q = store.queue("q")
            q.enqueue({"in": name})
            job = q.claim("w")
            assert job is not None and job.payload == {"in": name} and job.ack()
            store.stream("s").publish(1)
            assert store.lock("l", 5) is not None
            with store.listen("c") as listener:
                store.notify("c", "hi")
                note = listener.get(5.0)
                assert note is not None and note.payload == "hi"
            store.schedule("s", "@hourly", "q")
            assert store.tick_schedules() == 0
        with PostgresStore(pg_url, schema=name, migrate=False) as again:
            assert [s.name for s in again.schedules()] == ["s"]
    finally:
        drop_schema(pg_url, name)


@pytest.mark.clause("EN-2")
@pytest.mark.parametrize("name", ["x" * 64, "é" * 32, "pg_catalog2", "PG_x", "", "a\x00b"])
def test_schema_names_postgresql_cannot_hold_are_refused(pg_url: str, name: str) -> None:
    with pytest.raises(InvalidArgument):
        PostgresStore(pg_url, schema=name)


# ------------------------------------------------------ EN-2 roles


@pytest.fixture
def roles(admin: Admin) -> Iterator[Callable[[str], str]]:
    """Makes login roles with unique names; drops them (and what they own)
    afterwards."""
    made: list[str] = []

    def make(kind: str) -> str:
        name = f"alk_{kind}_{uuid.uuid4().hex[:8]}"
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
        made.append(name)
        return name

    yield make
    for name in made:
        admin.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(sql.Identifier(name)))
        admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


def _as(pg_url: str, role: str) -> str:
    parts = parse_url(pg_url)
    params = psycopg.conninfo.conninfo_to_dict(parts.conninfo)
    params["user"] = role
    params.pop("password", None)
    return psycopg.conninfo.make_conninfo("", **params)


def _every_operation(store: PostgresStore) -> None:
    """One of each kind of call, so that a missing grant shows."""
    q = store.queue("grants", QueueOpts(visibility_timeout_s=300, dead_letter_retention_s=1))
    q.enqueue("a")
    q.enqueue_many(["b", "c"])
    jobs = q.claim_batch("w", 3)
    assert len(jobs) == 3
    assert jobs[0].heartbeat()
    assert jobs[0].ack()
    assert jobs[1].retry("again", 0)
    assert jobs[2].fail("dead")
    assert q.ack_batch([]) == 0
    q.cancel(jobs[1].id)
    q.sweep_expired()
    q.stats()
    store.queue_stats()
    assert q.get_job(jobs[2].id) is not None
    with store.transaction() as tx:
        q.enqueue("in tx", tx=tx)
    s = store.stream("grants")
    s.publish(1)
    s.commit("c", 1)
    s.read()
    s.trim(2)
    lock = store.lock("grants", 5)
    assert lock is not None and lock.renew() and lock.release()
    with store.listen("grants") as listener:
        store.notify("grants", "x")
        assert listener.get(5.0) is not None
    store.schedule("grants", "@every 1s", "grants")
    store.tick_schedules()
    store.schedules()
    assert store.unschedule("grants")
    box = store.outbox("grants")
    box.put(1)


@pytest.mark.clause("EN-2")
def test_a_role_that_owns_only_its_schema_opens_migrates_and_runs(
    pg_url: str, admin: Admin, roles: Callable[[str], str]
) -> None:
    owner = roles("owner")
    schema = f"alk_owned_{uuid.uuid4().hex[:8]}"
    admin.execute(
        sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(
            sql.Identifier(schema), sql.Identifier(owner)
        )
    )
    with PostgresStore(_as(pg_url, owner), schema=schema) as store:
        _every_operation(store)


@pytest.mark.clause("EN-2")
def test_the_schema_owner_role_has_no_create_on_the_database(
    pg_url: str, admin: Admin, roles: Callable[[str], str]
) -> None:
    """The premise of the test above: the role really cannot CREATE in the
    database (PostgreSQL 15 grants nothing to PUBLIC there)."""
    owner = roles("owner")
    row = admin.execute(
        "SELECT has_database_privilege(%s, current_database(), 'CREATE')", (owner,)
    ).fetchone()
    assert row == (False,)


#: The grants docs/postgres-roles.md gives the application role: no more.
DML_GRANTS = [
    "GRANT USAGE ON SCHEMA {schema} TO {role}",
    "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}",
    "GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {role}",
]
#: The grants of the read-only role (CLI listings, dashboards, metrics).
READ_GRANTS = [
    "GRANT USAGE ON SCHEMA {schema} TO {role}",
    "GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role}",
]


def _grant_dml(admin: Admin, schema: str, role: str, grants: list[str] = DML_GRANTS) -> None:
    for grant in grants:
        admin.execute(
            sql.SQL(grant).format(schema=sql.Identifier(schema), role=sql.Identifier(role))
        )


@pytest.mark.clause("EN-2")
def test_a_dml_only_role_runs_every_operation_on_a_migrated_schema(
    pg_url: str, schema: str, admin: Admin, roles: Callable[[str], str]
) -> None:
    PostgresStore(pg_url, schema=schema).close()  # migrated by the superuser
    app = roles("dml")
    _grant_dml(admin, schema, app)
    with PostgresStore(_as(pg_url, app), schema=schema) as store:
        _every_operation(store)
    # It issued no DDL: the role owns nothing.
    row = admin.execute(
        "SELECT count(*) FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner "
        "WHERE r.rolname = %s",
        (app,),
    ).fetchone()
    assert row == (0,)


def test_a_read_only_role_lists_everything_with_migrate_false(
    pg_url: str, schema: str, admin: Admin, roles: Callable[[str], str]
) -> None:
    with PostgresStore(pg_url, schema=schema) as owner:
        q = owner.queue("listed")
        job_id = q.enqueue("x")
        owner.stream("listed").publish(1)
        owner.schedule("listed", "@hourly", "listed")
    reader = roles("ro")
    _grant_dml(admin, schema, reader, READ_GRANTS)
    with PostgresStore(_as(pg_url, reader), schema=schema, migrate=False) as store:
        q = store.queue("listed")
        info = q.get_job(job_id)
        assert info is not None and info.payload == "x"
        assert [s.queue for s in store.queue_stats()] == ["listed"]
        assert q.stats().pending == 1
        assert [e.payload for e in store.stream("listed").read()] == [1]
        assert [s.name for s in store.schedules()] == ["listed"]
        with pytest.raises(EngineError):
            q.enqueue("refused")  # 42501: not transient, not retried


@pytest.mark.clause("EN-2")
@pytest.mark.parametrize("migrate", [True, False], ids=["migrate", "migrate_false"])
def test_a_dml_only_role_on_an_older_schema_gets_schema_version_error(
    pg_url: str, schema: str, admin: Admin, roles: Callable[[str], str], migrate: bool
) -> None:
    admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    app = roles("dml")
    if migrate:
        admin.execute(
            sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(
                sql.Identifier(schema), sql.Identifier(app)
            )
        )
    with pytest.raises(SchemaVersionError) as info:
        PostgresStore(_as(pg_url, app), schema=schema, migrate=migrate)
    assert info.value.found == 0 and info.value.supported >= 1
    assert "migrat" in str(info.value)


# ---------------------------------------------------------------- EN-3 URLs


def _socket_dir(admin: Admin) -> str:
    row = admin.execute("SHOW unix_socket_directories").fetchone()
    assert row is not None
    return str(row[0]).split(",")[0].strip()


@pytest.mark.clause("EN-3")
def test_unix_socket_urls_work(pg_url: str, schema: str, admin: Admin) -> None:
    directory = _socket_dir(admin)
    user = psycopg.conninfo.conninfo_to_dict(parse_url(pg_url).conninfo).get("user", "postgres")
    encoded = directory.replace("/", "%2F")
    for url in (
        f"postgresql:///postgres?host={directory}&user={user}",
        f"postgresql://{user}@{encoded}/postgres",
        f"postgres://{user}@/postgres?host={encoded}",
    ):
        with alkstore.open(url, schema=schema) as store:
            store.queue("socket").enqueue(url)
    with alkstore.open(pg_url, schema=schema) as store:
        assert store.queue("socket").stats().pending == 3


@pytest.mark.clause("EN-3")
def test_multi_host_urls_fall_through_to_a_live_host(pg_url: str, schema: str) -> None:
    params = psycopg.conninfo.conninfo_to_dict(parse_url(pg_url).conninfo)
    host, port = params.get("host", "127.0.0.1"), params.get("port", "5432")
    user, db = params.get("user", "postgres"), params.get("dbname", "postgres")
    url = f"postgresql://{user}@127.0.0.1:1,{host}:{port}/{db}?connect_timeout=2"
    with alkstore.open(url, schema=schema) as store:
        store.queue("multi").enqueue(1)


@pytest.mark.clause("EN-3")
@pytest.mark.parametrize(
    ("text", "value"), [("true", True), ("TRUE", True), ("1", True), ("false", False), ("0", False)]
)
def test_boolean_engine_options_in_urls(text: str, value: bool) -> None:
    assert parse_url(f"postgresql://h/db?migrate={text}").options == {"migrate": value}


@pytest.mark.clause("EN-3")
@pytest.mark.parametrize("text", ["yes", "no", "on", "2", ""])
def test_other_boolean_spellings_are_refused(text: str) -> None:
    with pytest.raises(InvalidArgument):
        parse_url(f"postgresql://h/db?migrate={text}")


@pytest.mark.clause("EN-3")
@pytest.mark.parametrize(
    "url",
    [
        "postgresql://h/db?schema=a&schema=b",
        "postgresql://h:0/db",
        "postgresql://h:65536/db",
        "postgresql://h:port/db",
        "postgresql://h/db?port=x",
        "postgresql://[::1/db",
        "postgresql://h/db\x00",
        "postgresql://h/db?min_size=" + "9" * 5000,
        "postgresql://h/db?connect_timeout_s=inf",
    ],
)
def test_malformed_urls_are_invalid_arguments(url: str) -> None:
    with pytest.raises(InvalidArgument):
        parse_url(url)


@pytest.mark.clause("EN-3")
def test_engine_options_never_reach_libpq_and_the_password_is_not_shown() -> None:
    parsed = parse_url(
        "postgresql://u:secret@h:5432/db?sslmode=disable&schema=jobs&migrate=0&password=pw2"
    )
    assert parsed.options == {"schema": "jobs", "migrate": False}
    params = psycopg.conninfo.conninfo_to_dict(parsed.conninfo)
    assert "schema" not in params and "migrate" not in params
    assert params["sslmode"] == "disable"
    assert "secret" not in parsed.display and "pw2" not in parsed.display


@pytest.mark.clause("EN-3")
def test_an_option_given_both_in_the_url_and_as_a_keyword_is_refused(pg_url: str) -> None:
    joiner = "&" if "?" in pg_url else "?"
    in_url, as_keyword = f"alkt_url_{uuid.uuid4().hex[:8]}", f"alkt_kw_{uuid.uuid4().hex[:8]}"
    try:
        with pytest.raises(InvalidArgument):
            alkstore.open(f"{pg_url}{joiner}schema={in_url}", schema=as_keyword).close()
    finally:
        drop_schema(pg_url, in_url)
        drop_schema(pg_url, as_keyword)


@pytest.mark.clause("EN-3")
def test_store_dsn_is_the_libpq_dsn_without_engine_options(pg_url: str, schema: str) -> None:
    joiner = "&" if "?" in pg_url else "?"
    with alkstore.open(f"{pg_url}{joiner}schema={schema}&migrate=true") as store:
        dsn = store.dsn  # type: ignore[attr-defined]
    params = psycopg.conninfo.conninfo_to_dict(dsn)
    assert "schema" not in params and "migrate" not in params
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
