"""Transactions (T-1..T-4): the store's writes inside the caller's transaction.

The suite cannot know each engine's SQL dialect or placeholder style, so the
caller's SQL here is portable and carries no parameters: a table
``(id INTEGER PRIMARY KEY, note TEXT)`` and literal values the tests write
themselves. Native driver handles other than ``tx.connection`` (a
``sqlite3.Connection`` the caller opened, a ``psycopg.Connection`` in
autocommit) are engine-specific and belong to each engine's own tests.

A transaction that ends with an exception rolls back; the tests raise
:class:`Rollback` for that.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from alkstore import (
    Capability,
    InvalidArgument,
    Job,
    JobInfo,
    JobState,
    Notification,
    QueueOpts,
    Store,
)

from ._base import ContractBase, own_table, unique
from ._factory import StoreFactory
from ._queue_helpers import LONG_S, WAKE_BOUND_S, blocked, claim_one, counts, info_of

__all__ = ["TransactionContract"]

QUEUES = pytest.mark.requires(Capability.QUEUES)


class Rollback(Exception):
    """Raised inside ``with store.transaction()`` to roll it back."""


def row_values(row: Any) -> tuple[Any, ...]:
    """A driver row as a tuple, whatever the engine's row factory (tuples,
    ``sqlite3.Row``, mappings)."""
    if isinstance(row, Mapping):
        return tuple(row.values())
    return tuple(row)


def table_rows(store: Store, table: str) -> list[tuple[Any, ...]]:
    """The committed rows of the caller's *table*, ordered by id."""
    with store.transaction() as tx:
        cursor = tx.execute(f"SELECT id, note FROM {table} ORDER BY id")
        return [row_values(r) for r in cursor.fetchall()]


def roll_back(store: Store, body: Callable[[Any], object]) -> None:
    """Run *body(tx)* in a transaction that then rolls back; check that the
    exception came out unchanged."""
    error = Rollback("roll back")

    def run() -> None:
        with store.transaction() as tx:
            body(tx)
            raise error

    with pytest.raises(Rollback) as info:
        run()
    assert info.value is error, "the exception was replaced on its way out"


