"""What is specific to the PostgreSQL engine: schemas and migrations, URLs
and options, the listener connection, native transactions, lock timeouts,
dead connections, error translation."""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from fix_server import blocked_claim, once_back
from psycopg import sql
from psycopg_pool import PoolTimeout

import alkstore
from alkstore import (
    EngineError,
    InvalidArgument,
    JobState,
    QueueOpts,
    SchemaVersionError,
    StoreClosed,
    TransientError,
)
from alkstore_conformance._base import run_threads
from alkstore_conformance._queue_helpers import Background
from alkstore_postgres import PostgresStore, PostgresTx, open_store
from alkstore_postgres._errors import translate_errors
from alkstore_postgres._executor import PgExecutor
from alkstore_postgres._ops import advisory_key
from alkstore_postgres._sql import SCHEMA_VERSION, Statements
from alkstore_postgres._url import parse_url
from alkstore_postgres.testing import HOOKS, drop_schema

Opener = Callable[..., PostgresStore]
Admin = psycopg.Connection[tuple[Any, ...]]


def _ex(store: PostgresStore) -> PgExecutor:
    ex = store.executor
    assert isinstance(ex, PgExecutor)
    return ex


def _listener_pid(store: PostgresStore) -> int | None:
    listener = _ex(store)._listener
    assert listener is not None
    conn = listener.conn
    return None if conn is None or conn.closed else conn.info.backend_pid


def _listener_up(store: PostgresStore) -> bool:
    listener = _ex(store)._listener
    return listener is not None and listener.core.connected


def _eventually(probe: Callable[[], object], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not probe():
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout_s} s")
        time.sleep(0.01)


def test_store_satisfies_the_store_protocol(store: PostgresStore) -> None:
    typed: alkstore.Store = store
    assert typed.capabilities == alkstore.engine.ALL_CAPABILITIES
    assert isinstance(typed.transaction().__enter__(), PostgresTx)


def test_opening_through_alkstore_open_finds_the_engine(pg_url: str, schema: str) -> None:
    for url in (pg_url, pg_url.replace("postgresql://", "postgres://", 1)):
        with alkstore.open(url, schema=schema) as store:
            assert isinstance(store, PostgresStore)
            assert store.schema == schema


# ------------------------------------------------------------------- schemas


@pytest.mark.clause("EN-2")
@pytest.mark.parametrize("prefix", ['My "Schema" ü', "100% %(x)s %s"])
def test_a_schema_name_that_needs_quoting_works(pg_url: str, prefix: str) -> None:
    name = f"{prefix} {uuid.uuid4().hex[:6]}"
    try:
        with PostgresStore(pg_url, schema=name) as store:
            q = store.queue("q")
            job_id = q.enqueue({"x": 1})
            job = q.claim("w", wait_s=1)
            assert job is not None and job.id == job_id
            assert job.fail("boom")
            info = q.get_job(job_id)
            assert info is not None and info.state is JobState.DEAD
            assert store.stream("s").publish(1) == 1
            assert store.lock("l", 5) is not None
            store.schedule("sch", "@hourly", "q")
            assert [s.name for s in store.schedules()] == ["sch"]
            with store.listen("c") as listener:
                store.notify("c", "hi")
                note = listener.get(5)
            assert note is not None and note.payload == "hi"
        with PostgresStore(pg_url, schema=name) as again:
            assert again.queue("q").stats().dead == 1
    finally:
        drop_schema(pg_url, name)


