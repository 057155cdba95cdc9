"""``tx=`` with the objects real frameworks hand out, on both engines (T-1,
T-2, T-4, A-3; docs/adr/0015).

SQLAlchemy 2.x (``Connection``, ``Session``, the ORM; the sqlite3 driver and
``postgresql+psycopg``), Django (the connection wrapper inside
``transaction.atomic()``; the SQLite and psycopg 3 backends) and, on the
async face, the driver connection of a SQLAlchemy ``AsyncSession``
(``sqlite+aiosqlite``, ``postgresql+psycopg``) and a bare ``aiosqlite`` or
``psycopg.AsyncConnection``. Each write must land with the framework's
commit, vanish with its rollback, and be invisible before the commit; any
other object is refused with ``InvalidArgument`` before anything is written,
and the refusal names what to pass instead.

Each test gets an empty database of its own: a new file on SQLite, an
emptied scratch database on PostgreSQL (``pg_database``,
contract_tests/pg_server.py).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import aiosqlite
import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

import alkstore
from alkstore import InvalidArgument, Store

ENGINES = ["sqlite", "postgres"]


# ------------------------------------------------------------------ databases


@dataclass(frozen=True)
class Database:
    """One fresh database and how each framework reaches it."""

    engine: str
    url: str  # the store's URL
    sa_url: str  # SQLAlchemy, sync driver
    sa_async_url: str  # SQLAlchemy, async driver
    django: dict[str, Any]  # a Django DATABASES entry

    @asynccontextmanager
    async def raw_async(self) -> AsyncIterator[Any]:
        """A bare async driver connection: aiosqlite or psycopg."""
        if self.engine == "sqlite":
            async with aiosqlite.connect(urlsplit(self.sa_url).path[1:]) as conn:
                yield conn
        else:
            async with await psycopg.AsyncConnection.connect(self.url) as conn:
                yield conn


@pytest.fixture(params=ENGINES)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Database:
    if request.param == "sqlite":
        path = tmp_path / "app.db"
        return Database(
            "sqlite",
            f"sqlite:///{path}",
            f"sqlite:///{path}",
            f"sqlite+aiosqlite:///{path}",
            {"ENGINE": "django.db.backends.sqlite3", "NAME": str(path)},
        )
    url = request.getfixturevalue("pg_database")
    parts = urlsplit(url)
    return Database(
        "postgres",
        url,
        urlunsplit(parts._replace(scheme="postgresql+psycopg")),
        urlunsplit(parts._replace(scheme="postgresql+psycopg")),
        {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": parts.path.lstrip("/"),
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "",
            "PORT": str(parts.port or ""),
        },
    )


@pytest.fixture
def store(db: Database) -> Iterator[Store]:
    opened = alkstore.open(db.url)
    try:
        yield opened
    finally:
        opened.close()


def waiting(store: Store, queue: str = "q") -> int:
    """Jobs of *queue* that a committed transaction left: what others see."""
    stats = store.queue(queue).stats()
    return stats.pending + stats.scheduled + stats.processing


def refused_naming(exc: pytest.ExceptionInfo[InvalidArgument], *hints: str) -> None:
    """The refusal is an InvalidArgument whose message says what to pass: the
    point of these errors is that hint, so the test looks for it."""
    assert type(exc.value) is InvalidArgument
    message = str(exc.value)
    assert any(hint in message for hint in hints), message


# ----------------------------------------------------------------- SQLAlchemy


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "orders"
    id: Mapped[int] = mapped_column(primary_key=True)
    item: Mapped[str]


@pytest.fixture
def sa_engine(db: Database, store: Store) -> Iterator[sa.Engine]:
    engine = sa.create_engine(db.sa_url)
    Base.metadata.create_all(engine)
    try:
        yield engine
    finally:
        engine.dispose()


def orders(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT COUNT(*) FROM orders")).scalar_one())


@pytest.mark.clause("T-1", "T-2")
def test_enqueue_with_sqlalchemy_connection_before_any_statement_follows_its_commit(
    store: Store, sa_engine: sa.Engine
) -> None:
    q = store.queue("q")
    with sa_engine.connect() as conn:
        assert not conn.in_transaction()
        q.enqueue("rolled back", tx=conn)  # the first thing this connection does
        assert conn.in_transaction()  # it began the Connection's transaction ...
        conn.rollback()  # ... so the Connection's rollback erases the job
        assert waiting(store) == 0
        q.enqueue("committed", tx=conn)
        conn.execute(sa.insert(Order).values(item="book"))
        assert waiting(store) == 0  # not visible before the commit
        conn.commit()
    assert waiting(store) == 1
    assert orders(sa_engine) == 1


@pytest.mark.clause("T-1", "T-2")
def test_enqueue_inside_sqlalchemy_engine_begin_commits_and_rolls_back_with_it(
    store: Store, sa_engine: sa.Engine
) -> None:
    q = store.queue("q")

    def fails() -> None:
        with sa_engine.begin() as conn:
            conn.execute(sa.insert(Order).values(item="lost"))
            q.enqueue_many(["lost", "lost too"], tx=conn)
            raise RuntimeError("the block fails")

    with pytest.raises(RuntimeError):
        fails()
    assert (waiting(store), orders(sa_engine)) == (0, 0)
    with sa_engine.begin() as conn:
        conn.execute(sa.insert(Order).values(item="book"))
        q.enqueue("kept", tx=conn)
    assert (waiting(store), orders(sa_engine)) == (1, 1)


@pytest.mark.clause("T-1", "T-2")
def test_enqueue_with_sqlalchemy_session_before_its_first_statement_follows_its_commit(
    store: Store, sa_engine: sa.Engine
) -> None:
    q = store.queue("q")
    with Session(sa_engine) as session:
        q.enqueue("rolled back", tx=session)  # no connection checked out yet
        session.rollback()
    assert waiting(store) == 0
    with Session(sa_engine) as session:
        q.enqueue("committed", tx=session)
        session.add(Order(item="book"))
        session.flush()
        assert waiting(store) == 0
        session.commit()
    assert (waiting(store), orders(sa_engine)) == (1, 1)


@pytest.mark.clause("T-1", "T-2")
def test_enqueue_after_orm_writes_in_a_session_lands_or_vanishes_with_them(
    store: Store, sa_engine: sa.Engine
) -> None:
    q = store.queue("q")

    def fails() -> None:
        with Session(sa_engine) as session, session.begin():
            session.add(Order(item="lost"))
            session.flush()
            q.enqueue({"order": "lost"}, tx=session)
            raise RuntimeError("the request fails")

    with pytest.raises(RuntimeError):
        fails()
    assert (waiting(store), orders(sa_engine)) == (0, 0)
    with Session(sa_engine) as session, session.begin():
        order = Order(item="book")
        session.add(order)
        session.flush()  # the order's id, for the job
        order_id = order.id
        q.enqueue({"order": order_id}, tx=session)
    assert (waiting(store), orders(sa_engine)) == (1, 1)
    job = q.claim("w")
    assert job is not None and job.payload == {"order": order_id}
    assert job.ack()


@pytest.mark.clause("T-4")
def test_ack_in_a_sqlalchemy_session_lands_with_the_result_row(
    store: Store, sa_engine: sa.Engine
) -> None:
    q = store.queue("q")
    q.enqueue("work")
    job = q.claim("w")
    assert job is not None
    with Session(sa_engine) as session:
        session.add(Order(item="result"))
        assert job.ack(tx=session)
        session.rollback()  # neither the result nor the ack
    assert (waiting(store), orders(sa_engine)) == (1, 0)
    with Session(sa_engine) as session:
        session.add(Order(item="result"))
        assert job.ack(tx=session)
        session.commit()  # both
    assert (waiting(store), orders(sa_engine)) == (0, 1)


@pytest.mark.clause("T-2")
def test_sqlalchemy_objects_without_a_connection_are_refused_naming_what_to_pass(
    store: Store, sa_engine: sa.Engine
) -> None:
    q = store.queue("q")
    with pytest.raises(InvalidArgument) as engine_refused:
        q.enqueue("x", tx=sa_engine)
    refused_naming(engine_refused, "Session or a Connection")
    conn = sa_engine.connect()
    conn.close()
    with pytest.raises(InvalidArgument) as closed_refused:
        q.enqueue("x", tx=conn)
    refused_naming(closed_refused, "SQLAlchemy Connection")
    assert waiting(store) == 0


# --------------------------------------------------------------------- Django


def _django() -> Any:
    """Django, set up once per process with no database of its own; each test
    adds its database under a fresh alias."""
    import django
    from django.conf import settings

    if not settings.configured:
        settings.configure(DATABASES={}, INSTALLED_APPS=[], USE_TZ=True)
        django.setup()
    return django


@pytest.fixture
def django_alias(db: Database, store: Store) -> Iterator[str]:
    _django()
    from django.db import connections

    alias = f"fw_{uuid.uuid4().hex[:8]}"
    connections.settings[alias] = connections.configure_settings({"default": dict(db.django)})[
        "default"
    ]
    try:
        with connections[alias].cursor() as cur:
            cur.execute("CREATE TABLE shop_order (id INTEGER PRIMARY KEY, item TEXT NOT NULL)")
        yield alias
    finally:
        connections[alias].close()
        del connections[alias]
        del connections.settings[alias]


def django_orders(alias: str) -> int:
    from django.db import connections

    with connections[alias].cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM shop_order")
        row = cur.fetchone()
    return int(row[0])


def _insert_order(alias: str, item: str) -> None:
    from django.db import connections

    with connections[alias].cursor() as cur:  # Django's placeholder on every backend
        cur.execute(
            "INSERT INTO shop_order (id, item) VALUES (%s, %s)", [uuid.uuid4().int % 2**31, item]
        )


@pytest.mark.clause("T-1", "T-2")
def test_enqueue_with_django_connection_in_atomic_commits_and_rolls_back_with_it(
    store: Store, db: Database, django_alias: str
) -> None:
    from django.db import connections, transaction

    conn = connections[django_alias]
    q = store.queue("q")

    def fails() -> None:
        with transaction.atomic(using=django_alias):
            _insert_order(django_alias, "lost")
            q.enqueue("lost", tx=conn)
            raise RuntimeError("the view fails")

    with pytest.raises(RuntimeError):
        fails()
    assert (waiting(store), django_orders(django_alias)) == (0, 0)
    with transaction.atomic(using=django_alias):
        _insert_order(django_alias, "book")
        q.enqueue("kept", tx=conn)
        with transaction.atomic(using=django_alias):  # a savepoint inside
            q.enqueue("kept too", tx=conn)
        assert waiting(store) == 0
    assert (waiting(store), django_orders(django_alias)) == (2, 1)


@pytest.mark.clause("T-2")
def test_django_connection_before_its_first_query_is_connected_for_the_write(
    store: Store, django_alias: str
) -> None:
    from django.db import connections, transaction

    conn = connections[django_alias]
    conn.close()
    assert conn.connection is None
    with transaction.atomic(using=django_alias):
        store.queue("q").enqueue("first", tx=conn)  # the first use of the connection
    assert waiting(store) == 1


@pytest.mark.clause("T-4")
def test_ack_with_django_connection_lands_with_the_result_row(
    store: Store, db: Database, django_alias: str
) -> None:
    from django.db import connections, transaction

    q = store.queue("q")
    q.enqueue("work")
    job = q.claim("w")
    assert job is not None
    conn = connections[django_alias]

    def fails() -> None:
        with transaction.atomic(using=django_alias):
            _insert_order(django_alias, "result")
            assert job.ack(tx=conn)
            raise RuntimeError("the handler fails after its ack")

    with pytest.raises(RuntimeError):
        fails()
    assert (waiting(store), django_orders(django_alias)) == (1, 0)
    with transaction.atomic(using=django_alias):
        _insert_order(django_alias, "result")
        assert job.ack(tx=conn)
    assert (waiting(store), django_orders(django_alias)) == (0, 1)


@pytest.mark.clause("T-2")
def test_other_django_objects_are_refused_naming_the_connection(
    store: Store, django_alias: str
) -> None:
    from django.db import connections, transaction

    q = store.queue("q")
    with connections[django_alias].cursor() as cur, pytest.raises(InvalidArgument) as refused:
        q.enqueue("x", tx=cur)
    refused_naming(refused, "django.db.connection")
    with pytest.raises(InvalidArgument) as refused:
        q.enqueue("x", tx=transaction.atomic(using=django_alias))
    refused_naming(refused, "django.db.connection")
    assert waiting(store) == 0


@pytest.mark.clause("T-2", "A-3")
def test_django_connection_from_async_code_is_refused_naming_sync_to_async(
    db: Database, store: Store, django_alias: str
) -> None:
    from django.db import connections

    conn = connections[django_alias]
    conn.close()

    async def attempt() -> None:
        astore = await alkstore.open_async(db.url)
        try:
            with pytest.raises(InvalidArgument) as refused:
                await astore.queue("q").enqueue("x", tx=conn)
            refused_naming(refused, "sync_to_async")
        finally:
            await astore.close()

    asyncio.run(attempt())
    assert waiting(store) == 0


# ------------------------------------------------------------------- psycopg2


@pytest.mark.clause("T-2")
def test_psycopg2_connection_is_refused_naming_psycopg_3(db: Database, store: Store) -> None:
    if db.engine != "postgres":
        pytest.skip("a psycopg2 connection needs a PostgreSQL server")
    psycopg2 = pytest.importorskip("psycopg2")
    conn = psycopg2.connect(db.url)
    try:
        with pytest.raises(InvalidArgument) as refused:
            store.queue("q").enqueue("x", tx=conn)
        refused_naming(refused, "psycopg 3")
    finally:
        conn.close()
    assert waiting(store) == 0


@pytest.mark.clause("T-2")
def test_sqlalchemy_session_on_psycopg2_is_refused_naming_psycopg_3(
    db: Database, store: Store
) -> None:
    if db.engine != "postgres":
        pytest.skip("a psycopg2 connection needs a PostgreSQL server")
    pytest.importorskip("psycopg2")
    engine = sa.create_engine(db.url.replace("postgresql://", "postgresql+psycopg2://", 1))
    try:
        with Session(engine) as session, pytest.raises(InvalidArgument) as refused:
            store.queue("q").enqueue("x", tx=session)
        refused_naming(refused, "psycopg 3")
    finally:
        engine.dispose()
    assert waiting(store) == 0


# ----------------------------------------------------------------- async face


def run_async(db: Database, body: Callable[[alkstore.AsyncStore], Any]) -> None:
    async def main() -> None:
        astore = await alkstore.open_async(db.url)
        try:
            await body(astore)
        finally:
            await astore.close()

    asyncio.run(main())


async def async_waiting(astore: alkstore.AsyncStore) -> int:
    stats = await astore.queue("q").stats()
    return stats.pending + stats.scheduled + stats.processing


@pytest.mark.clause("A-3", "T-1")
def test_async_enqueue_with_the_driver_connection_of_an_async_session_follows_it(
    db: Database,
) -> None:
    async def body(astore: alkstore.AsyncStore) -> None:
        q = astore.queue("q")
        engine = create_async_engine(db.sa_async_url)
        try:
            async with engine.begin() as conn:
                await conn.run_sync(Base.metadata.create_all)
            for commit in (False, True):
                async with AsyncSession(engine) as session:
                    session.add(Order(item="book"))
                    await session.flush()
                    raw = await (await session.connection()).get_raw_connection()
                    await q.enqueue({"commit": commit}, tx=raw.driver_connection)
                    assert await async_waiting(astore) == 0
                    if commit:
                        await session.commit()
                    else:
                        await session.rollback()
                assert await async_waiting(astore) == int(commit)
            async with AsyncSession(engine) as session:
                count = (await session.execute(sa.text("SELECT COUNT(*) FROM orders"))).scalar()
            assert count == 1
            job = await q.claim("w")
            assert job is not None and job.payload == {"commit": True}
            async with AsyncSession(engine) as session:  # T-4 through the async face
                session.add(Order(item="result"))
                raw = await (await session.connection()).get_raw_connection()
                assert await job.ack(tx=raw)  # the pool's proxy works as well
                await session.commit()
            assert await async_waiting(astore) == 0
        finally:
            await engine.dispose()

    run_async(db, body)


@pytest.mark.clause("A-3", "T-1")
def test_async_enqueue_with_a_bare_async_driver_connection_follows_its_commit(
    db: Database,
) -> None:
    async def body(astore: alkstore.AsyncStore) -> None:
        q = astore.queue("q")
        async with db.raw_async() as conn:
            await conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT)")
            await conn.commit()
            await conn.execute("INSERT INTO orders (id, item) VALUES (1, 'lost')")
            await q.enqueue("lost", tx=conn)
            await conn.rollback()
            assert await async_waiting(astore) == 0
            await conn.execute("INSERT INTO orders (id, item) VALUES (2, 'book')")
            await q.enqueue("kept", tx=conn)
            assert await async_waiting(astore) == 0
            await conn.commit()
            assert await async_waiting(astore) == 1
        async with db.raw_async() as conn:
            cur = await conn.execute("SELECT item FROM orders")
            assert [tuple(r) for r in await cur.fetchall()] == [("book",)]
        with pytest.raises(InvalidArgument):  # closed now
            await q.enqueue("x", tx=conn)
        assert await async_waiting(astore) == 1

    run_async(db, body)


@pytest.mark.clause("A-7", "A-3", "T-1")
def test_async_session_and_async_connection_are_taken_as_tx_and_follow_their_commit(
    db: Database,
) -> None:
    async def body(astore: alkstore.AsyncStore) -> None:
        q = astore.queue("q")
        engine = create_async_engine(db.sa_async_url)
        try:
            async with engine.begin() as conn:
                await conn.run_sync(Base.metadata.create_all)
            for commit in (False, True):
                # An AsyncSession before its first statement: the enqueue
                # begins its transaction, so its commit or rollback decides.
                async with AsyncSession(engine) as session:
                    await q.enqueue({"session": commit}, tx=session)
                    session.add(Order(item=f"session {commit}"))
                    assert await async_waiting(astore) == 0
                    await (session.commit() if commit else session.rollback())
                # An AsyncConnection without a begun transaction, likewise.
                async with engine.connect() as conn:
                    await q.enqueue({"connection": commit}, tx=conn)
                    assert await async_waiting(astore) == int(commit)
                    await (conn.commit() if commit else conn.rollback())
            assert await async_waiting(astore) == 2
            async with AsyncSession(engine) as session:
                items = (await session.execute(sa.text("SELECT item FROM orders"))).scalars()
                assert list(items) == ["session True"]
            jobs = await q.claim_batch("w", 2)
            assert sorted(str(j.payload) for j in jobs) == [
                "{'connection': True}",
                "{'session': True}",
            ]
            async with AsyncSession(engine) as session:  # T-4 with the session itself
                session.add(Order(item="result"))
                assert await astore.ack_each(jobs, tx=session) == [True, True]
                await session.commit()
            assert await async_waiting(astore) == 0
            with pytest.raises(InvalidArgument) as refused:  # it holds no transaction
                await q.enqueue("x", tx=engine)
            refused_naming(refused, "AsyncSession")
        finally:
            await engine.dispose()
        assert await async_waiting(astore) == 0

    run_async(db, body)


@pytest.mark.clause("A-7")
def test_sqlalchemy_objects_of_the_other_face_are_refused_naming_the_store_to_use(
    db: Database, store: Store
) -> None:
    sync_engine = sa.create_engine(db.sa_url)
    try:
        with Session(sync_engine) as session:

            async def body(astore: alkstore.AsyncStore) -> None:
                with pytest.raises(InvalidArgument) as refused:
                    await astore.queue("q").enqueue("x", tx=session)
                refused_naming(refused, "sync store (alkstore.open)")

            run_async(db, body)
    finally:
        sync_engine.dispose()

    async def async_side() -> None:
        engine = create_async_engine(db.sa_async_url)
        try:
            async with AsyncSession(engine) as session:
                with pytest.raises(InvalidArgument) as refused:
                    store.queue("q").enqueue("x", tx=session)
                refused_naming(refused, "async store (alkstore.open_async)")
        finally:
            await engine.dispose()

    asyncio.run(async_side())
    assert store.queue("q").stats().pending == 0
