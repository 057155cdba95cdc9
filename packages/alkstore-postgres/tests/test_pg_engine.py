"""What is specific to the PostgreSQL engine: schemas, URLs, the listener
connection, native transactions, error translation."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
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
from alkstore_postgres import PostgresStore, PostgresTx, open_store
from alkstore_postgres._errors import translate_errors
from alkstore_postgres._store import parse_url
from alkstore_postgres.testing import HOOKS, drop_schema

Opener = Callable[..., PostgresStore]
Admin = psycopg.Connection[tuple[object, ...]]


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


def test_a_schema_name_that_needs_quoting_works(pg_url: str) -> None:
    name = f'My "Schema" ü {uuid.uuid4().hex[:6]}'
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
        # Both stores listen for wakes of queue "same", each on its own schema.
        assert second_q.claim("w", wait_s=0.05) is None
        assert first_q.claim("w", wait_s=0.05) is None
        seen = second._wakes.generation("same")
        job_id = first_q.enqueue("only in the first")
        assert second_q.claim("w") is None
        assert second_q.get_job(job_id) is None
        assert second_q.stats().pending == 0
        job = first_q.claim("w", wait_s=5)
        assert job is not None and job.id == job_id
        # The first store's wake did arrive (it woke the first store's board)...
        _eventually(lambda: first._wakes.generation("same") > 0)
        time.sleep(0.2)
        # ...and never the second's.
        assert second._wakes.generation("same") == seen
        second.close()


@pytest.mark.parametrize("bad", ["", "pg_mine", "x" * 64, "é" * 32, "new\nline", 5])
def test_bad_schema_names_are_refused(pg_url: str, bad: object) -> None:
    with pytest.raises(InvalidArgument):
        PostgresStore(pg_url, schema=bad)  # type: ignore[arg-type]


def test_a_newer_schema_is_refused_without_writing(pg_url: str, schema: str) -> None:
    with HOOKS.future_schema(pg_url, {"schema": schema}) as snapshot:
        before = snapshot()
        with pytest.raises(SchemaVersionError) as info:
            PostgresStore(pg_url, schema=schema)
        assert (info.value.found, info.value.supported) == (2, 1)
        assert snapshot() == before


def test_concurrent_opens_of_a_fresh_schema_all_succeed(pg_url: str, schema: str) -> None:
    errors: list[BaseException] = []
    go = threading.Event()

    def opener() -> None:
        go.wait()
        try:
            PostgresStore(pg_url, schema=schema).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=opener) for _ in range(6)]
    for t in threads:
        t.start()
    go.set()
    for t in threads:
        t.join(60)
    assert errors == []


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


def test_engine_options_from_the_url_apply(pg_url: str, schema: str) -> None:
    sep = "&" if "?" in pg_url else "?"
    with alkstore.open(f"{pg_url}{sep}schema={schema}&max_size=2") as store:
        assert isinstance(store, PostgresStore)
        assert store.schema == schema
        assert store._pool.max_size == 2


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


def test_listener_reconnects_and_still_wakes_a_blocked_claim(
    open_store: Opener, admin: Admin
) -> None:
    store, producer = open_store(), open_store()
    q = store.queue("wake")
    assert q.claim("w", wait_s=0.05) is None  # starts the listener
    old_pid = store._listener.backend_pid
    assert old_pid is not None
    _terminate(admin, old_pid)
    _eventually(
        lambda: store._listener.connected and store._listener.backend_pid not in (None, old_pid)
    )
    result: list[object] = []
    started = time.monotonic()
    claimer = threading.Thread(target=lambda: result.append(q.claim("w", wait_s=30)))
    claimer.start()
    time.sleep(0.3)
    producer.queue("wake").enqueue("hello")
    claimer.join(30)
    elapsed = time.monotonic() - started
    assert result and result[0] is not None
    # Woken by the NOTIFY, not by the 5 s fallback poll.
    assert elapsed < 4.0


def test_a_listener_lost_mid_wait_makes_sleepers_look_again(
    open_store: Opener, admin: Admin
) -> None:
    store, producer = open_store(), open_store()
    q = store.queue("lost")
    assert q.claim("w", wait_s=0.05) is None
    result: list[object] = []
    started = time.monotonic()
    claimer = threading.Thread(target=lambda: result.append(q.claim("w", wait_s=30)))
    claimer.start()
    time.sleep(0.2)
    pid = store._listener.backend_pid
    assert pid is not None
    _terminate(admin, pid)
    # Likely sent while the listener is away: only the re-check after the
    # reconnect finds it.
    producer.queue("lost").enqueue("while away")
    claimer.join(30)
    assert result and result[0] is not None
    assert time.monotonic() - started < 4.0


def test_user_listeners_survive_a_reconnect(store: PostgresStore, admin: Admin) -> None:
    with store.listen("news") as listener:
        pid = store._listener.backend_pid
        assert pid is not None
        _terminate(admin, pid)
        _eventually(
            lambda: store._listener.connected and store._listener.backend_pid not in (None, pid)
        )
        store.notify("news", {"after": "reconnect"})
        note = listener.get(10)
        assert note is not None and note.payload == {"after": "reconnect"}


def test_close_stops_the_listener_thread(store: PostgresStore) -> None:
    listener = store.listen("c")
    thread = store._listener._thread
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


def test_a_dropped_pooled_connection_is_transient_then_replaced(pg_url: str, schema: str) -> None:
    with HOOKS.transient_failure(pg_url, {"schema": schema}) as call:
        with pytest.raises(TransientError) as info:
            call()
        assert isinstance(info.value.__cause__, psycopg.OperationalError)
        # The pool threw the broken connection away: the next call works.
        call()