def test_two_schemas_of_one_database_never_see_each_other(open_store: Opener, pg_url: str) -> None:
    with HOOKS.isolated(pg_url, {}, "other") as (_, other_opts):
        first = open_store()
        second = open_store(schema=other_opts["schema"])
        first_q, second_q = first.queue("same"), second.queue("same")
        # Both stores watch for wakes of queue "same", each on its own schema.
        # A blocked claim also starts the listener, but only once its first
        # attempt finishes within its wait (not a given on a loaded machine).
        assert second_q.claim("w", wait_s=0.05) is None
        assert first_q.claim("w", wait_s=0.05) is None
        first.executor.start_wakes()
        second.executor.start_wakes()
        # A NOTIFY sent before the LISTEN is lost: wait for both listeners.
        _eventually(lambda: _listener_up(first) and _listener_up(second))
        seen = second.executor.wakes.generation(["same"])
        job_id = first_q.enqueue("only in the first")
        assert second_q.claim("w") is None
        assert second_q.get_job(job_id) is None
        assert second_q.stats().pending == 0
        job = first_q.claim("w", wait_s=5)
        assert job is not None and job.id == job_id
        # The first store's wake did arrive (it woke the first store's board)...
        _eventually(lambda: first.executor.wakes.generation(["same"]) > 0)
        time.sleep(0.2)
        # ...and never the second's.
        assert second.executor.wakes.generation(["same"]) == seen
        second.close()


@pytest.mark.clause("EN-2")
@pytest.mark.parametrize("bad", ["", "pg_mine", "x" * 64, "é" * 32, "nul\x00byte", 5])
def test_bad_schema_names_are_refused(pg_url: str, bad: object) -> None:
    with pytest.raises(InvalidArgument):
        PostgresStore(pg_url, schema=bad)


def test_a_newer_schema_is_refused_without_writing(pg_url: str, schema: str) -> None:
    with HOOKS.future_schema(pg_url, {"schema": schema}) as snapshot:
        before = snapshot()
        with pytest.raises(SchemaVersionError) as info:
            PostgresStore(pg_url, schema=schema)
        assert (info.value.found, info.value.supported) == (SCHEMA_VERSION + 1, SCHEMA_VERSION)
        assert snapshot() == before


def test_concurrent_opens_of_a_fresh_schema_all_succeed(pg_url: str, schema: str) -> None:
    def opener() -> None:
        PostgresStore(pg_url, schema=schema).close()

    run_threads([opener] * 6)


# ---------------------------------------------------------------------- URLs


def test_the_url_property_hides_the_password() -> None:
    parsed = parse_url("postgresql://app:s3cret@db.example:5433/app?sslmode=disable&schema=jobs")
    assert parsed.display == "postgresql://app@db.example:5433/app?sslmode=disable&schema=jobs"
    assert "s3cret" in parsed.conninfo
    assert "schema" not in parsed.conninfo
    assert parsed.options == {"schema": "jobs"}
    query_pw = parse_url("postgresql://db/app?password=s3cret&min_size=2")
    assert "s3cret" not in query_pw.display
    assert query_pw.options == {"min_size": 2}
    kv = parse_url("host=db dbname=app password=s3cret")
    assert "s3cret" not in kv.display and "s3cret" in kv.conninfo


@pytest.mark.clause("EN-3")
def test_engine_options_from_the_url_apply(pg_url: str, schema: str) -> None:
    sep = "&" if "?" in pg_url else "?"
    with alkstore.open(f"{pg_url}{sep}schema={schema}&max_size=2") as store:
        assert isinstance(store, PostgresStore)
        assert store.schema == schema
        assert _ex(store)._pool.max_size == 2


@pytest.mark.parametrize(
    ("url", "opts"),
    [
        ("postgresql://localhost/db", {"nope": 1}),
        ("postgresql://localhost/db?min_size=many", {}),
        ("postgresql://localhost/db", {"min_size": 3, "max_size": 2}),
        ("postgresql://localhost/db", {"pool_timeout_s": 0}),
        ("mysql://localhost/db", {}),
        ("postgresql://localhost/db?bogus_param=1", {}),
    ],
)
def test_bad_urls_and_options_are_refused(url: str, opts: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument):
        open_store(url, **opts)


def test_an_unreachable_server_is_transient() -> None:
    with pytest.raises(TransientError):
        PostgresStore("postgresql://postgres@127.0.0.1:1/postgres", connect_timeout_s=2)


