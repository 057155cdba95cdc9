# Async source of _executor.py (scripts/async_to_sync.py makes it: edit this file).
# mypy: warn-unreachable=False
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

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

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
from alkstore.protocols import AsyncTx
from alkstore.types import (
    JobState,
    LockInfo,
    QueueStats,
    StreamStats,
    SweepResult,
    WorkerCount,
    WorkerInfo,
)

from ._combine_async import AsyncEnqueueCombiner
from ._drive_async import drive_async
from ._errors import translate_errors
from ._executor_base import (
    OUTAGE_POOL_WAIT_S,
    POKE_WAIT_S,
    ExecutorBase,
    notifications_refused,
    readable,
)
from ._listen_async import AsyncListenerLoop, AsyncPoller
from ._listen_base import ListenerCore, PollCore
from ._ops import user_channel
from ._options import Config
from ._plan import Op, Progress
from ._schema import SCHEMA_VERSION, open_plan
from ._tx_async import AsyncJoined, AsyncPostgresTx, resolve_async

__all__ = ["AsyncPgExecutor"]

log = logging.getLogger("alkstore.postgres")

T = TypeVar("T")

if True:  # noqa: SIM108  # ASYNC
    _POOL_NAME = "alkstore-async"
else:
    _POOL_NAME = "alkstore"