class TransactionContract(ContractBase):
    """Transactions (T-1..T-4)."""

    @pytest.fixture
    def table(self, store: Store) -> Iterator[str]:
        """A table of the caller's own, created and dropped through ``tx.execute``."""
        with own_table(store) as name:
            yield name

    # ------------------------------------------------------------------ T-1

    @pytest.mark.clause("T-1", "T-2")
    @QUEUES
    def test_exception_in_a_transaction_propagates_unchanged_and_rolls_back(
        self, store: Store, table: str
    ) -> None:
        q = store.queue(unique())

        def write(tx: Any) -> None:
            tx.execute(f"INSERT INTO {table} (id, note) VALUES (1, 'rolled back')")
            q.enqueue("rolled back", tx=tx)

        roll_back(store, write)
        assert table_rows(store, table) == []
        assert counts(q) == (0, 0, 0, 0)
        # A normal exit commits both, and the store is usable after the error.
        with store.transaction() as tx:
            tx.execute(f"INSERT INTO {table} (id, note) VALUES (2, 'kept')")
            kept = q.enqueue("kept", tx=tx)
        assert table_rows(store, table) == [(2, "kept")]
        assert info_of(q, kept).payload == "kept"

    @pytest.mark.clause("T-1")
    @QUEUES
    def test_enqueue_in_a_transaction_is_visible_only_after_commit(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        q = store.queue(unique())
        with store_factory.open() as other:
            oq = other.queue(q.name)
            with store.transaction() as tx:
                one = q.enqueue("one", tx=tx)
                many = q.enqueue_many(["two", "three"], tx=tx)
                # The engine committed nothing of the caller's transaction.
                for job_id in (one, *many):
                    assert oq.get_job(job_id) is None
                assert counts(oq) == (0, 0, 0, 0)
            assert [i.payload for i in oq.list_jobs(JobState.PENDING)] == ["one", "two", "three"]

            rolled: list[int] = []

            def write(tx: Any) -> None:
                rolled.append(q.enqueue("gone", tx=tx))
                rolled.extend(q.enqueue_many(["gone", "gone"], tx=tx))

            roll_back(store, write)
            assert len(rolled) == 3
            for job_id in rolled:
                assert oq.get_job(job_id) is None
                assert q.get_job(job_id) is None
            assert counts(oq) == (3, 0, 0, 0)

    @pytest.mark.clause("T-1", "Q-7")
    @QUEUES
    def test_job_ops_in_a_transaction_land_only_at_commit(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """ack, retry and fail with tx=: rolled back they leave the row as it was; committed they
        are invisible to another store until the commit."""
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S, max_attempts=5))
        ops: list[tuple[str, Callable[[Job, Any], bool]]] = [
            ("ack", lambda job, tx: job.ack(tx=tx)),
            ("retry", lambda job, tx: job.retry("retried", delay_s=60, tx=tx)),
            ("fail", lambda job, tx: job.fail("failed", tx=tx)),
        ]
        with store_factory.open() as other:
            oq = other.queue(q.name)
            for name, op in ops:
                job_id = q.enqueue(name)
                job = claim_one(q)
                assert job.id == job_id
                before = info_of(q, job_id)

                def write(tx: Any, job: Job = job, op: Callable[[Job, Any], bool] = op) -> None:
                    assert op(job, tx) is True

                roll_back(store, write)
                assert info_of(oq, job_id) == before, f"a rolled-back {name} left a trace"
                with store.transaction() as tx:
                    assert op(job, tx) is True
                    assert info_of(oq, job_id) == before, f"{name} was visible before commit"
                after: JobInfo | None = oq.get_job(job_id)
                if name == "ack":
                    assert after is None
                elif name == "retry":
                    assert after is not None
                    assert (after.state, after.attempts) == (JobState.PENDING, 1)
                else:
                    assert after is not None
                    assert (after.state, after.last_error) == (JobState.DEAD, "failed")
                assert job.ack() is False

    @pytest.mark.clause("T-1", "C-3", "C-6")
    @QUEUES
    def test_refused_or_invalid_write_leaves_the_callers_transaction_usable(
        self, store: Store, table: str
    ) -> None:
        """Inside one transaction: refused handle ops and refused input neither commit nor roll
        back the caller's work."""
        q = store.queue(unique())
        q.enqueue("done")
        stale = claim_one(q)
        assert stale.ack()
        with store.transaction() as tx:
            tx.execute(f"INSERT INTO {table} (id, note) VALUES (1, 'business')")
            # Refusals and bad input neither commit nor roll back the caller's
            # transaction.
            assert stale.ack(tx=tx) is False
            assert stale.fail("late", tx=tx) is False
            assert stale.retry("late", delay_s=0, tx=tx) is False
            with pytest.raises(InvalidArgument):
                q.enqueue(float("nan"), tx=tx)
            with pytest.raises(InvalidArgument):
                q.enqueue_many(["ok", {"bad": {1}}], tx=tx)
            kept = q.enqueue("kept", tx=tx)
            tx.execute(f"INSERT INTO {table} (id, note) VALUES (2, 'after')")
        assert table_rows(store, table) == [(1, "business"), (2, "after")]
        assert info_of(q, kept).state is JobState.PENDING
        assert counts(q) == (1, 0, 0, 0)

    @pytest.mark.clause("T-1", "Q-20")
    @pytest.mark.requires(Capability.QUEUES, Capability.OUTBOX)
    def test_outbox_put_joins_the_transaction(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        box = store.outbox(unique("o"))
        with store_factory.open() as other:
            oq = other.outbox(box.name).queue
            roll_back(store, lambda tx: box.put({"mail": "never"}, tx=tx))
            assert counts(oq) == (0, 0, 0, 0)
            with store.transaction() as tx:
                job_id = box.put({"mail": "sent"}, tx=tx)
                assert oq.get_job(job_id) is None
            assert info_of(oq, job_id).payload == {"mail": "sent"}
            assert counts(oq) == (1, 0, 0, 0)

    @pytest.mark.clause("T-1")
    @pytest.mark.requires(Capability.STREAMS)
    def test_stream_publish_joins_the_transaction(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        s = store.stream(unique("s"))
        with store_factory.open() as other:
            os_ = other.stream(s.name)
            roll_back(store, lambda tx: s.publish("never", key="k", tx=tx))
            assert os_.read() == []
            with store.transaction() as tx:
                offset = s.publish("committed", key="k", tx=tx)
                assert os_.read() == []
            events = os_.read()
            assert [(e.offset, e.key, e.payload) for e in events] == [(offset, "k", "committed")]

    @pytest.mark.clause("T-1", "T-3")
    @pytest.mark.requires(Capability.NOTIFICATIONS)
    def test_notify_in_a_transaction_is_delivered_after_commit_only(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        channel = unique("ch")
        with store_factory.open() as other, other.listen(channel) as listener:
            roll_back(store, lambda tx: store.notify(channel, "rolled back", tx=tx))
            with store.transaction() as tx:
                store.notify(channel, "committed", tx=tx)
                assert listener.get(0.3) is None, "delivered before commit"
            assert listener.get(10.0) == Notification(channel, "committed")
            assert listener.get(0.3) is None, "a rolled-back notification was delivered"

    # ------------------------------------------------------------------ T-2

    @pytest.mark.clause("T-2")
    @QUEUES
    def test_tx_execute_runs_caller_sql_in_the_same_transaction(
        self, store: Store, table: str
    ) -> None:
        q = store.queue(unique())
        with store.transaction() as tx:
            assert tx.connection is not None
            tx.execute(f"INSERT INTO {table} (id, note) VALUES (1, 'a')")
            tx.execute(f"INSERT INTO {table} (id, note) VALUES (2, 'b')")
            cursor = tx.execute(f"SELECT id, note FROM {table} ORDER BY id")
            assert [row_values(r) for r in cursor.fetchall()] == [(1, "a"), (2, "b")]
            job_id = q.enqueue("with the rows", tx=tx)
        assert table_rows(store, table) == [(1, "a"), (2, "b")]
        assert info_of(q, job_id).state is JobState.PENDING

        def write(tx: Any) -> None:
            tx.execute(f"INSERT INTO {table} (id, note) VALUES (3, 'c')")
            tx.execute(f"DELETE FROM {table} WHERE id = 1")
            cursor = tx.execute(f"SELECT id FROM {table} ORDER BY id")
            assert [row_values(r) for r in cursor.fetchall()] == [(2,), (3,)]
            q.enqueue("gone", tx=tx)

        roll_back(store, write)
        assert table_rows(store, table) == [(1, "a"), (2, "b")]
        assert counts(q) == (1, 0, 0, 0)

    @pytest.mark.clause("T-2", "T-1", "T-4")
    @pytest.mark.requires(Capability.QUEUES, Capability.NATIVE_TRANSACTIONS)
    def test_native_connection_of_a_transaction_is_accepted_as_tx(
        self, store: Store, store_factory: StoreFactory, table: str
    ) -> None:
        """The driver connection behind store.transaction() (tx.connection) is a native handle
        (T-2): writes given it join that transaction."""
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
        with store_factory.open() as other:
            oq = other.queue(q.name)
            with store.transaction() as tx:
                native = tx.connection
                one = q.enqueue("native", tx=native)
                [two] = q.enqueue_many(["native many"], tx=native)
                tx.execute(f"INSERT INTO {table} (id, note) VALUES (1, 'native')")
                assert oq.get_job(one) is None and oq.get_job(two) is None
            assert counts(oq) == (2, 0, 0, 0)
            assert table_rows(store, table) == [(1, "native")]

            roll_back(store, lambda tx: q.enqueue("gone", tx=tx.connection))
            assert counts(oq) == (2, 0, 0, 0)

            job = claim_one(q)
            roll_back(store, lambda tx: job.ack(tx=tx.connection))
            assert info_of(oq, job.id).state is JobState.PROCESSING
            with store.transaction() as tx:
                assert job.ack(tx=tx.connection) is True
            assert oq.get_job(job.id) is None

    # ------------------------------------------------------------------ T-3

    @pytest.mark.clause("T-3", "Q-19")
    @QUEUES
    def test_blocked_claim_wakes_only_after_the_enqueue_commits(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """A blocked claim survives a rolled-back enqueue, does not return while an enqueue is
        uncommitted, and returns within the wake bound of its commit; with the writer in
        the same store and, when cross-process wakes are declared, in another."""
        q = store.queue(unique())
        with store_factory.open() as other:
            writers = [store]
            if Capability.CROSS_PROCESS_WAKES in store.capabilities:
                writers.append(other)
            for writer in writers:
                wq = writer.queue(q.name)
                bg = blocked(lambda: q.claim("w", wait_s=20))

                def write(tx: Any, wq: Any = wq) -> None:
                    wq.enqueue("rolled back", tx=tx)
                    time.sleep(0.2)

                roll_back(writer, write)
                time.sleep(0.2)
                assert not bg.done, "a rolled-back enqueue ended the wait"
                with writer.transaction() as tx:
                    job_id = wq.enqueue("committed", tx=tx)
                    time.sleep(0.3)
                    assert not bg.done, "the claim returned before the enqueue committed"
                    assert q.get_job(job_id) is None
                committed = time.monotonic()
                job = bg.result()
                assert job is not None and job.id == job_id
                assert bg.returned_at - committed < WAKE_BOUND_S
                assert job.ack()

    # ------------------------------------------------------------------ T-4

    @pytest.mark.clause("T-4", "T-1")
    @QUEUES
    def test_business_row_and_ack_commit_together(
        self, store: Store, store_factory: StoreFactory, table: str
    ) -> None:
        """The result-storage recipe: the handler's row and job.ack(tx=tx) commit together."""
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
        job_id = q.enqueue({"order": 7})
        job = claim_one(q, "handler")
        with store_factory.open() as other:
            with store.transaction() as tx:
                tx.execute(f"INSERT INTO {table} (id, note) VALUES (7, 'result of job')")
                assert job.ack(tx=tx) is True
                assert info_of(other.queue(q.name), job_id).state is JobState.PROCESSING
            assert other.queue(q.name).get_job(job_id) is None
        assert table_rows(store, table) == [(7, "result of job")]
        assert job.ack() is False
        assert q.claim("w") is None

    @pytest.mark.clause("T-4", "Q-7")
    @QUEUES
    def test_business_row_and_ack_roll_back_together(self, store: Store, table: str) -> None:
        """The recipe rolled back: no business row, and the job is still processing under the same
        claim, which can ack again."""
        q = store.queue(unique(), QueueOpts(visibility_timeout_s=LONG_S))
        job_id = q.enqueue({"order": 8})
        job = claim_one(q, "handler")
        before = info_of(q, job_id)

        def handle(tx: Any) -> None:
            tx.execute(f"INSERT INTO {table} (id, note) VALUES (8, 'result of job')")
            assert job.ack(tx=tx) is True

        roll_back(store, handle)
        assert table_rows(store, table) == []
        # Still processing under the same claim, which is still valid.
        assert info_of(q, job_id) == before
        assert q.claim("w") is None
        assert job.heartbeat()
        with store.transaction() as tx:
            tx.execute(f"INSERT INTO {table} (id, note) VALUES (8, 'second try')")
            assert job.ack(tx=tx) is True
        assert table_rows(store, table) == [(8, "second try")]
        assert q.get_job(job_id) is None