def test_a_refused_login_is_not_transient(pg_url: str) -> None:
    parts = parse_url(pg_url)
    missing_db = psycopg.conninfo.make_conninfo(parts.conninfo, dbname="alkstore_no_such_db")
    missing_role = psycopg.conninfo.make_conninfo(parts.conninfo, user="alkstore_no_such_role")
    for conninfo in (missing_db, missing_role):
        with pytest.raises(EngineError) as info:
            PostgresStore(conninfo)
        assert not isinstance(info.value, TransientError)
        assert isinstance(info.value.__cause__, psycopg.OperationalError)


# ------------------------------------------------------------------ listener


def _terminate(admin: Admin, pid: int) -> None:
    admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))


def _listening(open_store: Opener) -> tuple[PostgresStore, PostgresStore]:
    """A store whose listener is connected, and a producer beside it."""
    store, producer = open_store(), open_store()
    store.executor.start_wakes()  # as a blocked claim does
    # It connects in the background: on a loaded machine, after the start.
    _eventually(lambda: _listener_up(store) and _listener_pid(store) is not None)
    return store, producer


def test_listener_reconnects_and_still_wakes_a_blocked_claim(
    open_store: Opener, admin: Admin
) -> None:
    store, producer = _listening(open_store)
    q = store.queue("wake")
    old_pid = _listener_pid(store)
    assert old_pid is not None
    _terminate(admin, old_pid)
    _eventually(lambda: _listener_up(store) and _listener_pid(store) not in (None, old_pid))
    woken = blocked_claim(
        q, lambda: producer.queue("wake").enqueue("hello"), wait_s=30, pause_s=0.3
    )
    assert woken.result is not None
    # Woken by the NOTIFY, not by the 5 s fallback poll.
    assert woken.from_start < 4.0


def test_a_listener_lost_mid_wait_makes_sleepers_look_again(
    open_store: Opener, admin: Admin
) -> None:
    store, producer = _listening(open_store)
    q = store.queue("lost")

    def away() -> None:
        pid = _listener_pid(store)
        assert pid is not None
        _terminate(admin, pid)
        # Likely sent while the listener is away: only the re-check after the
        # reconnect finds it.
        producer.queue("lost").enqueue("while away")

    woken = blocked_claim(q, away, wait_s=30, pause_s=0.2)
    assert woken.result is not None
    assert woken.from_start < 4.0


def test_user_listeners_survive_a_reconnect(store: PostgresStore, admin: Admin) -> None:
    with store.listen("news") as listener:
        pid = _listener_pid(store)
        assert pid is not None
        _terminate(admin, pid)
        _eventually(lambda: _listener_up(store) and _listener_pid(store) not in (None, pid))
        store.notify("news", {"after": "reconnect"})
        note = listener.get(10)
        assert note is not None and note.payload == {"after": "reconnect"}


def test_close_stops_the_listener_thread(store: PostgresStore) -> None:
    listener = store.listen("c")
    runner = _ex(store)._listener
    assert runner is not None
    thread = runner._runner
    assert thread is not None and thread.is_alive()
    store.close()
    assert not thread.is_alive()
    assert listener.get(0.1) is None
    assert list(listener) == []


# ------------------------------------------------------------- transactions


def test_a_native_connection_joins_and_is_never_committed_by_the_engine(
    store: PostgresStore, pg_url: str
) -> None:
    q = store.queue("native")
    with psycopg.connect(pg_url) as conn:  # not autocommit: a transaction begins
        job_id = q.enqueue("rolled back", tx=conn)
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        assert q.get_job(job_id) is None
        conn.rollback()
        assert q.get_job(job_id) is None
        kept = q.enqueue("kept", tx=conn)
        conn.commit()
    assert q.get_job(kept) is not None
    with psycopg.connect(pg_url, autocommit=True) as auto:
        now = q.enqueue("autocommit", tx=auto)
        assert q.get_job(now) is not None


