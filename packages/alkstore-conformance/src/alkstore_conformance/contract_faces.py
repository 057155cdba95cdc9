"""The two faces side by side: one cursor shape (A-6), the wrong face named (A-7).

These tests hold a sync store and an async store on one database and drive
both APIs themselves, so they run once, under the suite's sync face
(``sync_only``). The SQL they send is the same on every engine: no
placeholders (their style is the driver's), nothing but standard SQL.

A-7 asks that the error *names the class to use*; that name is the one thing
these tests read from a message, and they take it from an object of the
right face (``type(sync_job).__name__``), never a literal, so an engine is
free to call its classes what it likes.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import uuid
from collections.abc import Callable, Coroutine, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

import pytest

import alkstore
from alkstore import (
    AsyncJob,
    AsyncQueue,
    AsyncStore,
    AsyncWorker,
    Capability,
    InvalidArgument,
    Job,
    JobState,
    Queue,
    QueueOpts,
    Store,
    Worker,
)

from ._base import ContractBase, mark_each_test, unique
from ._factory import StoreFactory

__all__ = ["FacesContract"]

T = TypeVar("T")

BOTH_FACES = pytest.mark.sync_only("drives the sync and the async API itself")
QUEUES_AND_ASYNC = pytest.mark.requires(Capability.QUEUES, Capability.ASYNC)
ASYNC = pytest.mark.requires(Capability.ASYNC)

#: A visibility timeout no test outlives.
LONG_S = 300.0
#: Rows of the A-6 table, and how many rows the generated series holds (more
#: than one batch of any sensible ``async for`` implementation).
ROWS = [(1, "a"), (2, "b"), (3, "c"), (4, "d"), (5, "e")]
SERIES = 250


def row_values(row: Any) -> tuple[Any, ...]:
    """A driver row as a tuple, whatever the engine's row factory."""
    if isinstance(row, Mapping):
        return tuple(row.values())
    return tuple(row)


def names_class(error: BaseException, name: str) -> bool:
    """Whether the message of *error* names the class *name* as a whole word
    (``Worker`` inside ``AsyncWorker`` does not count)."""
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", str(error)) is not None


def _table() -> str:
    return f"alkstore_conformance_{uuid.uuid4().hex[:12]}"


def _insert_rows(table: str) -> str:
    values = ", ".join(f"({i}, '{note}')" for i, note in ROWS)
    return f"INSERT INTO {table} (id, note) VALUES {values}"


def _series() -> str:
    # Recursive CTEs read the same in SQLite and PostgreSQL.
    return (
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
        f"WHERE i < {SERIES}) SELECT i FROM n"
    )


def _column_names(description: Any) -> list[str]:
    assert description is not None, "a SELECT has a description"
    return [column[0] for column in description]


async def _awaited(value: Any) -> Any:
    """Await *value*, failing the test when it is not awaitable (A-6: every
    fetch of the async face is a coroutine, on every engine)."""
    assert inspect.isawaitable(value), f"{value!r} is not awaitable: the fetch ran un-awaited"
    return await value


def assert_refused_naming(call: Callable[[], object], name: str) -> None:
    """*call* raises ``InvalidArgument`` whose message names the class *name*
    (A-7)."""
    with pytest.raises(InvalidArgument) as info:
        call()
    assert names_class(info.value, name), str(info.value)


class Runner:
    """An event loop of the test's own; :meth:`run` runs a coroutine on it
    (``asyncio.Runner`` before Python 3.11)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        try:
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.run_until_complete(self.loop.shutdown_default_executor())
        finally:
            self.loop.close()


@contextmanager
def both_faces(factory: StoreFactory) -> Iterator[tuple[Store, Runner, AsyncStore]]:
    """A sync store and an async store on the test's database; the async one
    lives on the yielded runner's loop. Both are closed afterwards."""
    store = alkstore.open(factory.url, **factory.opts)
    runner = Runner()
    try:
        astore = runner.run(alkstore.open_async(factory.url, **factory.opts))
        try:
            yield store, runner, astore
        finally:
            runner.run(astore.close())
    finally:
        runner.close()
        store.close()


@contextmanager
def claims_on_both_faces(
    factory: StoreFactory,
) -> Iterator[tuple[Store, Runner, AsyncStore, Queue, AsyncQueue, Job, AsyncJob]]:
    """:func:`both_faces` with one queue seen from each face and one job
    claimed through each: (store, runner, astore, q, aq, sync_job, async_job)."""
    name = unique()
    with both_faces(factory) as (store, runner, astore):
        q = store.queue(name, QueueOpts(visibility_timeout_s=LONG_S))
        aq = astore.queue(name, QueueOpts(visibility_timeout_s=LONG_S))
        q.enqueue_many(["sync", "async"])
        sync_job = q.claim("w-sync")
        async_job = runner.run(aq.claim("w-async"))
        assert sync_job is not None and async_job is not None
        yield store, runner, astore, q, aq, sync_job, async_job


