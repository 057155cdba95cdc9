# Generated from _executor_async.py by scripts/async_to_sync.py: edit that file, not this one.
"""The PostgreSQL executors: the I/O behind every contract call (docs/adr/0008,
the seam in :mod:`alkstore.engine.seam`).

Every operation runs an :class:`~._plan.Op` from :class:`~._ops.OpBook`;
each operation below is one line. The executor holds a pool of psycopg
connections and a listener (or a poller): on the async face a task on the
event loop and no thread of its own (A-2), on the sync face a thread.

Connections (E-2):

- A pooled connection that the server closed while it sat in the pool is
  noticed before use without a round trip (its socket is readable while it
  should be silent; then an empty query confirms), thrown away, and another
  one taken: the pool replaces it.
- A call whose connection is lost under it is retried once on a fresh
  connection when it cannot have changed anything: a read, or a write whose
  commit was not sent yet (see :class:`~._plan.Progress`).
- While the database is known to be out of reach (a dead connection or a
  failed connection attempt was seen, nothing succeeded since) a call waits
  at most :data:`~._executor_base.OUTAGE_POOL_WAIT_S` for a connection
  instead of ``pool_timeout_s``, and the re-attempts of a blocked call
  (``claim(wait_s=...)``, its next-ready probe) wait at most
  :data:`~._executor_base.SOFT_POOL_WAIT_S` and find nothing rather than
  fail, so a blocked call returns within its wait plus a small bound.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from alkstore.engine import (
    ClaimRow,
    EventRow,
    Fence,
    Fire,
    Inserted,
    JobRow,
    NewJob,
    NoteSink,
    RateSpec,
    ResultRow,
    ScheduleRow,
)
from alkstore.errors import TransientError
from alkstore.protocols import Tx
from alkstore.types import (
    JobState,
    LockInfo,
    QueueStats,
    StreamStats,
    SweepResult,
    WorkerCount,
    WorkerInfo,
)

from ._combine import EnqueueCombiner
from ._drive import drive
from ._errors import translate_errors
from ._executor_base import (
    OUTAGE_POOL_WAIT_S,
    POKE_WAIT_S,
    ExecutorBase,
    notifications_refused,
    readable,
)
from ._listen import ListenerLoop, Poller
from ._listen_base import ListenerCore, PollCore
from ._ops import user_channel
from ._options import Config
from ._plan import Op, Progress
from ._schema import SCHEMA_VERSION, open_plan
from ._tx import Joined, PostgresTx, resolve_sync

__all__ = ["PgExecutor"]

log = logging.getLogger("alkstore.postgres")

T = TypeVar("T")

_POOL_NAME = "alkstore"


class PgExecutor(ExecutorBase):
    """The seam's :class:`~alkstore.engine.seam.Executor` over psycopg.
    On the async face it is ready once :meth:`open` returned; on the sync
    face it opens itself when made."""

    def __init__(self, cfg: Config) -> None:
        super().__init__(cfg)
        self._pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            cfg.conninfo, open=False, configure=self._configure, **self._pool_options(_POOL_NAME)
        )
        self._combiner = EnqueueCombiner(self._insert_alone, self._insert_combined)
        self._listener: ListenerLoop | None = None
        self._poller: Poller | None = None
        if self._polling:
            core = PollCore(self._wakeboard)  # type: ignore[arg-type]
            self._poller = Poller(core, self._probe, cfg.poll_s)
        else:
            self._listener = ListenerLoop(
                ListenerCore(
                    wake_channel=self._ops.wake,
                    channel_for=lambda name: user_channel(cfg.schema, name),
                    wakes=self._wakeboard,
                    on_state=self._listener_state,
                ),
                self._connect_listener,
                self._poke,
                cfg.connect_timeout_s + 5.0,
            )
        self.open()

    def open(self) -> None:
        """Check or migrate the schema, then open the pool. The check runs on
        a connection of its own, so that a refused login or a missing
        database surfaces with the server's own message."""
        cfg = self._cfg
        with translate_errors():
            conn = psycopg.Connection.connect(cfg.conninfo, **self._pool_kwargs())
            with conn:
                self._store_id, found = drive(
                    conn,
                    open_plan(self._ops.st, cfg.schema, cfg.migrate, cfg.partition_width_s),
                    prepare=cfg.prepare,
                )
            self.schema_migration = (found, SCHEMA_VERSION)
            self._pool.open()

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        statement = self._set_lock_timeout()
        if statement is not None:
            conn.execute(statement)
        self._ours.add(conn)

    def _connect_listener(self) -> psycopg.Connection[Any]:
        return psycopg.Connection.connect(self._cfg.listen_conninfo, **self._listen_kwargs())

    # ----------------------------------------------------------- running

    def _checkout(self, wait_s: float) -> psycopg.Connection[Any]:
        """A pooled connection that looks alive (see the module docstring)."""
        pool = self._pool
        while True:
            try:
                conn = pool.getconn(timeout=wait_s)
            except PoolTimeout:
                self._note_connection_errors(pool.get_stats().get("connections_errors", 0))
                raise
            alive = readable(conn)
            if alive is False:
                break
            if alive:
                try:
                    conn.execute("")
                    break
                except psycopg.Error:
                    pass
            log.info("discarding a pooled connection the server closed")
            self._outage = True
            with contextlib.suppress(Exception):
                conn.close()
            pool.putconn(conn)
            wait_s = min(wait_s, OUTAGE_POOL_WAIT_S)
        return conn

    def resolve_tx(self, tx: object) -> Joined:
        self._check_open()
        return resolve_sync(tx)

    def _run(self, op: Op[T], tx: Joined | None = None) -> T:
        """Run *op*: on the caller's transaction *tx* (resolved by
        :meth:`resolve_tx`), or on a pooled connection with one retry on a
        fresh one (E-2)."""
        self._check_open()
        if tx is not None:
            conn, ours = tx
            with translate_errors():
                result: T = drive(conn, self._on_caller(op, conn, ours), prepare=self._cfg.prepare)
                return result
        retried = False
        while True:
            progress = Progress() if op.writes else None
            used: psycopg.Connection[Any] | None = None
            try:
                with translate_errors():
                    used = self._checkout(self._pool_wait(op.soft))
                    try:
                        result = drive(
                            used, self._scope(op), prepare=self._cfg.prepare, progress=progress
                        )
                    finally:
                        self._pool.putconn(used)
            except TransientError as exc:
                if self._after_failure(exc, used, progress, retried):
                    retried = True
                    continue
                if op.soft and not self._closed:
                    log.debug("blocked call re-attempt failed: %s", exc)
                    return op.soft_value  # type: ignore[no-any-return]
                raise
            self._outage = False
            return result

    def _insert_alone(self, queue: str, jobs: Sequence[NewJob]) -> list[Inserted]:
        return self._run(self._ops.insert_jobs(queue, jobs, None))

    def _insert_combined(self, batches: Sequence[tuple[str, Sequence[NewJob]]]) -> list[int]:
        return self._run(self._ops.insert_rows(batches))

    def _probe(self, keys: list[str]) -> list[tuple[str, str]]:
        return self._run(self._ops.wake_probe(keys))

    def _poke(self, channel: str) -> None:
        """Interrupt the listener's wait (best effort)."""
        if self._pool.closed:
            return
        try:
            with translate_errors():
                conn = self._checkout(POKE_WAIT_S)
                try:
                    drive(conn, self._ops.poke(channel).make(), prepare=self._cfg.prepare)
                finally:
                    self._pool.putconn(conn)
        except Exception as exc:  # the listener falls back to its idle wait
            log.debug("listener poke failed: %s", exc)

    # ------------------------------------------------------------ the store

    def start_wakes(self) -> None:
        if self._closed:
            return
        if self._poller is not None:
            self._poller.start()
        elif self._listener is not None:
            self._listener.start()

    def fallback_s(self) -> float | None:
        if self._poller is not None:
            return self._degraded(True, self._poller.core.healthy)
        assert self._listener is not None
        return self._degraded(self._listener.started, self._listener.core.connected)

    def transaction(self) -> AbstractContextManager[Tx]:
        self._check_open()
        return self._transaction()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[Tx]:
        with translate_errors():
            conn = self._checkout(self._pool_wait())
        try:
            with translate_errors():
                conn.execute(self._begin())
        except BaseException:
            self._end(conn, None)
            raise
        tx = PostgresTx(conn, lambda: self._closed, self._cfg.prepare)
        try:
            yield tx
        except BaseException:
            tx._active = False
            with contextlib.suppress(Exception):
                self._end(conn, False)
            raise
        tx._active = False
        with translate_errors():
            self._end(conn, True)

    def _end(self, conn: psycopg.Connection[Any], commit: bool | None) -> None:
        """``COMMIT`` (*commit* true), ``ROLLBACK`` (false) or neither
        (``None``: it never began), then the connection goes back to the
        pool. On the async face this runs in a task of its own, so that a
        transaction whose task was cancelled is still rolled back (A-4)."""
        self._end_now(conn, commit)

    def _end_now(self, conn: psycopg.Connection[Any], commit: bool | None) -> None:
        try:
            if commit:
                conn.execute("COMMIT")
            elif commit is not None:
                with contextlib.suppress(psycopg.Error):
                    conn.execute("ROLLBACK")
        finally:
            self._pool.putconn(conn)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._wakeboard.close()
        if self._listener is not None:
            self._listener.stop()
        if self._poller is not None:
            self._poller.stop()
        self._pool.close()

    # --------------------------------------------------------------- queues

    def insert_jobs(
        self, tx: Joined | None, queue: str, jobs: Sequence[NewJob], max_depth: int | None
    ) -> list[Inserted]:
        if tx is None and max_depth is None and jobs[0].unique_key is None and not jobs[0].after:
            return self._combiner.submit(queue, jobs)  # group commit of producers
        return self._run(self._ops.insert_jobs(queue, jobs, max_depth), tx)

    def claim(
        self, queues: Sequence[str], worker_id: str, n: int, rate: RateSpec | None, idle: bool
    ) -> list[ClaimRow]:
        return self._run(self._ops.claim(queues, worker_id, n, rate, idle))

    def next_ready(self, queues: Sequence[str]) -> float | None:
        return self._run(self._ops.next_ready(queues, soft=True))

    def ack(
        self,
        tx: Joined | None,
        fences: Sequence[Fence],
        results: Sequence[str | None] | None = None,
    ) -> list[bool]:
        return self._run(self._ops.ack(fences, results), tx)

    def parent_results(self, tx: Joined | None, job_id: int) -> dict[int, str]:
        return self._run(self._ops.parent_results(job_id), tx)

    def retry(self, tx: Joined | None, fence: Fence, delay_s: float, error: str) -> bool:
        return self._run(self._ops.retry(fence, delay_s, error), tx)

    def fail(self, tx: Joined | None, fence: Fence, error: str) -> bool:
        return self._run(self._ops.fail(fence, error), tx)

    def release(self, fence: Fence) -> bool:
        return self._run(self._ops.release(fence))

    def heartbeat(self, fence: Fence, extend_s: float) -> datetime | None:
        return self._run(self._ops.heartbeat(fence, extend_s))

    def progress(self, tx: Joined | None, fence: Fence, value: str | None) -> bool:
        return self._run(self._ops.progress(fence, value), tx)

    def cancel(self, tx: Joined | None, queue: str, job_id: int) -> bool:
        return self._run(self._ops.cancel(queue, job_id), tx)

    def set_paused(self, tx: Joined | None, queue: str, paused: bool) -> bool:
        return self._run(self._ops.set_paused(queue, paused), tx)

    def is_paused(self, queue: str) -> bool:
        return self._run(self._ops.is_paused(queue))

    def run_now(self, tx: Joined | None, queue: str, job_id: int) -> bool:
        return self._run(self._ops.run_now(queue, job_id), tx)

    def get_job(self, queue: str, job_id: int) -> JobRow | None:
        return self._run(self._ops.get_job(queue, job_id))

    def get_result(self, tx: Joined | None, queue: str, job_id: int) -> ResultRow | None:
        return self._run(self._ops.get_result(queue, job_id), tx)

    def list_jobs(self, queue: str, state: JobState, limit: int, after_id: int) -> list[JobRow]:
        return self._run(self._ops.list_jobs(queue, state, limit, after_id))

    def queue_stats(self, queue: str | None) -> list[QueueStats]:
        return self._run(self._ops.queue_stats(queue))

    def sweep(self, queue: str) -> SweepResult:
        return self._run(self._ops.sweep(queue))

    def redrive(self, tx: Joined | None, queue: str, job_ids: Sequence[int] | None) -> int:
        return self._run(self._ops.redrive(queue, job_ids), tx)

    def purge_dead(
        self,
        tx: Joined | None,
        queue: str,
        job_ids: Sequence[int] | None,
        older_than_s: float | None,
    ) -> int:
        return self._run(self._ops.purge_dead(queue, job_ids, older_than_s), tx)

    # -------------------------------------------------------------- streams

    def publish(self, tx: Joined | None, stream: str, key: str | None, payload: str) -> int:
        return self._run(self._ops.publish(stream, key, payload), tx)

    def read_events(self, stream: str, after: int, limit: int) -> list[EventRow]:
        return self._run(self._ops.read_events(stream, after, limit))

    def has_event_after(self, stream: str, after: int) -> bool:
        return self._run(self._ops.has_event_after(stream, after))

    def commit_offset(self, stream: str, consumer: str, offset: int) -> bool:
        return self._run(self._ops.commit_offset(stream, consumer, offset))

    def get_offset(self, stream: str, consumer: str) -> int:
        return self._run(self._ops.get_offset(stream, consumer))

    def trim(self, stream: str, before: int) -> int:
        return self._run(self._ops.trim(stream, before))

    def stream_stats(self) -> list[StreamStats]:
        return self._run(self._ops.stream_stats())

    # ---------------------------------------------------------------- locks

    def acquire_lock(self, name: str, owner: str, ttl_s: float) -> tuple[int, datetime] | None:
        return self._run(self._ops.acquire_lock(name, owner, ttl_s))

    def renew_lock(self, name: str, owner: str, token: int, ttl_s: float) -> datetime | None:
        return self._run(self._ops.renew_lock(name, owner, token, ttl_s))

    def release_lock(self, name: str, owner: str, token: int) -> bool:
        return self._run(self._ops.release_lock(name, owner, token))

    def held_locks(self) -> list[LockInfo]:
        return self._run(self._ops.held_locks())

    # -------------------------------------------------------- workers (O-5)

    def report_worker(
        self,
        info: WorkerInfo,
        counts: Sequence[WorkerCount],
        gone: bool,
        forget_after_s: float,
        keep_counts_s: float,
    ) -> None:
        self._run(self._ops.report_worker(info, counts, gone, forget_after_s, keep_counts_s))

    def list_workers(self, seen_within_s: float) -> list[WorkerInfo]:
        return self._run(self._ops.list_workers(seen_within_s))

    def worker_counts(self, since: datetime) -> list[WorkerCount]:
        return self._run(self._ops.worker_counts(since))

    def acquire_rate(self, rate: RateSpec, n: int) -> float:
        return self._run(self._ops.acquire_rate(rate, n))

    # -------------------------------------------------------- notifications

    def notify(self, tx: Joined | None, channel: str, payload: str) -> None:
        if self._polling:
            raise notifications_refused()
        self._run(self._ops.notify(channel, payload), tx)

    def subscribe(self, sink: NoteSink) -> None:
        self._check_open()
        if self._listener is None:
            raise notifications_refused()
        self._listener.subscribe(sink)

    def unsubscribe(self, sink: NoteSink) -> None:
        if self._listener is not None:
            self._listener.unsubscribe(sink)

    # ------------------------------------------------------------ schedules

    def clock(self) -> datetime:
        return self._run(self._ops.clock())

    def upsert_schedule(self, row: ScheduleRow) -> ScheduleRow:
        return self._run(self._ops.upsert_schedule(row))

    def delete_schedule(self, name: str) -> bool:
        return self._run(self._ops.delete_schedule(name))

    def list_schedules(self) -> list[ScheduleRow]:
        return self._run(self._ops.list_schedules())

    def due_schedules(self) -> tuple[datetime, list[ScheduleRow]]:
        return self._run(self._ops.due_schedules())

    def fire_schedule(self, fire: Fire) -> bool:
        return self._run(self._ops.fire_schedule(fire))

    def seconds_to_next_fire(self) -> float | None:
        return self._run(self._ops.seconds_to_next_fire())