def test_a_finished_or_foreign_tx_is_refused_before_any_statement(store: PostgresStore) -> None:
    q = store.queue("tx")
    with store.transaction() as tx:
        q.enqueue(1, tx=tx)
    with pytest.raises(InvalidArgument):
        q.enqueue(2, tx=tx)
    with pytest.raises(InvalidArgument):
        tx.execute("SELECT 1")
    for bad in (object(), "conn", 1):
        with pytest.raises(InvalidArgument):
            q.enqueue(3, tx=bad)
    assert q.stats().pending == 1


def test_caller_sql_uses_psycopg_placeholders(store: PostgresStore) -> None:
    with store.transaction() as tx:
        assert tx.execute("SELECT %s + %s", (1, 2)).fetchone() == (3,)
        assert tx.execute("SELECT %(a)s::text", {"a": "x"}).fetchone() == ("x",)
        assert tx.execute("SELECT '100%'").fetchone() == ("100%",)


class _Rollback(Exception):
    """Raised in a ``with store.transaction()`` block to roll it back."""


def test_publishers_of_one_stream_take_turns(store: PostgresStore, open_store: Opener) -> None:
    """S-2: a second publisher waits for the first one's transaction, so no
    reader sees offset 2 while 1 is uncommitted; a rollback frees offset 1."""
    other = open_store()
    name = "turns"
    offsets: list[int] = []

    def publish_then_roll_back() -> None:
        with store.transaction() as tx:
            assert store.stream(name).publish("first", tx=tx) == 1
            second.start()
            time.sleep(0.3)
            assert offsets == []  # waiting on the counter row
            assert store.stream(name).read() == []
            raise _Rollback

    second = threading.Thread(target=lambda: offsets.append(other.stream(name).publish("b")))
    with pytest.raises(_Rollback):
        publish_then_roll_back()
    second.join(10)
    assert offsets == [1]
    assert [e.payload for e in store.stream(name).read()] == ["b"]


def test_error_texts_postgres_cannot_store_are_cleaned(store: PostgresStore) -> None:
    q = store.queue("errors", QueueOpts(max_attempts=1))
    job_id = q.enqueue(1)
    job = q.claim("w")
    assert job is not None
    assert job.fail("nul \x00 and lone \ud800 surrogate")
    info = q.get_job(job_id)
    assert info is not None and info.last_error is not None
    assert info.last_error.startswith("nul \ufffd and lone ")


# ------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (psycopg.errors.SerializationFailure("conflict"), TransientError),
        (psycopg.errors.DeadlockDetected("deadlock"), TransientError),
        (psycopg.errors.LockNotAvailable("nowait"), TransientError),
        (psycopg.errors.AdminShutdown("terminating"), TransientError),
        (psycopg.OperationalError("server closed the connection unexpectedly"), TransientError),
        (PoolTimeout("no connection"), TransientError),
        (psycopg.errors.UniqueViolation("duplicate"), EngineError),
        (psycopg.errors.QueryCanceled("statement timeout"), EngineError),
        (psycopg.errors.SyntaxError("nope"), EngineError),
    ],
)
def test_driver_errors_are_translated(exc: Exception, kind: type[EngineError]) -> None:
    with pytest.raises(kind) as info, translate_errors():
        raise exc
    assert type(info.value) is kind
    assert info.value.__cause__ is exc


def test_alkstore_errors_are_not_rewrapped() -> None:
    with pytest.raises(StoreClosed), translate_errors():
        raise StoreClosed("closed")


# ------------------------------------------------------- least privilege (EN-2)


def _as_role(url: str, role: str) -> str:
    return psycopg.conninfo.make_conninfo(parse_url(url).conninfo, user=role)


@pytest.fixture
def role(admin: Admin) -> Iterator[str]:
    """A fresh login role with no privilege of its own, dropped afterwards."""
    name = f"alk_role_{uuid.uuid4().hex[:10]}"
    admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
    try:
        yield name
    finally:
        admin.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(sql.Identifier(name)))
        admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