def _noop(job: Any) -> None:
    pass


@mark_each_test(BOTH_FACES)
class FacesContract(ContractBase):
    """One cursor shape (A-6) and the wrong face named (A-7)."""

    # -----------------------------------------------------------------

    @pytest.mark.clause("A-6", "T-2")
    @ASYNC
    def test_async_execute_returns_a_cursor_whose_fetches_are_awaited(
        self, store_factory: StoreFactory
    ) -> None:
        """The same SQL on every engine: ``rowcount`` and ``description``
        read as they are; ``fetchone``, ``fetchmany(n)``, ``fetchall`` and
        ``close`` awaited; ``async for`` over more rows than one batch."""
        table = _table()

        async def body(astore: AsyncStore) -> None:
            async with astore.transaction() as tx:
                await tx.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, note TEXT)")
                inserted = await tx.execute(_insert_rows(table))
                assert inserted.rowcount == len(ROWS)
                assert inserted.description is None
            try:
                async with astore.transaction() as tx:
                    cur = await tx.execute(f"SELECT id, note FROM {table} ORDER BY id")
                    assert _column_names(cur.description) == ["id", "note"]
                    assert row_values(await _awaited(cur.fetchone())) == ROWS[0]
                    assert [row_values(r) for r in await _awaited(cur.fetchmany(2))] == ROWS[1:3]
                    assert [row_values(r) for r in await _awaited(cur.fetchall())] == ROWS[3:]
                    assert await _awaited(cur.fetchone()) is None
                    assert await _awaited(cur.fetchmany(2)) == []
                    assert await _awaited(cur.fetchall()) == []
                    await _awaited(cur.close())

                    again = await tx.execute(f"SELECT id, note FROM {table} ORDER BY id")
                    assert [row_values(r) async for r in again] == ROWS

                    series = await tx.execute(_series())
                    assert _column_names(series.description) == ["i"]
                    seen = [row_values(r)[0] async for r in series]
                    assert seen == list(range(1, SERIES + 1))

                    updated = await tx.execute(f"UPDATE {table} SET note = 'z' WHERE id > 3")
                    assert updated.rowcount == 2
                    deleted = await tx.execute(f"DELETE FROM {table} WHERE id = 1")
                    assert deleted.rowcount == 1
                async with astore.transaction() as tx:
                    cur = await tx.execute(f"SELECT id, note FROM {table} ORDER BY id")
                    rows = [row_values(r) for r in await cur.fetchall()]
                    assert rows == [(2, "b"), (3, "c"), (4, "z"), (5, "z")]
            finally:
                async with astore.transaction() as tx:
                    await tx.execute(f"DROP TABLE {table}")

        with both_faces(store_factory) as (_, runner, astore):
            runner.run(body(astore))

    @pytest.mark.clause("A-6", "T-2")
    def test_sync_execute_returns_a_dbapi_cursor(self, store_factory: StoreFactory) -> None:
        """The same SQL through the sync face: a DB-API cursor, ``for row in
        cursor`` included."""
        table = _table()
        store = alkstore.open(store_factory.url, **store_factory.opts)
        try:
            with store.transaction() as tx:
                tx.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, note TEXT)")
                inserted = tx.execute(_insert_rows(table))
                assert inserted.rowcount == len(ROWS)
                assert inserted.description is None
            try:
                with store.transaction() as tx:
                    cur = tx.execute(f"SELECT id, note FROM {table} ORDER BY id")
                    assert _column_names(cur.description) == ["id", "note"]
                    assert row_values(cur.fetchone()) == ROWS[0]
                    assert [row_values(r) for r in cur.fetchmany(2)] == ROWS[1:3]
                    assert [row_values(r) for r in cur.fetchall()] == ROWS[3:]
                    assert cur.fetchone() is None
                    cur.close()
                    again = tx.execute(f"SELECT id, note FROM {table} ORDER BY id")
                    assert [row_values(r) for r in again] == ROWS
                    series = tx.execute(_series())
                    assert [row_values(r)[0] for r in series] == list(range(1, SERIES + 1))
                    updated = tx.execute(f"UPDATE {table} SET note = 'z' WHERE id > 3")
                    assert updated.rowcount == 2
            finally:
                with store.transaction() as tx:
                    tx.execute(f"DROP TABLE {table}")
        finally:
            store.close()

    # -----------------------------------------------------------------

    @pytest.mark.clause("A-7", "A-5")
    @QUEUES_AND_ASYNC
    def test_worker_given_an_async_store_is_refused_naming_async_worker(
        self, store_factory: StoreFactory
    ) -> None:
        with both_faces(store_factory) as (_, _runner, astore):
            stranger: Any = astore
            assert_refused_naming(lambda: Worker(stranger, unique(), _noop), AsyncWorker.__name__)

    @pytest.mark.clause("A-7", "A-5")
    @QUEUES_AND_ASYNC
    def test_async_worker_given_a_sync_store_is_refused_naming_worker(
        self, store_factory: StoreFactory
    ) -> None:
        async def construct(stranger: Any) -> None:
            AsyncWorker(stranger, unique(), _noop)

        with both_faces(store_factory) as (store, runner, _):
            assert_refused_naming(lambda: runner.run(construct(store)), Worker.__name__)

    @pytest.mark.clause("A-7", "Q-9")
    @QUEUES_AND_ASYNC
    def test_sync_batch_ops_given_an_async_job_are_refused_naming_the_job_class(
        self, store_factory: StoreFactory
    ) -> None:
        """``queue.ack_batch`` and ``store.ack_each`` of the sync face refuse a
        job the async store claimed, name the sync face's job class, and leave
        the claim as it was."""
        with claims_on_both_faces(store_factory) as (store, runner, _, q, aq, sync_job, async_job):
            to_use = type(sync_job).__name__
            stranger: Any = async_job  # what a type checker would refuse
            assert_refused_naming(lambda: q.ack_batch([stranger]), to_use)
            assert_refused_naming(lambda: store.ack_each([stranger]), to_use)
            with pytest.raises(InvalidArgument):
                q.ack_batch([sync_job, stranger])  # one wrong job spoils the batch
            state = q.get_job(async_job.id)
            assert state is not None and state.state is JobState.PROCESSING
            state = q.get_job(sync_job.id)
            assert state is not None and state.state is JobState.PROCESSING
            assert q.ack_batch([sync_job]) == 1
            assert runner.run(aq.ack_batch([async_job])) == 1

    @pytest.mark.clause("A-7", "Q-9")
    @QUEUES_AND_ASYNC
    def test_async_batch_ops_given_a_sync_job_are_refused_naming_the_job_class(
        self, store_factory: StoreFactory
    ) -> None:
        with claims_on_both_faces(store_factory) as (_, runner, astore, q, aq, sync_job, async_job):
            to_use = type(async_job).__name__
            stranger: Any = sync_job
            assert_refused_naming(lambda: runner.run(aq.ack_batch([stranger])), to_use)
            assert_refused_naming(lambda: runner.run(astore.ack_each([stranger])), to_use)
            state = q.get_job(sync_job.id)
            assert state is not None and state.state is JobState.PROCESSING
            assert runner.run(aq.ack_batch([async_job])) == 1
            assert q.ack_batch([sync_job]) == 1

    @pytest.mark.clause("A-7", "T-2")
    @QUEUES_AND_ASYNC
    def test_sync_face_given_an_async_transaction_is_refused_naming_what_to_pass(
        self, store_factory: StoreFactory
    ) -> None:
        """``tx=`` of the sync face refuses the async store's transaction,
        naming it and what to pass instead, and writes nothing."""
        name = unique()
        with both_faces(store_factory) as (store, runner, astore):
            q = store.queue(name, QueueOpts(visibility_timeout_s=LONG_S))
            q.enqueue("to claim")
            job = q.claim("w")
            assert job is not None

            async def body() -> list[BaseException]:
                errors: list[BaseException] = []
                async with astore.transaction() as atx:
                    for call in (
                        lambda: q.enqueue("never", tx=atx),
                        lambda: store.ack_each([job], tx=atx),
                    ):
                        try:
                            call()
                        except InvalidArgument as exc:
                            errors.append(exc)
                return errors

            async def async_tx_class() -> str:
                async with astore.transaction() as atx:
                    return type(atx).__name__

            refused = runner.run(async_tx_class())
            errors = runner.run(body())
            assert len(errors) == 2, "an async transaction was taken as tx= by the sync face"
            for error in errors:
                # Names what it got and what to use instead.
                assert names_class(error, refused), str(error)
                assert "store.transaction()" in str(error), str(error)
            stats = q.stats()
            assert (stats.pending, stats.processing) == (0, 1)

    @pytest.mark.clause("A-7", "T-2")
    @QUEUES_AND_ASYNC
    def test_async_face_given_a_sync_transaction_is_refused_naming_what_to_pass(
        self, store_factory: StoreFactory
    ) -> None:
        name = unique()
        with both_faces(store_factory) as (store, runner, astore):
            aq = astore.queue(name, QueueOpts(visibility_timeout_s=LONG_S))
            runner.run(aq.enqueue("to claim"))
            job = runner.run(aq.claim("w"))
            assert job is not None

            with store.transaction() as tx:
                refused = type(tx).__name__
                for call in (
                    lambda: aq.enqueue("never", tx=tx),
                    lambda: astore.ack_each([job], tx=tx),
                ):
                    with pytest.raises(InvalidArgument) as info:
                        runner.run(call())
                    # Names what it got and what to use instead.
                    assert names_class(info.value, refused), str(info.value)
                    assert "store.transaction()" in str(info.value), str(info.value)
            stats = runner.run(aq.stats())
            assert (stats.pending, stats.processing) == (0, 1)
