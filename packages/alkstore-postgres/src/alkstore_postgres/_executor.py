"""The PostgreSQL executors: the I/O behind every contract call, sync and
async (docs/adr/0008, the seam in :mod:`alkstore.engine.seam`).

Both faces run the same :class:`~._plan.Op` objects from :class:`~._ops.OpBook`;
each operation below is one line. What differs is only how a connection is
had and a plan is driven: :class:`PgExecutor` uses a
``psycopg_pool.ConnectionPool`` and a listener thread,
:class:`AsyncPgExecutor` an ``AsyncConnectionPool`` and a listener task.

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
  at most :data:`OUTAGE_POOL_WAIT_S` for a connection instead of
  ``pool_timeout_s``, and the re-attempts of a blocked call
  (``claim(wait_s=...)``, its next-ready probe) wait at most
  :data:`SOFT_POOL_WAIT_S` and find nothing rather than fail, so a blocked
  call returns within its wait plus a small bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import select
import weakref
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from datetime import datetime
from typing import Any, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from alkstore.engine import (
    ALL_CAPABILITIES,
    FALLBACK_POLL_S,
    ClaimRow,
    EventRow,
    Fence,
    Inserted,
    JobRow,
    NewJob,
    NoteSink,
    RateSpec,
    ScheduleRow,
    WakeBoard,
)
from alkstore.errors import StoreClosed, TransientError, UnsupportedOperation
from alkstore.protocols import AsyncTx, Capability, Tx
from alkstore.types import JobState, LockInfo, QueueStats, StreamStats, SweepResult

from ._combine import AsyncEnqueueCombiner, EnqueueCombiner
from ._errors import translate_errors
from ._listen import (
    KEEPALIVES,
    ListenerCore,
    PollCore,
    TaskListener,
    TaskPoller,
    ThreadListener,
    ThreadPoller,
    WatchedWakeBoard,
)
from ._ops import OpBook, user_channel
from ._options import Config
from ._plan import (
    Op,
    Plan,
    Progress,
    begin_with_lock_timeout,
    caller_scope,
    drive,
    drive_async,
    pooled_scope,
)
from ._schema import open_plan
from ._tx import AsyncPostgresTx, PostgresTx, resolve_async, resolve_sync

__all__ = ["AsyncPgExecutor", "PgExecutor"]

log = logging.getLogger("alkstore.postgres")

T = TypeVar("T")

#: Longest wait for a pooled connection while the database is known to be
#: out of reach.
OUTAGE_POOL_WAIT_S = 0.5
#: Longest wait for a pooled connection of a blocked call's re-attempt.
SOFT_POOL_WAIT_S = 0.5
#: Poll interval of blocked calls while the wake source is down.
DEGRADED_POLL_S = 1.0
#: A poke only saves the listener its idle wait: never wait long for it.
POKE_WAIT_S = 1.0


def _notifications_refused() -> UnsupportedOperation:
    return UnsupportedOperation(
        "notifications need a LISTEN connection: behind a transaction pooler, give "
        "listen_url= (a direct or session-mode DSN)"
    )


def _readable(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool | None:
    """Whether an idle connection has something to read (``None``: it is
    closed). An idle connection of ours should have nothing: what arrives
    is most often the server saying goodbye."""
    if conn.closed or conn.broken:
        return None
    try:
        ready, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError):
        return None
    return bool(ready)


class _Shared:
    """State and rules the two faces share."""

    def __init__(self, cfg: Config) -> None:
        self._cfg = cfg
        self._ops = OpBook(cfg.schema)
        self._closed = False
        self._store_id = ""
        self._outage = False
        self._errors_seen = 0
        # Connections our pool configured (their lock timeout is set).
        self._ours: weakref.WeakSet[Any] = weakref.WeakSet()
        self._polling = not cfg.can_listen
        self._wakeboard: WakeBoard = WatchedWakeBoard() if self._polling else WakeBoard()
        self._caps = (
            ALL_CAPABILITIES if cfg.can_listen else ALL_CAPABILITIES - {Capability.NOTIFICATIONS}
        )

    # ------------------------------------------------------------ the store

    @property
    def url(self) -> str:
        return self._cfg.display

    @property
    def config(self) -> Config:
        return self._cfg

    @property
    def schema(self) -> str:
        return self._cfg.schema

    @property
    def capabilities(self) -> frozenset[Capability]:
        return self._caps

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def store_id(self) -> str:
        """The random id migration 2 wrote into the schema's ``meta``: equal
        for every store on this schema, different for any other (C-7)."""
        return self._store_id

    @property
    def wakes(self) -> WakeBoard:
        return self._wakeboard

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("the store was closed")

    def _pool_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"autocommit": True, **self._cfg.connect_kwargs}
        if self._cfg.pooler:
            kwargs["prepare_threshold"] = None  # EN-4: nothing prepared
        return kwargs

    def _pool_options(self, name: str) -> dict[str, Any]:
        """What the sync and the async pool are both made with (each adds
        its own ``configure``)."""
        cfg = self._cfg
        return {
            "min_size": cfg.min_size,
            "max_size": cfg.max_size,
            "kwargs": self._pool_kwargs(),
            "timeout": cfg.pool_timeout_s,
            "reconnect_timeout": max(5.0, cfg.connect_timeout_s),
            "name": f"{name}:{cfg.schema}",
        }

    def _listen_kwargs(self) -> dict[str, Any]:
        return {**KEEPALIVES, **self._cfg.connect_kwargs, "autocommit": True}

    def _set_lock_timeout(self) -> str | None:
        """The session ``SET`` of our pooled connections; none behind a
        pooler, where every write sets it for its own transaction."""
        if self._cfg.pooler:
            return None
        return f"SET lock_timeout = '{self._cfg.lock_timeout_ms}ms'"

    def _begin(self) -> str:
        if self._cfg.pooler:
            return begin_with_lock_timeout(self._cfg.lock_timeout_ms)
        return "BEGIN"

    def _pool_wait(self, soft: bool = False) -> float:
        wait = self._cfg.pool_timeout_s
        if soft:
            wait = min(wait, SOFT_POOL_WAIT_S)
        if self._outage:
            wait = min(wait, OUTAGE_POOL_WAIT_S)
        return wait

    def _scope(self, op: Op[T]) -> Plan[T]:
        return pooled_scope(op, pooler=self._cfg.pooler, lock_timeout_ms=self._cfg.lock_timeout_ms)

    def _on_caller(self, op: Op[T], conn: Any, ours: bool) -> Plan[T]:
        ours = ours or (not self._cfg.pooler and conn in self._ours)
        return caller_scope(op, conn, ours=ours, lock_timeout_ms=self._cfg.lock_timeout_ms)

    def _note_connection_errors(self, errors: int) -> None:
        """After a pool timeout: an outage if connection attempts failed."""
        if errors > self._errors_seen:
            self._outage = True
        self._errors_seen = errors

    def _after_failure(
        self, exc: TransientError, conn: Any, progress: Progress | None, retried: bool
    ) -> bool:
        """Whether to retry once on a fresh connection (E-2)."""
        lost = conn is not None and (conn.closed or conn.broken)
        if lost:
            self._outage = True
        return (
            lost
            and not retried
            and not self._closed
            and not (progress is not None and progress.unsafe)
        )

    def _degraded(self, started: bool, healthy: bool) -> float:
        return DEGRADED_POLL_S if (started and not healthy) or self._outage else FALLBACK_POLL_S


# ====================================================================== sync


class PgExecutor(_Shared):
    """The :class:`~alkstore.engine.seam.Executor` of the sync store."""

    def __init__(self, cfg: Config) -> None:
        super().__init__(cfg)
        # Check or migrate on a connection of its own, so that a refused
        # login or a missing database surfaces with the server's own message.
        with (
            translate_errors(),
            psycopg.connect(cfg.conninfo, **self._pool_kwargs()) as conn,
        ):
            self._store_id = drive(
                conn, open_plan(self._ops.st, cfg.schema, cfg.migrate), prepare=cfg.prepare
            )
        self._pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            cfg.conninfo, open=True, configure=self._configure, **self._pool_options("alkstore")
        )
        self._combiner = EnqueueCombiner(
            lambda queue, jobs: self._run(self._ops.insert_jobs(None, queue, jobs, None)),
            lambda batches: self._run(self._ops.insert_rows(batches)),
        )
        self._listener: ThreadListener | None = None
        self._poller: ThreadPoller | None = None
        if self._polling:
            core = PollCore(self._wakeboard)  # type: ignore[arg-type]
            self._poller = ThreadPoller(core, self._probe, cfg.poll_s)
        else:
            self._listener = ThreadListener(
                ListenerCore(
                    wake_channel=self._ops.wake,
                    channel_for=lambda name: user_channel(cfg.schema, name),
                    wakes=self._wakeboard,
                    on_state=self._listener_state,
                ),
                lambda: psycopg.connect(cfg.listen_conninfo, **self._listen_kwargs()),
                self._poke,
                cfg.connect_timeout_s + 5.0,
            )

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        statement = self._set_lock_timeout()
        if statement is not None:
            conn.execute(statement)
        self._ours.add(conn)

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
            readable = _readable(conn)
            if readable is False:
                break
            if readable:
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

    @contextlib.contextmanager
    def _pooled(self, wait_s: float) -> Iterator[psycopg.Connection[Any]]:
        conn = self._checkout(wait_s)
        try:
            yield conn
        finally:
            self._pool.putconn(conn)

    def _run(self, op: Op[T]) -> T:
        self._check_open()
        if op.tx is not None:
            conn, ours = resolve_sync(op.tx)
            with translate_errors():
                result: T = drive(conn, self._on_caller(op, conn, ours), prepare=self._cfg.prepare)
                return result
        retried = False
        while True:
            progress = Progress() if op.writes else None
            used: psycopg.Connection[Any] | None = None
            try:
                with translate_errors(), self._pooled(self._pool_wait(op.soft)) as conn:
                    used = conn
                    result = drive(
                        conn, self._scope(op), prepare=self._cfg.prepare, progress=progress
                    )
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

    def _probe(self, keys: list[str]) -> list[tuple[str, str]]:
        return self._run(self._ops.wake_probe(keys))

    def _poke(self, channel: str) -> None:
        """Interrupt the listener's wait (best effort)."""
        if self._closed and self._pool.closed:
            return
        try:
            with translate_errors(), self._pooled(POKE_WAIT_S) as conn:
                drive(conn, self._ops.poke(channel).make(), prepare=self._cfg.prepare)
        except Exception as exc:  # the listener falls back to its idle wait
            log.debug("listener poke failed: %s", exc)

    def _listener_state(self, up: bool) -> None:
        if not up:
            self._outage = True

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
            tx = PostgresTx(conn, lambda: self._closed, self._cfg.prepare)
            try:
                yield tx
            except BaseException:
                tx._active = False
                with contextlib.suppress(psycopg.Error):
                    conn.execute("ROLLBACK")
                raise
            tx._active = False
            with translate_errors():
                conn.execute("COMMIT")
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
        self, tx: object | None, queue: str, jobs: Sequence[NewJob], max_depth: int | None
    ) -> list[Inserted]:
        if tx is None and max_depth is None and jobs[0].unique_key is None:
            return self._combiner.submit(queue, jobs)  # group commit of producers
        return self._run(self._ops.insert_jobs(tx, queue, jobs, max_depth))

    def claim(
        self, queues: Sequence[str], worker_id: str, n: int, rate: RateSpec | None, idle: bool
    ) -> list[ClaimRow]:
        return self._run(self._ops.claim(queues, worker_id, n, rate, idle))

    def next_ready(self, queues: Sequence[str]) -> float | None:
        return self._run(self._ops.next_ready(queues, soft=True))

    def ack(self, tx: object | None, fences: Sequence[Fence]) -> list[bool]:
        return self._run(self._ops.ack(tx, fences))

    def retry(self, tx: object | None, fence: Fence, delay_s: float, error: str) -> bool:
        return self._run(self._ops.retry(tx, fence, delay_s, error))

    def fail(self, tx: object | None, fence: Fence, error: str) -> bool:
        return self._run(self._ops.fail(tx, fence, error))

    def release(self, fence: Fence) -> bool:
        return self._run(self._ops.release(fence))

    def heartbeat(self, fence: Fence, extend_s: float) -> datetime | None:
        return self._run(self._ops.heartbeat(fence, extend_s))

    def cancel(self, tx: object | None, queue: str, job_id: int) -> bool:
        return self._run(self._ops.cancel(tx, queue, job_id))

    def get_job(self, queue: str, job_id: int) -> JobRow | None:
        return self._run(self._ops.get_job(queue, job_id))

    def list_jobs(self, queue: str, state: JobState, limit: int, after_id: int) -> list[JobRow]:
        return self._run(self._ops.list_jobs(queue, state, limit, after_id))

    def queue_stats(self, queue: str | None) -> list[QueueStats]:
        return self._run(self._ops.queue_stats(queue))

    def sweep(self, queue: str) -> SweepResult:
        return self._run(self._ops.sweep(queue))

    def redrive(self, tx: object | None, queue: str, job_ids: Sequence[int] | None) -> int:
        return self._run(self._ops.redrive(tx, queue, job_ids))

    def purge_dead(
        self,
        tx: object | None,
        queue: str,
        job_ids: Sequence[int] | None,
        older_than_s: float | None,
    ) -> int:
        return self._run(self._ops.purge_dead(tx, queue, job_ids, older_than_s))

    # -------------------------------------------------------------- streams

    def publish(self, tx: object | None, stream: str, key: str | None, payload: str) -> int:
        return self._run(self._ops.publish(tx, stream, key, payload))

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

    def acquire_rate(self, rate: RateSpec, n: int) -> float:
        return self._run(self._ops.acquire_rate(rate, n))

    # -------------------------------------------------------- notifications

    def notify(self, tx: object | None, channel: str, payload: str) -> None:
        if self._polling:
            raise _notifications_refused()
        self._run(self._ops.notify(tx, channel, payload))

    def subscribe(self, sink: NoteSink) -> None:
        self._check_open()
        if self._listener is None:
            raise _notifications_refused()
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

    def fire_schedule(
        self,
        name: str,
        expected: datetime,
        fire_at: datetime,
        next_fire_at: datetime,
        queue: str,
        job: NewJob,
    ) -> bool:
        return self._run(self._ops.fire_schedule(name, expected, fire_at, next_fire_at, queue, job))

    def seconds_to_next_fire(self) -> float | None:
        return self._run(self._ops.seconds_to_next_fire())