def _grant_dml(admin: Admin, schema: str, role: str) -> None:
    ident, who = sql.Identifier(schema), sql.Identifier(role)
    admin.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(ident, who))
    admin.execute(
        sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {} TO {}").format(
            ident, who
        )
    )


def _v1_schema(admin: Admin, schema: str) -> None:
    """The schema as the previous release left it (version 1)."""
    st = Statements(schema)
    admin.execute(st.create_schema, {})
    for statement in st.migrations[1]:
        admin.execute(statement, {})
    admin.execute(st.set_version, {"version": "1"})


@pytest.mark.clause("EN-2")
def test_a_role_owning_only_the_schema_migrates_and_runs(
    pg_url: str, admin: Admin, role: str, schema: str
) -> None:
    admin.execute(
        sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(
            sql.Identifier(schema), sql.Identifier(role)
        )
    )
    row = admin.execute(
        "SELECT has_database_privilege(%s, current_database(), 'CREATE')", (role,)
    ).fetchone()
    assert row == (False,)
    with PostgresStore(_as_role(pg_url, role), schema=schema) as store:
        q = store.queue("q")
        job_id = q.enqueue(1)
        job = q.claim("w")
        assert job is not None and job.id == job_id and job.ack()
        assert store.stream("s").publish(1) == 1
        assert store.lock("l", 5) is not None
        store.schedule("sch", "@hourly", "q")
        with store.listen("c") as listener:
            store.notify("c", "hi")
            note = listener.get(5)
        assert note is not None and note.payload == "hi"


@pytest.mark.clause("EN-2")
def test_a_dml_only_role_runs_on_a_current_schema_without_ddl(
    pg_url: str, admin: Admin, role: str, store: PostgresStore
) -> None:
    _grant_dml(admin, store.schema, role)
    # Any DDL would fail for this role: opening issues none.
    with PostgresStore(_as_role(pg_url, role), schema=store.schema) as limited:
        q = limited.queue("q")
        q.enqueue(1)
        job = q.claim("w")
        assert job is not None and job.ack()
        assert limited.executor.store_id == store.executor.store_id


@pytest.mark.clause("EN-2")
def test_a_dml_only_role_on_an_older_schema_is_told_the_migration(
    pg_url: str, admin: Admin, role: str, schema: str
) -> None:
    _v1_schema(admin, schema)
    _grant_dml(admin, schema, role)
    with pytest.raises(SchemaVersionError) as info:
        PostgresStore(_as_role(pg_url, role), schema=schema)
    assert (info.value.found, info.value.supported) == (1, SCHEMA_VERSION)
    with pytest.raises(SchemaVersionError) as info:
        PostgresStore(pg_url, schema=schema, migrate=False)
    assert (info.value.found, info.value.supported) == (1, SCHEMA_VERSION)


def test_version_1_is_upgraded_keeping_its_jobs(pg_url: str, admin: Admin, schema: str) -> None:
    _v1_schema(admin, schema)
    jobs = sql.Identifier(schema, "jobs")
    admin.execute(
        sql.SQL(
            "INSERT INTO {} (queue, state, payload, priority, run_at, ready_at, created_at, "
            "attempts, max_attempts, visibility_timeout_s, backoff_base_s) VALUES "
            "('q', 'pending', '\"old\"', 0, now(), now(), now(), 2, 5, 30, 1)"
        ).format(jobs)
    )
    with PostgresStore(pg_url, schema=schema) as store:
        q = store.queue("q")
        job = q.claim("w")
        assert job is not None and job.payload == "old" and job.attempts == 3
        assert job._fence.claim == 3  # type: ignore[attr-defined]  # claims carried over
        assert store.executor.store_id