class AsyncPgExecutor(ExecutorBase):
    """The seam's :class:`~alkstore.engine.seam.AsyncExecutor` over psycopg.
    On the async face it is ready once :meth:`open` returned; on the sync
    face it opens itself when made."""

    def __init__(self, cfg: Config) -> None:
        super().__init__(cfg)
        self._pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] = AsyncConnectionPool(
            cfg.conninfo, open=False, configure=self._configure, **self._pool_options(_POOL_NAME)
        )
        self._combiner = AsyncEnqueueCombiner(self._insert_alone, self._insert_combined)
        self._listener: AsyncListenerLoop | None = None
        self._poller: AsyncPoller | None = None
        if self._polling:
            core = PollCore(self._wakeboard)  # type: ignore[arg-type]
            self._poller = AsyncPoller(core, self._probe, cfg.poll_s)
        else:
            self._listener = AsyncListenerLoop(
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
        if True:  # ASYNC
            pass  # the caller awaits open()
        else:
            self.open()

    async def open(self) -> None:
        """Check or migrate the schema, then open the pool. The check runs on
        a connection of its own, so that a refused login or a missing
        database surfaces with the server's own message."""
        cfg = self._cfg
        with translate_errors():
            conn = await psycopg.AsyncConnection.connect(cfg.conninfo, **self._pool_kwargs())
            async with conn:
                self._store_id, found = await drive_async(
                    conn,
                    open_plan(self._ops.st, cfg.schema, cfg.migrate, cfg.partition_width_s),
                    prepare=cfg.prepare,
                )
            self.schema_migration = (found, SCHEMA_VERSION)
            await self._pool.open()

    async def _configure(self, conn: psycopg.AsyncConnection[Any]) -> None:
        statement = self._set_lock_timeout()
        if statement is not None:
            await conn.execute(statement)
        self._ours.add(conn)

    async def _connect_listener(self) -> psycopg.AsyncConnection[Any]:
        return await psycopg.AsyncConnection.connect(
            self._cfg.listen_conninfo, **self._listen_kwargs()
        )

    # ----------------------------------------------------------- running

    async def _checkout(self, wait_s: float) -> psycopg.AsyncConnection[Any]:
        """A pooled connection that looks alive (see the module docstring)."""
        pool = self._pool
        while True:
            try:
                conn = await pool.getconn(timeout=wait_s)
            except PoolTimeout:
                self._note_connection_errors(pool.get_stats().get("connections_errors", 0))
                raise
            alive = readable(conn)
            if alive is False:
                break
            if alive:
                try:
                    await conn.execute("")
                    break
                except psycopg.Error:
                    pass
            log.info("discarding a pooled connection the server closed")
            self._outage = True
            with contextlib.suppress(Exception):
                await conn.close()
            await pool.putconn(conn)
            wait_s = min(wait_s, OUTAGE_POOL_WAIT_S)
        return conn

    def resolve_tx(self, tx: object) -> AsyncJoined:
        self._check_open()
        return resolve_async(tx)

    async def _run(self, op: Op[T], tx: AsyncJoined | None = None) -> T:
        """Run *op*: on the caller's transaction *tx* (resolved by
        :meth:`resolve_tx`), or on a pooled connection with one retry on a
        fresh one (E-2)."""
        self._check_open()
        if tx is not None:
            conn, ours = tx
            with translate_errors():
                result: T = await drive_async(
                    conn, self._on_caller(op, conn, ours), prepare=self._cfg.prepare
                )
                return result
        retried = False
        while True:
            progress = Progress() if op.writes else None
            used: psycopg.AsyncConnection[Any] | None = None
            try:
                with translate_errors():
                    used = await self._checkout(self._pool_wait(op.soft))
                    try:
                        result = await drive_async(
                            used, self._scope(op), prepare=self._cfg.prepare, progress=progress
                        )
                    finally:
                        await self._pool.putconn(used)
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

    async def _insert_alone(self, queue: str, jobs: Sequence[NewJob]) -> list[Inserted]:
        return await self._run(self._ops.insert_jobs(queue, jobs, None))

    async def _insert_combined(self, batches: Sequence[tuple[str, Sequence[NewJob]]]) -> list[int]:
        return await self._run(self._ops.insert_rows(batches))

    async def _probe(self, keys: list[str]) -> list[tuple[str, str]]:
        return await self._run(self._ops.wake_probe(keys))

    async def _poke(self, channel: str) -> None:
        """Interrupt the listener's wait (best effort)."""
        if self._pool.closed:
            return
        try:
            with translate_errors():
                conn = await self._checkout(POKE_WAIT_S)
                try:
                    await drive_async(
                        conn, self._ops.poke(channel).make(), prepare=self._cfg.prepare
                    )
                finally:
                    await self._pool.putconn(conn)
        except Exception as exc:  # the listener falls back to its idle wait
            log.debug("listener poke failed: %s", exc)

    # ------------------------------------------------------------ the store

    async def start_wakes(self) -> None:
        if self._closed:
            return
        if self._poller is not None:
            self._poller.start()
        elif self._listener is not None:
            await self._listener.start()

    def fallback_s(self) -> float | None:
        if self._poller is not None:
            return self._degraded(True, self._poller.core.healthy)
        assert self._listener is not None
        return self._degraded(self._listener.started, self._listener.core.connected)

    def transaction(self) -> AbstractAsyncContextManager[AsyncTx]:
        self._check_open()
        return self._transaction()

    @contextlib.asynccontextmanager
    async def _transaction(self) -> AsyncIterator[AsyncTx]:
        with translate_errors():
            conn = await self._checkout(self._pool_wait())
        try:
            with translate_errors():
                await conn.execute(self._begin())
        except BaseException:
            await self._end(conn, None)
            raise
        tx = AsyncPostgresTx(conn, lambda: self._closed, self._cfg.prepare)
        try:
            yield tx
        except BaseException:
            tx._active = False
            with contextlib.suppress(Exception):
                await self._end(conn, False)
            raise
        tx._active = False
        with translate_errors():
            await self._end(conn, True)

    async def _end(self, conn: psycopg.AsyncConnection[Any], commit: bool | None) -> None:
        """``COMMIT`` (*commit* true), ``ROLLBACK`` (false) or neither
        (``None``: it never began), then the connection goes back to the
        pool. On the async face this runs in a task of its own, so that a
        transaction whose task was cancelled is still rolled back (A-4)."""
        if True:  # ASYNC
            await asyncio.shield(asyncio.ensure_future(self._end_now(conn, commit)))
        else:
            self._end_now(conn, commit)

    async def _end_now(self, conn: psycopg.AsyncConnection[Any], commit: bool | None) -> None:
        try:
            if commit:
                await conn.execute("COMMIT")
            elif commit is not None:
                with contextlib.suppress(psycopg.Error):
                    await conn.execute("ROLLBACK")
        finally:
            await self._pool.putconn(conn)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._wakeboard.close()
        if self._listener is not None:
            await self._listener.stop()
        if self._poller is not None:
            await self._poller.stop()
        await self._pool.close()

    # --------------------------------------------------------------- queues

    async def insert_jobs(
        self, tx: AsyncJoined | None, queue: str, jobs: Sequence[NewJob], max_depth: int | None
    ) -> list[Inserted]:
        if tx is None and max_depth is None and jobs[0].unique_key is None and not jobs[0].after:
            return await self._combiner.submit(queue, jobs)  # group commit of producers
        return await self._run(self._ops.insert_jobs(queue, jobs, max_depth), tx)

    async def claim(
        self, queues: Sequence[str], worker_id: str, n: int, rate: RateSpec | None, idle: bool
    ) -> list[ClaimRow]:
        return await self._run(self._ops.claim(queues, worker_id, n, rate, idle))

    async def next_ready(self, queues: Sequence[str]) -> float | None:
        return await self._run(self._ops.next_ready(queues, soft=True))

    async def ack(
        self,
        tx: AsyncJoined | None,
        fences: Sequence[Fence],
        results: Sequence[str | None] | None = None,
    ) -> list[bool]:
        return await self._run(self._ops.ack(fences, results), tx)

    async def parent_results(self, tx: AsyncJoined | None, job_id: int) -> dict[int, str]:
        return await self._run(self._ops.parent_results(job_id), tx)

    async def retry(self, tx: AsyncJoined | None, fence: Fence, delay_s: float, error: str) -> bool:
        return await self._run(self._ops.retry(fence, delay_s, error), tx)

    async def fail(self, tx: AsyncJoined | None, fence: Fence, error: str) -> bool:
        return await self._run(self._ops.fail(fence, error), tx)

    async def release(self, fence: Fence) -> bool:
        return await self._run(self._ops.release(fence))

    async def heartbeat(self, fence: Fence, extend_s: float) -> datetime | None:
        return await self._run(self._ops.heartbeat(fence, extend_s))

    async def progress(self, tx: AsyncJoined | None, fence: Fence, value: str | None) -> bool:
        return await self._run(self._ops.progress(fence, value), tx)

    async def cancel(self, tx: AsyncJoined | None, queue: str, job_id: int) -> bool:
        return await self._run(self._ops.cancel(queue, job_id), tx)

    async def set_paused(self, tx: AsyncJoined | None, queue: str, paused: bool) -> bool:
        return await self._run(self._ops.set_paused(queue, paused), tx)

    async def is_paused(self, queue: str) -> bool:
        return await self._run(self._ops.is_paused(queue))

    async def run_now(self, tx: AsyncJoined | None, queue: str, job_id: int) -> bool:
        return await self._run(self._ops.run_now(queue, job_id), tx)

    async def get_job(self, queue: str, job_id: int) -> JobRow | None:
        return await self._run(self._ops.get_job(queue, job_id))

    async def get_result(self, tx: AsyncJoined | None, queue: str, job_id: int) -> ResultRow | None:
        return await self._run(self._ops.get_result(queue, job_id), tx)

    async def list_jobs(
        self, queue: str, state: JobState, limit: int, after_id: int
    ) -> list[JobRow]:
        return await self._run(self._ops.list_jobs(queue, state, limit, after_id))

    async def queue_stats(self, queue: str | None) -> list[QueueStats]:
        return await self._run(self._ops.queue_stats(queue))

    async def sweep(self, queue: str) -> SweepResult:
        return await self._run(self._ops.sweep(queue))

    async def redrive(
        self, tx: AsyncJoined | None, queue: str, job_ids: Sequence[int] | None
    ) -> int:
        return await self._run(self._ops.redrive(queue, job_ids), tx)

    async def purge_dead(
        self,
        tx: AsyncJoined | None,
        queue: str,
        job_ids: Sequence[int] | None,
        older_than_s: float | None,
    ) -> int:
        return await self._run(self._ops.purge_dead(queue, job_ids, older_than_s), tx)

    # -------------------------------------------------------------- streams

    async def publish(
        self, tx: AsyncJoined | None, stream: str, key: str | None, payload: str
    ) -> int:
        return await self._run(self._ops.publish(stream, key, payload), tx)

    async def read_events(self, stream: str, after: int, limit: int) -> list[EventRow]:
        return await self._run(self._ops.read_events(stream, after, limit))

    async def has_event_after(self, stream: str, after: int) -> bool:
        return await self._run(self._ops.has_event_after(stream, after))

    async def commit_offset(self, stream: str, consumer: str, offset: int) -> bool:
        return await self._run(self._ops.commit_offset(stream, consumer, offset))

    async def get_offset(self, stream: str, consumer: str) -> int:
        return await self._run(self._ops.get_offset(stream, consumer))

    async def trim(self, stream: str, before: int) -> int:
        return await self._run(self._ops.trim(stream, before))

    async def stream_stats(self) -> list[StreamStats]:
        return await self._run(self._ops.stream_stats())

    # ---------------------------------------------------------------- locks

    async def acquire_lock(
        self, name: str, owner: str, ttl_s: float
    ) -> tuple[int, datetime] | None:
        return await self._run(self._ops.acquire_lock(name, owner, ttl_s))

    async def renew_lock(self, name: str, owner: str, token: int, ttl_s: float) -> datetime | None:
        return await self._run(self._ops.renew_lock(name, owner, token, ttl_s))

    async def release_lock(self, name: str, owner: str, token: int) -> bool:
        return await self._run(self._ops.release_lock(name, owner, token))

    async def held_locks(self) -> list[LockInfo]:
        return await self._run(self._ops.held_locks())

    # -------------------------------------------------------- workers (O-5)

    async def report_worker(
        self,
        info: WorkerInfo,
        counts: Sequence[WorkerCount],
        gone: bool,
        forget_after_s: float,
        keep_counts_s: float,
    ) -> None:
        await self._run(self._ops.report_worker(info, counts, gone, forget_after_s, keep_counts_s))

    async def list_workers(self, seen_within_s: float) -> list[WorkerInfo]:
        return await self._run(self._ops.list_workers(seen_within_s))

    async def worker_counts(self, since: datetime) -> list[WorkerCount]:
        return await self._run(self._ops.worker_counts(since))

    async def acquire_rate(self, rate: RateSpec, n: int) -> float:
        return await self._run(self._ops.acquire_rate(rate, n))

    # -------------------------------------------------------- notifications

    async def notify(self, tx: AsyncJoined | None, channel: str, payload: str) -> None:
        if self._polling:
            raise notifications_refused()
        await self._run(self._ops.notify(channel, payload), tx)

    async def subscribe(self, sink: NoteSink) -> None:
        self._check_open()
        if self._listener is None:
            raise notifications_refused()
        await self._listener.subscribe(sink)

    async def unsubscribe(self, sink: NoteSink) -> None:
        if self._listener is not None:
            await self._listener.unsubscribe(sink)

    # ------------------------------------------------------------ schedules

    async def clock(self) -> datetime:
        return await self._run(self._ops.clock())

    async def upsert_schedule(self, row: ScheduleRow) -> ScheduleRow:
        return await self._run(self._ops.upsert_schedule(row))

    async def delete_schedule(self, name: str) -> bool:
        return await self._run(self._ops.delete_schedule(name))

    async def list_schedules(self) -> list[ScheduleRow]:
        return await self._run(self._ops.list_schedules())

    async def due_schedules(self) -> tuple[datetime, list[ScheduleRow]]:
        return await self._run(self._ops.due_schedules())

    async def fire_schedule(self, fire: Fire) -> bool:
        return await self._run(self._ops.fire_schedule(fire))

    async def seconds_to_next_fire(self) -> float | None:
        return await self._run(self._ops.seconds_to_next_fire())