# ===================================================================== async


class AsyncPgExecutor(_Shared):
    """The :class:`~alkstore.engine.seam.AsyncExecutor` of the async store:
    psycopg's async connections and pool, the listener as a task on the
    event loop; no thread of its own (A-2)."""

    def __init__(self, cfg: Config) -> None:
        super().__init__(cfg)
        self._pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] = AsyncConnectionPool(
            cfg.conninfo,
            open=False,
            configure=self._configure,
            **self._pool_options("alkstore-async"),
        )
        self._combiner = AsyncEnqueueCombiner(
            lambda queue, jobs: self._run(self._ops.insert_jobs(None, queue, jobs, None)),
            lambda batches: self._run(self._ops.insert_rows(batches)),
        )
        self._listener: TaskListener | None = None
        self._poller: TaskPoller | None = None
        if self._polling:
            core = PollCore(self._wakeboard)  # type: ignore[arg-type]
            self._poller = TaskPoller(core, self._probe, cfg.poll_s)
        else:

            async def connect() -> psycopg.AsyncConnection[Any]:
                return await psycopg.AsyncConnection.connect(
                    cfg.listen_conninfo, **self._listen_kwargs()
                )

            self._listener = TaskListener(
                ListenerCore(
                    wake_channel=self._ops.wake,
                    channel_for=lambda name: user_channel(cfg.schema, name),
                    wakes=self._wakeboard,
                    on_state=self._listener_state,
                ),
                connect,
                self._poke,
                cfg.connect_timeout_s + 5.0,
            )

    async def open(self) -> None:
        """Check or migrate the schema, then open the pool."""
        cfg = self._cfg
        with translate_errors():
            conn = await psycopg.AsyncConnection.connect(cfg.conninfo, **self._pool_kwargs())
            async with conn:
                self._store_id = await drive_async(
                    conn, open_plan(self._ops.st, cfg.schema, cfg.migrate), prepare=cfg.prepare
                )
            await self._pool.open()

    async def _configure(self, conn: psycopg.AsyncConnection[Any]) -> None:
        statement = self._set_lock_timeout()
        if statement is not None:
            await conn.execute(statement)
        self._ours.add(conn)

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
            readable = _readable(conn)
            if readable is False:
                break
            if readable:
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

    @contextlib.asynccontextmanager
    async def _pooled(self, wait_s: float) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        conn = await self._checkout(wait_s)
        try:
            yield conn
        finally:
            await self._pool.putconn(conn)

    async def _run(self, op: Op[T]) -> T:
        self._check_open()
        if op.tx is not None:
            conn, ours = resolve_async(op.tx)
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
                    async with self._pooled(self._pool_wait(op.soft)) as conn:
                        used = conn
                        result = await drive_async(
                            conn, self._scope(op), prepare=self._cfg.prepare, progress=progress
                        )
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

    async def _probe(self, keys: list[str]) -> list[tuple[str, str]]:
        return await self._run(self._ops.wake_probe(keys))

    async def _poke(self, channel: str) -> None:
        if self._pool.closed:
            return
        try:
            with translate_errors():
                async with self._pooled(POKE_WAIT_S) as conn:
                    await drive_async(
                        conn, self._ops.poke(channel).make(), prepare=self._cfg.prepare
                    )
        except Exception as exc:
            log.debug("listener poke failed: %s", exc)

    def _listener_state(self, up: bool) -> None:
        if not up:
            self._outage = True

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
        pool = self._pool
        with translate_errors():
            conn = await self._checkout(self._pool_wait())
        try:
            with translate_errors():
                await conn.execute(self._begin())
        except BaseException:
            await asyncio.shield(pool.putconn(conn))
            raise
        tx = AsyncPostgresTx(conn, lambda: self._closed, self._cfg.prepare)

        async def finish(commit: bool) -> None:
            try:
                if commit:
                    await conn.execute("COMMIT")
                else:
                    with contextlib.suppress(psycopg.Error):
                        await conn.execute("ROLLBACK")
            finally:
                await pool.putconn(conn)

        try:
            yield tx
        except BaseException:
            # Rolled back even when the task was cancelled: the ending
            # runs in a task of its own, which also hands the connection back.
            tx._active = False
            with contextlib.suppress(Exception):
                await asyncio.shield(asyncio.ensure_future(finish(False)))
            raise
        tx._active = False
        with translate_errors():
            await asyncio.shield(asyncio.ensure_future(finish(True)))

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
        self, tx: object | None, queue: str, jobs: Sequence[NewJob], max_depth: int | None
    ) -> list[Inserted]:
        if tx is None and max_depth is None and jobs[0].unique_key is None:
            return await self._combiner.submit(queue, jobs)  # group commit of producers
        return await self._run(self._ops.insert_jobs(tx, queue, jobs, max_depth))

    async def claim(
        self, queues: Sequence[str], worker_id: str, n: int, rate: RateSpec | None, idle: bool
    ) -> list[ClaimRow]:
        return await self._run(self._ops.claim(queues, worker_id, n, rate, idle))

    async def next_ready(self, queues: Sequence[str]) -> float | None:
        return await self._run(self._ops.next_ready(queues, soft=True))

    async def ack(self, tx: object | None, fences: Sequence[Fence]) -> list[bool]:
        return await self._run(self._ops.ack(tx, fences))

    async def retry(self, tx: object | None, fence: Fence, delay_s: float, error: str) -> bool:
        return await self._run(self._ops.retry(tx, fence, delay_s, error))

    async def fail(self, tx: object | None, fence: Fence, error: str) -> bool:
        return await self._run(self._ops.fail(tx, fence, error))

    async def release(self, fence: Fence) -> bool:
        return await self._run(self._ops.release(fence))

    async def heartbeat(self, fence: Fence, extend_s: float) -> datetime | None:
        return await self._run(self._ops.heartbeat(fence, extend_s))

    async def cancel(self, tx: object | None, queue: str, job_id: int) -> bool:
        return await self._run(self._ops.cancel(tx, queue, job_id))

    async def get_job(self, queue: str, job_id: int) -> JobRow | None:
        return await self._run(self._ops.get_job(queue, job_id))

    async def list_jobs(
        self, queue: str, state: JobState, limit: int, after_id: int
    ) -> list[JobRow]:
        return await self._run(self._ops.list_jobs(queue, state, limit, after_id))

    async def queue_stats(self, queue: str | None) -> list[QueueStats]:
        return await self._run(self._ops.queue_stats(queue))

    async def sweep(self, queue: str) -> SweepResult:
        return await self._run(self._ops.sweep(queue))

    async def redrive(self, tx: object | None, queue: str, job_ids: Sequence[int] | None) -> int:
        return await self._run(self._ops.redrive(tx, queue, job_ids))

    async def purge_dead(
        self,
        tx: object | None,
        queue: str,
        job_ids: Sequence[int] | None,
        older_than_s: float | None,
    ) -> int:
        return await self._run(self._ops.purge_dead(tx, queue, job_ids, older_than_s))

    # -------------------------------------------------------------- streams

    async def publish(self, tx: object | None, stream: str, key: str | None, payload: str) -> int:
        return await self._run(self._ops.publish(tx, stream, key, payload))

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

    async def acquire_rate(self, rate: RateSpec, n: int) -> float:
        return await self._run(self._ops.acquire_rate(rate, n))

    # -------------------------------------------------------- notifications

    async def notify(self, tx: object | None, channel: str, payload: str) -> None:
        if self._polling:
            raise _notifications_refused()
        await self._run(self._ops.notify(tx, channel, payload))

    async def subscribe(self, sink: NoteSink) -> None:
        self._check_open()
        if self._listener is None:
            raise _notifications_refused()
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

    async def fire_schedule(
        self,
        name: str,
        expected: datetime,
        fire_at: datetime,
        next_fire_at: datetime,
        queue: str,
        job: NewJob,
    ) -> bool:
        return await self._run(
            self._ops.fire_schedule(name, expected, fire_at, next_fire_at, queue, job)
        )

    async def seconds_to_next_fire(self) -> float | None:
        return await self._run(self._ops.seconds_to_next_fire())