def test_stores_on_one_schema_share_an_id_and_others_differ(
    open_store: Opener, pg_url: str
) -> None:
    first, second = open_store(), open_store()
    assert first.executor.store_id == second.executor.store_id
    with HOOKS.isolated(pg_url, {}, "other") as (_, opts):
        other = open_store(schema=opts["schema"])
        assert other.executor.store_id != first.executor.store_id
        job_id = first.queue("q").enqueue(1)
        job = first.queue("q").claim("w")
        assert job is not None and job.id == job_id
        assert other.queue("q").ack_batch([job]) == 0  # C-7
        other.close()


# ------------------------------------------------------------- options (EN-3)


@pytest.mark.clause("EN-3")
def test_dsn_keeps_the_password_and_drops_engine_options() -> None:
    from alkstore_postgres._options import parse_options

    cfg = parse_options("postgresql://app:s3cret@db:5433/app?schema=jobs&lock_timeout_s=5", {})
    assert "s3cret" in cfg.conninfo and "schema" not in cfg.conninfo
    assert "lock_timeout" not in cfg.conninfo
    assert "s3cret" not in cfg.display
    assert (cfg.schema, cfg.lock_timeout_s) == ("jobs", 5.0)


@pytest.mark.clause("EN-3")
def test_store_dsn_opens_the_callers_own_connection(store: PostgresStore) -> None:
    with psycopg.connect(store.dsn) as conn:
        job_id = store.queue("q").enqueue("mine", tx=conn)
    assert store.queue("q").get_job(job_id) is not None


@pytest.mark.clause("EN-3")
@pytest.mark.parametrize(
    ("query", "keywords"),
    [
        ("?schema=a", {"schema": "a"}),
        ("?pooler=true", {"pooler": True}),
        ("?lock_timeout_s=1", {"lock_timeout_s": 2}),
    ],
)
def test_an_option_given_twice_is_refused(query: str, keywords: dict[str, Any]) -> None:
    from alkstore_postgres._options import parse_options

    with pytest.raises(InvalidArgument):
        parse_options("postgresql://localhost/db" + query, keywords)


@pytest.mark.clause("EN-3")
@pytest.mark.parametrize(
    ("text", "value"), [("true", True), ("1", True), ("0", False), ("false", False)]
)
def test_boolean_options_in_a_url(text: str, value: bool) -> None:
    from alkstore_postgres._options import parse_options

    cfg = parse_options(f"postgresql://localhost/db?pooler={text}&migrate={text}", {})
    assert (cfg.pooler, cfg.migrate) == (value, value)


@pytest.mark.parametrize(
    ("url", "keywords"),
    [
        ("postgresql://localhost/db?pooler=yes", {}),
        ("postgresql://localhost/db", {"pooler": "true"}),
        ("postgresql://localhost/db", {"migrate": 1}),
        ("postgresql://localhost/db", {"lock_timeout_s": 0}),
        ("postgresql://localhost/db", {"poll_s": -1}),
        ("postgresql://localhost/db?listen_url=postgresql://x/y%3Fschema%3Dz", {}),
    ],
)
def test_bad_option_values_are_refused(url: str, keywords: dict[str, Any]) -> None:
    from alkstore_postgres._options import parse_options

    with pytest.raises(InvalidArgument):
        parse_options(url, keywords)


@pytest.mark.clause("EN-3")
@pytest.mark.skipif(
    not os.path.exists("/var/run/postgresql/.s.PGSQL.5432"), reason="no local Unix socket"
)
def test_a_unix_socket_url_works(schema: str) -> None:
    url = "postgresql:///postgres?host=/var/run/postgresql&user=postgres"
    with alkstore.open(url, schema=schema) as store:
        q = store.queue("q")
        q.enqueue(1)
        assert q.claim("w") is not None


# ------------------------------------------------------------ lock timeout (E-2)


def _lock_waiters(admin: Admin, app: str, event: str | None = None) -> list[int]:
    """The backends of *app* waiting for a lock (of the *event* kind, when given)."""
    rows = admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE application_name = %s "
        "AND wait_event_type = 'Lock' AND (%s::text IS NULL OR wait_event = %s)",
        (app, event, event),
    ).fetchall()
    return [int(pid) for (pid,) in rows]


def _lock_row(conn: psycopg.Connection[Any], store: PostgresStore, job_id: int) -> None:
    """Hold the row lock of *job_id* in *conn*'s open transaction."""
    table = sql.Identifier(store.schema, "jobs")
    conn.execute(sql.SQL("SELECT id FROM {} WHERE id = %s FOR UPDATE").format(table), (job_id,))


def test_pooled_connections_carry_the_lock_timeout(open_store: Opener) -> None:
    store = open_store(lock_timeout_s=12.5)
    with _ex(store)._pool.connection() as conn:
        assert conn.execute("SHOW lock_timeout").fetchone() == ("12500ms",)


def test_a_write_waits_at_most_lock_timeout_s(open_store: Opener, pg_url: str) -> None:
    store = open_store(lock_timeout_s=0.3)
    q = store.queue("q")
    job_id = q.enqueue(1)
    with psycopg.connect(pg_url) as holder:
        _lock_row(holder, store, job_id)
        started = time.monotonic()
        with pytest.raises(TransientError) as info:
            q.cancel(job_id)
        assert time.monotonic() - started < 5
        assert isinstance(info.value.__cause__, psycopg.errors.LockNotAvailable)
        holder.rollback()
    assert q.cancel(job_id)


@pytest.mark.parametrize("autocommit", [True, False])
def test_a_tx_write_waits_at_most_lock_timeout_s_and_leaves_the_setting(
    open_store: Opener, pg_url: str, autocommit: bool
) -> None:
    store = open_store(lock_timeout_s=0.3)
    q = store.queue("q")
    job_id = q.enqueue(1)
    with (
        psycopg.connect(pg_url) as holder,
        psycopg.connect(pg_url, autocommit=autocommit) as conn,
    ):
        conn.execute("SET lock_timeout = '7s'")
        if not autocommit:
            conn.commit()
        _lock_row(holder, store, job_id)
        with pytest.raises(TransientError):
            q.cancel(job_id, tx=conn)
        if not autocommit:
            conn.rollback()
        assert conn.execute("SHOW lock_timeout").fetchone() == ("7s",)
        holder.rollback()
        # A write that went through: the caller's own value is back, in and
        # after the transaction.
        other = q.enqueue(2, tx=conn)
        assert conn.execute("SHOW lock_timeout").fetchone() == ("7s",)
        if not autocommit:
            conn.commit()
        assert conn.execute("SHOW lock_timeout").fetchone() == ("7s",)
    assert q.get_job(other) is not None


# --------------------------------------------------------- dead connections (E-2)


def _backends(admin: Admin, app: str) -> list[int]:
    rows = admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE application_name = %s AND pid <> pg_backend_pid()",
        (app,),
    ).fetchall()
    return [int(pid) for (pid,) in rows]


def test_a_pooled_connection_the_server_dropped_is_replaced_unnoticed(
    open_store: Opener, admin: Admin
) -> None:
    app = f"alk-e2-{uuid.uuid4().hex[:8]}"
    store = open_store(application_name=app, min_size=1, max_size=1)
    q = store.queue("q")
    q.stats()
    pids = _backends(admin, app)
    assert pids
    for pid in pids:
        _terminate(admin, pid)
    time.sleep(0.1)
    job_id = q.enqueue(1)  # no error: the dead connection was replaced
    assert q.get_job(job_id) is not None
    assert not set(_backends(admin, app)) & set(pids)


def test_a_write_whose_connection_dies_before_commit_is_retried_once(
    open_store: Opener, admin: Admin, pg_url: str
) -> None:
    """A bounded enqueue runs in a transaction of its own: while it waits for
    the queue's depth lock its connection is killed; nothing was committed,
    so it runs again on a fresh connection and lands once."""
    app = f"alk-retry-{uuid.uuid4().hex[:8]}"
    store = open_store(application_name=app)
    q = store.queue("bounded", QueueOpts(max_depth=5))
    key = advisory_key("depth", store.schema, "bounded")
    result: list[object] = []
    with psycopg.connect(pg_url) as holder:
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (key,))
        worker = threading.Thread(target=lambda: result.append(q.enqueue("once")))
        worker.start()

        def waiting() -> list[int]:
            return _lock_waiters(admin, app, "advisory")

        _eventually(waiting)
        first = waiting()
        for pid in first:
            _terminate(admin, pid)
        _eventually(lambda: waiting() and not set(waiting()) & set(first))
        holder.rollback()
        worker.join(10)
    assert len(result) == 1 and isinstance(result[0], int)
    assert q.stats().pending == 1


def test_a_write_whose_connection_dies_after_sending_is_not_retried(
    open_store: Opener, admin: Admin, pg_url: str
) -> None:
    app = f"alk-noretry-{uuid.uuid4().hex[:8]}"
    store = open_store(application_name=app)
    q = store.queue("q")
    job_id = q.enqueue(1)
    with psycopg.connect(pg_url) as holder:
        _lock_row(holder, store, job_id)
        cancelling = Background(lambda: q.cancel(job_id))

        def waiting() -> list[int]:
            return _lock_waiters(admin, app)

        _eventually(waiting)
        for pid in waiting():
            _terminate(admin, pid)
        with pytest.raises(TransientError):
            cancelling.result(10)
        holder.rollback()
    assert q.get_job(job_id) is not None


def test_an_outage_bounds_blocked_claims_and_the_store_recovers() -> None:
    from alkstore_postgres.testing import throwaway_cluster

    try:
        cm = throwaway_cluster()
        cluster = cm.__enter__()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    try:
        store = PostgresStore(cluster.url, connect_timeout_s=2)
        q = store.queue("q")
        assert q.claim("w", wait_s=0.1) is None  # the listener is up
        blocked: list[float] = []

        def claim_through() -> None:
            started = time.monotonic()
            with contextlib.suppress(TransientError):
                q.claim("w", wait_s=3)
            blocked.append(time.monotonic() - started)

        waiter = threading.Thread(target=claim_through)
        waiter.start()
        time.sleep(0.3)
        cluster.stop()
        waiter.join(15)
        assert blocked and blocked[0] < 3 + 2.5, blocked
        started = time.monotonic()
        with contextlib.suppress(TransientError):
            q.claim("w", wait_s=2)
        assert time.monotonic() - started < 2 + 2.5
        cluster.start()
        job_id = once_back(lambda: q.enqueue("after"), 30)
        job = q.claim("w", wait_s=5)
        assert job is not None and job.id == job_id
        store.close()
    finally:
        cm.__exit__(None, None, None)


# ------------------------------------------------------- framework objects (T-2)


def test_sqlalchemy_connections_and_sessions_join_as_tx(store: PostgresStore, pg_url: str) -> None:
    sqlalchemy = pytest.importorskip("sqlalchemy")
    orm = pytest.importorskip("sqlalchemy.orm")
    engine = sqlalchemy.create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://", 1))
    q = store.queue("sa")
    try:
        with engine.connect() as conn, conn.begin() as outer:
            rolled = q.enqueue("rolled back", tx=conn)
            outer.rollback()
        with engine.begin() as conn:
            kept = q.enqueue("kept", tx=conn)
        with orm.Session(engine) as session:
            in_session = q.enqueue("session", tx=session)
            session.commit()
    finally:
        engine.dispose()
    assert q.get_job(rolled) is None
    assert q.get_job(kept) is not None and q.get_job(in_session) is not None


def test_a_psycopg2_connection_is_refused_with_a_reason(store: PostgresStore) -> None:
    fake = type("connection", (), {"__module__": "psycopg2.extensions"})()
    with pytest.raises(InvalidArgument):
        store.queue("q").enqueue(1, tx=fake)
